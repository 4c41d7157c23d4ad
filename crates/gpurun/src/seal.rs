//! Re-exec from a copy of our own binary that nothing can write to
//! (CVE-2019-5736).
//!
//! A process inside the container can open `/proc/<pid>/exe` of a runtime
//! that joined its namespaces, and, once the runtime is gone, write
//! through it to the host binary. So `create`, `run` and `exec` first
//! re-exec from a view of the binary that cannot be written:
//!
//! - as root, the binary opened through a read-only overlayfs made with
//!   fsopen/fsmount and attached nowhere (runc 1.2's method): no copy, no
//!   memory, no mount in any namespace, and no way to make it writable;
//! - where that is refused (an unprivileged user), a sealed memfd copy.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::detached_mount::{detached_mount, FsOption};
use anyhow::{Context, Result};

/// The copy can neither change size nor get new seals...
const FIXED: libc::c_int = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
/// ...nor be written: F_SEAL_WRITE, or F_SEAL_FUTURE_WRITE (see `seal`).
const NO_WRITES: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_FUTURE_WRITE;
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

fn is_sealed_memfd(file: &File) -> bool {
    // SAFETY: fcntl on a valid fd; F_GET_SEALS takes no argument.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & FIXED == FIXED && seals & NO_WRITES != 0
}

/// Whether the file is on a read-only overlayfs: the private mount made
/// below (an overlay with no upper layer cannot be written, and one that
/// is mounted nowhere cannot be remounted).
fn is_on_read_only_overlay(file: &File) -> bool {
    // SAFETY: fstatfs and fstatvfs fill zeroed structs for a valid fd.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut vfs: libc::statvfs = std::mem::zeroed();
        libc::fstatfs(file.as_raw_fd(), &mut fs) == 0
            && fs.f_type as i64 == OVERLAYFS_SUPER_MAGIC
            && libc::fstatvfs(file.as_raw_fd(), &mut vfs) == 0
            && vfs.f_flag & libc::ST_RDONLY != 0
    }
}

/// Seals the copy against every change. F_SEAL_WRITE also requires that
/// nothing else holds a reference to any of its pages at that moment; on a
/// busy host (page migration, DAMON) the kernel gives up with EBUSY after
/// waiting about 70 ms (seen once in 300 back-to-back runs). The copy was
/// filled with sendfile and never mapped, so F_SEAL_FUTURE_WRITE (Linux
/// 5.1), which forbids every later write and writable mapping without that
/// check, leaves it just as unchangeable.
fn seal(fd: libc::c_int) -> io::Result<()> {
    for seals in [
        FIXED | libc::F_SEAL_WRITE,
        FIXED | libc::F_SEAL_FUTURE_WRITE,
    ] {
        // SAFETY: valid fd and seal flags. A failed F_ADD_SEALS adds none.
        if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EBUSY) {
            return Err(err);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EBUSY))
}

fn check(rc: libc::c_long) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as libc::c_int)
    }
}

/// Overlay's escapes for a path in `lowerdir`.
fn escape_layer(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        if b == b':' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// The binary, opened (O_PATH) through a read-only overlayfs whose top
/// layer is the binary's directory. Overlayfs needs two layers to have no
/// upper one; the second is `/dev`, which holds no file of our name that
/// could matter (the binary's layer is on top) and never overlaps it.
fn through_private_overlay(exe: &Path) -> io::Result<OwnedFd> {
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let mut lower = escape_layer(dir);
    lower.extend_from_slice(b":/dev");
    let lower = CString::new(lower)?;
    let name = CString::new(name.as_bytes())?;
    let mnt = detached_mount(
        c"overlay",
        &[
            FsOption {
                key: c"lowerdir",
                value: &lower,
                required: true,
            },
            // Only to keep xino's notes out of dmesg; older kernels may refuse.
            FsOption {
                key: c"xino",
                value: c"off",
                required: false,
            },
        ],
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOSUID,
    )?;
    // SAFETY: a NUL-terminated name below the mount's root; the result is
    // a new descriptor owned here.
    unsafe {
        let fd = check(libc::openat(
            mnt.as_raw_fd(),
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        ) as libc::c_long)?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// A sealed memfd copy of the binary.
fn sealed_copy(exe: &mut File) -> Result<OwnedFd> {
    // SAFETY: the name is a valid C string; flags are valid.
    let fd = unsafe {
        libc::memfd_create(
            c"gpurun-sealed".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: fd was just returned by memfd_create and is owned here.
    let mut memfd = unsafe { File::from_raw_fd(fd) };
    io::copy(exe, &mut memfd).context("copy the binary into a memfd")?;
    seal(fd).context("seal the memfd")?;
    Ok(memfd.into())
}

/// Returns if we already run from a protected binary; otherwise execs one
/// and does not return.
pub fn ensure_sealed() -> Result<()> {
    let mut exe = File::open("/proc/self/exe").context("open /proc/self/exe")?;
    if is_sealed_memfd(&exe) || is_on_read_only_overlay(&exe) {
        return Ok(());
    }
    let path = std::fs::read_link("/proc/self/exe").context("read /proc/self/exe")?;
    let fd = match through_private_overlay(&path) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::debug!(
                "no private overlay for {} ({e}): sealed copy",
                path.display()
            );
            sealed_copy(&mut exe)?
        }
    };

    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.as_bytes()).context("argument holds a NUL byte"))
        .collect::<Result<_>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).context("environment holds a NUL byte")
        })
        .collect::<Result<_>>()?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: argv and envp are NULL-terminated arrays of valid C strings
    // that outlive the call; an empty path with AT_EMPTY_PATH executes the
    // descriptor itself (an O_PATH one too). execveat only returns on
    // failure.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd.as_raw_fd(),
            c"".as_ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    Err(io::Error::last_os_error()).context("re-exec from the protected binary")
}
