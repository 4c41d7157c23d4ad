use std::collections::HashMap;
use std::fs;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use oci_spec::runtime::{Linux, LinuxNamespace, LinuxNamespaceType};
#[cfg(feature = "libseccomp")]
use oci_spec::runtime::{SECCOMP_FD_NAME, VERSION as OCI_VERSION};

use crate::hooks;
use crate::network::network_device::dev_change_net_namespace;
use crate::process::args::{ContainerArgs, ContainerType};
use crate::process::fork::{self, CloneCb};
use crate::process::{channel, container_intermediate_process};
use crate::syscall::SyscallError;
use crate::user_ns::UserNamespaceConfig;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    Channel(#[from] channel::ChannelError),
    #[error("failed to write deny to setgroups")]
    SetGroupsDeny(#[source] std::io::Error),
    #[error(transparent)]
    UserNamespace(#[from] crate::user_ns::UserNamespaceError),
    #[error("container state is required")]
    ContainerStateRequired,
    #[error("failed to wait for intermediate process")]
    WaitIntermediateProcess(#[source] nix::Error),
    #[error(transparent)]
    IntelRdt(#[from] crate::process::intel_rdt::IntelRdtError),
    #[error("failed to create intermediate process")]
    IntermediateProcessFailed(#[source] fork::CloneError),
    /// gpurun patch: the init cloned with no intermediate process.
    #[error("failed to create init process")]
    InitProcessFailed(#[source] fork::CloneError),
    /// gpurun patch: the scope of an init cloned with no intermediate.
    #[error(transparent)]
    SystemdScope(container_intermediate_process::IntermediateProcessError),
    #[error("failed seccomp listener")]
    #[cfg(feature = "libseccomp")]
    SeccompListener(#[from] crate::process::seccomp_listener::SeccompListenerError),
    #[error("failed setup network device")]
    Network(#[from] crate::network::NetworkError),
    #[error("failed syscall")]
    SyscallOther(#[source] SyscallError),
    #[error("failed hooks: {0}")]
    Hooks(#[from] crate::hooks::HookError),
    #[error("failed to build OCI state: {0}")]
    OciStateBuild(String),
    /// gpurun patch: the main process could not return to its own mount
    /// namespace after opening bind sources in the container's.
    #[error("return to the runtime's mount namespace")]
    MountNamespace(#[source] std::io::Error),
}

type Result<T> = std::result::Result<T, ProcessError>;

/// gpurun patch: the container's cgroup v2 directory, made and opened for
/// CLONE_INTO_CGROUP (on a hybrid host, its unified one); `None` on a pure
/// v1 host, with systemd, or when it cannot be made
/// now (the intermediate process then joins, and reports any error, as
/// before).
fn clone_into_cgroup(args: &ContainerArgs) -> Option<std::os::fd::OwnedFd> {
    use libcgroups::common::CgroupSetup;
    if args.cgroup_config.systemd_cgroup {
        return None;
    }
    let setup = libcgroups::common::get_cgroup_setup().ok()?;
    if matches!(setup, CgroupSetup::Legacy) {
        return None;
    }
    let rootless =
        crate::utils::rootless_required(args.syscall.create_syscall().as_ref()).unwrap_or(false);
    let dir = if matches!(setup, CgroupSetup::Hybrid) {
        // The unified hierarchy; v1 membership is inherited and the
        // intermediate process moves its own thread there.
        libcgroups::v1::manager::Manager::prepare_hybrid_clone_into(
            &args.cgroup_config.cgroup_path,
            rootless,
        )?
    } else {
        libcgroups::common::create_cgroup_manager(args.cgroup_config.to_owned())
            .ok()?
            .with_rootless(rootless)
            .prepare_clone_into()?
    };
    // From libcgroups' descriptor of /sys/fs/cgroup (libcgroups patch 22).
    libcgroups::cgroupfs::open(
        &dir,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
    )
    .ok()
    .map(std::os::fd::OwnedFd::from)
}

pub fn container_main_process(container_args: &ContainerArgs) -> Result<Pid> {
    // We use a set of channels to communicate between parent and child process.
    // Each channel is uni-directional. Because we will pass these channel to
    // cloned process, we have to be deligent about closing any unused channel.
    // At minimum, we have to close down any unused senders. The corresponding
    // receivers will be cleaned up once the senders are closed down.
    let (mut init_main_sender, mut init_main_receiver) = channel::main_channel()?;
    let mut init_chan = channel::init_channel()?;
    // gpurun patch: on any error from here on, the processes made so far
    // are killed and reaped (a failed uid mapping left the intermediate
    // process behind, waiting forever).
    let mut made = KillOnError {
        pids: Vec::new(),
        armed: true,
    };
    let (init_pid, intermediate_pid) = if clones_init_directly(container_args) {
        let init_pid = clone_init(container_args, &mut init_chan, &mut init_main_sender)?;
        made.pids.push(init_pid);
        (init_pid, None)
    } else {
        let (intermediate_pid, init_pid) = start_through_intermediate(
            container_args,
            &mut init_chan,
            &mut init_main_sender,
            &mut made,
        )?;
        (init_pid, Some(intermediate_pid))
    };

    // Close down unused fds. The corresponding fds are duplicated to the
    // child process during clone.
    init_main_sender.close().map_err(|err| {
        tracing::error!("failed to close unused sender: {}", err);
        err
    })?;
    let (mut init_sender, init_receiver) = init_chan;
    if intermediate_pid.is_none() && container_args.cgroup_config.systemd_cgroup {
        container_intermediate_process::join_systemd_scope(container_args, init_pid)
            .map_err(ProcessError::SystemdScope)?;
        init_sender.cgroup_joined()?;
    }

    // if file to write the pid to is specified, write pid of the child
    if let Some(pid_file) = &container_args.pid_file {
        if let Err(err) = fs::write(pid_file, format!("{init_pid}")) {
            tracing::warn!("failed to write pid to file: {err}");
        }
    }

    if !container_args.bind_sources.is_empty() {
        init_main_receiver.wait_for_mount_fd_request()?;
        send_bind_sources(container_args, init_pid, &mut init_sender)?;
    }

    if matches!(container_args.container_type, ContainerType::InitContainer) {
        if let Some(hooks) = container_args.spec.hooks() {
            init_main_receiver.wait_for_hook_request()?;
            if let Some(container_for_hooks) = &container_args.container {
                // In the bundle, as runc runs host-side hooks (gpurun patch).
                hooks::run_hooks(
                    hooks.prestart().as_ref(),
                    Some(&container_for_hooks.state),
                    Some(&container_for_hooks.state.bundle),
                    Some(init_pid),
                    None,
                )
                .map_err(|err| {
                    tracing::error!("failed to run prestart hooks: {}", err);
                    err
                })?;

                // In the bundle, as runc runs host-side hooks (gpurun patch).
                hooks::run_hooks(
                    hooks.create_runtime().as_ref(),
                    Some(&container_for_hooks.state),
                    Some(&container_for_hooks.state.bundle),
                    Some(init_pid),
                    None,
                )
                .map_err(|err| {
                    tracing::error!("failed to run create runtime hooks: {}", err);
                    err
                })?;
            }
            init_sender.hook_done()?;
        }
    }

    if let Some(linux) = container_args.spec.linux() {
        move_network_devices_to_container(
            linux,
            init_pid,
            &mut init_main_receiver,
            &mut init_sender,
        )?;

        #[cfg(feature = "libseccomp")]
        if let Some(seccomp) = linux.seccomp() {
            let container = container_args
                .container
                .as_ref()
                .or(container_args.exec_into.as_ref())
                .ok_or(ProcessError::ContainerStateRequired)?;

            // Determine OCI status based on container type (matching runc behavior)
            let oci_status = match container_args.container_type {
                ContainerType::InitContainer => oci_spec::runtime::ContainerState::Creating,
                ContainerType::TenantContainer { .. } => oci_spec::runtime::ContainerState::Running,
            };

            // Build OCI-compliant ContainerProcessState using builder pattern
            let oci_state = oci_spec::runtime::StateBuilder::default()
                .version(OCI_VERSION)
                .id(container.state.id.clone())
                .status(oci_status)
                .pid(init_pid.as_raw())
                .bundle(container.state.bundle.clone())
                .annotations(container.state.annotations.clone().unwrap_or_default())
                .build()
                .map_err(|e| ProcessError::OciStateBuild(e.to_string()))?;

            let state = oci_spec::runtime::ContainerProcessStateBuilder::default()
                .version(OCI_VERSION)
                .fds(vec![SECCOMP_FD_NAME.to_string()])
                .pid(init_pid.as_raw())
                .metadata(seccomp.listener_metadata().clone().unwrap_or_default())
                .state(oci_state)
                .build()
                .map_err(|e| ProcessError::OciStateBuild(e.to_string()))?;
            crate::process::seccomp_listener::sync_seccomp(
                seccomp,
                &state,
                &mut init_sender,
                &mut init_main_receiver,
            )
            .map_err(|err| match err {
                // gpurun patch: the init's own failure is reported as such.
                crate::process::seccomp_listener::SeccompListenerError::ChannelError(
                    e @ channel::ChannelError::ExecError(_),
                ) => ProcessError::Channel(e),
                other => ProcessError::SeccompListener(other),
            })?;
        }
    }

    // We don't need to send anything to the init process after this point, so
    // close the sender.
    init_sender.close().map_err(|err| {
        tracing::error!("failed to close unused init sender: {}", err);
        err
    })?;

    init_main_receiver.wait_for_init_ready().map_err(|err| {
        tracing::error!("failed to wait for init ready: {}", err);
        err
    })?;

    tracing::debug!("init pid is {:?}", init_pid);

    // Close the receiver ends to avoid leaking file descriptors.

    init_receiver.close().map_err(|err| {
        tracing::error!("failed to close init process receiver: {}", err);
        err
    })?;

    init_main_receiver.close().map_err(|err| {
        tracing::error!("failed to close init main receiver: {}", err);
        err
    })?;

    if let Some(intermediate_pid) = intermediate_pid {
        reap_intermediate(intermediate_pid)?;
    }

    made.armed = false;
    Ok(init_pid)
}

/// gpurun patch: whether the init can be cloned by this process straight
/// into its new pid namespace, with no intermediate process. The
/// intermediate exists for what must happen between two clones: a user
/// namespace mapped by this process, time offsets written, a pid
/// namespace joined by path (each applies to children only). Without
/// them it was a whole process made, faulted in and reaped on every start
/// (11% of a `run`'s CPU time in a pure v2 guest, 16% on a v1 VM). The
/// init then joins its cgroup itself, or, under systemd (a D-Bus call
/// that takes a host pid), this process starts its scope
/// (`join_systemd_scope`). exec and `as_sibling` keep the intermediate.
fn clones_init_directly(args: &ContainerArgs) -> bool {
    if !matches!(args.container_type, ContainerType::InitContainer)
        || args.as_sibling
        || args.user_ns_config.is_some()
    {
        return false;
    }
    namespaces_of(args).all(|ns| match ns.typ() {
        LinuxNamespaceType::User | LinuxNamespaceType::Time => false,
        LinuxNamespaceType::Pid => ns.path().is_none(),
        _ => true,
    })
}

fn namespaces_of(args: &ContainerArgs) -> impl Iterator<Item = &LinuxNamespace> {
    args.spec
        .linux()
        .as_ref()
        .and_then(|linux| linux.namespaces().as_ref())
        .into_iter()
        .flatten()
}

/// gpurun patch: clones the init straight into its pid namespace (and, on
/// cgroup v2, its cgroup); it first does what the intermediate process
/// would have done to itself (`prepare_direct_init`).
fn clone_init(
    args: &ContainerArgs,
    init_chan: &mut (channel::InitSender, channel::InitReceiver),
    init_main_sender: &mut channel::MainSender,
) -> Result<Pid> {
    let (init_sender, init_receiver) = init_chan;
    let cb: CloneCb = Box::new(|| {
        if let Some(record) = args.pid_record {
            container_intermediate_process::record_own_pid(record);
        }
        if let Err(ret) = prctl::set_name("youki:[2:INIT]") {
            tracing::error!(?ret, "failed to set name for child process");
            return ret;
        }
        if let Err(err) = init_sender.close() {
            tracing::error!(?err, "failed to close the init sender in the init process");
            return -1;
        }
        if let Err(err) = container_intermediate_process::prepare_direct_init(args, init_receiver) {
            tracing::error!("failed to prepare the init process: {err}");
            let _ = init_main_sender.exec_failed(crate::utils::error_chain(&err));
            return -1;
        }
        container_intermediate_process::run_init(args, init_main_sender, init_receiver)
    });
    let new_pid_ns = namespaces_of(args).any(|ns| ns.typ() == LinuxNamespaceType::Pid);
    let flags = if new_pid_ns {
        libc::CLONE_NEWPID as u64
    } else {
        0
    };
    let cgroup = clone_into_cgroup(args);
    fork::container_clone_into(cb, cgroup.as_ref().map(|fd| fd.as_fd()), flags).map_err(|err| {
        tracing::error!("failed to fork init process: {}", err);
        ProcessError::InitProcessFailed(err)
    })
}

/// Clones the intermediate process, which clones the init; answers its
/// uid mapping and time offset requests; returns the intermediate's pid
/// and the init's (both pushed to `made`).
fn start_through_intermediate(
    container_args: &ContainerArgs,
    init_chan: &mut (channel::InitSender, channel::InitReceiver),
    init_main_sender: &mut channel::MainSender,
    made: &mut KillOnError,
) -> Result<(Pid, Pid)> {
    let (mut intermediate_main_sender, mut intermediate_main_receiver) = channel::main_channel()?;
    let mut inter_chan = channel::intermediate_channel()?;

    let main_pid = nix::unistd::getpid();
    let cb: CloneCb = {
        Box::new(|| {
            if let Err(ret) = prctl::set_name("youki:[1:INTER]") {
                tracing::error!(?ret, "failed to set name for child process");
                return ret;
            }
            // gpurun patch: the intermediate process dies with the process
            // that made it. Its channels are datagram sockets, which see no
            // end of file: killed or failed, the main process left it
            // waiting forever.
            if !container_args.as_sibling {
                // SAFETY: prctl with an integer signal number.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
                if nix::unistd::getppid() != main_pid {
                    return -1;
                }
            }

            match container_intermediate_process::container_intermediate_process(
                container_args,
                &mut inter_chan,
                init_chan,
                &mut intermediate_main_sender,
                init_main_sender,
            ) {
                Ok(_) => 0,
                Err(err) => {
                    tracing::error!("failed to run intermediate process {}", err);
                    match intermediate_main_sender.send_error(crate::utils::error_chain(&err)) {
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!(
                                "error in sending intermediate error message {} to main: {}",
                                err,
                                e
                            )
                        }
                    }
                    -1
                }
            }
        })
    };

    // gpurun patch: on cgroup v2, the intermediate process starts in the
    // container's cgroup (see `fork::container_clone_into`).
    let intermediate_pid = if container_args.as_sibling {
        fork::container_clone_sibling(cb)
    } else {
        let cgroup = clone_into_cgroup(container_args);
        fork::container_clone_into(cb, cgroup.as_ref().map(|fd| fd.as_fd()), 0)
    };
    let intermediate_pid = intermediate_pid.map_err(|err| {
        tracing::error!("failed to fork intermediate process: {}", err);
        ProcessError::IntermediateProcessFailed(err)
    })?;
    made.pids.push(intermediate_pid);

    intermediate_main_sender.close().map_err(|err| {
        tracing::error!("failed to close unused sender: {}", err);
        err
    })?;
    let (mut inter_sender, inter_receiver) = inter_chan;

    // If creating a container with new user namespace, the intermediate process will ask
    // the main process to set up uid and gid mapping, once the intermediate
    // process enters into a new user namespace.
    if let Some(config) = &container_args.user_ns_config {
        intermediate_main_receiver.wait_for_mapping_request()?;
        setup_mapping(config, intermediate_pid)?;
        inter_sender.mapping_written()?;
    }

    write_time_offsets(
        container_args,
        intermediate_pid,
        &mut intermediate_main_receiver,
        &mut inter_sender,
    )?;

    // At this point, we don't need to send any message to intermediate process anymore,
    // so we want to close this sender at the earliest point.
    inter_sender.close().map_err(|err| {
        tracing::error!("failed to close unused intermediate sender: {}", err);
        err
    })?;

    // The intermediate process will send the init pid once it forks the init
    // process.  The intermediate process should exit after this point.
    let init_pid = intermediate_main_receiver.wait_for_intermediate_ready()?;
    made.pids.push(init_pid);

    inter_receiver.close().map_err(|err| {
        tracing::error!("failed to close intermediate process receiver: {}", err);
        err
    })?;
    intermediate_main_receiver.close().map_err(|err| {
        tracing::error!("failed to close intermediate main receiver: {}", err);
        err
    })?;
    Ok((intermediate_pid, init_pid))
}

/// If creating a container with time namespace and offsets are specified,
/// the intermediate process will ask the main process to write the time offsets.
fn write_time_offsets(
    container_args: &ContainerArgs,
    intermediate_pid: Pid,
    intermediate_main_receiver: &mut channel::MainReceiver,
    inter_sender: &mut channel::IntermediateSender,
) -> Result<()> {
    let Some(time_offsets) = container_args
        .spec
        .linux()
        .as_ref()
        .and_then(build_timens_offsets)
    else {
        return Ok(());
    };
    // This must be done from the parent process since CAP_SYS_TIME is required.
    intermediate_main_receiver.wait_for_time_offset_request()?;
    tracing::debug!("write time offsets for pid {intermediate_pid:?}: '{time_offsets}'");
    std::fs::write(
        format!("/proc/{intermediate_pid}/timens_offsets"),
        &time_offsets,
    )
    .map_err(|err| {
        tracing::error!("failed to write timens_offsets for pid {intermediate_pid:?}: {err}");
        ProcessError::SyscallOther(SyscallError::IO(err))
    })?;
    inter_sender.time_offsets_written()?;
    Ok(())
}

/// Before the main process returns, we want to make sure the intermediate
/// process is exit and reaped. By this point, the intermediate process
/// should already exited successfully. If intermediate process errors out,
/// the `init_ready` will not be sent.
fn reap_intermediate(intermediate_pid: Pid) -> Result<()> {
    match waitpid(intermediate_pid, None) {
        Ok(WaitStatus::Exited(_, 0)) => (),
        Ok(WaitStatus::Exited(_, s)) => {
            tracing::warn!("intermediate process failed with exit status: {s}");
        }
        Ok(WaitStatus::Signaled(_, sig, _)) => {
            tracing::warn!("intermediate process killed with signal: {sig}")
        }
        Ok(_) => (),
        Err(nix::errno::Errno::ECHILD) => {
            // This is safe because intermediate_process and main_process check if the process is
            // finished by piping instead of exit code.
            tracing::warn!("intermediate process already reaped");
        }
        Err(err) => return Err(ProcessError::WaitIntermediateProcess(err)),
    };
    Ok(())
}

/// The container processes made by a `container_main_process` that has not
/// finished: killed and reaped when it returns an error.
struct KillOnError {
    pids: Vec<Pid>,
    armed: bool,
}

impl Drop for KillOnError {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for pid in &self.pids {
            let _ = nix::sys::signal::kill(*pid, nix::sys::signal::Signal::SIGKILL);
        }
        for pid in &self.pids {
            // Not a child of ours (a sibling, or already reaped): ECHILD.
            let _ = waitpid(*pid, None);
        }
    }
}

/// gpurun patch, runc's mount sources: opens the source of each mount of
/// `ContainerArgs::bind_sources` as the host's root from inside
/// the init's mount namespace (so the mount the init clones from the
/// descriptor is one of its own namespace's), and sends the descriptors in
/// that order. A source that cannot be opened (or a namespace that cannot
/// be entered) is sent as an error: the init then mounts from the path and
/// reports its own failure, naming the mount. An idmapped mount is sent
/// made (`idmapped_mount`), or as the error that says why it could not be.
fn send_bind_sources(
    args: &ContainerArgs,
    init_pid: Pid,
    init_sender: &mut channel::InitSender,
) -> Result<()> {
    use nix::fcntl::OFlag;
    use nix::sched::CloneFlags;
    let mounts = args.spec.mounts().as_deref().unwrap_or_default();
    let chosen: Vec<&oci_spec::runtime::Mount> =
        args.bind_sources.iter().map(|&i| &mounts[i]).collect();
    // Each idmapped mount's user namespace, made or opened before entering
    // the container's mount namespace.
    let usernses: Vec<Option<std::result::Result<std::os::fd::OwnedFd, String>>> = chosen
        .iter()
        .map(|m| crate::rootfs::mount::is_idmapped(m).then(|| idmap_userns(m, init_pid)))
        .collect();
    let host_ns = File::open("/proc/self/ns/mnt");
    let entered = host_ns.as_ref().map_err(|e| e.to_string()).and_then(|_| {
        let container_ns =
            File::open(format!("/proc/{init_pid}/ns/mnt")).map_err(|e| e.to_string())?;
        nix::sched::setns(&container_ns, CloneFlags::CLONE_NEWNS).map_err(|e| e.to_string())
    });
    let opened: Vec<std::result::Result<std::os::fd::OwnedFd, String>> = chosen
        .iter()
        .zip(usernses)
        .map(|(mount, userns)| {
            if let Err(e) = &entered {
                return Err(format!("enter the container's mount namespace: {e}"));
            }
            let Some(source) = mount.source().as_deref() else {
                return Err("no source".to_string());
            };
            if let Some(userns) = userns {
                return userns
                    .and_then(|userns| idmapped_mount(mount, source, userns.as_fd()))
                    .map_err(|why| {
                        format!(
                            "idmapped mount of {} at {}: {why}",
                            source.display(),
                            mount.destination().display()
                        )
                    });
            }
            nix::fcntl::open(
                source,
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            // SAFETY: open returned a new descriptor that nothing else owns.
            .map(|fd| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
            .map_err(|e| format!("open {}: {e}", source.display()))
        })
        .collect();
    if let (Ok(()), Ok(host_ns)) = (&entered, &host_ns) {
        nix::sched::setns(host_ns, CloneFlags::CLONE_NEWNS)
            .map_err(|e| ProcessError::MountNamespace(e.into()))?;
    }
    for source in opened {
        match source {
            Ok(fd) => init_sender.send_mount_fd_reply(fd.as_raw_fd())?,
            Err(why) => {
                tracing::debug!("bind source not opened by the runtime: {why}");
                init_sender.send_mount_fd_error(why)?
            }
        }
    }
    Ok(())
}

/// gpurun patch: the user namespace whose mapping an idmapped mount takes:
/// one made from the mount's own `uidMappings`/`gidMappings`, or else the
/// container's (the init is already in it, made or joined).
fn idmap_userns(
    mount: &oci_spec::runtime::Mount,
    init_pid: Pid,
) -> std::result::Result<std::os::fd::OwnedFd, String> {
    match (mount.uid_mappings(), mount.gid_mappings()) {
        (Some(uids), Some(gids)) => userns_from_mappings(uids, gids),
        _ => File::open(format!("/proc/{init_pid}/ns/user"))
            .map(std::os::fd::OwnedFd::from)
            .map_err(|e| format!("open the container's user namespace: {e}")),
    }
}

/// gpurun patch: a user namespace with the given mappings, held by a
/// descriptor: a child is cloned into a new one, its maps written, the
/// namespace opened, and the child killed (the namespace lives on in the
/// descriptor).
fn userns_from_mappings(
    uids: &[oci_spec::runtime::LinuxIdMapping],
    gids: &[oci_spec::runtime::LinuxIdMapping],
) -> std::result::Result<std::os::fd::OwnedFd, String> {
    // SAFETY: a fork-like clone (no stack given); the child only waits
    // for its SIGKILL, calling nothing but pause(2).
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_NEWUSER | libc::SIGCHLD,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(format!(
            "clone a user namespace for its mapping: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        loop {
            // SAFETY: pause(2) has no preconditions.
            unsafe { libc::pause() };
        }
    }
    let pid = pid as libc::pid_t;
    let map = |mappings: &[oci_spec::runtime::LinuxIdMapping]| -> String {
        mappings
            .iter()
            .map(|m| format!("{} {} {}\n", m.container_id(), m.host_id(), m.size()))
            .collect()
    };
    let made = fs::write(format!("/proc/{pid}/uid_map"), map(uids))
        .map_err(|e| format!("write its uidMappings: {e}"))
        .and_then(|()| {
            fs::write(format!("/proc/{pid}/gid_map"), map(gids))
                .map_err(|e| format!("write its gidMappings: {e}"))
        })
        .and_then(|()| {
            File::open(format!("/proc/{pid}/ns/user"))
                .map(std::os::fd::OwnedFd::from)
                .map_err(|e| format!("open its user namespace: {e}"))
        });
    let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    let _ = waitpid(Pid::from_raw(pid), None);
    made
}

/// gpurun patch: an idmapped mount as runc >= 1.2 makes it: the source
/// cloned as a detached mount (its submounts too with `rbind`), then given
/// the user namespace's mapping (MOUNT_ATTR_IDMAP; to the submounts too
/// with `ridmap`). Only the host's root can: the filesystem's own user
/// namespace must be the caller's.
fn idmapped_mount(
    mount: &oci_spec::runtime::Mount,
    source: &std::path::Path,
    userns: std::os::fd::BorrowedFd<'_>,
) -> std::result::Result<std::os::fd::OwnedFd, String> {
    use std::os::unix::ffi::OsStrExt;
    let options = mount.options().as_deref().unwrap_or_default();
    let mut open_flags = (libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC) as libc::c_uint;
    if options.iter().any(|o| o == "rbind") {
        open_flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    let path = std::ffi::CString::new(source.as_os_str().as_bytes())
        .map_err(|_| "the source has a NUL byte".to_string())?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            open_flags,
        )
    };
    if fd < 0 {
        return Err(format!("open_tree: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: open_tree returned a new descriptor that nothing else owns.
    let tree: std::os::fd::OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) };
    let attr = crate::syscall::linux::MountAttr {
        attr_set: crate::syscall::linux::MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if options.iter().any(|o| o == "ridmap") {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: valid descriptor, empty path, attr of the kernel's size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const crate::syscall::linux::MountAttr,
            std::mem::size_of::<crate::syscall::linux::MountAttr>(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOSYS) => format!(
                "this kernel ({}) has no mount_setattr: idmapped mounts need Linux 5.12 or later",
                kernel_release()
            ),
            Some(libc::EINVAL) => {
                let filesystem = filesystem_name(source);
                let hint = if filesystem == "tmpfs" {
                    ": tmpfs needs Linux 6.3 or later"
                } else {
                    ""
                };
                format!(
                    "its filesystem ({filesystem}) cannot be idmapped on this kernel ({}){hint}",
                    kernel_release()
                )
            }
            Some(libc::EPERM) => format!(
                "not permitted ({err}): idmapped mounts need the runtime started as the host's root"
            ),
            _ => format!("mount_setattr(MOUNT_ATTR_IDMAP): {err}"),
        });
    }
    Ok(tree)
}

fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// A filesystem's name, for an error message.
fn filesystem_name(path: &std::path::Path) -> String {
    use nix::sys::statfs;
    let Ok(fs) = statfs::statfs(path) else {
        return "unknown".into();
    };
    let known = [
        (statfs::TMPFS_MAGIC, "tmpfs"),
        (statfs::EXT4_SUPER_MAGIC, "ext4"),
        (statfs::XFS_SUPER_MAGIC, "xfs"),
        (statfs::BTRFS_SUPER_MAGIC, "btrfs"),
        (statfs::OVERLAYFS_SUPER_MAGIC, "overlay"),
        (statfs::NFS_SUPER_MAGIC, "nfs"),
        (statfs::PROC_SUPER_MAGIC, "proc"),
        (statfs::SYSFS_MAGIC, "sysfs"),
    ];
    known
        .iter()
        .find(|(magic, _)| *magic == fs.filesystem_type())
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| format!("type {:#x}", fs.filesystem_type().0))
}

fn setup_mapping(config: &UserNamespaceConfig, pid: Pid) -> Result<()> {
    tracing::debug!("write mapping for pid {:?}", pid);
    if !config.privileged {
        // The main process is running as an unprivileged user and cannot write the mapping
        // until "deny" has been written to setgroups. See CVE-2014-8989.
        std::fs::write(format!("/proc/{pid}/setgroups"), "deny")
            .map_err(ProcessError::SetGroupsDeny)?;
    }

    config.write_uid_mapping(pid).map_err(|err| {
        tracing::error!("failed to write uid mapping for pid {:?}: {}", pid, err);
        err
    })?;
    config.write_gid_mapping(pid).map_err(|err| {
        tracing::error!("failed to write gid mapping for pid {:?}: {}", pid, err);
        err
    })?;
    Ok(())
}

/// Builds the payload to write to the kernel's `/proc/<pid>/timens_offsets`
/// from the spec's `timeOffsets`.
fn build_timens_offsets(linux: &Linux) -> Option<String> {
    let offsets = linux.time_offsets().as_ref()?;
    if offsets.is_empty() {
        return None;
    }
    let time_ns = linux
        .namespaces()
        .as_ref()?
        .iter()
        .find(|ns| ns.typ() == LinuxNamespaceType::Time)?;
    // Only set offsets when creating a new time namespace (no path to join).
    if time_ns.path().is_some() {
        return None;
    }
    Some(
        offsets
            .iter()
            .map(|(clock_type, offset)| {
                format!(
                    "{clock_type} {} {}",
                    offset.secs().unwrap_or(0),
                    offset.nanosecs().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Moves configured network devices from the host to the container's network namespace.
/// This function waits for the init process to join its namespace, then transfers each
/// configured device while preserving network addresses. Returns early if the container
/// runs in the host network namespace.
fn move_network_devices_to_container(
    linux: &Linux,
    init_pid: Pid,
    main_receiver: &mut channel::MainReceiver,
    init_sender: &mut channel::InitSender,
) -> Result<()> {
    // Early return if there are no network devices to move
    let devices = match linux.net_devices() {
        Some(devs) if !devs.is_empty() => devs,
        _ => return Ok(()),
    };

    if let Some(namespaces) = linux.namespaces() {
        // network devices are not moved for containers running in the host network.
        let net_ns = match namespaces
            .iter()
            .find(|ns| ns.typ() == LinuxNamespaceType::Network)
        {
            Some(ns) => ns,
            None => return Ok(()),
        };

        // Wait for the init process to signal that it has joined the network namespace
        // and is ready for network device setup
        main_receiver.wait_for_network_setup_ready()?;

        // the container init process has already joined the provided net namespace,
        // so we can use the process's net ns path directly.
        let default_ns_path = PathBuf::from(format!("/proc/{}/ns/net", init_pid.as_raw()));
        let ns_path = net_ns.path().as_deref().unwrap_or(&default_ns_path);

        // Open the network namespace file and validate it exists before moving devices
        let netns_file = File::open(ns_path).map_err(|err| {
            tracing::error!(
                "failed to open network namespace at {}: {}",
                ns_path.display(),
                err
            );
            ProcessError::Network(err.into())
        })?;
        let netns_fd = netns_file.as_raw_fd();

        // If moving any of the network devices fails, we return an error immediately.
        // The runtime spec requires that the kernel handles moving back any devices
        // that were successfully moved before the failure occurred.
        // See: https://github.com/opencontainers/runtime-spec/blob/27cb0027fd92ef81eda1ea3a8153b8337f56d94a/config-linux.md#namespace-lifecycle-and-container-termination
        let addrs_map = devices
            .iter()
            .map(|(name, net_dev)| {
                let addrs = dev_change_net_namespace(name, netns_fd, net_dev).map_err(|err| {
                    tracing::error!("failed to dev_change_net_namespace: {}", err);
                    err
                })?;
                Ok((name.clone(), addrs))
            })
            .collect::<Result<HashMap<String, Vec<crate::network::cidr::CidrAddress>>>>()?;
        init_sender.move_network_device(addrs_map)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use anyhow::Result;
    use nix::sched::{CloneFlags, unshare};
    use nix::unistd::{self, getgid, getuid};
    use oci_spec::runtime::LinuxIdMappingBuilder;
    use serial_test::serial;

    use super::*;
    use crate::process::channel::{intermediate_channel, main_channel};
    use crate::user_ns::UserNamespaceIDMapper;

    #[test]
    #[serial]
    fn setup_uid_mapping_should_succeed() -> Result<()> {
        let uid_mapping = LinuxIdMappingBuilder::default()
            .host_id(getuid())
            .container_id(0u32)
            .size(1u32)
            .build()?;
        let uid_mappings = vec![uid_mapping];
        let tmp = tempfile::tempdir()?;
        let id_mapper = UserNamespaceIDMapper::new_test(tmp.path().to_path_buf());
        let ns_config = UserNamespaceConfig {
            uid_mappings: Some(uid_mappings),
            privileged: true,
            id_mapper: id_mapper.clone(),
            ..Default::default()
        };
        let (mut parent_sender, mut parent_receiver) = main_channel()?;
        let (mut child_sender, mut child_receiver) = intermediate_channel()?;
        match unsafe { unistd::fork()? } {
            unistd::ForkResult::Parent { child } => {
                parent_receiver.wait_for_mapping_request()?;
                parent_receiver.close()?;

                // In test, we fake the uid path in /proc/{pid}/uid_map, so we
                // need to ensure the path exists before we write the mapping.
                // The path requires the pid we use, so we can only do do after
                // obtaining the child pid here.
                id_mapper.ensure_uid_path(&child)?;
                setup_mapping(&ns_config, child)?;
                let line = fs::read_to_string(id_mapper.get_uid_path(&child))?;
                let split_lines = line.split_whitespace();
                for (act, expect) in split_lines.zip([
                    uid_mapping.container_id().to_string(),
                    uid_mapping.host_id().to_string(),
                    uid_mapping.size().to_string(),
                ]) {
                    assert_eq!(act, expect);
                }
                child_sender.mapping_written()?;
                child_sender.close()?;
            }
            unistd::ForkResult::Child => {
                prctl::set_dumpable(true).unwrap();
                unshare(CloneFlags::CLONE_NEWUSER)?;
                parent_sender.identifier_mapping_request()?;
                parent_sender.close()?;
                child_receiver.wait_for_mapping_ack()?;
                child_receiver.close()?;
                std::process::exit(0);
            }
        }
        Ok(())
    }

    #[test]
    #[serial]
    fn setup_gid_mapping_should_succeed() -> Result<()> {
        let gid_mapping = LinuxIdMappingBuilder::default()
            .host_id(getgid())
            .container_id(0u32)
            .size(1u32)
            .build()?;
        let gid_mappings = vec![gid_mapping];
        let tmp = tempfile::tempdir()?;
        let id_mapper = UserNamespaceIDMapper::new_test(tmp.path().to_path_buf());
        let ns_config = UserNamespaceConfig {
            gid_mappings: Some(gid_mappings),
            id_mapper: id_mapper.clone(),
            ..Default::default()
        };
        let (mut parent_sender, mut parent_receiver) = main_channel()?;
        let (mut child_sender, mut child_receiver) = intermediate_channel()?;
        match unsafe { unistd::fork()? } {
            unistd::ForkResult::Parent { child } => {
                parent_receiver.wait_for_mapping_request()?;
                parent_receiver.close()?;

                // In test, we fake the gid path in /proc/{pid}/gid_map, so we
                // need to ensure the path exists before we write the mapping.
                // The path requires the pid we use, so we can only do do after
                // obtaining the child pid here.
                id_mapper.ensure_gid_path(&child)?;
                setup_mapping(&ns_config, child)?;
                let line = fs::read_to_string(id_mapper.get_gid_path(&child))?;
                let split_lines = line.split_whitespace();
                for (act, expect) in split_lines.zip([
                    gid_mapping.container_id().to_string(),
                    gid_mapping.host_id().to_string(),
                    gid_mapping.size().to_string(),
                ]) {
                    assert_eq!(act, expect);
                }
                assert_eq!(
                    fs::read_to_string(format!("/proc/{}/setgroups", child.as_raw()))?,
                    "deny\n",
                );
                child_sender.mapping_written()?;
                child_sender.close()?;
            }
            unistd::ForkResult::Child => {
                prctl::set_dumpable(true).unwrap();
                unshare(CloneFlags::CLONE_NEWUSER)?;
                parent_sender.identifier_mapping_request()?;
                parent_sender.close()?;
                child_receiver.wait_for_mapping_ack()?;
                child_receiver.close()?;
                std::process::exit(0);
            }
        }
        Ok(())
    }
}
