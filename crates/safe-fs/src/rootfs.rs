//! Looking inside a directory tree as if it were `/`, without following
//! symlinks out of it: openat2(2) with `RESOLVE_IN_ROOT`, so `..` and
//! absolute symlinks stop at the root, as they would for a process inside
//! the container. Used for an untrusted image's rootfs, and for a driver
//! root (`/run/nvidia/driver`, a fake host) whose absolute symlinks mean
//! paths under that root, not on this host.

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A directory handle on a tree treated as `/`.
pub struct Rootfs {
    root: OwnedFd,
    /// Where the root really is on this host (symlinks resolved).
    host: PathBuf,
}

/// A file found inside a root: where it really is, and what it is.
pub struct Found {
    /// Its symlink-free path inside the root, absolute (`/usr/lib/...`).
    pub in_root: PathBuf,
    /// The same file's path on this host.
    pub host: PathBuf,
    pub meta: Metadata,
    file: File,
}

impl Found {
    /// The first `n` bytes of a regular file, opened without blocking (a
    /// FIFO or device node is never opened for reading).
    pub fn head(&self, n: usize) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::with_capacity(n);
        self.reopen_regular()?
            .take(n as u64)
            .read_to_end(&mut out)?;
        Ok(out)
    }

    /// Opens the found file for reading, only if it is a regular file.
    pub fn reopen_regular(&self) -> io::Result<File> {
        if !self.meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        // Reopening the O_PATH descriptor through procfs opens exactly the
        // inode that was checked, whatever happens to the path meanwhile.
        let path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(path)
    }
}

