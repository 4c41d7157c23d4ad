//! What a test checks on the host afterwards: cgroups, mounts, processes, a tree's contents.

use crate::*;

/// Every cgroup directory named by `relative` (v1 controllers and v2).
pub fn cgroup_dirs(relative: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut dirs = vec![root.join(relative)];
    if let Ok(entries) = fs::read_dir(root) {
        dirs.extend(entries.flatten().map(|e| e.path().join(relative)));
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Mount points in our mount namespace that mention `needle`.
pub fn mounts_mentioning(needle: &str) -> Vec<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// Whether `pid` is a live process: it exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            // The state letter follows the command name's closing paren.
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

/// Host processes whose command line contains `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Each process as a leak report shows it: command line, stat line, what
/// it waits in, its pid namespace and its pids (v1) and unified cgroups.
pub fn describe_processes(pids: &[i32]) -> Vec<String> {
    let read =
        |p: i32, file: &str| fs::read_to_string(format!("/proc/{p}/{file}")).unwrap_or_default();
    pids.iter()
        .map(|&p| {
            let cgroups: Vec<String> = read(p, "cgroup")
                .lines()
                .filter(|l| l.contains("pids") || l.starts_with("0::"))
                .map(str::to_owned)
                .collect();
            format!(
                "{} [stat {}] [wchan {}] [{} {}]",
                read(p, "cmdline").replace('\0', " "),
                read(p, "stat").trim_end(),
                read(p, "wchan"),
                fs::read_link(format!("/proc/{p}/ns/pid"))
                    .unwrap_or_default()
                    .display(),
                cgroups.join(";")
            )
        })
        .collect()
}

/// A fingerprint of a directory tree: every entry's path, type, mode,
/// owner, size, modification time, symlink target and content. Equal
/// before and after means nothing in the tree was changed.
pub fn tree_fingerprint(root: &Path) -> Vec<String> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let mut line = format!(
            "{rel} mode={:o} uid={} gid={} size={} mtime={}.{}",
            meta.mode(),
            meta.uid(),
            meta.gid(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        if meta.file_type().is_symlink() {
            line += &format!(" -> {}", fs::read_link(&path).unwrap().display());
        } else if meta.is_file() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            fs::read(&path).unwrap().hash(&mut h);
            line += &format!(" content={:x}", h.finish());
        } else if meta.is_dir() {
            for e in fs::read_dir(&path).unwrap().flatten() {
                todo.push(e.path());
            }
        }
        out.push(line);
    }
    out.sort();
    out
}

/// The lines of `after` that differ from `before`.
pub fn tree_changes(before: &[String], after: &[String]) -> Vec<String> {
    let mut changes: Vec<String> = after
        .iter()
        .filter(|l| !before.contains(l))
        .map(|l| format!("+ {l}"))
        .collect();
    changes.extend(
        before
            .iter()
            .filter(|l| !after.contains(l))
            .map(|l| format!("- {l}")),
    );
    changes
}

/// Unmounts a test's own mount when the test ends, passed or not.
pub struct Unmount(pub PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Makes a file of one kind at a path.
pub type Make = fn(&Path);

/// What a path a runtime opens may be instead of a file, named as gpurun's
/// errors name it: each must be refused without blocking.
pub const NOT_FILES: [(&str, Make); 3] = [
    ("a FIFO", |p| {
        nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap()
    }),
    ("a socket", |p| {
        drop(std::os::unix::net::UnixListener::bind(p).unwrap());
    }),
    ("a directory", |p| std::fs::create_dir(p).unwrap()),
];

/// Puts each of `NOT_FILES`' kinds at each of `paths` in `rootfs` in turn
/// (the file that was there kept aside, and put back after the path's
/// last kind), calls `check(path, kind)` with it there, then removes it.
/// A check that fails leaves the rootfs as it is, for the failure's reader.
pub fn with_each_wrong_kind(rootfs: &Path, paths: &[&str], mut check: impl FnMut(&str, &str)) {
    for path in paths {
        let at = rootfs.join(path);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let kept = rootfs.join(format!("{path}.kept"));
        let had = fs::rename(&at, &kept).is_ok();
        for (kind, make) in NOT_FILES {
            make(&at);
            check(path, kind);
            if at.is_dir() {
                fs::remove_dir(&at).unwrap();
            } else {
                fs::remove_file(&at).unwrap();
            }
        }
        if had {
            fs::rename(&kept, &at).unwrap();
        }
    }
}
