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
//! - as an unprivileged user, nothing at all when no id a container of
//!   this user can hold could write the binary (see `container_could_write`:
//!   the normal root-owned install), a sealed memfd copy otherwise;
//! - for a root `run` whose container can reach neither the binary nor a
//!   process running it (see `stub_policy`), no re-exec: the program is
//!   exec'd through a sealed stub instead (`exec_stub`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result};
use safe_fs::detached_mount::{detached_mount, FsOption};
use safe_fs::syscall_result as check;

use crate::runtime::protect::rootless_write::{container_could_write, ContainerIds};

/// The copy can neither change size nor get new seals...
const FIXED: libc::c_int = crate::runtime::protect::exec_stub::SEALS_FIXED;
/// ...nor be written: F_SEAL_WRITE, or F_SEAL_FUTURE_WRITE (see
/// `exec_stub::seal_memfd`).
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

/// An empty directory for the overlay's second layer, removed when
/// dropped (the mount keeps what it needs).
struct EmptyLayer(std::path::PathBuf);

impl EmptyLayer {
    fn new() -> io::Result<EmptyLayer> {
        let path = std::env::temp_dir().join(format!("gpurun-seal-{}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(EmptyLayer(path))
    }
}

impl Drop for EmptyLayer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The binary, opened (O_PATH) through a read-only overlayfs whose top
/// layer is the binary's directory. Overlayfs needs two layers to have no
/// upper one; the second holds no file of our name that could matter (the
/// binary's layer is on top) and never overlaps it: `/dev`, or, inside a
/// user namespace, where the kernel refuses a layer with mounts below it
/// that the namespace may not see under (`/dev/pts`: "failed to clone
/// lowerpath"), an empty directory of our own.
fn through_private_overlay(exe: &Path) -> io::Result<OwnedFd> {
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let empty = if crate::runtime::protect::privilege::in_user_namespace() {
        Some(EmptyLayer::new()?)
    } else {
        None
    };
    let mut lower = escape_layer(dir);
    lower.push(b':');
    match &empty {
        Some(layer) => lower.extend_from_slice(&escape_layer(&layer.0)),
        None => lower.extend_from_slice(b"/dev"),
    }
    let lower = CString::new(lower)?;
    let name = CString::new(name.as_bytes())?;
    let mnt = detached_mount(
        c"overlay",
        &[
            FsOption::required(c"lowerdir", &lower),
            // Only to keep xino's notes out of dmesg; older kernels may refuse.
            FsOption::optional(c"xino", c"off"),
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
    crate::runtime::protect::exec_stub::seal_memfd(fd).context("seal the memfd")?;
    Ok(memfd.into())
}

/// Whether `exe` (this process's) is a sealed copy or on the overlay.
pub fn runs_protected(exe: &File) -> bool {
    is_sealed_memfd(exe) || is_on_read_only_overlay(exe)
}

/// Returns if we already run from a protected binary, or from one no
/// container of ours could write; otherwise execs a protected one and does
/// not return.
pub fn ensure_sealed() -> Result<()> {
    let mut exe = File::open("/proc/self/exe").context("open /proc/self/exe")?;
    if runs_protected(&exe) {
        return Ok(());
    }
    let path = std::fs::read_link("/proc/self/exe").context("read /proc/self/exe")?;
    if !nix::unistd::geteuid().is_root() {
        let ids = ContainerIds::of_caller();
        match container_could_write(&exe, &path, &ids) {
            None => {
                tracing::debug!(
                    "{}: no id of ours can write it, no copy needed",
                    path.display()
                );
                return Ok(());
            }
            Some(why) => tracing::debug!("{}: {why}: sealed copy", path.display()),
        }
    }
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
    let errno = crate::runtime::protect::exec_stub::exec_fd(fd.as_raw_fd(), &args, &env);
    Err(io::Error::from(errno)).context("re-exec from the protected binary")
}
