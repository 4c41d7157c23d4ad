//! Re-exec from a sealed, anonymous copy of our own binary (CVE-2019-5736).
//!
//! A process inside the container can open `/proc/<runtime pid>/exe` while
//! the runtime joins its namespaces, and write through it to the host binary.
//! Running from a sealed memfd leaves it nothing to write to.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;

use anyhow::{Context, Result};

/// The copy can neither change size nor get new seals...
const FIXED: libc::c_int = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
/// ...nor be written: F_SEAL_WRITE, or F_SEAL_FUTURE_WRITE (see `seal`).
const NO_WRITES: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_FUTURE_WRITE;

fn is_sealed(file: &File) -> bool {
    // SAFETY: fcntl on a valid fd; F_GET_SEALS takes no argument.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & FIXED == FIXED && seals & NO_WRITES != 0
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

/// Returns if we already run from a sealed copy; otherwise execs one and
/// does not return.
pub fn ensure_sealed() -> Result<()> {
    let mut exe = File::open("/proc/self/exe").context("open /proc/self/exe")?;
    if is_sealed(&exe) {
        return Ok(());
    }
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
    io::copy(&mut exe, &mut memfd).context("copy the binary into a memfd")?;
    seal(fd).context("seal the memfd")?;

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
    // that outlive the call. fexecve only returns on failure.
    unsafe { libc::fexecve(fd, argv.as_ptr(), envp.as_ptr()) };
    Err(io::Error::last_os_error()).context("re-exec from the sealed copy")
}
