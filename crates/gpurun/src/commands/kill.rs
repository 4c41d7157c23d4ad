use anyhow::{Context, Result};
use libcgroups::common::CgroupManager;
use libcontainer::container::ContainerStatus;
use libcontainer::signal::Signal;
use nix::unistd::Pid;

use crate::cli::KillArgs;
use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, launch::signals, state::containers};

pub fn kill(ctx: &Ctx, args: KillArgs) -> Result<()> {
    let id = &args.container_id;
    let mut container = containers::load(&ctx.root, id)?;
    let number = signals::parse(&args.signal)?;
    containers::refresh_status(&mut container, &ctx.root)?;
    let status = container.status();
    let alive = matches!(
        status,
        ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused
    );
    let stopped_with_all = args.all && status == ContainerStatus::Stopped;
    if !(alive || stopped_with_all) {
        // "container not running" is runc's error, which containerd's shim
        // matches to treat a kill of a stopped container as done.
        anyhow::bail!(
            "container not running: {id:?} is {}, there is nothing to signal",
            containers::status_name(&container)
        );
    }
    let all = args.all && cgroups::container::has_cgroup(&container);
    match nix::sys::signal::Signal::try_from(number) {
        // A rootless container without a cgroup has no pid list for --all:
        // its init (and with it its pid namespace) is what can be signalled.
        Ok(signal) => container
            .kill(Signal::from(signal), all)
            .with_context(|| format!("signal container {id:?}")),
        // Signal 0 and the real-time signals, which libcontainer's signal
        // type cannot carry.
        Err(_) => {
            let pids = if all {
                cgroups::container::manager(&container)?.get_all_pids()?
            } else {
                container.pid().into_iter().collect()
            };
            for pid in pids {
                send(pid, number).with_context(|| format!("signal container {id:?}"))?;
            }
            Ok(())
        }
    }
}

fn send(pid: Pid, number: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) takes plain integers.
    if unsafe { libc::kill(pid.as_raw(), number) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    // Gone already is what a signal to a dying container gives.
    if err.raw_os_error() == Some(libc::ESRCH) {
        return Ok(());
    }
    Err(err)
}
