use anyhow::{Context, Result};
use liboci_cli::Resume;

use crate::runtime::{context::Ctx, state::containers};

pub fn resume(ctx: &Ctx, args: Resume) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    container
        .resume()
        .with_context(|| format!("resume container {:?}", args.container_id))
}
