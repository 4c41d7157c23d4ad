//! `gpurun doctor`: can the current user run a container, and a GPU
//! container, on this host? One line per check, each failure with its fix.
//! Exits 1 when a container cannot run. The checks live in three parts:
//! the host (state directory, user namespaces, subordinate ids), cgroups,
//! and the GPU.

mod cgroups;
mod gpu;
mod host;

use std::fs;

use anyhow::Result;

use crate::runtime::context::Ctx;
use crate::runtime::spec::idmap::UserIds;
use cgroups::{check_cgroup_drivers, check_cgroups};
use gpu::check_gpu;
use host::{check_state_dir, check_subordinate_ids, check_user_namespaces};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Ok,
    Info,
    Warn,
    Fail,
}

struct Report {
    worst_plain: Level,
    worst_gpu: Level,
}

impl Report {
    /// `gpu` checks only decide whether a GPU container would work.
    fn line(&mut self, level: Level, gpu: bool, name: &str, detail: impl AsRef<str>) {
        let tag = match level {
            Level::Ok => "ok  ",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{tag}  {name}: {}", detail.as_ref());
        if gpu {
            self.worst_gpu = self.worst_gpu.max(level);
        } else {
            self.worst_plain = self.worst_plain.max(level);
        }
    }
}

fn read_number(path: &str) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub fn doctor(ctx: &Ctx, need_gpu: bool) -> Result<i32> {
    let root = nix::unistd::geteuid().is_root();
    let user = UserIds::current();
    let mut r = Report {
        worst_plain: Level::Ok,
        worst_gpu: Level::Ok,
    };
    println!(
        "gpurun doctor for {} (uid {}), gpurun {}",
        if user.name.is_empty() {
            "?"
        } else {
            &user.name
        },
        user.uid,
        env!("CARGO_PKG_VERSION")
    );

    check_state_dir(&mut r, ctx);
    check_user_namespaces(&mut r, root);
    check_subordinate_ids(&mut r, root, &user);
    check_cgroups(&mut r, root, &user);
    check_cgroup_drivers(&mut r, root);
    let gpu_verdict = check_gpu(&mut r, ctx, &user);

    let plain_ok = r.worst_plain < Level::Fail;
    println!(
        "verdict:  container: {}",
        if plain_ok {
            "would run"
        } else {
            "would NOT run (see FAIL above)"
        }
    );
    let gpu = match (plain_ok, r.worst_gpu < Level::Fail, gpu_verdict) {
        (false, _, _) => "would NOT run (no container can)",
        (true, false, _) => "would NOT get a GPU (see FAIL above)",
        (true, true, Some(true)) => "would run with the GPUs",
        _ => "would run with the driver files injected, but no kernel driver answers",
    };
    println!("verdict:  GPU container: {gpu}");
    let gpu_ok = r.worst_gpu < Level::Fail;
    Ok(if plain_ok && (gpu_ok || !need_gpu) {
        0
    } else {
        1
    })
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Whether `path` has the extended attribute `name` (a file capability).
fn xattr_present(path: &std::path::Path, name: &str) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(p), Ok(n)) = (
        std::ffi::CString::new(path.as_os_str().as_bytes()),
        std::ffi::CString::new(name),
    ) else {
        return false;
    };
    // SAFETY: valid C strings; a NULL buffer of size 0 asks for the size only.
    unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) > 0 }
}
