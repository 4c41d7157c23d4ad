//! gpurun's GPU support, as a one-way flow of plain values:
//!
//! **inventory** (what the host has) → **request** (what the container asks
//! for) → **plan** (devices, mounts, env, linker-cache entries) → **apply**
//! (edits to the OCI spec). Every stage is a serde value that can be printed
//! and tested without root.

pub mod apply;
pub mod caps;
pub mod cdi;
pub mod cdi_hooks;
pub mod cdi_registry;
pub mod checkpoint;
pub mod cuda_compat;
pub mod devlist;
pub mod driver_files;
pub mod elf;
pub mod flow;
#[doc(hidden)]
pub mod fuzzing;
pub mod gated;
pub mod gpu_models;
pub mod gpus;
pub mod inventory;
pub mod inventory_cache;
pub mod ldcache;
pub mod mount_points;
pub mod musl;
pub mod nvml;
pub mod platform;
pub mod require;
pub mod roots;
pub mod slurm;
pub mod spec_env;
pub mod tegra;
pub mod wsl;

pub use caps::Capability;
pub use inventory::{discover, Inventory, Source};
pub use platform::Platform;
pub use roots::{RootFlags, Roots};
pub mod plan;
pub mod request;

pub use plan::Plan;
pub use request::Request;
