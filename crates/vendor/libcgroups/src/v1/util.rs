use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::OnceLock;

use pathrs::flags::OpenFlags;
use pathrs::procfs::{ProcfsBase, ProcfsHandle};
use procfs::ProcError;
use procfs::process::MountInfo;

use super::ControllerType;
use super::controller_type::CONTROLLERS;

#[derive(thiserror::Error, Debug)]
pub enum V1MountPointError {
    #[error("io error: {0}")]
    Io(#[from] std::io::Error),
    #[error("failed to get mountinfo: {0}")]
    MountInfo(ProcError),
    #[error("could not find mountpoint for {subsystem}")]
    NotFound { subsystem: ControllerType },
    #[error(transparent)]
    Pathrs(#[from] pathrs::error::Error),
}

/// List all cgroup v1 subsystem mount points on the system. This can include unsupported
/// subsystems, comounted controllers and named hierarchies.
pub fn list_subsystem_mount_points() -> Result<Vec<PathBuf>, V1MountPointError> {
    Ok(cgroup_mounts()?
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .map(|m| m.mount_point.clone())
        .collect())
}

/// List the mount points of all currently supported cgroup subsystems.
pub fn list_supported_mount_points() -> Result<HashMap<ControllerType, PathBuf>, V1MountPointError>
{
    let mut mount_paths = HashMap::with_capacity(CONTROLLERS.len());

    for controller in CONTROLLERS {
        if let Ok(mount_point) = get_subsystem_mount_point(controller) {
            mount_paths.insert(controller.to_owned(), mount_point);
        }
    }

    Ok(mount_paths)
}

pub fn get_subsystem_mount_point(subsystem: &ControllerType) -> Result<PathBuf, V1MountPointError> {
    find_subsystem_mount_point(subsystem, cgroup_mounts()?)
}

/// The cgroup and cgroup2 mounts of /proc/self/mountinfo, read once per
/// process (gpurun patch): every lookup used to read and check the file
/// again, six times in one container start between the runtime, its
/// intermediate process and the container's init, each read taking the
/// kernel's global mount-namespace lock against every other mount on the
/// host. A process cloned after the first read inherits the table. The
/// hierarchies a runtime finds at its start are those it uses until it
/// exits, as runc keeps its cgroup paths.
pub fn cgroup_mounts() -> Result<&'static [MountInfo], V1MountPointError> {
    static MOUNTS: OnceLock<Vec<MountInfo>> = OnceLock::new();
    if let Some(mounts) = MOUNTS.get() {
        return Ok(mounts);
    }
    let reader = BufReader::new(ProcfsHandle::new()?.open(
        ProcfsBase::ProcSelf,
        "mountinfo",
        OpenFlags::O_RDONLY | OpenFlags::O_CLOEXEC,
    )?);
    let mut mounts = Vec::new();
    for line in reader.lines() {
        let mount = MountInfo::from_line(&line?).map_err(V1MountPointError::MountInfo)?;
        // gpurun patch: cgroup2 too, for a hybrid host's unified hierarchy.
        if mount.fs_type == "cgroup" || mount.fs_type == "cgroup2" {
            mounts.push(mount);
        }
    }
    Ok(MOUNTS.get_or_init(|| mounts))
}

/// The mount point of `subsystem` among `mounts` (from [`cgroup_mounts`]).
pub fn find_subsystem_mount_point(
    subsystem: &ControllerType,
    mounts: &[MountInfo],
) -> Result<PathBuf, V1MountPointError> {
    let subsystem_name = subsystem.to_string();
    mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .find(|m| {
            // Some systems mount net_prio and net_cls in the same directory
            // other systems mount them in their own directories. This
            // should handle both cases.
            match subsystem_name.as_str() {
                "net_cls" => ["net_cls,net_prio", "net_prio,net_cls", "net_cls"]
                    .iter()
                    .any(|s| m.mount_point.ends_with(s)),
                "net_prio" => ["net_cls,net_prio", "net_prio,net_cls", "net_prio"]
                    .iter()
                    .any(|s| m.mount_point.ends_with(s)),
                "cpu" => ["cpu,cpuacct", "cpu"]
                    .iter()
                    .any(|s| m.mount_point.ends_with(s)),
                "cpuacct" => ["cpu,cpuacct", "cpuacct"]
                    .iter()
                    .any(|s| m.mount_point.ends_with(s)),
                _ => m.mount_point.ends_with(&subsystem_name),
            }
        })
        .map(|m| m.mount_point.clone())
        .ok_or(V1MountPointError::NotFound {
            subsystem: *subsystem,
        })
}
