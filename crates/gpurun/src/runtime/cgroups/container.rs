//! A container's own cgroup: whether it has one, its path and manager as
//! libcontainer made them, and waiting for it to empty.

use std::path::{Path, PathBuf};

use anyhow::Result;
use libcontainer::container::Container;

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

/// The container's cgroupfs path (as in linux.cgroupsPath).
pub fn path(container: &Container) -> Result<PathBuf> {
    Ok(container.spec()?.cgroup_path)
}

/// The cgroup manager for a container's own cgroup, as libcontainer made it.
pub fn manager(container: &Container) -> Result<libcgroups::common::AnyCgroupManager> {
    Ok(libcgroups::common::create_cgroup_manager(
        libcgroups::common::CgroupConfig {
            cgroup_path: container.spec()?.cgroup_path,
            systemd_cgroup: container.systemd(),
            container_name: container.id().to_owned(),
        },
    )?)
}

/// Waits, up to 10 s, until no process is left in the cgroup: killed
/// processes with much memory to free take a while to go.
pub fn wait_empty(manager: &libcgroups::common::AnyCgroupManager) {
    use libcgroups::common::CgroupManager;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while manager.get_all_pids().is_ok_and(|pids| !pids.is_empty())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
