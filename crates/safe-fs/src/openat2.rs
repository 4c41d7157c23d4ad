//! openat2(2), the one way gpurun resolves a path it does not trust.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `..` and absolute symlinks stop at the directory, as they would at `/`
/// for a process whose root it is; no magic link (`/proc/self/fd/N`) is
/// followed.
pub const IN_ROOT: u64 = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
/// Any step out of the directory (`..` above it, an absolute symlink, a
/// magic link) fails with EXDEV.
pub const BENEATH: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;

/// Opens `path` relative to `dir` with `flags` (close-on-exec added) under
/// the `resolve` rules; an empty path means `dir` itself.
pub fn openat2(
    dir: BorrowedFd,
    path: &Path,
    flags: libc::c_int,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: open_how is plain data; all-zero is its "no options" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: a valid dirfd, a NUL-terminated path and an open_how of the
    // size given; the result is a new descriptor owned here.
    let fd = syscall_result(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })?;
    // SAFETY: a fresh descriptor from openat2.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A raw syscall's return value as a result: negative means errno is set.
pub fn syscall_result(rc: libc::c_long) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as libc::c_int)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn in_root_stays_inside_and_beneath_refuses_to_leave() {
        let dir = std::env::temp_dir().join(format!("safe-fs-openat2-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/hostname"), "inside").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../etc/hostname", dir.join("up")).unwrap();
        let root = std::fs::File::open(&dir).unwrap();
        for link in ["abs", "up"] {
            let fd = openat2(root.as_fd(), Path::new(link), libc::O_RDONLY, IN_ROOT).unwrap();
            let text =
                std::fs::read_to_string(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
            assert_eq!(text, "inside", "{link}");
            let err = openat2(root.as_fd(), Path::new(link), libc::O_RDONLY, BENEATH).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EXDEV), "{link}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
