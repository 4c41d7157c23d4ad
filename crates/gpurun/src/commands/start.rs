use anyhow::{Context, Result};
use liboci_cli::Start;

use crate::runtime::{context::Ctx, state::containers};

pub fn start(ctx: &Ctx, args: Start) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    containers::refuse_start_without_process(&ctx.root, &args.container_id)?;
    container
        .start()
        .with_context(|| format!("start container {:?}", args.container_id))
}
