//! Choosing and checking a container's cgroup path.
//!
//! libcontainer removes a container's cgroup by SIGKILLing every pid in it,
//! including after a failed create. So the path must belong to this
//! container alone: never empty (the v1 manager then means the caller's own
//! cgroup), never the root, and never a cgroup that already holds processes.

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The path to hand libcontainer for this container.
pub fn choose(spec_path: Option<&Path>, id: &str, systemd: bool) -> Result<PathBuf> {
    let given = spec_path.filter(|p| !p.as_os_str().is_empty());
    let Some(path) = given else {
        if systemd {
            // No slice: libcgroups takes system.slice for root and the
            // user's user.slice otherwise, as runc does.
            return Ok(PathBuf::from(format!(":gpurun:{id}")));
        }
        let path = PathBuf::from(format!("/gpurun/{id}"));
        refuse_unusable(&path, &path.to_string_lossy())?;
        return Ok(path);
    };
    let text = path.to_string_lossy();
    if systemd || is_systemd_style(&text) {
        // "slice:prefix:name": systemd places it in a fresh scope.
        return Ok(path.to_path_buf());
    }
    let mut normal = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => normal.push(part),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => bail!(
                "linux.cgroupsPath {text:?} climbs with \"..\": give the container a path of its own, such as \"/gpurun/{id}\""
            ),
        }
    }
    if normal == Path::new("/") {
        bail!(
            "linux.cgroupsPath {text:?} is the root cgroup: give the container a path of its own, such as \"/gpurun/{id}\""
        );
    }
    refuse_unusable(&normal, &text)?;
    Ok(normal)
}

/// A cgroup that already holds processes (libcontainer would kill them
/// with the container) or is frozen (the container would never run). The
/// messages start with runc's words, which engines and users search for.
fn refuse_unusable(path: &Path, text: &str) -> Result<()> {
    // Most containers get a new cgroup: one stat per hierarchy, then only
    // the directories that exist are read.
    let existing: Vec<PathBuf> = hierarchy_dirs(path)
        .into_iter()
        .filter(|d| d.is_dir())
        .collect();
    if let Some((holder, count)) = occupied(&existing) {
        bail!(
            "container's cgroup is not empty: {count} process(es) found in {}: linux.cgroupsPath {text:?} must be a cgroup of the container's own (gpurun would kill them with it)",
            holder.display()
        );
    }
    if let Some(frozen) = frozen(&existing) {
        bail!(
            "container's cgroup unexpectedly frozen: {} (linux.cgroupsPath {text:?}): thaw it or give the container another cgroup",
            frozen.display()
        );
    }
    Ok(())
}

fn is_systemd_style(path: &str) -> bool {
    !path.starts_with('/') && path.split(':').count() == 3
}

/// Where a cgroupfs `path` would be in every hierarchy: v2's, and each v1
/// controller's. They need not exist.
fn hierarchy_dirs(path: &Path) -> Vec<PathBuf> {
    let relative = path.strip_prefix("/").unwrap_or(path);
    let root = Path::new(CGROUP_ROOT);
    let mut dirs = vec![root.join(relative)];
    if let Ok(entries) = fs::read_dir(root) {
        dirs.extend(entries.flatten().map(|e| e.path().join(relative)));
    }
    dirs
}

/// The first of `dirs` whose `cgroup.procs` is not empty, with its
/// number of processes.
fn occupied(dirs: &[PathBuf]) -> Option<(PathBuf, usize)> {
    dirs.iter().find_map(|dir| {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        let count = procs.lines().filter(|l| !l.trim().is_empty()).count();
        (count > 0).then(|| (dir.clone(), count))
    })
}

/// The first of `dirs` that is frozen: v1's `freezer.state` (FROZEN or
/// FREEZING) or v2's `cgroup.freeze`.
fn frozen(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .find(|dir| {
            let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap_or_default();
            matches!(read("freezer.state").trim(), "FROZEN" | "FREEZING")
                || read("cgroup.freeze").trim() == "1"
        })
        .cloned()
}

/// `exec --cgroup SUB` read as runc reads it: `PATH` or
/// `CONTROLLER[,CONTROLLER]:PATH` below the container's `cgroup`; `/` is the
/// container's own cgroup. Returns the path to join (`None`: the
/// container's own). The sub-cgroup must exist in each hierarchy it names;
/// none is made.
pub fn existing_sub_cgroup(cgroup: &Path, sub: &str) -> Result<Option<String>> {
    let (controllers, given) = match sub.split_once(':') {
        Some((c, p)) => (Some(c), p),
        None => (None, sub),
    };
    let sub_path = Path::new(given.trim_start_matches('/'));
    if sub_path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("exec --cgroup {sub:?}: {given} is not a sub cgroup path: give a path below the container's cgroup");
    }
    if sub_path.as_os_str().is_empty() {
        return Ok(None);
    }
    if controllers.is_some() && !is_unified() {
        // libcontainer joins one path in every hierarchy: it would make
        // a cgroup literally named "memory:sub" in each.
        bail!(
            "exec --cgroup {sub:?}: joining a sub-cgroup of some controllers only is not supported on cgroup v1; give the path alone ({}) to join it in every controller",
            sub_path.display()
        );
    }
    // In each hierarchy the container has a cgroup in (on v2 there is one:
    // the controllers named do not choose).
    let dirs: Vec<PathBuf> = hierarchy_dirs(cgroup)
        .into_iter()
        .filter(|d| d.is_dir())
        .map(|d| d.join(sub_path))
        .collect();
    if let Some(missing) = dirs.iter().find(|d| !d.is_dir()) {
        bail!(
            "exec --cgroup {sub:?}: {} does not exist: create the sub-cgroup first (exec joins it, never makes it)",
            missing.display()
        );
    }
    if dirs.is_empty() {
        bail!("exec --cgroup {sub:?}: the container has no such cgroup");
    }
    Ok(Some(sub_path.to_string_lossy().into_owned()))
}

