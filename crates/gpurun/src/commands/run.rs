use anyhow::{Context, Result};

use crate::cli::RunArgs;
use crate::foreground;
use crate::launch::{self, LaunchArgs};
use crate::Ctx;

pub fn run(ctx: &Ctx, args: RunArgs) -> Result<i32> {
    let oci = &args.oci;
    if !oci.detach {
        // Before any child exists, so no SIGCHLD can be lost.
        foreground::block_signals()?;
        if !oci.no_subreaper {
            // Orphans of a container without its own pid namespace come to
            // us, and the wait loop reaps them.
            let _ = nix::sys::prctl::set_child_subreaper(true);
        }
    }
    let gpu_env = args.gpu_env();
    let mut container = launch::create(
        ctx,
        &LaunchArgs {
            id: &oci.container_id,
            bundle: &oci.bundle,
            pid_file: oci.pid_file.as_ref(),
            console_socket: oci.console_socket.as_ref(),
            preserve_fds: oci.preserve_fds,
            no_pivot: oci.no_pivot,
            detach: oci.detach,
            extra_env: &gpu_env,
        },
    )?;
    if let Err(e) = container.start() {
        let _ = container.delete(true);
        return Err(e).with_context(|| format!("start container {:?}", oci.container_id));
    }
    if oci.detach {
        return Ok(0);
    }
    let init = container.pid().context("the container has no init pid")?;
    let code = foreground::wait_for_init(init);
    if !oci.keep {
        container
            .delete(true)
            .with_context(|| format!("delete container {:?}", oci.container_id))?;
    }
    code
}
