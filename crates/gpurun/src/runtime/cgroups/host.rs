//! The host's cgroups as gpurun reads them: the pids in a path, a
//! process's place in each hierarchy, whether the user may use cgroups, and
//! what is left of a container whose state is gone.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// Where the cgroup hierarchies are mounted.
pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A systemd-style path (`slice:prefix:name`), not one under /sys/fs/cgroup.
pub(super) fn is_systemd_style(path: &str) -> bool {
    !path.starts_with('/') && path.split(':').count() == 3
}

/// Where a cgroupfs `path` would be in every hierarchy: v2's, and each v1
/// controller's. They need not exist.
pub(super) fn hierarchy_dirs(path: &Path) -> Vec<PathBuf> {
    let relative = path.strip_prefix("/").unwrap_or(path);
    let root = Path::new(CGROUP_ROOT);
    let mut dirs = vec![root.join(relative)];
    // On pure v2 the root is the one hierarchy: the directories below it
    // are other cgroups, whose own sub-cgroups of that name are not this
    // container's.
    if is_unified() {
        return dirs;
    }
    if let Ok(entries) = fs::read_dir(root) {
        dirs.extend(entries.flatten().map(|e| e.path().join(relative)));
    }
    dirs
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

/// Takes down what is left of a container whose state is gone: the
/// processes in the cgroup gpurun gives container `id` by default
/// (`/gpurun/ID`, in every hierarchy), and then that cgroup. Nothing
/// outside that cgroup is signalled. Returns how many processes it killed.
pub fn remove_orphaned_default(id: &str) -> usize {
    let path = PathBuf::from(format!("/gpurun/{id}"));
    let dirs: Vec<PathBuf> = hierarchy_dirs(&path)
        .into_iter()
        .filter(|d| d.is_dir())
        .collect();
    if dirs.is_empty() {
        return 0;
    }
    let mut killed = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = pids(&path);
        if left.is_empty() || std::time::Instant::now() > deadline {
            break;
        }
        for pid in left {
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for dir in dirs {
        let _ = fs::remove_dir(dir);
    }
    killed
}

/// The path `/proc/PID/cgroup` (its `text`) gives for the first hierarchy
/// whose controller field `wanted` accepts: `cpu,cpuacct`, `name=systemd`,
/// or empty for the unified hierarchy.
pub fn in_proc_cgroup(text: &str, wanted: impl Fn(&str) -> bool) -> Option<&str> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        wanted(controllers).then_some(path)
    })
}

/// Whether /sys/fs/cgroup is a pure cgroup v2 hierarchy (one statfs of
/// what is mounted there).
pub fn is_unified() -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
    statfs(CGROUP_ROOT).is_ok_and(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC)
}

/// Whether the current user can place processes in cgroups at all: false
/// for a non-root user on v1, or on v2 without a delegated tree: one it can
/// write, or, for a systemd-style path, one its own systemd manager makes.
pub fn writable_for_current_user(path: &Path) -> bool {
    if crate::runtime::protect::privilege::is_host_root() {
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

/// See `containers::delete`: for a v1 path `/slurm*/uid_N/job_N/step_N/
/// gpurun-ID`, removes its parents, deepest first, in every v1 hierarchy
/// where they are empty. Stops at the first that stays and never goes
/// above Slurm's own root directory.
pub fn remove_empty_slurm_parents(path: &Path) {
    let Some(step) = path.parent() else { return };
    let slurm_named = |name: &str| {
        name.starts_with("slurm")
            || ["uid_", "job_", "step_"]
                .iter()
                .any(|p| name.starts_with(p))
    };
    let components: Vec<&str> = step
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    let is_step_path = components.len() >= 2
        && components.iter().all(|c| slurm_named(c))
        && components.iter().any(|c| c.starts_with("job_"));
    if !is_step_path {
        return;
    }
    let Ok(hierarchies) = fs::read_dir(CGROUP_ROOT) else {
        return;
    };
    for hierarchy in hierarchies.flatten() {
        // Real mount points only: cpu and cpuacct link to cpu,cpuacct.
        if !hierarchy.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let mut dir = hierarchy.path();
        dir.extend(&components);
        for _ in 0..components.len() {
            if fs::remove_dir(&dir).is_err() {
                break;
            }
            dir.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_lines_are_found_by_their_controllers() {
        let text = "12:freezer:/gpurun/a\n5:cpu,cpuacct:/gpurun/a\n1:name=systemd:/user.slice\n0::/init.scope\n";
        assert_eq!(in_proc_cgroup(text, |c| c == "freezer"), Some("/gpurun/a"));
        assert_eq!(
            in_proc_cgroup(text, |c| c.split(',').any(|c| c == "cpu")),
            Some("/gpurun/a")
        );
        assert_eq!(
            in_proc_cgroup(text, |c| c == "name=systemd"),
            Some("/user.slice")
        );
        assert_eq!(in_proc_cgroup(text, str::is_empty), Some("/init.scope"));
        assert_eq!(in_proc_cgroup(text, |c| c == "devices"), None);
    }

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
}
