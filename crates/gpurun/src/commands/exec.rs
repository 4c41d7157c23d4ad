use crate::cli::ExecArgs;
use crate::runtime::cgroups;
use anyhow::{Context, Result};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::wait::{waitpid, WaitStatus};

use crate::runtime::launch::executor::GpurunExecutor;
use crate::runtime::launch::terminal::ConsoleSocket;
use crate::runtime::{context::Ctx, state::containers};

/// Runs a process in a running container; returns its exit code unless
/// --detach. exec's own failures exit 255 and start with "exec failed", as
/// runc's do: engines tell them from the process's own exit codes so.
pub fn exec(ctx: &Ctx, args: ExecArgs) -> Result<i32> {
    exec_in(ctx, args).map_err(|e| e.context(crate::runtime::context::Failure::EXEC))
}

fn exec_in(ctx: &Ctx, args: ExecArgs) -> Result<i32> {
    let id = &args.container_id;
    // Held until the process has started (below): no delete can take the
    // container down between the process joining its cgroup and its start.
    let lock = containers::lock_for_exec(&ctx.root, id);
    let container = containers::load(&ctx.root, id)?;
    refuse_unless_exec_can_run(&container, &args)?;
    let exec_cgroups = if args.cgroup.is_empty() {
        crate::runtime::cgroups::exec::ExecCgroups::default()
    } else {
        let cgroup = cgroups::container::path(&container)?;
        crate::runtime::cgroups::exec::exec_cgroups(&cgroup, &args.cgroup)?
    };
    if args.process.is_none() && args.command.is_empty() {
        anyhow::bail!("exec needs a command, or --process FILE with a process.json");
    }
    // The process file is read once (it may be a pipe, as `-p /dev/stdin`)
    // and handed on from memory.
    let process_copy = args.process.as_deref().map(ProcessCopy::read).transpose()?;
    // A terminal without a console socket, in the foreground: gpurun's
    // own socket, and the master relayed to our stdin and stdout.
    // With --process, the command line's process flags (-t) are ignored,
    // as runc ignores them.
    let wants_terminal = match &process_copy {
        Some(process) => process.terminal,
        None => args.tty,
    };
    let own_socket = container
        .root
        .join(format!("exec-terminal-{}.sock", std::process::id()));
    let mut console_socket = args.console_socket.clone();
    let mut console = None;
    if wants_terminal && console_socket.is_none() && !args.detach {
        console = Some(ConsoleSocket::bind(&own_socket)?);
        console_socket = Some(own_socket.clone());
    }
    let user = args.user.map(|(u, _)| u);
    let group = args.user.and_then(|(_, g)| g);
    let pid = ContainerBuilder::new(id.clone(), SyscallType::default())
        .with_executor(GpurunExecutor)
        .with_root_path(&ctx.root)?
        .with_console_socket(console_socket.as_ref())
        .with_pid_file(args.pid_file.as_ref())?
        .with_preserved_fds(args.preserve_fds)
        .validate_id()?
        .as_tenant()
        .with_detach(args.detach)
        .with_tty(args.tty)
        .with_cwd(args.cwd.as_ref())
        .with_env(args.env.clone().into_iter().collect())
        .with_process(process_copy.as_ref().map(|p| p.path.clone()))
        .with_no_new_privs(args.no_new_privs)
        .with_container_args(args.command.clone())
        .with_additional_gids(args.additional_gids)
        .with_user(user)
        .with_group(group)
        .with_capabilities(args.cap)
        .with_ignore_paused(args.ignore_paused)
        .with_sub_cgroup(exec_cgroups.everywhere)
        .with_extra_cgroup_dirs(exec_cgroups.per_controller)
        .with_apparmor(args.apparmor)
        .build();
    if console.is_some() {
        let _ = std::fs::remove_file(&own_socket);
    }
    drop(lock);
    // runc words it so: "exec failed: unable to start container process: …".
    let pid = pid.context("unable to start container process")?;
    if args.detach {
        return Ok(0);
    }
    let relay = console.map(ConsoleSocket::relay).transpose()?;
    let code = wait_for_exit(pid)?;
    if let Some(relay) = relay {
        relay.finish();
    }
    Ok(code)
}

/// runc's refusals, before anything is made: a paused container without
/// --ignore-paused, a stopped one, and a --pid-file in no directory.
fn refuse_unless_exec_can_run(container: &Container, args: &ExecArgs) -> Result<()> {
    let id = &args.container_id;
    let paused = container.status() == ContainerStatus::Paused;
    if paused && !args.ignore_paused {
        anyhow::bail!(
            "cannot exec in a paused container: {id:?} is paused; resume it, or exec with --ignore-paused (the process then waits until it is resumed)"
        );
    }
    // runc refuses only stopped and paused containers: a created one,
    // whose init waits for start, takes an exec too.
    let created = container.status() == ContainerStatus::Created;
    if !(container.can_exec() || created || paused && args.ignore_paused) {
        anyhow::bail!(
            "cannot exec in a {} container: {id:?} must be created or running",
            container.status().to_string().to_lowercase()
        );
    }
    if let Some(pid_file) = &args.pid_file {
        let parent = pid_file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() {
            anyhow::bail!(
                "--pid-file {}: directory {} does not exist",
                pid_file.display(),
                parent.display()
            );
        }
    }
    Ok(())
}

/// The exec'd process's exit code, as a shell gives it (128 + signal).
fn wait_for_exit(pid: nix::unistd::Pid) -> Result<i32> {
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok(128 + signal as i32),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("wait for the exec'd process"),
        }
    }
}

/// An exec's process.json, read once and kept in a memfd that libcontainer
/// opens by its /proc/self/fd path.
struct ProcessCopy {
    path: std::path::PathBuf,
    terminal: bool,
    _memfd: std::os::fd::OwnedFd,
}

impl ProcessCopy {
    fn read(path: &std::path::Path) -> Result<Self> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut bytes =
            std::fs::read(path).with_context(|| format!("read --process {}", path.display()))?;
        let parsed = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
        let terminal = parsed.as_ref().is_some_and(|v| v["terminal"] == true);
        if let Some(affinity) = parsed.as_ref().map(|v| &v["execCPUAffinity"]) {
            for field in ["initial", "final"] {
                crate::runtime::spec::prepare::check_cpu_affinity(field, affinity[field].as_str())?;
            }
        }
        // A process without "user" runs as uid and gid 0, as under runc
        // (the OCI type makes the field required).
        if let Some(mut process) = parsed.filter(|v| v.is_object() && v.get("user").is_none()) {
            process["user"] = serde_json::json!({"uid": 0, "gid": 0});
            bytes = serde_json::to_vec(&process)?;
        }
        let memfd = nix::sys::memfd::memfd_create(
            c"gpurun-process.json",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )
        .context("keep --process in memory")?;
        let mut file = std::fs::File::from(memfd);
        file.write_all(&bytes).context("keep --process in memory")?;
        let memfd = std::os::fd::OwnedFd::from(file);
        Ok(ProcessCopy {
            path: format!("/proc/self/fd/{}", memfd.as_raw_fd()).into(),
            terminal,
            _memfd: memfd,
        })
    }
}