impl Rootfs {
    pub fn open(path: &Path) -> io::Result<Rootfs> {
        let dir = File::open(path)?;
        if !dir.metadata()?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "rootfs is not a directory",
            ));
        }
        let host = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
        Ok(Rootfs {
            root: dir.into(),
            host,
        })
    }

    /// Where the root is on this host.
    pub fn host_path(&self) -> &Path {
        &self.host
    }

    /// Opens `path` (relative to the rootfs, symlinks resolved inside it).
    pub fn open_in(&self, path: &Path, flags: libc::c_int) -> io::Result<File> {
        let rel = path.strip_prefix("/").unwrap_or(path);
        Ok(crate::openat2::openat2(self.root.as_fd(), rel, flags, crate::openat2::IN_ROOT)?.into())
    }

    /// Where an open file really is, as an absolute path inside the root.
    fn path_in_root(&self, file: &File) -> io::Result<PathBuf> {
        let target = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let inside = target
            .strip_prefix(&self.host)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "resolved outside the root"))?;
        Ok(Path::new("/").join(inside))
    }

    /// Finds `path` inside the root, following symlinks (also a final one)
    /// inside it, or with `nofollow` stopping at a final symlink.
    pub fn find(&self, path: &Path, nofollow: bool) -> io::Result<Found> {
        let mut flags = libc::O_PATH;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        let file = self.open_in(path, flags)?;
        let meta = file.metadata()?;
        let in_root = self.path_in_root(&file)?;
        let host = self
            .host
            .join(in_root.strip_prefix("/").unwrap_or(&in_root));
        Ok(Found {
            in_root,
            host,
            meta,
            file,
        })
    }

    /// What `path` is inside the root (a final symlink is not followed).
    pub fn file_type(&self, path: &Path) -> io::Result<std::fs::FileType> {
        Ok(self
            .open_in(path, libc::O_PATH | libc::O_NOFOLLOW)?
            .metadata()?
            .file_type())
    }

    /// Whether `path` is a directory inside the rootfs, and where it really
    /// is, as a path from the rootfs root (symlinks resolved in the root).
    pub fn real_dir(&self, path: &Path) -> Option<PathBuf> {
        let file = self.open_in(path, libc::O_PATH | libc::O_DIRECTORY).ok()?;
        self.path_in_root(&file).ok()
    }

    /// The target of `path` if it is a symlink (its parents resolved inside
    /// the rootfs), `None` if it is something else.
    pub fn read_link(&self, path: &Path) -> io::Result<Option<PathBuf>> {
        let file = self.open_in(path, libc::O_PATH | libc::O_NOFOLLOW)?;
        if !file.metadata()?.file_type().is_symlink() {
            return Ok(None);
        }
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: an O_PATH fd of a symlink and an empty path read that
        // link; buf is valid for its length.
        let n = unsafe {
            libc::readlinkat(
                file.as_raw_fd(),
                c"".as_ptr(),
                buf.as_mut_ptr() as *mut libc::c_char,
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        use std::os::unix::ffi::OsStringExt;
        Ok(Some(std::ffi::OsString::from_vec(buf).into()))
    }

    /// Resolves `path` inside the rootfs as the kernel would for a process
    /// in the container (`..` and absolute symlinks stop at the root), also
    /// through a final symlink whose target does not exist yet. Returns the
    /// symlink-free path and whether any symlink was followed.
    pub fn resolve(&self, path: &Path) -> io::Result<(PathBuf, bool)> {
        use std::collections::VecDeque;
        use std::path::Component;
        let mut todo: VecDeque<std::ffi::OsString> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_owned()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        let mut resolved = PathBuf::from("/");
        let (mut links, mut followed) = (0, false);
        while let Some(name) = todo.pop_front() {
            if name == ".." {
                resolved.pop();
                continue;
            }
            let candidate = resolved.join(&name);
            match self.read_link(&candidate) {
                Ok(Some(target)) => {
                    links += 1;
                    if links > 40 {
                        return Err(io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    followed = true;
                    if target.is_absolute() {
                        resolved = PathBuf::from("/");
                    }
                    for c in target.components().rev() {
                        match c {
                            Component::Normal(s) => todo.push_front(s.to_owned()),
                            Component::ParentDir => todo.push_front("..".into()),
                            _ => {}
                        }
                    }
                }
                Ok(None) => resolved = candidate,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    resolved = candidate;
                    resolved.extend(todo.drain(..).filter(|c| c != ".."));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok((resolved, followed))
    }

    /// Reads a regular file inside the rootfs, up to `limit` bytes. The
    /// file is looked at before it is opened for reading, so a FIFO (which
    /// would block forever) or a device node (whose open can have effects)
    /// is refused without being opened; a final symlink is not followed.
    pub fn read(&self, path: &Path, limit: u64) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let found = self.find(path, true)?;
        let mut out = Vec::new();
        found.reopen_regular()?.take(limit).read_to_end(&mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn symlinks_resolve_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("in-root-{}", std::process::id()));
        let root = dir.join("rootfs");
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink("/", root.join("usr/lib/x86_64-linux-gnu")).unwrap();
        std::os::unix::fs::symlink("../../../../..", root.join("up")).unwrap();
        std::os::unix::fs::symlink("/real", root.join("lib64")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
        std::fs::write(root.join("real/file"), "data").unwrap();
        std::os::unix::fs::symlink("/lib64/file", root.join("abs")).unwrap();
        let r = Rootfs::open(&root).unwrap();
        assert_eq!(
            r.real_dir(Path::new("usr/lib/x86_64-linux-gnu")).unwrap(),
            Path::new("/")
        );
        assert_eq!(r.real_dir(Path::new("up")).unwrap(), Path::new("/"));
        assert_eq!(r.real_dir(Path::new("/lib64")).unwrap(), Path::new("/real"));
        assert!(r.real_dir(Path::new("missing")).is_none());
        // An absolute symlink to a host file does not reach the host.
        assert!(r.read(Path::new("passwd"), 1024).is_err());
        // An absolute symlink means a path under the root.
        let found = r.find(Path::new("abs"), false).unwrap();
        assert_eq!(found.in_root, Path::new("/real/file"));
        assert_eq!(found.host, root.canonicalize().unwrap().join("real/file"));
        assert_eq!(found.head(2).unwrap(), b"da");
        assert!(r.find(Path::new("abs"), true).unwrap().meta.is_symlink());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn fifos_and_devices_are_not_opened_for_reading() {
        let dir = std::env::temp_dir().join(format!("in-root-fifo-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        let fifo = CString::new(dir.join("etc/ld.so.cache").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("/dev/zero", dir.join("etc/passwd")).unwrap();
        let r = Rootfs::open(&dir).unwrap();
        // Would block forever if the FIFO were opened.
        let err = r.read(Path::new("/etc/ld.so.cache"), 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(r.read(Path::new("/etc/passwd"), 1024).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
