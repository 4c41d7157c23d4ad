//! Waiting for a foreground container, and passing signals on to it.
//!
//! Every signal is blocked before the container is cloned (see
//! `block_signals`), so a container that exits at once still leaves its
//! SIGCHLD pending for `wait_for_init`. youki 0.7 blocks them only after
//! start, loses that SIGCHLD, and hangs about one run in five.

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

pub fn block_signals() -> Result<()> {
    SigSet::all().thread_block().context("block signals")
}

/// Waits for `init` to exit and returns its exit code (128+N for signal N).
/// Other signals are forwarded to it; other children are reaped.
pub fn wait_for_init(init: Pid) -> Result<i32> {
    let signals = SigSet::all();
    loop {
        if let Some(code) = reap(init)? {
            return Ok(code);
        }
        match signals.wait().context("wait for signals")? {
            Signal::SIGCHLD => {}
            // Go runtimes (the engines) use SIGURG for preemption.
            Signal::SIGURG => {}
            // A resize is for the relayed terminal, not the container's init.
            Signal::SIGWINCH => crate::runtime::launch::terminal::pass_window_size(),
            signal => match kill(init, signal) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => tracing::warn!("forward {signal} to the container: {e}"),
            },
        }
    }
}

fn reap(init: Pid) -> Result<Option<i32>> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == init => return Ok(Some(code)),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == init => {
                return Ok(Some(128 + signal as i32))
            }
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(_) => continue,
            // No children left at all: init is gone and was reaped elsewhere.
            Err(Errno::ECHILD) => return Ok(Some(init_exit_unknown())),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e).context("waitpid"),
        }
    }
}

fn init_exit_unknown() -> i32 {
    tracing::warn!("the container's init was reaped by someone else; its exit code is unknown");
    255
}
