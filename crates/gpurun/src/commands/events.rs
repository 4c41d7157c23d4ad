use anyhow::{Context, Result};
use liboci_cli::Events;

use crate::{containers, Ctx};

pub fn events(ctx: &Ctx, args: Events) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    container
        .events(args.interval, args.stats)
        .with_context(|| format!("events of container {:?}", args.container_id))
}
