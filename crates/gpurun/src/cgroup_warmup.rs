//! Hiding the kernel's cgroup-attach latency behind the binary copy (v2).
//!
//! Moving a process between cgroups through `cgroup.procs` takes the
//! kernel's `cgroup_threadgroup_rwsem` for writing, which waits for an RCU
//! grace period when no attach happened in the last few tens of
//! milliseconds: 7 to 15 ms here, on every container start (runc pays it
//! too). Once one attach has paid it, the next ones are fast for a while.
//!
//! On cgroup v1 the container's intermediate process moves only its own
//! thread (through `tasks`; see libcgroups' `add_task_v1`), which needs no
//! such lock, so there is nothing to warm, and a warm-up would only hold
//! `cgroup_mutex` while it waits. On v2, moving a thread across domains is
//! not allowed, so the join goes through `cgroup.procs`: before copying our
//! binary into the sealed memfd (a few ms), we fork a helper that writes
//! its own pid into the `cgroup.procs` of the cgroup it is already in: a
//! no-op move that starts the grace period. The helper exits at once;
//! nothing is moved anywhere, and nothing else is touched.

use std::fs::OpenOptions;
use std::io::Write;

/// The `cgroup.procs` of our own cgroup on a cgroup v2 host; `None` on a
/// v1 or hybrid host (one with any v1 controller lines).
fn own_cgroup_procs() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (hierarchy, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if hierarchy != "0" {
            return None;
        }
        if controllers.is_empty() {
            v2 = Some(format!("/sys/fs/cgroup{path}/cgroup.procs"));
        }
    }
    v2.filter(|p| std::path::Path::new(p).exists())
}

/// Starts the warm-up in a child process; returns at once.
pub fn start() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let Some(procs) = own_cgroup_procs() else {
        return;
    };
    // SAFETY: we are single-threaded here (first thing in main), and the
    // child only opens, writes and exits.
    // The parent goes on at once; the child is reaped like any other.
    if unsafe { libc::fork() } == 0 {
        if let Ok(mut file) = OpenOptions::new().write(true).open(&procs) {
            let _ = file.write_all(b"0");
        }
        // SAFETY: leaving without running our atexit handlers or flushing
        // buffers shared with the parent.
        unsafe { libc::_exit(0) }
    }
}
