//! Creating a container: shared by `create` and `run`.

pub mod executor;
pub mod foreground;
pub mod signals;
pub mod terminal;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::syscall::syscall::SyscallType;

use crate::runtime::context::Ctx;
use crate::runtime::launch::executor::GpurunExecutor;
use crate::runtime::launch::terminal::ConsoleSocket;
use crate::runtime::spec::prepare::{self, CreateOptions};

pub struct LaunchArgs<'a> {
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a PathBuf>,
    pub console_socket: Option<&'a PathBuf>,
    pub preserve_fds: i32,
    pub no_pivot: bool,
    pub detach: bool,
    /// The invoker's own GPU request (`run --gpus`), if any.
    pub invoker_gpus: Option<&'a gpurun_gpu::flow::InvokerGpus>,
    /// Where the container's stdout and stderr go instead of ours (`gpu
    /// verify`).
    pub output: Option<std::os::fd::OwnedFd>,
    /// A spec made on the fly (`run --rootfs`) instead of the bundle's.
    pub spec: Option<libcontainer::oci_spec::runtime::Spec>,
    /// Inside a Slurm job, no GPU request means the job's GPUs.
    pub slurm_gpus_by_default: bool,
    /// A container with `process.terminal` and no console socket gets a
    /// terminal that gpurun relays (a foreground `run`).
    pub relay_terminal: bool,
}

impl<'a> LaunchArgs<'a> {
    /// Container `id` from `bundle`, detached, with nothing else asked.
    pub fn new(id: &'a str, bundle: &'a Path) -> LaunchArgs<'a> {
        LaunchArgs {
            id,
            bundle,
            pid_file: None,
            console_socket: None,
            preserve_fds: 0,
            no_pivot: false,
            detach: true,
            invoker_gpus: None,
            output: None,
            spec: None,
            slurm_gpus_by_default: false,
            relay_terminal: false,
        }
    }
}

/// As root on a v1 or hybrid host, the cgroup hierarchies (and pathrs'
/// procfs handle) are looked up here, before the container's processes are
/// cloned: the intermediate process and the init inherit them, and so does
/// the delete at the end of a `run`. Each used to read mountinfo on its
/// own, five reads and two private procfs mounts per start, all taking
/// the kernel's global mount lock against every other start on the host
/// (libcgroups patch 21). Rootless and v2 starts read none of it here.
fn read_cgroup_mounts_once(ctx: &Ctx) {
    use libcgroups::common::CgroupSetup;
    if ctx.settings.systemd_cgroup || !nix::unistd::geteuid().is_root() {
        return;
    }
    if matches!(
        libcgroups::common::get_cgroup_setup(),
        Ok(CgroupSetup::Legacy | CgroupSetup::Hybrid)
    ) {
        // A failure is met again, and reported, where the table is used.
        let _ = libcgroups::v1::util::cgroup_mounts();
    }
}

pub fn create(ctx: &Ctx, args: LaunchArgs) -> Result<(Container, Option<ConsoleSocket>)> {
    let prepared = prepare::prepare(&CreateOptions {
        root: &ctx.root,
        id: args.id,
        bundle: args.bundle,
        settings: &ctx.settings,
        invoker_gpus: args.invoker_gpus,
        slurm_gpus_by_default: args.slurm_gpus_by_default,
        spec: args.spec,
    })?;

    let wants_terminal = prepared
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    let mut own_console = None;
    let relayed_socket;
    let mut console_socket = args.console_socket;
    if wants_terminal && console_socket.is_none() && args.relay_terminal {
        relayed_socket = prepared.dir().join("terminal.sock");
        own_console = Some(ConsoleSocket::bind(&relayed_socket)?);
        console_socket = Some(&relayed_socket);
    }
    read_cgroup_mounts_once(ctx);
    let mut builder = ContainerBuilder::new(args.id.to_owned(), SyscallType::default());
    if let Some(output) = args.output {
        builder.stderr = Some(
            output
                .try_clone()
                .context("duplicate the output descriptor")?,
        );
        builder.stdout = Some(output);
    }
    let container = builder
        .with_executor(GpurunExecutor)
        .with_pid_file(args.pid_file)?
        .with_console_socket(console_socket)
        .with_root_path(&ctx.root)?
        .with_preserved_fds(args.preserve_fds)
        .validate_id()?
        .as_init(&prepared.user_bundle)
        .with_config_dir(prepared.dir())
        .with_pid_record(crate::runtime::state::containers::open_pid_record(
            prepared.dir(),
        )?)
        .with_systemd(ctx.settings.systemd_cgroup)
        .with_detach(args.detach)
        .with_no_pivot(args.no_pivot)
        .build();
    let container = match container {
        Ok(container) => container,
        Err(e) => {
            undo_failed_build(args.id, &prepared);
            let err = anyhow::Error::from(e).context(format!("create container {:?}", args.id));
            return Err(prepare::state_root_full(err, &ctx.root));
        }
    };
    // The config the container runs is kept with its state: `exec` reads
    // it (libcontainer patch), as runc reads its saved config, so an exec'd
    // process joins the same cgroup and gets the same edits.
    let saved = container.root.join("config.json");
    if let Err(e) = std::fs::rename(prepared.dir().join("config.json"), &saved) {
        let mut container = container;
        let _ = crate::runtime::state::containers::delete(&mut container, true);
        return Err(e).with_context(|| format!("save the config of container {:?}", args.id));
    }
    if prepared.no_process {
        crate::runtime::state::containers::mark_no_process(&ctx.root, args.id)?;
    }

    Ok((container, own_console))
}

