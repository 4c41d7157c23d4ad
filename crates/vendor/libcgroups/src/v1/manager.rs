use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::unistd::Pid;
use pathrs::flags::OpenFlags;
use pathrs::procfs::{ProcfsBase, ProcfsHandle};
use procfs::process::MountInfo;
use procfs::{FromRead, ProcError, ProcessCGroups};

use super::blkio::{Blkio, V1BlkioStatsError};
use super::controller::Controller;
use super::controller_type::CONTROLLERS;
use super::cpu::{Cpu, V1CpuStatsError};
use super::cpuacct::{CpuAcct, V1CpuAcctStatsError};
use super::cpuset::{CpuSet, V1CpuSetControllerError};
use super::devices::Devices;
use super::freezer::{Freezer, V1FreezerControllerError};
use super::hugetlb::{HugeTlb, V1HugeTlbControllerError, V1HugeTlbStatsError};
use super::memory::{Memory, V1MemoryControllerError, V1MemoryStatsError};
use super::network_classifier::NetworkClassifier;
use super::network_priority::NetworkPriority;
use super::perf_event::PerfEvent;
use super::pids::Pids;
use super::util::V1MountPointError;
use super::{ControllerType as CtrlType, util};
use crate::common::{
    self, AnyCgroupManager, CGROUP_PROCS, CgroupManager, ControllerOpt, FreezerState,
    JoinSafelyError, PathBufExt, WrapIoResult, WrappedIoError,
};
use crate::stats::{PidStatsError, Stats, StatsProvider};

pub struct Manager {
    subsystems: HashMap<CtrlType, PathBuf>,
    // gpurun patch: an empty cgroups path means "the caller's own cgroup",
    // which this manager must never empty out with SIGKILL on removal.
    uses_caller_cgroup: bool,
    // gpurun patch: like runc, a rootless container on a v1 host without
    // delegation runs without cgroups instead of failing with EACCES.
    rootless: bool,
    // gpurun patch: the hierarchies without controllers that runc joins as
    // well: systemd's named v1 hierarchy and, on a hybrid host, the unified
    // (v2) one. systemd tracks processes there; without them a container
    // stayed in the cgroup of whoever started it (a service's, a login
    // session's) in systemd's view.
    tracking: Vec<TrackingCgroup>,
}

/// A cgroup in a hierarchy without controllers, joined but never limited.
struct TrackingCgroup {
    path: PathBuf,
    /// The hierarchy's mount point.
    root: PathBuf,
    unified: bool,
}

