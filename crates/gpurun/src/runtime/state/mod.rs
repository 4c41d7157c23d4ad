//! Containers' state: ids, locks, pid records and loading, and the state
//! root's directory and its modes.

pub mod containers;
pub mod state_dir;
