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
        // The common case in one call: a path that exists with no symlink
        // and no `..` on the way (the kernel refuses any link with
        // RESOLVE_NO_SYMLINKS; a final one opens as itself and is checked).
        // Anything else takes the walk below, one component at a time.
        if !path.components().any(|c| c == Component::ParentDir) {
            let rel = path.strip_prefix("/").unwrap_or(path);
            let flags = libc::O_PATH | libc::O_NOFOLLOW;
            let strict = crate::openat2::IN_ROOT | libc::RESOLVE_NO_SYMLINKS;
            if let Ok(fd) = crate::openat2::openat2(self.root.as_fd(), rel, flags, strict) {
                if !File::from(fd).metadata()?.file_type().is_symlink() {
                    let plain: PathBuf = path
                        .components()
                        .filter(|c| matches!(c, Component::Normal(_)))
                        .collect();
                    return Ok((Path::new("/").join(plain), false));
                }
            }
        }
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

/// Writing inside a root, for the NVIDIA CDI hooks gpurun carries out in
/// an engine's per-container layer or as `gpurun cdi-hook`: every parent is
/// resolved inside the root, and the last component is made, replaced or
/// changed with the `*at` calls on that parent, so no symlink in the tree
/// ever leads a write out of it.
impl Rootfs {
    /// The directory `path` inside the root, made (with `mode`) where
    /// missing, component by component.
    pub fn create_dir_all_in(&self, path: &Path, mode: u32) -> io::Result<File> {
        // Symlinks resolved inside the root first (also dangling ones), so
        // each step below is a real directory or a missing name.
        let (path, _) = self.resolve(path)?;
        let mut so_far = PathBuf::from("/");
        let mut dir = self.open_in(&so_far, libc::O_PATH | libc::O_DIRECTORY)?;
        for c in path.components() {
            let std::path::Component::Normal(name) = c else {
                continue;
            };
            let next = so_far.join(name);
            match self.open_in(&next, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(d) => dir = d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let c_name = c_name(name)?;
                    // SAFETY: a directory fd and a single NUL-terminated name.
                    let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), mode) };
                    if rc != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    dir = self.open_in(&next, libc::O_PATH | libc::O_DIRECTORY)?;
                }
                Err(e) => return Err(e),
            }
            so_far = next;
        }
        Ok(dir)
    }

    /// The parent directory of `path` (made where missing) and its last name.
    fn parent_in(&self, path: &Path) -> io::Result<(File, std::ffi::CString)> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let parent = self.create_dir_all_in(path.parent().unwrap_or(Path::new("/")), 0o755)?;
        Ok((parent, c_name(name)?))
    }

    /// Makes `link` a symlink to `target`, as `ln -sf`: a symlink or file
    /// already there is replaced, a directory is not. Returns false where
    /// the same symlink was there already.
    pub fn symlink_in(&self, target: &Path, link: &Path) -> io::Result<bool> {
        use std::os::unix::ffi::OsStrExt;
        let (parent, name) = self.parent_in(link)?;
        if let Ok(Some(existing)) = self.read_link(link) {
            if existing == target {
                return Ok(false);
            }
        }
        // SAFETY: a directory fd and a NUL-terminated name; AT_SYMLINK_NOFOLLOW
        // looks at the entry itself.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::fstatat(
                parent.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc == 0 {
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                return Err(io::Error::from_raw_os_error(libc::EISDIR));
            }
            // SAFETY: as above; removes the entry, never what it points to.
            if unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let c_target = std::ffi::CString::new(target.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in target"))?;
        // SAFETY: NUL-terminated strings and a directory fd.
        if unsafe { libc::symlinkat(c_target.as_ptr(), parent.as_raw_fd(), name.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(true)
    }

    /// Writes `bytes` to `path` with `mode`: a new file renamed into place,
    /// so a reader sees the old or the new one whole, and a symlink at
    /// `path` is replaced, never written through.
    pub fn write_in(&self, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
        use std::io::Write;
        use std::os::fd::FromRawFd;
        let (parent, name) = self.parent_in(path)?;
        let tmp = c_name(std::ffi::OsStr::new(&format!(
            ".gpurun-new-{}",
            std::process::id()
        )))?;
        // SAFETY: a directory fd and a NUL-terminated name; O_EXCL|O_NOFOLLOW
        // make a new file or fail.
        let fd = unsafe {
            libc::openat(
                parent.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned here.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let written = file
            .write_all(bytes)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(mode))
            })
            .and_then(|()| {
                // SAFETY: two names in the same directory fd.
                let rc = unsafe {
                    libc::renameat(
                        parent.as_raw_fd(),
                        tmp.as_ptr(),
                        parent.as_raw_fd(),
                        name.as_ptr(),
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        if written.is_err() {
            // SAFETY: as above.
            unsafe { libc::unlinkat(parent.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        written
    }

    /// Sets the mode of `path` (a final symlink is not followed: a symlink
    /// is left as it is, and false returned).
    pub fn chmod_in(&self, path: &Path, mode: u32) -> io::Result<bool> {
        use std::os::unix::fs::PermissionsExt;
        let file = self.open_in(path, libc::O_PATH | libc::O_NOFOLLOW)?;
        let meta = file.metadata()?;
        if meta.file_type().is_symlink() {
            return Ok(false);
        }
        if meta.permissions().mode() & 0o7777 == mode & 0o7777 {
            return Ok(false);
        }
        // Through the descriptor: exactly the inode that was looked at.
        std::fs::set_permissions(
            format!("/proc/self/fd/{}", file.as_raw_fd()),
            std::fs::Permissions::from_mode(mode & 0o7777),
        )?;
        Ok(true)
    }
}

fn c_name(name: &std::ffi::OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    if name.as_bytes().contains(&b'/') || name == ".." || name == "." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a single name",
        ));
    }
    std::ffi::CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
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
    fn writes_stay_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("in-root-write-{}", std::process::id()));
        let outside = dir.join("outside");
        let root = dir.join("rootfs");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        // Symlinks in the tree that point out of it, absolutely and by "..".
        std::os::unix::fs::symlink(&outside, root.join("etc/out")).unwrap();
        std::os::unix::fs::symlink("../../outside", root.join("up")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), root.join("etc/victim")).unwrap();
        let r = Rootfs::open(&root).unwrap();
        r.symlink_in(Path::new("x"), Path::new("/etc/out/link"))
            .unwrap();
        r.symlink_in(Path::new("x"), Path::new("/up/link")).unwrap();
        r.symlink_in(Path::new("x"), Path::new("/../../../outside/l2"))
            .unwrap();
        r.write_in(Path::new("/etc/victim"), b"data", 0o644)
            .unwrap();
        r.write_in(Path::new("/etc/out/file"), b"data", 0o644)
            .unwrap();
        assert!(!r.chmod_in(Path::new("/etc/out"), 0o777).unwrap());
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "wrote outside"
        );
        // They landed inside, where a process in the root would see them.
        let canonical = root.canonicalize().unwrap();
        assert!(canonical
            .join(outside.strip_prefix("/").unwrap())
            .join("link")
            .is_symlink());
        assert!(canonical.join("outside/l2").is_symlink());
        assert_eq!(std::fs::read(root.join("etc/victim")).unwrap(), b"data");
        // Replaced, not written through; the same link twice is no change.
        assert!(!r
            .symlink_in(Path::new("x"), Path::new("/outside/l2"))
            .unwrap());
        assert!(r
            .symlink_in(Path::new("y"), Path::new("/outside/l2"))
            .unwrap());
        assert_eq!(
            std::fs::read_link(canonical.join("outside/l2")).unwrap(),
            Path::new("y")
        );
        assert!(r.symlink_in(Path::new("y"), Path::new("/etc")).is_err());
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