#[derive(thiserror::Error, Debug)]
pub enum V1ManagerError {
    #[error("io error: {0}")]
    WrappedIo(#[from] WrappedIoError),
    #[error("mount point error: {0}")]
    MountPoint(#[from] V1MountPointError),
    #[error("proc error: {0}")]
    Proc(#[from] ProcError),
    #[error("while joining paths: {0}")]
    JoinSafely(#[from] JoinSafelyError),
    #[error("cgroup {0} is required to fulfill the request, but is not supported by this system")]
    CGroupRequired(CtrlType),
    #[error("subsystem does not exist")]
    SubsystemDoesNotExist,
    #[error(transparent)]
    Pathrs(#[from] pathrs::error::Error),

    #[error(transparent)]
    BlkioController(WrappedIoError),
    #[error(transparent)]
    CpuController(WrappedIoError),
    #[error(transparent)]
    CpuAcctController(WrappedIoError),
    #[error(transparent)]
    CpuSetController(#[from] V1CpuSetControllerError),
    #[error(transparent)]
    FreezerController(#[from] V1FreezerControllerError),
    #[error(transparent)]
    HugeTlbController(#[from] V1HugeTlbControllerError),
    #[error(transparent)]
    MemoryController(#[from] V1MemoryControllerError),
    #[error(transparent)]
    PidsController(WrappedIoError),

    #[error(transparent)]
    BlkioStats(#[from] V1BlkioStatsError),
    #[error(transparent)]
    CpuStats(#[from] V1CpuStatsError),
    #[error(transparent)]
    CpuAcctStats(#[from] V1CpuAcctStatsError),
    #[error(transparent)]
    PidsStats(#[from] PidStatsError),
    #[error(transparent)]
    HugeTlbStats(#[from] V1HugeTlbStatsError),
    #[error(transparent)]
    MemoryStats(#[from] V1MemoryStatsError),
}

/// Makes `dir` and writes `pid` to its `file` (gpurun patch 22: below
/// /sys/fs/cgroup, from its descriptor).
fn join_by(dir: &Path, file: &str, pid: Pid) -> std::io::Result<()> {
    use std::io::Write;
    crate::cgroupfs::create_dir_all(dir)?;
    let flags =
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_TRUNC;
    crate::cgroupfs::open(&dir.join(file), flags)?.write_all(pid.to_string().as_bytes())
}

impl Manager {
    /// Constructs a new cgroup manager with cgroups_path being relative to the root of the subsystem
    pub fn new(cgroup_path: &Path) -> Result<Self, V1ManagerError> {
        let mut subsystems = HashMap::new();
        // Read once for all subsystems (gpurun patch): each lookup used to
        // read and check both files again, a few hundred syscalls in all.
        let mounts = util::cgroup_mounts()?;
        let own_cgroups = ProcessCGroups::from_read(ProcfsHandle::new()?.open(
            ProcfsBase::ProcSelf,
            "cgroup",
            OpenFlags::O_RDONLY | OpenFlags::O_CLOEXEC,
        )?)?;
        for subsystem in CONTROLLERS {
            if let Ok(subsystem_path) =
                Self::get_subsystem_path(cgroup_path, subsystem, mounts, &own_cgroups)
            {
                subsystems.insert(*subsystem, subsystem_path);
            } else {
                tracing::warn!("cgroup {} not supported on this system", subsystem);
            }
        }

        let uses_caller_cgroup = cgroup_path.as_os_str().is_empty();
        let tracking = if uses_caller_cgroup {
            Vec::new()
        } else {
            Self::tracking_cgroups(cgroup_path, mounts, &own_cgroups)
        };
        Ok(Manager {
            subsystems,
            uses_caller_cgroup,
            rootless: false,
            tracking,
        })
    }

    /// The container's directories in the named systemd hierarchy and the
    /// hybrid host's unified one, where those are mounted.
    fn tracking_cgroups(
        cgroup_path: &Path,
        mounts: &[MountInfo],
        own_cgroups: &ProcessCGroups,
    ) -> Vec<TrackingCgroup> {
        let mut found = Vec::new();
        for mount in mounts {
            let unified = mount.fs_type == "cgroup2";
            let named_systemd = mount.fs_type == "cgroup"
                && mount.super_options.get("name") == Some(&Some("systemd".to_string()));
            if !(unified || named_systemd) {
                continue;
            }
            let joined_before = if unified {
                own_cgroups.0.iter().any(|c| c.hierarchy == 0)
            } else {
                own_cgroups
                    .0
                    .iter()
                    .any(|c| c.controllers.iter().any(|n| n == "name=systemd"))
            };
            if !joined_before || found.iter().any(|t: &TrackingCgroup| t.unified == unified) {
                continue;
            }
            if let Ok(path) = mount.mount_point.join_safely(cgroup_path) {
                found.push(TrackingCgroup {
                    path,
                    root: mount.mount_point.clone(),
                    unified,
                });
            }
        }
        found
    }

    /// gpurun patch: on a hybrid host, makes the container's unified (v2)
    /// cgroup and returns it, for the parent to clone the container's first
    /// process straight into it (CLONE_INTO_CGROUP): joining it later by
    /// cgroup.procs waits for an RCU grace period, milliseconds per start.
    /// Without a manager, which would read mountinfo once more: the unified
    /// hierarchy is where `get_cgroup_setup` found it.
    pub fn prepare_hybrid_clone_into(cgroup_path: &Path, rootless: bool) -> Option<PathBuf> {
        if cgroup_path.as_os_str().is_empty() {
            return None;
        }
        let dir = Path::new(common::DEFAULT_CGROUP_ROOT)
            .join("unified")
            .join_safely(cgroup_path)
            .ok()?;
        if crate::cgroupfs::create_dir_all(&dir).is_err()
            || (rootless && !Self::rootless_usable(&dir))
        {
            return None;
        }
        Some(dir)
    }

    /// Joins the tracking hierarchies; best effort, as they limit nothing.
    fn join_tracking(&self, pid: Pid) {
        for cgroup in &self.tracking {
            if self.rootless && !Self::rootless_usable(&cgroup.path) {
                continue;
            }
            let joined = if cgroup.unified {
                if pid.as_raw() == 0 && common::caller_in_v2_cgroup(&cgroup.root, &cgroup.path) {
                    continue;
                }
                join_by(&cgroup.path, CGROUP_PROCS, pid)
            } else {
                join_by(&cgroup.path, "tasks", pid)
            };
            if let Err(err) = joined {
                tracing::debug!("cannot join {:?}: {err}", cgroup.path);
            }
        }
    }

    /// Marks the manager as rootless: subsystems the caller may not write
    /// to are skipped with a debug message instead of failing the container.
    pub fn with_rootless(mut self, rootless: bool) -> Self {
        self.rootless = rootless;
        self
    }

    /// Whether a rootless caller can use this subsystem directory: it exists
    /// (or can be created) and its `cgroup.procs` is writable.
    fn rootless_usable(path: &Path) -> bool {
        if !crate::cgroupfs::exists(path) && crate::cgroupfs::create_dir_all(path).is_err() {
            return false;
        }
        nix::unistd::access(&path.join(CGROUP_PROCS), nix::unistd::AccessFlags::W_OK).is_ok()
    }

    fn usable_subsystems(&self) -> impl Iterator<Item = (&CtrlType, &PathBuf)> {
        self.subsystems.iter().filter(move |(ctrl, path)| {
            if !self.rootless || Self::rootless_usable(path) {
                return true;
            }
            tracing::debug!("rootless cgroup: no write access to {ctrl} at {path:?}; not using it");
            false
        })
    }

    fn get_subsystem_path(
        cgroup_path: &Path,
        subsystem: &CtrlType,
        mounts: &[MountInfo],
        own_cgroups: &ProcessCGroups,
    ) -> Result<PathBuf, V1ManagerError> {
        tracing::debug!("Get path for subsystem: {}", subsystem);
        let mount_point = util::find_subsystem_mount_point(subsystem, mounts)?;

        let cgroup = own_cgroups
            .0
            .iter()
            .find(|c| c.controllers.contains(&subsystem.to_string()))
            .ok_or(V1ManagerError::SubsystemDoesNotExist)?;

        let p = if cgroup_path.as_os_str().is_empty() {
            mount_point.join_safely(Path::new(&cgroup.pathname))?
        } else {
            mount_point.join_safely(cgroup_path)?
        };

        Ok(p)
    }

    fn get_required_controllers(
        &self,
        controller_opt: &ControllerOpt,
    ) -> Result<HashMap<&CtrlType, &PathBuf>, V1ManagerError> {
        let mut required_controllers = HashMap::new();

        for controller in CONTROLLERS {
            let required = match controller {
                CtrlType::Cpu => Cpu::needs_to_handle(controller_opt).is_some(),
                CtrlType::CpuAcct => CpuAcct::needs_to_handle(controller_opt).is_some(),
                CtrlType::CpuSet => CpuSet::needs_to_handle(controller_opt).is_some(),
                CtrlType::Devices => Devices::needs_to_handle(controller_opt).is_some(),
                CtrlType::HugeTlb => HugeTlb::needs_to_handle(controller_opt).is_some(),
                CtrlType::Memory => Memory::needs_to_handle(controller_opt).is_some(),
                CtrlType::Pids => Pids::needs_to_handle(controller_opt).is_some(),
                CtrlType::PerfEvent => PerfEvent::needs_to_handle(controller_opt).is_some(),
                CtrlType::Blkio => Blkio::needs_to_handle(controller_opt).is_some(),
                CtrlType::NetworkPriority => {
                    NetworkPriority::needs_to_handle(controller_opt).is_some()
                }
                CtrlType::NetworkClassifier => {
                    NetworkClassifier::needs_to_handle(controller_opt).is_some()
                }
                CtrlType::Freezer => Freezer::needs_to_handle(controller_opt).is_some(),
            };

            if required {
                if let Some(subsystem_path) = self.subsystems.get(controller) {
                    required_controllers.insert(controller, subsystem_path);
                } else {
                    return Err(V1ManagerError::CGroupRequired(*controller));
                }
            }
        }

        Ok(required_controllers)
    }

    pub fn any(self) -> AnyCgroupManager {
        AnyCgroupManager::V1(self)
    }
}

impl CgroupManager for Manager {
    type Error = V1ManagerError;

    fn get_all_pids(&self) -> Result<Vec<Pid>, Self::Error> {
        let devices = self.subsystems.get(&CtrlType::Devices);
        if let Some(p) = devices {
            // gpurun patch: a rootless container that got no cgroup has no
            // pids in one, rather than an error.
            if !p.exists() {
                return Ok(Vec::new());
            }
            Ok(common::get_all_pids(p)?)
        } else {
            Err(V1ManagerError::SubsystemDoesNotExist)
        }
    }

    fn add_task(&self, pid: Pid) -> Result<(), Self::Error> {
        let pid = common::v1_task_pid(pid);
        for (ctrl_type, cgroup_path) in self.usable_subsystems() {
            match ctrl_type {
                CtrlType::Cpu => Cpu::add_task(pid, cgroup_path)?,
                CtrlType::CpuAcct => CpuAcct::add_task(pid, cgroup_path)?,
                CtrlType::CpuSet => CpuSet::add_task(pid, cgroup_path)?,
                CtrlType::Devices => Devices::add_task(pid, cgroup_path)?,
                CtrlType::HugeTlb => HugeTlb::add_task(pid, cgroup_path)?,
                CtrlType::Memory => Memory::add_task(pid, cgroup_path)?,
                CtrlType::Pids => Pids::add_task(pid, cgroup_path)?,
                CtrlType::PerfEvent => PerfEvent::add_task(pid, cgroup_path)?,
                CtrlType::Blkio => Blkio::add_task(pid, cgroup_path)?,
                CtrlType::NetworkPriority => NetworkPriority::add_task(pid, cgroup_path)?,
                CtrlType::NetworkClassifier => NetworkClassifier::add_task(pid, cgroup_path)?,
                CtrlType::Freezer => Freezer::add_task(pid, cgroup_path)?,
            }
        }
        self.join_tracking(pid);

        Ok(())
    }

    fn apply(&self, controller_opt: &ControllerOpt) -> Result<(), Self::Error> {
        for (ctrl_type, cgroup_path) in self.get_required_controllers(controller_opt)? {
            if self.rootless && !Self::rootless_usable(cgroup_path) {
                tracing::debug!(
                    "rootless cgroup: cannot apply {ctrl_type} limits at {cgroup_path:?}"
                );
                continue;
            }
            match ctrl_type {
                CtrlType::Cpu => Cpu::apply(controller_opt, cgroup_path)?,
                CtrlType::CpuAcct => CpuAcct::apply(controller_opt, cgroup_path)?,
                CtrlType::CpuSet => CpuSet::apply(controller_opt, cgroup_path)?,
                CtrlType::Devices => Devices::apply(controller_opt, cgroup_path)?,
                CtrlType::HugeTlb => HugeTlb::apply(controller_opt, cgroup_path)?,
                CtrlType::Memory => Memory::apply(controller_opt, cgroup_path)?,
                CtrlType::Pids => Pids::apply(controller_opt, cgroup_path)?,
                CtrlType::PerfEvent => PerfEvent::apply(controller_opt, cgroup_path)?,
                CtrlType::Blkio => Blkio::apply(controller_opt, cgroup_path)?,
                CtrlType::NetworkPriority => NetworkPriority::apply(controller_opt, cgroup_path)?,
                CtrlType::NetworkClassifier => {
                    NetworkClassifier::apply(controller_opt, cgroup_path)?
                }
                CtrlType::Freezer => Freezer::apply(controller_opt, cgroup_path)?,
            }
        }

        Ok(())
    }

    fn remove(&self) -> Result<(), Self::Error> {
        if self.uses_caller_cgroup {
            tracing::warn!("refusing to remove the caller's own cgroup");
            return Ok(());
        }
        for cgroup_path in self.subsystems.values() {
            if crate::cgroupfs::exists(cgroup_path) {
                tracing::debug!("remove cgroup {:?}", cgroup_path);
                let procs_path = cgroup_path.join(CGROUP_PROCS);
                let procs = crate::cgroupfs::read_to_string(&procs_path).wrap_read(&procs_path)?;

                for line in procs.lines() {
                    let pid: i32 = line
                        .parse()
                        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
                        .wrap_other(&procs_path)?;
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                }

                common::delete_with_retry(cgroup_path, 4, Duration::from_millis(100))?;
            }
        }
        for cgroup in &self.tracking {
            if crate::cgroupfs::exists(&cgroup.path) {
                if let Err(err) =
                    common::delete_with_retry(&cgroup.path, 4, Duration::from_millis(100))
                {
                    tracing::warn!("cannot remove {:?}: {err}", cgroup.path);
                }
            }
        }

        Ok(())
    }

    fn freeze(&self, state: FreezerState) -> Result<(), Self::Error> {
        let path = self
            .subsystems
            .get(&CtrlType::Freezer)
            .ok_or(V1ManagerError::SubsystemDoesNotExist)?;
        // gpurun patch: freezing or thawing a cgroup that is gone (a delete
        // ran meanwhile) must not make it again: Freezer::apply creates its
        // directory, which was then left behind, empty. Only the state file
        // of an existing cgroup is written.
        Ok(Freezer::set_state(&state, path)?)
    }

    fn stats(&self) -> Result<Stats, Self::Error> {
        let mut stats = Stats::default();

        for (ctrl_type, cgroup_path) in &self.subsystems {
            match ctrl_type {
                CtrlType::Cpu => stats.cpu.throttling = Cpu::stats(cgroup_path)?,
                CtrlType::CpuAcct => stats.cpu.usage = CpuAcct::stats(cgroup_path)?,
                CtrlType::Pids => stats.pids = Pids::stats(cgroup_path)?,
                CtrlType::HugeTlb => stats.hugetlb = HugeTlb::stats(cgroup_path)?,
                CtrlType::Blkio => stats.blkio = Blkio::stats(cgroup_path)?,
                CtrlType::Memory => stats.memory = Memory::stats(cgroup_path)?,
                _ => continue,
            }
        }

        Ok(stats)
    }
}
