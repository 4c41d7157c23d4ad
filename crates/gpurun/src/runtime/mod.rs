//! The runtime adapter between the commands and libcontainer: preparing a
//! bundle's spec (GPU edits, checks), launching and re-entering containers,
//! the protected re-exec, state, cgroups, terminals and signals. Nothing
//! here knows the command line; what the user set reaches it as
//! `context::Settings`.

pub mod cgroup_path;
pub mod containers;
pub mod context;
pub mod criu;
pub mod driver_paths;
pub mod exec_stub;
pub mod executor;
pub mod foreground;
pub mod idmap;
pub mod import;
pub mod launch;
pub mod logging;
pub mod lxc;
pub mod prepare;
pub mod privilege;
pub mod rootfs_spec;
pub mod seal;
pub mod signals;
pub mod state_dir;
pub mod terminal;
pub mod validate;
pub mod verify;
