use anyhow::{anyhow, Context, Result};
use libcontainer::container::ContainerStatus;
use libcontainer::signal::Signal;

use crate::cli::KillArgs;
use crate::{containers, Ctx};

pub fn kill(ctx: &Ctx, args: KillArgs) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    let signal = Signal::try_from(args.signal.as_str()).map_err(|_| {
        anyhow!(
            "unknown signal {:?}: use a name such as SIGTERM or KILL, or a number such as 9",
            args.signal
        )
    })?;
    container.refresh_status()?;
    if container.status() == ContainerStatus::Stopped && !args.all {
        anyhow::bail!("container {:?} is not running", args.container_id);
    }
    // A rootless container without a cgroup has no pid list for --all: its
    // init (and with it its pid namespace) is what can be signalled.
    if args.all && !containers::has_cgroup(&container) {
        return container
            .kill(signal, false)
            .with_context(|| format!("signal container {:?}", args.container_id));
    }
    container
        .kill(signal, args.all)
        .with_context(|| format!("signal container {:?}", args.container_id))
}
