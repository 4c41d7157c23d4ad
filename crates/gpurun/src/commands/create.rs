use anyhow::Result;
use liboci_cli::Create;

use crate::context::Ctx;
use crate::launch::{self, LaunchArgs};

pub fn create(ctx: &Ctx, args: Create) -> Result<()> {
    launch::create(
        ctx,
        LaunchArgs {
            id: &args.container_id,
            bundle: &args.bundle,
            pid_file: args.pid_file.as_ref(),
            console_socket: args.console_socket.as_ref(),
            preserve_fds: args.preserve_fds,
            no_pivot: args.no_pivot,
            detach: true,
            extra_env: &[],
            spec: None,
            slurm_gpus_by_default: false,
            output: None,
            relay_terminal: false,
        },
    )?;
    Ok(())
}
