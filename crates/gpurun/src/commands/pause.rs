use anyhow::{Context, Result};
use liboci_cli::Pause;

use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, state::containers};

pub fn pause(ctx: &Ctx, args: Pause) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    if !cgroups::container::has_cgroup(&container) {
        anyhow::bail!(
            "container {:?} has no cgroup (rootless without delegation), so it cannot be frozen",
            args.container_id
        );
    }
    container
        .pause()
        .with_context(|| format!("pause container {:?}", args.container_id))
}
