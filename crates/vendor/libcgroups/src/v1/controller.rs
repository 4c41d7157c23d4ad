use std::path::Path;

use nix::unistd::Pid;

use crate::common::{self, ControllerOpt, WrapIoResult, WrappedIoError};

pub(super) trait Controller {
    type Error: From<WrappedIoError>;
    type Resource;

    /// Adds a new task specified by its pid to the cgroup
    fn add_task(pid: Pid, cgroup_path: &Path) -> Result<(), Self::Error> {
        // gpurun patch 22: below /sys/fs/cgroup, from its descriptor.
        crate::cgroupfs::create_dir_all(cgroup_path).wrap_create_dir(cgroup_path)?;
        common::add_task_v1(pid, cgroup_path)?;
        Ok(())
    }

    /// Applies resource restrictions to the cgroup
    fn apply(controller_opt: &ControllerOpt, cgroup_root: &Path) -> Result<(), Self::Error>;

    /// Checks if the controller needs to handle this request
    fn needs_to_handle<'a>(controller_opt: &'a ControllerOpt) -> Option<&'a Self::Resource>;
}