/// Every pid in a cgroupfs path, in any hierarchy. Empty for a
/// systemd-style path, which is not a path under /sys/fs/cgroup.
pub fn pids(path: &Path) -> Vec<nix::unistd::Pid> {
    if !path.to_string_lossy().starts_with('/') {
        return Vec::new();
    }
    hierarchy_dirs(path)
        .iter()
        .filter_map(|dir| fs::read_to_string(dir.join("cgroup.procs")).ok())
        .flat_map(|procs| {
            procs
                .lines()
                .filter_map(|line| line.trim().parse().ok())
                .map(nix::unistd::Pid::from_raw)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether /sys/fs/cgroup is a pure cgroup v2 hierarchy.
pub fn is_unified() -> bool {
    fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines().any(|l| {
                l.split(' ').nth(1) == Some(CGROUP_ROOT) && l.split(' ').nth(2) == Some("cgroup2")
            })
        })
        .unwrap_or(false)
}

/// Whether the current user can place processes in cgroups at all: false
/// for a non-root user on v1, or on v2 without a delegated tree: one it can
/// write, or, for a systemd-style path, one its own systemd manager makes.
pub fn writable_for_current_user(path: &Path) -> bool {
    if crate::runtime::privilege::is_host_root() {
        return true;
    }
    if !is_unified() {
        return false;
    }
    if is_systemd_style(&path.to_string_lossy()) {
        return user_manager_reachable(|k| std::env::var_os(k));
    }
    let root = Path::new(CGROUP_ROOT);
    // The nearest existing ancestor must be writable to us.
    let mut dir = root.join(path.strip_prefix("/").unwrap_or(path));
    while !dir.exists() {
        if !dir.pop() {
            return false;
        }
    }
    nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Whether the caller's own systemd manager can be asked for a scope: a
/// non-root caller's systemd-style path goes to it over the session bus
/// (libcgroups looks for `DBUS_SESSION_BUS_ADDRESS`, then
/// `$XDG_RUNTIME_DIR/bus`), and it makes the scope in the subtree systemd
/// delegates to the user (user@UID.service), where limits apply.
fn user_manager_reachable(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    if var("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty()) {
        return true;
    }
    var("XDG_RUNTIME_DIR").is_some_and(|dir| Path::new(&dir).join("bus").exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_manager_is_reached_as_libcgroups_reaches_it() {
        let none = |_: &str| None;
        assert!(!user_manager_reachable(none));
        let bus = |k: &str| (k == "DBUS_SESSION_BUS_ADDRESS").then(|| "unix:path=/x".into());
        assert!(user_manager_reachable(bus));
        let dir = std::env::temp_dir().join(format!("gpurun-bus-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let runtime_dir = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| dir.clone().into_os_string());
        assert!(!user_manager_reachable(runtime_dir));
        fs::write(dir.join("bus"), "").unwrap();
        assert!(user_manager_reachable(runtime_dir));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn empty_or_missing_path_gets_a_private_default() {
        assert_eq!(
            choose(None, "c1", false).unwrap(),
            PathBuf::from("/gpurun/c1")
        );
        assert_eq!(
            choose(Some(Path::new("")), "c1", false).unwrap(),
            PathBuf::from("/gpurun/c1")
        );
        assert_eq!(
            choose(None, "c1", true).unwrap(),
            PathBuf::from(":gpurun:c1")
        );
    }

    #[test]
    fn root_and_climbing_paths_are_refused() {
        for bad in ["/", "//", "/./", "/a/../..", "../x"] {
            assert!(choose(Some(Path::new(bad)), "c1", false).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_occupied_cgroup_is_refused() {
        // Our own cgroup holds at least this test process, on v1 and v2.
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let path = own
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .find(|p| *p != "/")
            .map(str::to_owned);
        if let Some(path) = path {
            let err = choose(Some(Path::new(&path)), "c1", false).unwrap_err();
            assert!(err.to_string().contains("cgroup is not empty"), "{err}");
        }
    }

    #[test]
    fn relative_paths_are_normalised() {
        assert_eq!(
            choose(Some(Path::new("docker/abc")), "c1", false).unwrap(),
            PathBuf::from("/docker/abc")
        );
    }
}
