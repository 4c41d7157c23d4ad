//! A root `run` without the protected re-exec: the container's program is
//! exec'd through a tiny sealed stub instead (runc 1.2-rc's "runc-dmz"
//! idea), so the big binary is loaded once per start, not twice.
//!
//! CVE-2019-5736 needs a container process to get hold of the host's
//! gpurun binary through procfs, which can happen in two ways:
//!
//! 1. It opens `/proc/<pid>/exe` of a gpurun process it can see. That open
//!    is a ptrace access check. The processes that enter the container are
//!    clones of this one, made non-dumpable here (`protect_run`), and a
//!    non-dumpable process's `exe` opens only for a caller with
//!    CAP_SYS_PTRACE over it; no container process can hold that cap when
//!    the bounding set lacks it. The main process stays in the host's pid
//!    namespace, which the container does not see (it has a new one), and
//!    nobody else can be in that new one before the program runs: no hook
//!    runs before start, and a `run` is never left "created" for another
//!    container to join.
//! 2. The container's program is (or its interpreter or loader resolves
//!    to) `/proc/self/exe`: the kernel resolves that while it execs, when
//!    "self" is still the init. Here the init first execs this stub from a
//!    sealed memfd, and the stub execs the program: `/proc/self/exe` then
//!    names the stub, which refuses to run on its own, and which nobody
//!    can write (sealed).
//!
//! What is left is an instant: between `start` and the stub's exec (the
//! init execs it as soon as it is told to start) a `gpurun exec` that
//! adds CAP_SYS_PTRACE could, in principle, open the init's exe; such an
//! exec is an administrator's, and its own re-exec takes longer than that
//! instant.
//!
//! Two execs give the program exactly what one did: capabilities are
//! recomputed from the same bounding, inheritable and ambient sets, and
//! the stub touches no other process attribute. Where one condition is
//! not met (see `stub_policy::stub_protects`), `run` takes the protected re-exec
//! as before; `create` and `exec` always do, since a created container
//! waits for an unbounded time with the init in it.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;

#[cfg(gpurun_exec_stub)]
const STUB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/exec-stub"));
#[cfg(not(gpurun_exec_stub))]
const STUB: &[u8] = &[];

/// The stub's first argument, so that it refuses any other caller (a
/// program that names `/proc/self/exe` as its interpreter).
const MAGIC: &str = "gpurun-exec-v1";

/// The errors execve can give, each passed to the stub in runc's words.
const EXEC_ERRNOS: [Errno; 18] = [
    Errno::EPERM,
    Errno::ENOENT,
    Errno::EIO,
    Errno::E2BIG,
    Errno::ENOEXEC,
    Errno::ENOMEM,
    Errno::EACCES,
    Errno::EFAULT,
    Errno::ENOTDIR,
    Errno::EISDIR,
    Errno::EINVAL,
    Errno::ENFILE,
    Errno::EMFILE,
    Errno::ETXTBSY,
    Errno::ENAMETOOLONG,
    Errno::ELOOP,
    Errno::ELIBBAD,
    Errno::EAGAIN,
];

/// The sealed copy, open (close-on-exec) in this process and in the init,
/// its clone; -1 until `load`.
static STUB_FD: AtomicI32 = AtomicI32::new(-1);

/// Whether this build carries a stub.
pub fn built() -> bool {
    !STUB.is_empty()
}

/// Puts the stub into a sealed memfd for the init to exec.
pub fn load() -> io::Result<()> {
    if !built() {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    // vm.memfd_noexec = 2 forbids executing any memfd (Linux 6.3).
    if std::fs::read_to_string("/proc/sys/vm/memfd_noexec").is_ok_and(|v| v.trim() == "2") {
        return Err(io::Error::other("vm.memfd_noexec is 2"));
    }
    const MFD_EXEC: libc::c_uint = 0x10;
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a valid name and flags; kernels before 6.3 refuse MFD_EXEC
    // with EINVAL and make every memfd executable anyway.
    let mut fd = unsafe { libc::memfd_create(c"gpurun-exec".as_ptr(), flags | MFD_EXEC) };
    if fd < 0 && Errno::last() == Errno::EINVAL {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(c"gpurun-exec".as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor, owned here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(STUB)?;
    seal_memfd(fd)?;
    STUB_FD.store(file.into_raw_fd(), Ordering::Relaxed);
    Ok(())
}

/// The stub's descriptor, once loaded.
pub fn loaded() -> Option<RawFd> {
    Some(STUB_FD.load(Ordering::Relaxed)).filter(|fd| *fd >= 0)
}

/// Execs `program` (searched in `path` as execvp does) with `args` and
/// `envp` through the stub, which writes gpurun's error line and exits 255
/// if the program cannot start. Returns only if the stub itself could not
/// be exec'd.
pub fn exec(stub: RawFd, program: &str, path: &str, args: &[CString], envp: &[CString]) -> Errno {
    let mut argv: Vec<CString> = Vec::with_capacity(args.len() + 32);
    // Every entry must stay in its place for the stub to read them: a NUL
    // (possible only in a PATH from the spec) ends the entry there.
    let mut push = |mut s: String| {
        s.truncate(s.find('\0').unwrap_or(s.len()));
        argv.push(CString::new(s).unwrap_or_default());
    };
    push("gpurun-exec".into());
    push(MAGIC.into());
    push(program.into());
    push(path.into());
    let sinks = crate::runtime::logging::error_line_parts(&format!("exec {program}: "));
    push(sinks.len().to_string());
    for (fd, before, after) in sinks {
        // The log's descriptor is close-on-exec here; the stub gets a copy
        // it closes on its own exec.
        let fd = if fd > 2 {
            // SAFETY: F_DUPFD on a descriptor of ours makes a new one.
            unsafe { libc::fcntl(fd, libc::F_DUPFD, 3) }
        } else {
            fd
        };
        push(fd.to_string());
        push(before);
        push(after);
    }
    push(EXEC_ERRNOS.len().to_string());
    for errno in EXEC_ERRNOS {
        push(format!("{}={}", errno as i32, errno_text(errno)));
    }
    argv.extend(args.iter().cloned());
    exec_fd(stub, &argv, envp)
}

/// Executes the file behind `fd` (an O_PATH descriptor too) with `argv`
/// and `envp`; returns only on failure.
pub fn exec_fd(fd: RawFd, argv: &[CString], envp: &[CString]) -> Errno {
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    // SAFETY: NULL-terminated arrays of C strings that outlive the call;
    // an empty path with AT_EMPTY_PATH executes the descriptor itself.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd,
            c"".as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    Errno::last()
}

/// "no such file or directory": the error's text as Go prints it.
pub fn errno_text(errno: Errno) -> String {
    let desc = errno.desc();
    let mut chars = desc.chars();
    chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A memfd can neither change size nor get new seals...
pub const SEALS_FIXED: libc::c_int = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

/// Seals a memfd (the stub, or seal.rs's copy of the binary) against
/// every change. F_SEAL_WRITE also requires that
/// nothing else holds a reference to any of its pages at that moment; on a
/// busy host (page migration, DAMON) the kernel gives up with EBUSY after
/// waiting about 70 ms (seen once in 300 back-to-back runs). The copy was
/// filled with sendfile and never mapped, so F_SEAL_FUTURE_WRITE (Linux
/// 5.1), which forbids every later write and writable mapping without that
/// check, leaves it just as unchangeable.
pub fn seal_memfd(fd: libc::c_int) -> io::Result<()> {
    for seals in [
        SEALS_FIXED | libc::F_SEAL_WRITE,
        SEALS_FIXED | libc::F_SEAL_FUTURE_WRITE,
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
