//! A child process in a user namespace of its own, for work that must
//! own files as other ids than the caller's (an unprivileged unpack).

use std::fs;
use std::io::{Read, Write};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Runs `work` in a child process inside a new user namespace where it is
/// root, once `map_ids` (given the child's pid) has written the namespace's
/// id mappings from outside; returns what `work` returned. Unpacking an
/// image as an unprivileged user keeps its files' owners this way.
pub fn in_user_namespace<T: Serialize + DeserializeOwned>(
    map_ids: impl FnOnce(u32) -> Result<()>,
    work: impl FnOnce() -> Result<T>,
) -> Result<T> {
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};

    let (ready_r, ready_w) = nix::unistd::pipe()?;
    let (go_r, go_w) = nix::unistd::pipe()?;
    let (result_r, result_w) = nix::unistd::pipe()?;
    // SAFETY: the caller runs no other threads; the child does its work and
    // leaves with _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop((ready_r, go_w, result_r));
            let outcome = (|| -> Result<T> {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
                    .context("create a user namespace (see gpurun doctor)")?;
                fs::File::from(ready_w).write_all(b"1")?;
                let mut go = [0u8; 1];
                if fs::File::from(go_r).read(&mut go)? != 1 || go[0] != b'1' {
                    bail!("the id mappings could not be written");
                }
                nix::unistd::setresgid(0.into(), 0.into(), 0.into())
                    .context("become root in the user namespace")?;
                nix::unistd::setresuid(0.into(), 0.into(), 0.into())
                    .context("become root in the user namespace")?;
                work()
            })();
            let (code, text) = match outcome {
                Ok(stats) => (0, serde_json::to_string(&stats).unwrap_or_default()),
                Err(e) => (1, format!("{e:#}").replace('\n', " ")),
            };
            let _ = fs::File::from(result_w).write_all(text.as_bytes());
            // SAFETY: ends the child without running the parent's exit path.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop((ready_w, go_r, result_w));
            let mut ready = [0u8; 1];
            let unshared = fs::File::from(ready_r).read(&mut ready).unwrap_or(0) == 1;
            let mapped = if unshared {
                map_ids(child.as_raw() as u32)
            } else {
                Ok(())
            };
            let _ = fs::File::from(go_w).write_all(if mapped.is_ok() { b"1" } else { b"0" });
            let mut text = String::new();
            let _ = fs::File::from(result_r).read_to_string(&mut text);
            let status = waitpid(child, None)?;
            mapped?;
            match status {
                WaitStatus::Exited(_, 0) => Ok(serde_json::from_str(&text)?),
                _ if !text.is_empty() => bail!("{text}"),
                other => bail!("the unpacking process ended with {other:?}"),
            }
        }
    }
}
