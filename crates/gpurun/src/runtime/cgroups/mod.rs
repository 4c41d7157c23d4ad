//! Cgroups as gpurun uses them beside libcontainer's managers: the path a
//! container gets (`path`), the sub-cgroups an exec joins (`exec`), a
//! container's own cgroup (`container`) and the host's (`host`).

pub mod container;
pub mod exec;
pub mod host;
pub mod path;
