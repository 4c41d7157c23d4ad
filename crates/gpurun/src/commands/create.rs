use anyhow::Result;
use liboci_cli::Create;

use crate::runtime::context::Ctx;
use crate::runtime::launch::{self, LaunchArgs};

pub fn create(ctx: &Ctx, args: Create) -> Result<()> {
    launch::create(
        ctx,
        LaunchArgs {
            pid_file: args.pid_file.as_ref(),
            console_socket: args.console_socket.as_ref(),
            preserve_fds: args.preserve_fds,
            no_pivot: args.no_pivot,
            ..LaunchArgs::new(&args.container_id, &args.bundle)
        },
    )?;
    Ok(())
}
