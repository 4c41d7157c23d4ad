use anyhow::Result;

use crate::cli::RunArgs;
use crate::launch::{self, LaunchArgs};
use crate::Ctx;

pub fn run(ctx: &Ctx, args: RunArgs) -> Result<i32> {
    let oci = &args.oci;
    let gpu_env = args.gpu_env();
    let launch_args = LaunchArgs {
        id: &oci.container_id,
        bundle: &oci.bundle,
        pid_file: oci.pid_file.as_ref(),
        console_socket: oci.console_socket.as_ref(),
        preserve_fds: oci.preserve_fds,
        no_pivot: oci.no_pivot,
        detach: oci.detach,
        extra_env: &gpu_env,
        stdout: None,
    };
    if !oci.detach {
        return launch::run_foreground(ctx, launch_args, !oci.no_subreaper, oci.keep);
    }
    let mut container = launch::create(ctx, launch_args)?;
    launch::start_or_delete(&mut container)?;
    Ok(0)
}
