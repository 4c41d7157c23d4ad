//! Choosing and checking a container's cgroup path.
//!
//! libcontainer removes a container's cgroup by SIGKILLing every pid in it,
//! including after a failed create. So the path must belong to this
//! container alone: never empty (the v1 manager then means the caller's own
//! cgroup), never the root, and never a cgroup that already holds processes.

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};
use libcgroups::cgroupfs;

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
    // From libcgroups' descriptor of /sys/fs/cgroup: an absolute path
    // walks sysfs, whose lock every network namespace made or removed on
    // the host takes for writing.
    let existing: Vec<PathBuf> = hierarchy_dirs(path)
        .into_iter()
        .filter(|d| cgroupfs::is_dir(d))
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

/// The first of `dirs` whose `cgroup.procs` is not empty, with its
/// number of processes.
fn occupied(dirs: &[PathBuf]) -> Option<(PathBuf, usize)> {
    dirs.iter().find_map(|dir| {
        let procs = cgroupfs::read_to_string(&dir.join("cgroup.procs")).ok()?;
        let count = procs.lines().filter(|l| !l.trim().is_empty()).count();
        (count > 0).then(|| (dir.clone(), count))
    })
}

/// The first of `dirs` that is frozen: v1's `freezer.state` (FROZEN or
/// FREEZING) or v2's `cgroup.freeze`.
fn frozen(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .find(|dir| {
            let read = |f: &str| cgroupfs::read_to_string(&dir.join(f)).unwrap_or_default();
            matches!(read("freezer.state").trim(), "FROZEN" | "FREEZING")
                || read("cgroup.freeze").trim() == "1"
        })
        .cloned()
}

/// Where `exec --cgroup` puts a process, besides the container's cgroup.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecCgroups {
    /// A sub-cgroup path joined in every hierarchy (`--cgroup PATH`).
    pub everywhere: Option<String>,
    /// Sub-cgroup directories joined in the hierarchies named
    /// (`--cgroup CTRL[,CTRL]:PATH` on cgroup v1), one per controller.
    pub per_controller: Vec<PathBuf>,
}

/// The `--cgroup` flags as runc reads them: `CTRL[,CTRL]:PATH`, repeatable
/// (a controller named twice takes the later path); or one `PATH` alone
/// (key ""), for every hierarchy.
pub fn parse_exec_cgroups(flags: &[String]) -> Result<Vec<(String, String)>> {
    let mut paths: Vec<(String, String)> = Vec::new();
    for flag in flags {
        match flag.split_once(':') {
            Some((controllers, path)) => {
                for controller in controllers.split(',') {
                    if controller.is_empty() {
                        bail!("invalid --cgroup argument: {flag} (empty <controller> prefix)");
                    }
                    // A controller named again takes the later path, as
                    // in runc 1.1.
                    paths.retain(|(c, _)| c != controller);
                    paths.push((controller.to_owned(), path.to_owned()));
                }
            }
            None if flags.len() != 1 => {
                bail!("invalid --cgroup argument: {flag} (missing <controller>: prefix)")
            }
            None => paths.push((String::new(), flag.clone())),
        }
    }
    Ok(paths)
}

/// The sub-cgroup `sub` (a path below the container's cgroup, `/` or empty
/// for the cgroup itself) as a clean relative path, or runc's refusal.
fn sub_cgroup_path(flag: &str, sub: &str) -> Result<PathBuf> {
    let path = Path::new(sub.trim_start_matches('/'));
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("exec --cgroup {flag:?}: {sub} is not a sub cgroup path: give a path below the container's cgroup");
    }
    Ok(path.to_owned())
}

/// Checks the `--cgroup` flags of an exec into the container whose cgroup
/// is `cgroup`: the sub-cgroups must exist (exec joins, never makes them),
/// and a controller must be one of the container's hierarchies.
pub fn exec_cgroups(cgroup: &Path, flags: &[String]) -> Result<ExecCgroups> {
    let mut out = ExecCgroups::default();
    let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
    for (controller, sub) in parse_exec_cgroups(flags)? {
        let flag = if controller.is_empty() {
            sub.clone()
        } else {
            format!("{controller}:{sub}")
        };
        let path = sub_cgroup_path(&flag, &sub)?;
        if controller.is_empty() {
            if path.as_os_str().is_empty() {
                continue;
            }
            // In each hierarchy the container has a cgroup in.
            let dirs: Vec<PathBuf> = hierarchy_dirs(cgroup)
                .into_iter()
                .filter(|d| d.is_dir())
                .map(|d| d.join(&path))
                .collect();
            if dirs.is_empty() {
                bail!("exec --cgroup {flag:?}: the container has no such cgroup");
            }
            if let Some(missing) = dirs.iter().find(|d| !d.is_dir()) {
                return Err(missing_sub_cgroup(&flag, missing));
            }
            out.everywhere = Some(path.to_string_lossy().into_owned());
            continue;
        }
        // cgroup v2 has one hierarchy, whose key is "" in runc.
        let hierarchy = Path::new(CGROUP_ROOT)
            .join(controller.strip_prefix("name=").unwrap_or(&controller))
            .join(relative);
        let unified = is_unified();
        if unified || !hierarchy.is_dir() {
            bail!(
                "exec --cgroup {flag:?}: unknown controller {controller} in SubCgroupPaths: name a controller the container has a cgroup in{}",
                if unified { " (cgroup v2 has one hierarchy: give the path alone)" } else { "" }
            );
        }
        let dir = hierarchy.join(&path);
        if !dir.is_dir() {
            return Err(missing_sub_cgroup(&flag, &dir));
        }
        if !path.as_os_str().is_empty() {
            out.per_controller.push(dir);
        }
    }
    Ok(out)
}

/// exec never makes a sub-cgroup, only joins one. runc's words first,
/// which scripts match; the pid is the exec's own, whose process would
/// have joined.
fn missing_sub_cgroup(flag: &str, dir: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "exec --cgroup {flag:?}: adding pid {} to cgroups: open {}: no such file or directory; create the sub-cgroup first (exec joins it, never makes it)",
        std::process::id(),
        dir.join("cgroup.procs").display()
    )
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
    fn exec_cgroup_flags_as_runc_reads_them() {
        let flags =
            |f: &[&str]| parse_exec_cgroups(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(flags(&["sub"]).unwrap(), [("".into(), "sub".into())]);
        assert_eq!(
            flags(&["memory,pids:a", "memory:b"]).unwrap(),
            [
                ("pids".to_string(), "a".to_string()),
                ("memory".into(), "b".into())
            ]
        );
        let err = flags(&["a", "b"]).unwrap_err().to_string();
        assert!(err.contains("(missing <controller>: prefix)"), "{err}");
        let err = flags(&[":a"]).unwrap_err().to_string();
        assert!(err.contains("(empty <controller> prefix)"), "{err}");
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
