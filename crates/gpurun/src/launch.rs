//! Creating a container: shared by `create` and `run`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::syscall::syscall::SyscallType;

use crate::executor::GpurunExecutor;
use crate::prepare::{self, CreateOptions};
use crate::Ctx;

pub struct LaunchArgs<'a> {
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a PathBuf>,
    pub console_socket: Option<&'a PathBuf>,
    pub preserve_fds: i32,
    pub no_pivot: bool,
    pub detach: bool,
    pub extra_env: &'a [String],
}

pub fn create(ctx: &Ctx, args: &LaunchArgs) -> Result<Container> {
    let prepared = prepare::prepare(&CreateOptions {
        root: &ctx.root,
        id: args.id,
        bundle: args.bundle,
        global: &ctx.global,
        extra_env: args.extra_env,
    })?;

    let mut container = ContainerBuilder::new(args.id.to_owned(), SyscallType::default())
        .with_executor(GpurunExecutor)
        .with_pid_file(args.pid_file)?
        .with_console_socket(args.console_socket)
        .with_root_path(&ctx.root)?
        .with_preserved_fds(args.preserve_fds)
        .validate_id()?
        .as_init(&prepared.dir)
        .with_systemd(ctx.global.systemd_cgroup)
        .with_detach(args.detach)
        .with_no_pivot(args.no_pivot)
        .build()
        .with_context(|| format!("create container {:?}", args.id))?;

    // State reports the user's bundle, not gpurun's working copy.
    container.state.bundle = prepared.user_bundle.clone();
    container.save().context("save container state")?;
    Ok(container)
}
