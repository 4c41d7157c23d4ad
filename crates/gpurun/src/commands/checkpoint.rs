//! `gpurun checkpoint`: runc's flags, handed to the runtime's CRIU code.

use anyhow::Result;

use crate::cli::{CheckpointArgs, CriuFlags};
use crate::runtime::context::Ctx;
use crate::runtime::criu::{self, CheckpointOptions, Common};

pub fn checkpoint(ctx: &Ctx, args: CheckpointArgs) -> Result<()> {
    criu::checkpoint::checkpoint(
        ctx,
        CheckpointOptions {
            criu: common(args.criu),
            leave_running: args.leave_running,
            link_remap: args.link_remap,
            page_server: args.page_server,
            parent_path: args.parent_path,
            pre_dump: args.pre_dump,
            status_fd: args.status_fd,
            cuda_lock_timeout: std::time::Duration::from_secs(args.cuda_lock_timeout.into()),
            container_id: args.container_id,
        },
    )
}

/// The flags checkpoint and restore share, as the runtime takes them.
pub fn common(flags: CriuFlags) -> Common {
    Common {
        image_path: flags.image_path,
        work_path: flags.work_path,
        tcp_established: flags.tcp_established,
        ext_unix_sk: flags.ext_unix_sk,
        shell_job: flags.shell_job,
        file_locks: flags.file_locks,
        auto_dedup: flags.auto_dedup,
        lazy_pages: flags.lazy_pages,
        empty_ns: flags.empty_ns,
        manage_cgroups_mode: flags.manage_cgroups_mode,
    }
}
