//! A filesystem mounted nowhere (the new mount API: fsopen, fsconfig,
//! fsmount): reachable only through the returned descriptor, so nothing is
//! left in any mount namespace to clean up.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::openat2::syscall_result;

/// A string option for fsconfig, or a flag where `value` is empty (`ro`:
/// the superblock read-only, so a block device is opened for reading
/// alone); a failed optional one is skipped (an older kernel may not know
/// it).
pub struct FsOption<'a> {
    pub key: &'a CStr,
    pub value: &'a CStr,
    pub required: bool,
}

impl<'a> FsOption<'a> {
    /// An option whose failure fails the mount.
    pub fn required(key: &'a CStr, value: &'a CStr) -> Self {
        FsOption {
            key,
            value,
            required: true,
        }
    }

    /// An option an older kernel may not know: skipped if it fails.
    pub fn optional(key: &'a CStr, value: &'a CStr) -> Self {
        FsOption {
            key,
            value,
            required: false,
        }
    }
}

/// Mounts a `fstype` with `options` and the `MOUNT_ATTR_*` `attributes`,
/// and returns the mount's root, close-on-exec.
pub fn detached_mount(fstype: &CStr, options: &[FsOption], attributes: u64) -> io::Result<OwnedFd> {
    // SAFETY: the new mount API with NUL-terminated strings; every result
    // is a new descriptor owned here.
    unsafe {
        let context = OwnedFd::from_raw_fd(syscall_result(libc::syscall(
            libc::SYS_fsopen,
            fstype.as_ptr(),
            libc::FSOPEN_CLOEXEC,
        ))?);
        for option in options {
            let (command, value) = if option.value.is_empty() {
                (libc::FSCONFIG_SET_FLAG, std::ptr::null())
            } else {
                (libc::FSCONFIG_SET_STRING, option.value.as_ptr())
            };
            let set = syscall_result(libc::syscall(
                libc::SYS_fsconfig,
                context.as_raw_fd(),
                command,
                option.key.as_ptr(),
                value,
                0,
            ));
            if option.required {
                set?;
            }
        }
        syscall_result(libc::syscall(
            libc::SYS_fsconfig,
            context.as_raw_fd(),
            libc::FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        ))?;
        Ok(OwnedFd::from_raw_fd(syscall_result(libc::syscall(
            libc::SYS_fsmount,
            context.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            attributes,
        ))?))
    }
}
