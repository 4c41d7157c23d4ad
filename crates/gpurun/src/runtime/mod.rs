//! The runtime adapter between the commands and libcontainer: preparing a
//! bundle's spec (GPU edits, checks), launching and re-entering containers,
//! the protected re-exec, state, cgroups, terminals and signals. Nothing
//! here knows the command line; what the user set reaches it as
//! `context::Settings`.

pub mod cgroups;
pub mod context;
pub mod criu;
pub mod import;
pub mod launch;
pub mod logging;
pub mod lxc;
pub mod protect;
pub mod spec;
pub mod squashfs;
pub mod state;
pub mod verify;
