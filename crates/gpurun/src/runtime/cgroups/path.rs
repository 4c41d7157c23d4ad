//! Choosing and checking a container's cgroup path.
//!
//! libcontainer removes a container's cgroup by SIGKILLing every pid in it,
//! including after a failed create. So the path must belong to this
//! container alone: never empty (the v1 manager then means the caller's own
//! cgroup), never the root, and never a cgroup that already holds processes.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};
use libcgroups::cgroupfs;

use super::host::{hierarchy_dirs, is_systemd_style};

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

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

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
