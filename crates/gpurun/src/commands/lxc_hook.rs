//! `gpurun lxc-hook`: LXC's mount and start-host hooks (runtime/lxc.rs).

use anyhow::Result;

use crate::cli::LxcHookArgs;
use crate::runtime::{context::Ctx, lxc};

pub fn lxc_hook(ctx: &Ctx, args: LxcHookArgs) -> Result<i32> {
    lxc::hook(ctx, &args.lxc_args)
}
