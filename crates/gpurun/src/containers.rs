//! Container ids and loading a container's saved state.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcontainer::container::Container;

/// The suffix of the directory a create works in. `@` is not valid in an id,
/// so it never collides with a container's own state directory.
pub const CREATING_SUFFIX: &str = "@creating";

/// Accepts the ids runc accepts: letters, digits and `_+-.`, not `.` or `..`.
pub fn validate_id(id: &str) -> Result<()> {
    let valid_chars = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.'));
    if id.is_empty() || id == "." || id == ".." || !valid_chars || id.len() > 1024 {
        bail!(
            "invalid container id {id:?}: use 1 to 1024 letters, digits and \"_+-.\", not \".\" or \"..\""
        );
    }
    Ok(())
}

pub fn state_dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

pub fn creating_dir(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}{CREATING_SUFFIX}"))
}

pub fn exists(root: &Path, id: &str) -> bool {
    state_dir(root, id).join("state.json").exists()
}

pub fn load(root: &Path, id: &str) -> Result<Container> {
    validate_id(id)?;
    let dir = state_dir(root, id);
    if !dir.join("state.json").exists() {
        bail!(
            "container {id:?} does not exist in {}: see \"gpurun list\"",
            root.display()
        );
    }
    Container::load(dir).with_context(|| format!("read the state of container {id:?}"))
}

/// Whether the container got a cgroup of its own. A rootless container on a
/// host without delegation runs without one.
pub fn has_cgroup(container: &Container) -> bool {
    let Ok(config) = container.spec() else {
        return false;
    };
    let path = config.cgroup_path;
    let text = path.to_string_lossy();
    if !text.starts_with('/') && text.contains(':') {
        return true; // systemd-managed
    }
    let relative = path.strip_prefix("/").unwrap_or(&path);
    let root = Path::new("/sys/fs/cgroup");
    [
        root.join("devices"),
        root.join("freezer"),
        root.to_path_buf(),
    ]
    .iter()
    .any(|base| base.join(relative).join("cgroup.procs").exists())
}

/// Waits up to a second for the container's init to be gone.
pub fn wait_gone(container: &Container) {
    let Some(pid) = container.pid() else { return };
    for _ in 0..100 {
        match nix::sys::signal::kill(pid, None) {
            Err(_) => return,
            Ok(()) => {
                // A zombie still answers; its state letter tells.
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
                {
                    return;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The OCI spelling of a status: "created", "running", "stopped", ...
pub fn status_name(container: &Container) -> String {
    serde_json::to_value(container.status())
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| container.status().to_string().to_lowercase())
}

/// The cgroup manager for a container's own cgroup, as libcontainer made it.
pub fn cgroup_manager(container: &Container) -> Result<libcgroups::common::AnyCgroupManager> {
    Ok(libcgroups::common::create_cgroup_manager(
        libcgroups::common::CgroupConfig {
            cgroup_path: container.spec()?.cgroup_path,
            systemd_cgroup: container.systemd(),
            container_name: container.id().to_owned(),
        },
    )?)
}
