//! The host's side of running a container at all: the state directory, user namespaces, subordinate ids.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Result;

use super::{read_number, xattr_present, Level, Report};
use crate::runtime::spec::idmap::{map_helpers, UserIds};
use crate::runtime::{context::Ctx, state::state_dir};

/// Tries it: a child process creates a user namespace and exits.
fn can_create_user_namespace() -> Result<(), nix::errno::Errno> {
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};
    // SAFETY: the child only calls unshare(2) and _exit(2), both
    // async-signal-safe, and doctor runs no other threads.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let code = match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
                Ok(()) => 0,
                Err(e) => e as i32,
            };
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None)? {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, errno) => Err(nix::errno::Errno::from_raw(errno)),
            _ => Err(nix::errno::Errno::ECHILD),
        },
    }
}

/// State directory.
pub(super) fn check_state_dir(r: &mut Report, ctx: &Ctx) {
    match state_dir::resolve(ctx.settings.root.as_deref(), true) {
        Ok(dir) if nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok() => r.line(
            Level::Ok,
            false,
            "state directory",
            dir.display().to_string(),
        ),
        Ok(dir) => r.line(
            Level::Fail,
            false,
            "state directory",
            format!(
                "{} is not writable: pass --root DIR with a directory of yours",
                dir.display()
            ),
        ),
        Err(e) => r.line(Level::Fail, false, "state directory", format!("{e:#}")),
    }
}

/// User namespaces: root needs none; everyone else needs to create one.
pub(super) fn check_user_namespaces(r: &mut Report, root: bool) {
    if root {
        r.line(Level::Ok, false, "user namespaces", "not needed as root");
    } else {
        let max = read_number("/proc/sys/user/max_user_namespaces");
        match can_create_user_namespace() {
            Ok(()) => r.line(
                Level::Ok,
                false,
                "user namespaces",
                format!("enabled (max_user_namespaces={})", max.unwrap_or(-1)),
            ),
            Err(e) => {
                let fix = if max == Some(0) {
                    "user.max_user_namespaces is 0: as root, sysctl -w user.max_user_namespaces=15000"
                } else if read_number("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
                    "as root, sysctl -w kernel.unprivileged_userns_clone=1"
                } else if read_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
                    == Some(1)
                {
                    "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): as root, sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give gpurun an AppArmor profile allowing userns"
                } else {
                    "the kernel or a security module refuses unprivileged user namespaces"
                };
                r.line(
                    Level::Fail,
                    false,
                    "user namespaces",
                    format!("cannot create one ({e}): {fix}"),
                )
            }
        }
    }
}

/// Subordinate ids and the helpers that map them.
pub(super) fn check_subordinate_ids(r: &mut Report, root: bool, user: &UserIds) {
    if root {
        r.line(Level::Ok, false, "subuid/subgid", "not needed as root");
    } else if user.subuids.is_empty() || user.subgids.is_empty() {
        r.line(
            Level::Warn,
            false,
            "subuid/subgid",
            format!(
                "no ranges for {:?}: containers map only your own id (files of other owners show as nobody, --keep-uid is unavailable); as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {}",
                user.name, user.name
            ),
        );
    } else {
        let (u, g) = (user.subuids[0], user.subgids[0]);
        r.line(
            Level::Ok,
            false,
            "subuid/subgid",
            format!("{}+{} and {}+{}", u.start, u.count, g.start, g.count),
        );
    }
    match map_helpers() {
        Some((uidmap, gidmap)) => {
            let setuid = |p: &Path| {
                fs::metadata(p).is_ok_and(|m| m.mode() & 0o4000 != 0)
                    || xattr_present(p, "security.capability")
            };
            if root || (setuid(&uidmap) && setuid(&gidmap)) {
                r.line(
                    Level::Ok,
                    false,
                    "newuidmap",
                    format!("{} and {}", uidmap.display(), gidmap.display()),
                )
            } else {
                r.line(
                    Level::Warn,
                    false,
                    "newuidmap",
                    format!(
                        "{} has neither the setuid bit nor file capabilities: reinstall uidmap",
                        uidmap.display()
                    ),
                )
            }
        }
        None if root => r.line(Level::Ok, false, "newuidmap", "not needed as root"),
        None => r.line(
            Level::Warn,
            false,
            "newuidmap",
            "not installed: only your own id can be mapped; apt-get install uidmap",
        ),
    }
}
