//! Paths inside the container's root, resolved by the kernel with
//! `openat2(RESOLVE_IN_ROOT)` (gpurun patch): a symlink in the image,
//! absolute or climbing with `..`, cannot lead out of the root, and
//! what is made there is made through the resolved parent's descriptor,
//! never through a host path the kernel would walk again.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// The container's root directory, to resolve paths in.
pub(crate) fn open_root(rootfs: &Path) -> io::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        rootfs,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: open just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `path` opened with O_PATH, resolved as if `root` were `/`: one
/// `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`, as pathrs' kernel
/// resolver makes it. Not pathrs' `resolve` itself: its error reads the
/// root's path through procfs, nine more syscalls for each mount
/// destination not there yet, the case this module exists to make cheap.
/// Where openat2 fails (kernels before 5.6), callers take pathrs.
pub(crate) fn resolve_in_root(root: BorrowedFd, path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain data; all-zero is its "no options" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid dirfd, a NUL-terminated path and an open_how of the
    // size given; the result is a new descriptor owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor from openat2.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The link at `path` inside `root` (not followed), where it leads.
pub(crate) fn readlink_in_root(root: BorrowedFd, path: &Path) -> io::Result<std::path::PathBuf> {
    pathrs::RootRef::from_fd(root)
        .readlink(path)
        .map_err(io_error)
}

/// pathrs' error as the errno it carries, which callers test.
fn io_error(e: pathrs::error::Error) -> io::Error {
    match e.kind() {
        pathrs::error::ErrorKind::OsError(Some(errno)) => io::Error::from_raw_os_error(errno),
        _ => io::Error::other(e.to_string()),
    }
}

pub(crate) fn expect_dir(fd: &OwnedFd) -> io::Result<()> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::ENOTDIR))
    }
}

/// Makes sure `dest` is a directory inside `root`, making it and its
/// missing parents with `mode`.
pub(crate) fn make_dir_in_root(root: BorrowedFd, dest: &Path, mode: u32) -> io::Result<()> {
    dir_in_root(root, dest, mode).map(drop)
}

/// The directory `dir` inside `root`, made (with its missing parents) with
/// `mode` if missing.
pub(crate) fn dir_in_root(root: BorrowedFd, dir: &Path, mode: u32) -> io::Result<OwnedFd> {
    match resolve_in_root(root, dir) {
        Ok(fd) => return expect_dir(&fd).map(|()| fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(e),
    }
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let parent = dir_in_root(root, parent, mode)?;
    match nix::sys::stat::mkdirat(
        Some(parent.as_raw_fd()),
        name,
        Mode::from_bits_truncate(mode),
    ) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let fd = resolve_in_root(root, dir)?;
    expect_dir(&fd)?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{MetadataExt, symlink};

    use super::*;

    #[test]
    fn an_absolute_symlink_in_the_image_stays_in_the_root() {
        let host = tempfile::tempdir().unwrap();
        let rootfs = tempfile::tempdir().unwrap();
        symlink(host.path(), rootfs.path().join("dev")).unwrap();
        let inside = rootfs.path().join(host.path().strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside).unwrap();
        let root = open_root(rootfs.path()).unwrap();
        let dev = dir_in_root(root.as_fd(), Path::new("/dev/sub"), 0o755).unwrap();
        let inside = inside.join("sub");
        assert_eq!(
            nix::sys::stat::fstat(dev.as_raw_fd()).unwrap().st_ino,
            std::fs::metadata(&inside).unwrap().ino()
        );
        assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_dangling_symlink_is_not_followed_out_of_the_root() {
        let host = tempfile::tempdir().unwrap();
        let rootfs = tempfile::tempdir().unwrap();
        symlink(host.path(), rootfs.path().join("dev")).unwrap();
        let root = open_root(rootfs.path()).unwrap();
        let err = dir_in_root(root.as_fd(), Path::new("/dev"), 0o755).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(std::fs::read_dir(host.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_in_the_way_is_not_a_directory() {
        let rootfs = tempfile::tempdir().unwrap();
        std::fs::write(rootfs.path().join("dev"), b"").unwrap();
        let root = open_root(rootfs.path()).unwrap();
        let err = dir_in_root(root.as_fd(), Path::new("/dev"), 0o755).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
    }
}
