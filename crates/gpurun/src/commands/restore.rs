//! `gpurun restore`: runc's flags, handed to the runtime's CRIU code.

use anyhow::Result;

use super::checkpoint::common;
use crate::cli::RestoreArgs;
use crate::runtime::context::Ctx;
use crate::runtime::criu::{self, RestoreOptions};

pub fn restore(ctx: &Ctx, args: RestoreArgs) -> Result<i32> {
    criu::restore::restore(
        ctx,
        RestoreOptions {
            criu: common(args.criu),
            bundle: args.bundle,
            detach: args.detach,
            pid_file: args.pid_file,
            no_subreaper: args.no_subreaper,
            container_id: args.container_id,
        },
    )
}