/// After libcontainer's build failed: the poststop hooks, and a Slurm
/// step's parents made for the container (libcontainer removed its own
/// cgroup; see containers::delete).
fn undo_failed_build(id: &str, prepared: &prepare::PreparedBundle) {
    run_poststop_hooks_after_failed_create(id, prepared);
    if let Some(path) = prepared
        .spec
        .linux()
        .as_ref()
        .and_then(|l| l.cgroups_path().as_ref())
    {
        crate::runtime::cgroups::host::remove_empty_slurm_parents(path);
    }
}

/// A failed create is a container stopped and destroyed: the runtime spec
/// then goes on with the poststop hooks ("continue the lifecycle at step
/// 12"), as runc does. Their failures are warnings.
fn run_poststop_hooks_after_failed_create(id: &str, prepared: &prepare::PreparedBundle) {
    let Some(hooks) = prepared.spec.hooks() else {
        return;
    };
    let mut state = libcontainer::container::State::new(
        id,
        libcontainer::container::ContainerStatus::Stopped,
        None,
        prepared.user_bundle.clone(),
    );
    state.annotations = prepared.spec.annotations().clone();
    libcontainer::hooks::run_hooks_warn_on_failure(
        hooks.poststop().as_ref(),
        Some(&state),
        None,
        "poststop",
    );
}

/// What `run_foreground` writes to `started` once the container runs.
pub const STARTED: &[u8] = b"started\n";

/// Creates, starts and waits for a container in the foreground; deletes it
/// afterwards unless `keep`. Returns its exit code (128+N for signal N).
pub fn run_foreground(
    ctx: &Ctx,
    args: LaunchArgs,
    subreaper: bool,
    keep: bool,
    started: Option<&mut std::fs::File>,
) -> Result<i32> {
    // Before any child exists, so no SIGCHLD can be lost.
    crate::runtime::launch::foreground::block_signals()?;
    if subreaper {
        // Orphans of a container without its own pid namespace come to us,
        // and the wait loop reaps them.
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    let id = args.id.to_owned();
    let (mut container, console) = create(ctx, args)?;
    let relay = match console {
        Some(console) => match console.relay() {
            Ok(relay) => Some(relay),
            Err(e) => {
                let _ = crate::runtime::state::containers::delete(&mut container, true);
                return Err(e);
            }
        },
        None => None,
    };
    start_or_delete(ctx, &mut container)?;
    if let Some(started) = started {
        use std::io::Write;
        let _ = started.write_all(STARTED);
    }
    let init = container.pid().context("the container has no init pid")?;
    let code = crate::runtime::launch::foreground::wait_for_init(init);
    if !keep {
        crate::runtime::state::containers::delete(&mut container, true)
            .with_context(|| format!("delete container {id:?}"))?;
    }
    if let Some(relay) = relay {
        relay.finish();
    }
    code
}

/// Starts a created container; one that fails to start is deleted, so a
/// failed `run` leaves nothing behind.
pub fn start_or_delete(ctx: &Ctx, container: &mut Container) -> Result<()> {
    let started =
        crate::runtime::state::containers::refuse_start_without_process(&ctx.root, container.id())
            .and_then(|()| Ok(container.start()?));
    if let Err(e) = started {
        let id = container.id().to_owned();
        let _ = crate::runtime::state::containers::delete(container, true);
        return Err(e).with_context(|| format!("start container {id:?}"));
    }
    Ok(())
}
