//! Paths below `/sys/fs/cgroup` reached from one descriptor of that
//! directory (gpurun patch 22), as runc opens cgroup files.
//!
//! Every lookup of a kernfs name takes its filesystem's lock for reading,
//! and the walk of an absolute cgroup path passes two sysfs names (`fs`,
//! `cgroup`). Making or removing a network namespace registers or removes
//! its loopback device in sysfs and takes that lock for writing, so with
//! many containers starting at once each of the hundred cgroup path walks
//! of a start queued behind another start's network namespace: about 50
//! times per start at 80 concurrent starts, none with no network
//! namespace. From the descriptor the walk begins below sysfs.
//!
//! The descriptor is opened on first use and kept for the process; a
//! process cloned after that inherits it. Each function behaves as its
//! `std::fs` namesake on the absolute path; paths elsewhere are used as
//! given.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

const CGROUPFS: &str = "/sys/fs/cgroup";

fn root() -> Option<RawFd> {
    static ROOT: OnceLock<Option<OwnedFd>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let fd = nix::fcntl::open(
            CGROUPFS,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        // SAFETY: open returned a new descriptor that nothing else owns.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
    .map(|fd| fd.as_raw_fd())
}

/// The directory descriptor and the path to give an `*at` call: the
/// cgroupfs descriptor and the rest of the path below it, or the current
/// directory's and the path itself.
fn at(path: &Path) -> (Option<RawFd>, &Path) {
    match path.strip_prefix(CGROUPFS) {
        Ok(rest) if !rest.as_os_str().is_empty() => match root() {
            Some(fd) => (Some(fd), rest),
            None => (None, path),
        },
        _ => (None, path),
    }
}

/// Opens `path` with `flags` (and `O_CLOEXEC`); `O_CREAT` makes it 0666
/// less the umask, as `std::fs` does.
pub fn open(path: &Path, flags: OFlag) -> io::Result<File> {
    let (dir, rest) = at(path);
    let fd = nix::fcntl::openat(
        dir,
        rest,
        flags | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open(path, OFlag::O_RDONLY)?.read_to_string(&mut text)?;
    Ok(text)
}

fn stat_mode(path: &Path) -> Option<SFlag> {
    let (dir, rest) = at(path);
    nix::sys::stat::fstatat(dir, rest, AtFlags::empty())
        .ok()
        .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
}

pub fn exists(path: &Path) -> bool {
    stat_mode(path).is_some()
}

pub fn is_dir(path: &Path) -> bool {
    stat_mode(path) == Some(SFlag::S_IFDIR)
}

/// `mkdir -p`, with 0777 less the umask, as `std::fs::create_dir_all`.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    let (dir, rest) = at(path);
    // A directory made meanwhile by someone else is as good as ours.
    let mkdir = || match nix::sys::stat::mkdirat(dir, rest, Mode::from_bits_truncate(0o777)) {
        Err(Errno::EEXIST) if is_dir(path) => Ok(()),
        result => result,
    };
    match mkdir() {
        Err(Errno::ENOENT) => match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                create_dir_all(parent)?;
                Ok(mkdir()?)
            }
            _ => Err(Errno::ENOENT.into()),
        },
        result => Ok(result?),
    }
}

pub fn remove_dir(path: &Path) -> io::Result<()> {
    let (dir, rest) = at(path);
    Ok(nix::unistd::unlinkat(dir, rest, UnlinkatFlags::RemoveDir)?)
}

/// The names in directory `path` that are directories themselves (the
/// child cgroups of a cgroup).
pub fn subdirectories(path: &Path) -> io::Result<Vec<OsString>> {
    let dir = open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    let mut dir = nix::dir::Dir::from_fd(dir.into_raw_fd())?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsString::from(std::ffi::OsStr::from_bytes(name));
        let is_dir = match entry.file_type() {
            Some(nix::dir::Type::Directory) => true,
            Some(_) => false,
            None => is_dir(&path.join(&name)),
        };
        if is_dir {
            names.push(name);
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_elsewhere_behave_as_std_fs() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        create_dir_all(&deep).unwrap();
        assert!(is_dir(&deep) && exists(&deep));
        std::fs::write(tmp.path().join("a/file"), "x").unwrap();
        assert!(!is_dir(&tmp.path().join("a/file")));
        assert_eq!(read_to_string(&tmp.path().join("a/file")).unwrap(), "x");
        assert_eq!(subdirectories(&tmp.path().join("a")).unwrap(), ["b"]);
        assert!(remove_dir(&tmp.path().join("a/b")).is_err()); // not empty
        remove_dir(&deep).unwrap();
        assert!(!exists(&deep));
        assert_eq!(
            create_dir_all(&tmp.path().join("a/file/x"))
                .unwrap_err()
                .raw_os_error(),
            Some(nix::libc::ENOTDIR)
        );
    }

    #[test]
    fn cgroupfs_paths_resolve_below_the_descriptor() {
        // The descriptor names the same directory the absolute path does.
        if !Path::new(CGROUPFS).is_dir() {
            return;
        }
        let (dir, rest) = at(Path::new("/sys/fs/cgroup/x/y"));
        assert!(dir.is_some());
        assert_eq!(rest, Path::new("x/y"));
        assert_eq!(at(Path::new(CGROUPFS)).0, None);
        assert_eq!(at(Path::new("/sys/fs/cgroupx")).0, None);
        let listed: Vec<OsString> = std::fs::read_dir(CGROUPFS)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name())
            .collect();
        for name in &listed {
            assert!(is_dir(&Path::new(CGROUPFS).join(name)), "{name:?}");
        }
    }
}
