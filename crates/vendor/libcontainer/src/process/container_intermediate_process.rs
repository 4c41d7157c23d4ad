use std::os::fd::FromRawFd;

use libcgroups::common::CgroupManager;
use nix::unistd::{Gid, Pid, Uid, close, getpid, write};
use oci_spec::runtime::{LinuxNamespace, LinuxNamespaceType, LinuxResources};

use super::args::{ContainerArgs, ContainerType};
use super::channel::{IntermediateReceiver, MainSender};
use super::fork::CloneCb;
use super::init::process as init_process;
use crate::error::MissingSpecError;
use crate::namespaces::Namespaces;
use crate::process::{channel, cpu_affinity, fork};
use crate::utils::rootless_required;

#[derive(Debug, thiserror::Error)]
pub enum IntermediateProcessError {
    #[error(transparent)]
    Channel(#[from] channel::ChannelError),
    #[error(transparent)]
    Namespace(#[from] crate::namespaces::NamespaceError),
    #[error(transparent)]
    Syscall(#[from] crate::syscall::SyscallError),
    #[error("failed to launch init process")]
    InitProcess(#[source] fork::CloneError),
    #[error("cgroup error: {0}")]
    Cgroup(String),
    #[error(transparent)]
    Procfs(#[from] procfs::ProcError),
    #[error("exec notify failed")]
    ExecNotify(#[source] nix::Error),
    #[error(transparent)]
    MissingSpec(#[from] crate::error::MissingSpecError),
    #[error("CPU affinity error {0}")]
    CpuAffinity(#[from] cpu_affinity::CPUAffinityError),
    #[error("other error")]
    Other(String),
}

type Result<T> = std::result::Result<T, IntermediateProcessError>;

pub fn container_intermediate_process(
    args: &ContainerArgs,
    intermediate_chan: &mut (channel::IntermediateSender, channel::IntermediateReceiver),
    init_chan: &mut (channel::InitSender, channel::InitReceiver),
    intermediate_main_sender: &mut channel::MainSender,
    init_main_sender: &mut channel::MainSender,
) -> Result<()> {
    let (inter_sender, inter_receiver) = intermediate_chan;
    let (init_sender, init_receiver) = init_chan;
    let command = args.syscall.create_syscall();
    let spec = &args.spec;
    let linux = spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;
    let namespaces = Namespaces::try_from(linux.namespaces().as_ref())?;
    let rootless = rootless_required(command.as_ref()).unwrap_or(false);
    let cgroup_manager = container_cgroup_manager(args, rootless)?;

    let current_pid = Pid::this();
    // setting CPU affinity for tenant container before cgroup move
    if matches!(args.container_type, ContainerType::TenantContainer { .. }) {
        if let Some(exec_cpu_affinity) = spec
            .process()
            .as_ref()
            .and_then(|p| p.exec_cpu_affinity().as_ref())
        {
            if let Some(initial) = exec_cpu_affinity.initial() {
                cpu_affinity::set_cpuset_affinity_from_string(current_pid, initial)?;
            }
        }
    }
    let _ = cpu_affinity::log_cpu_affinity();

    // this needs to be done before we create the init process, so that the init
    // process will already be captured by the cgroup. It also needs to be done
    // before we enter the user namespace because if a privileged user starts a
    // rootless container on a cgroup v1 system we can still fulfill resource
    // restrictions through the cgroup fs support (delegation through systemd is
    // not supported for v1 by us). This only works if the user has not yet been
    // mapped to an unprivileged user by the user namespace however.
    // In addition this needs to be done before we enter the cgroup namespace as
    // the cgroup of the process will form the root of the cgroup hierarchy in
    // the cgroup namespace.
    apply_cgroups(
        &cgroup_manager,
        linux.resources().as_ref(),
        matches!(args.container_type, ContainerType::InitContainer),
    )?;
    // gpurun patch: per-controller sub-cgroups of an exec'd process, joined
    // before it is cloned, as runc joins them.
    for dir in &args.extra_cgroup_dirs {
        std::fs::write(dir.join("cgroup.procs"), current_pid.to_string()).map_err(|err| {
            IntermediateProcessError::Cgroup(format!("join {}: {err}", dir.display()))
        })?;
    }

    // gpurun patch: the container's first process starts on every CPU its
    // cgroup allows, not on the CPUs the runtime was pinned to (`taskset -c
    // 0 gpurun run`), as runc >= 1.2 resets it; execCPUAffinity is for
    // exec'd processes only (runtime-spec 1.2.1).
    if matches!(args.container_type, ContainerType::InitContainer) {
        if let Err(err) = cpu_affinity::reset_to_all_cpus(current_pid) {
            tracing::debug!(?err, "could not reset the CPU affinity");
        }
    }

    // setting CPU affinity for tenant container after cgroup move
    if matches!(args.container_type, ContainerType::TenantContainer { .. }) {
        if let Some(exec_cpu_affinity) = spec
            .process()
            .as_ref()
            .and_then(|p| p.exec_cpu_affinity().as_ref())
        {
            if let Some(cpu_affinity_final) = exec_cpu_affinity.cpu_affinity_final() {
                cpu_affinity::set_cpuset_affinity_from_string(current_pid, cpu_affinity_final)?;
            }
        }
    }

    // if new user is specified in specification, this will be true and new
    // namespace will be created, check
    // https://man7.org/linux/man-pages/man7/user_namespaces.7.html for more
    // information
    if let Some(user_namespace) = namespaces.get(LinuxNamespaceType::User)? {
        setup_userns(
            &namespaces,
            user_namespace,
            intermediate_main_sender,
            inter_receiver,
        )?;

        // After UID and GID mapping is configured correctly in the Youki main
        // process, We want to make sure continue as the root user inside the
        // new user namespace. This is required because the process of
        // configuring the container process will require root, even though the
        // root in the user namespace likely is mapped to an non-privileged user
        // on the parent user namespace.
        command.set_id(Uid::from_raw(0), Gid::from_raw(0))?;
    }

    // set limits and namespaces to the process
    set_rlimits(args, command.as_ref())?;

    if let Some(time_namespace) = namespaces.get(LinuxNamespaceType::Time)? {
        namespaces.unshare_or_setns(time_namespace)?;
        if time_namespace.path().is_none()
            && linux
                .time_offsets()
                .as_ref()
                .is_some_and(|offsets| !offsets.is_empty())
        {
            setup_time_offsets(intermediate_main_sender, inter_receiver)?;
        }
    }

    // Pid namespace requires an extra fork to enter, so we enter pid namespace now.
    if let Some(pid_namespace) = namespaces.get(LinuxNamespaceType::Pid)? {
        namespaces.unshare_or_setns(pid_namespace)?;
    }

    let cb: CloneCb = {
        Box::new(|| {
            // gpurun patch: named before anything that could wait.
            if let Some(record) = args.pid_record {
                record_own_pid(record);
            }
            if let Err(ret) = prctl::set_name("youki:[2:INIT]") {
                tracing::error!(?ret, "failed to set name for child process");
                return ret;
            }

            // We are inside the forked process here. The first thing we have to do
            // is to close any unused senders, since fork will make a dup for all
            // the socket.
            if let Err(err) = init_sender.close() {
                tracing::error!(?err, "failed to close receiver in init process");
                return -1;
            }
            if let Err(err) = inter_sender.close() {
                tracing::error!(?err, "failed to close sender in the intermediate process");
                return -1;
            }
            if let Err(err) = intermediate_main_sender.close() {
                tracing::error!(
                    ?err,
                    "failed to close intermediate main sender in init process"
                );
                return -1;
            }
            run_init(args, init_main_sender, init_receiver)
        })
    };

    // We have to record the pid of the init process. The init process will be
    // inside the pid namespace, so we can't rely on the init process to send us
    // the correct pid. We also want to clone the init process as a sibling
    // process to the intermediate process. The intermediate process is only
    // used as a jumping board to set the init process to the correct
    // configuration. The youki main process can decide what to do with the init
    // process and the intermediate process can just exit safely after the job
    // is done.
    let pid = fork::container_clone_sibling(cb).map_err(|err| {
        tracing::error!("failed to fork init process: {}", err);
        IntermediateProcessError::InitProcess(err)
    })?;

    // Close the exec_notify_fd in this process
    if let ContainerType::TenantContainer { exec_notify_fd } = args.container_type {
        close(exec_notify_fd).map_err(|err| {
            tracing::error!("failed to close exec notify fd: {}", err);
            IntermediateProcessError::ExecNotify(err)
        })?;
    }

    intermediate_main_sender
        .intermediate_ready(pid)
        .map_err(|err| {
            tracing::error!("failed to wait on intermediate process: {}", err);
            err
        })?;

    // Close unused senders here so we don't have lingering socket around.
    intermediate_main_sender.close().map_err(|err| {
        tracing::error!("failed to close unused main sender: {}", err);
        err
    })?;
    init_main_sender.close().map_err(|err| {
        tracing::error!("failed to close unused init main sender: {}", err);
        err
    })?;
    inter_sender.close().map_err(|err| {
        tracing::error!(
            "failed to close sender in the intermediate process: {}",
            err
        );
        err
    })?;
    init_sender.close().map_err(|err| {
        tracing::error!("failed to close unused init sender: {}", err);
        err
    })?;

    Ok(())
}

/// The init process's work, from its first step to the exec: the
/// process's exit status (its error sent to the main process).
pub(crate) fn run_init(
    args: &ContainerArgs,
    init_main_sender: &mut MainSender,
    init_receiver: &mut channel::InitReceiver,
) -> i32 {
    match init_process::container_init_process(args, init_main_sender, init_receiver) {
        Ok(_) => 0,
        Err(e) => {
            tracing::error!("failed to initialize container process: {e}");
            if let Err(err) = init_main_sender.exec_failed(crate::utils::error_chain(&e)) {
                tracing::error!(?err, "failed sending error to main sender");
            }
            if let ContainerType::TenantContainer { exec_notify_fd } = args.container_type {
                let buf = format!("{e}");
                let exec_notify_fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(exec_notify_fd) };
                if let Err(err) = write(&exec_notify_fd, buf.as_bytes()) {
                    tracing::error!(?err, "failed to write to exec notify fd");
                }

                // After sending the error through the exec_notify_fd,
                // we need to explicitly close the pipe.
                drop(exec_notify_fd);
            }
            -1
        }
    }
}

/// gpurun patch: what the intermediate process does to itself before it
/// clones the init, done by an init the main process cloned straight
/// into its pid namespace (`container_main_process::clones_init_directly`:
/// no user or time namespace, no pid namespace joined). There `getpid()`
/// names the caller in the namespace that reads it: the cgroup files (0
/// or its own pid) and sched_setaffinity. systemd is the exception: it
/// takes a pid in the host's pid namespace, so the main process starts
/// the scope (`join_systemd_scope`) and this waits for its word.
pub(crate) fn prepare_direct_init(
    args: &ContainerArgs,
    init_receiver: &mut channel::InitReceiver,
) -> Result<()> {
    let command = args.syscall.create_syscall();
    let linux = args.spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;
    if args.cgroup_config.systemd_cgroup {
        init_receiver.wait_for_cgroup_joined()?;
    } else {
        let rootless = rootless_required(command.as_ref()).unwrap_or(false);
        let cgroup_manager = container_cgroup_manager(args, rootless)?;
        apply_cgroups(&cgroup_manager, linux.resources().as_ref(), true)?;
    }
    if let Err(err) = cpu_affinity::reset_to_all_cpus(Pid::this()) {
        tracing::debug!(?err, "could not reset the CPU affinity");
    }
    set_rlimits(args, command.as_ref())
}

/// gpurun patch: starts the systemd scope of a directly cloned init, from
/// the main process, with the init's pid in the host's pid namespace,
/// and applies the spec's resources to it.
pub(crate) fn join_systemd_scope(args: &ContainerArgs, init_pid: Pid) -> Result<()> {
    let linux = args.spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;
    // systemd's manager has no rootless mode (`with_rootless` leaves it).
    let cgroup_manager = container_cgroup_manager(args, false)?;
    apply_cgroups_for(&cgroup_manager, init_pid, linux.resources().as_ref(), true)
}

/// The container's cgroup manager, told whether the runtime is rootless.
fn container_cgroup_manager(
    args: &ContainerArgs,
    rootless: bool,
) -> Result<libcgroups::common::AnyCgroupManager> {
    let manager = libcgroups::common::create_cgroup_manager(args.cgroup_config.to_owned())
        .map_err(|e| IntermediateProcessError::Cgroup(e.to_string()))?;
    Ok(manager.with_rootless(rootless))
}

/// Sets the process's rlimits on the calling process (its children and
/// the exec'd program inherit them).
fn set_rlimits(args: &ContainerArgs, command: &dyn crate::syscall::Syscall) -> Result<()> {
    let proc = args
        .spec
        .process()
        .as_ref()
        .ok_or(MissingSpecError::Process)?;
    for rlimit in proc.rlimits().iter().flatten() {
        command.set_rlimit(rlimit).map_err(|err| {
            tracing::error!(?err, ?rlimit, "failed to set rlimit");
            err
        })?;
    }
    Ok(())
}

/// gpurun patch: appends "PID STARTTIME\n" for the calling process to
/// `record`. `/proc` is still the host's here, so `/proc/self` names the
/// host's pid even inside a new pid namespace.
pub(crate) fn record_own_pid(record: std::os::fd::RawFd) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    let pid = stat.split_whitespace().next();
    let start = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().nth(19));
    if let (Some(pid), Some(start)) = (pid, start) {
        // SAFETY: the descriptor is ContainerArgs', open for the whole clone.
        let record = unsafe { std::os::fd::BorrowedFd::borrow_raw(record) };
        let _ = write(record, format!("{pid} {start}\n").as_bytes());
    }
}

fn setup_userns(
    namespaces: &Namespaces,
    user_namespace: &LinuxNamespace,
    sender: &mut MainSender,
    receiver: &mut IntermediateReceiver,
) -> Result<()> {
    namespaces.unshare_or_setns(user_namespace)?;
    if user_namespace.path().is_some() {
        return Ok(());
    }

    tracing::debug!("creating new user namespace");
    // child needs to be dumpable, otherwise the non root parent is not
    // allowed to write the uid/gid maps
    prctl::set_dumpable(true).map_err(|e| {
        IntermediateProcessError::Other(format!(
            "error in setting dumpable to true : {}",
            nix::errno::Errno::from_raw(e)
        ))
    })?;
    sender.identifier_mapping_request().map_err(|err| {
        tracing::error!("failed to send id mapping request: {}", err);
        err
    })?;
    receiver.wait_for_mapping_ack().map_err(|err| {
        tracing::error!("failed to receive id mapping ack: {}", err);
        err
    })?;
    prctl::set_dumpable(false).map_err(|e| {
        IntermediateProcessError::Other(format!(
            "error in setting dumplable to false : {}",
            nix::errno::Errno::from_raw(e)
        ))
    })?;
    Ok(())
}

fn setup_time_offsets(sender: &mut MainSender, receiver: &mut IntermediateReceiver) -> Result<()> {
    tracing::debug!("requesting parent to write time namespace offsets");

    prctl::set_dumpable(true).map_err(|e| {
        IntermediateProcessError::Other(format!(
            "error in setting dumpable to true for time offsets: {}",
            nix::errno::Errno::from_raw(e)
        ))
    })?;

    sender.time_offset_request().map_err(|err| {
        tracing::error!("failed to send time offset request: {}", err);
        err
    })?;

    receiver.wait_for_time_offsets_ack().map_err(|err| {
        tracing::error!("failed to receive time offsets ack: {}", err);
        err
    })?;

    prctl::set_dumpable(false).map_err(|e| {
        IntermediateProcessError::Other(format!(
            "error in setting dumpable to false after time offsets: {}",
            nix::errno::Errno::from_raw(e)
        ))
    })?;

    Ok(())
}

fn apply_cgroups<
    C: CgroupManager<Error = E> + ?Sized,
    E: std::error::Error + Send + Sync + 'static,
>(
    cmanager: &C,
    resources: Option<&LinuxResources>,
    init: bool,
) -> Result<()> {
    apply_cgroups_for(cmanager, getpid(), resources, init)
}

/// Adds `pid` to the cgroup and, for an init, applies the resources.
fn apply_cgroups_for<
    C: CgroupManager<Error = E> + ?Sized,
    E: std::error::Error + Send + Sync + 'static,
>(
    cmanager: &C,
    pid: Pid,
    resources: Option<&LinuxResources>,
    init: bool,
) -> Result<()> {
    cmanager.add_task(pid).map_err(|err| {
        tracing::error!(?pid, ?err, ?init, "failed to add task to cgroup");
        IntermediateProcessError::Cgroup(err.to_string())
    })?;

    if init && let Some(resources) = resources {
        // gpurun patch: `memory.disableOOMKiller` was never passed on, so
        // memory.oom_control stayed 0.
        let disable_oom_killer = resources
            .memory()
            .as_ref()
            .and_then(|m| m.disable_oom_killer())
            .unwrap_or(false);
        let controller_opt = libcgroups::common::ControllerOpt {
            resources,
            freezer_state: None,
            oom_score_adj: None,
            disable_oom_killer,
        };

        cmanager.apply(&controller_opt).map_err(|err| {
            tracing::error!(?pid, ?err, ?init, "failed to apply cgroup");
            IntermediateProcessError::Cgroup(err.to_string())
        })?;
    }

    Ok(())
}

#[cfg(test)]
mod tests {
    use anyhow::Result;
    use libcgroups::test_manager::TestManager;
    use nix::unistd::Pid;
    use oci_spec::runtime::LinuxResources;
    use procfs::process::Process;

    use super::*;

    #[test]
    fn apply_cgroup_init() -> Result<()> {
        // arrange
        let cmanager = TestManager::default();
        let resources = LinuxResources::default();

        // act
        apply_cgroups(&cmanager, Some(&resources), true)?;

        // assert
        assert!(cmanager.get_add_task_args().len() == 1);
        assert_eq!(
            cmanager.get_add_task_args()[0],
            Pid::from_raw(Process::myself()?.pid())
        );
        assert!(cmanager.apply_called());
        Ok(())
    }

    #[test]
    fn apply_cgroup_tenant() -> Result<()> {
        // arrange
        let cmanager = TestManager::default();
        let resources = LinuxResources::default();

        // act
        apply_cgroups(&cmanager, Some(&resources), false)?;

        // assert
        assert_eq!(
            cmanager.get_add_task_args()[0],
            Pid::from_raw(Process::myself()?.pid())
        );
        assert!(!cmanager.apply_called());
        Ok(())
    }

    #[test]
    fn apply_cgroup_no_resources() -> Result<()> {
        // arrange
        let cmanager = TestManager::default();

        // act
        apply_cgroups(&cmanager, None, true)?;
        // assert
        assert_eq!(
            cmanager.get_add_task_args()[0],
            Pid::from_raw(Process::myself()?.pid())
        );
        assert!(!cmanager.apply_called());
        Ok(())
    }
}
