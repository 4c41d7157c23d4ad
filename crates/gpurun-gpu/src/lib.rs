//! gpurun's GPU support, as a one-way flow of plain values:
//!
//! **inventory** (what the host has) → **request** (what the container asks
//! for) → **plan** (devices, mounts, env, linker-cache entries) → **apply**
//! (edits to the OCI spec). Every stage is a serde value that can be printed
//! and tested without root. Each stage is a folder, and a stage names only
//! the stages before it (`scripts/ci/check-layers.py`): `formats` (the pure
//! parsers and writers) and `roots` (where the host's files are, and the
//! config) come first; `cdi` (NVIDIA's CDI specs and hooks) builds on the
//! four; `flow` is the one entry that decides what a container gets.

pub mod formats;
pub mod roots;

pub mod apply;
pub mod inventory;
pub mod plan;
pub mod request;

pub mod cdi;
pub mod checkpoint;
pub mod flow;
#[doc(hidden)]
pub mod fuzzing;

pub use formats::platform::Platform;
pub use inventory::caps::Capability;
pub use inventory::{discover, Inventory, Source};
pub use plan::Plan;
pub use request::Request;
pub use roots::{RootFlags, Roots};
