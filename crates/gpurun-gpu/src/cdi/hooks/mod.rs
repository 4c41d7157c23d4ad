//! NVIDIA's CDI hooks (`nvidia-cdi-hook SUB …`, `nvidia-ctk hook SUB …`,
//! or `gpurun cdi-hook SUB …`) carried out by gpurun itself: no hook
//! process, no toolkit on the host.
//!
//! An engine that applied NVIDIA's CDI spec hands over a config with the
//! driver files bind-mounted at their driver-root paths and createContainer
//! hooks that finish the job inside the rootfs (SONAME and `.so` links, the
//! linker cache, CUDA compat, a `params` copy). Here each hook is parsed
//! into an [`Op`] (pure, fuzzed), the ops are planned against the
//! container's view of its folders ([`plan`]: the image's files plus the
//! spec's bind mounts, resolved inside the rootfs), and the plan becomes
//! spec edits ([`apply`]) that libcontainer carries out in the container's
//! init before pivot_root: links in the private mount-point layer (or the
//! engine's own container layer), the linker cache bound over
//! `/etc/ld.so.cache`. `gpurun cdi-hook` runs the same plan in place, for
//! runc and crun ([`run_in_place`]).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use oci_spec::runtime::{Hook, Mount, Spec};
use serde::Serialize;

use crate::apply::{self as spec_apply, Applied};
use crate::formats::ldcache::{self, Entry};
use crate::plan as gpu_plan;
use crate::plan::mount_points::{Entry as LayerEntry, Needed};
use safe_fs::Rootfs;

/// The hook programs carried out natively, by file name.
pub const NVIDIA_CDI_HOOK: &str = "nvidia-cdi-hook";
pub const NVIDIA_CTK: &str = "nvidia-ctk";
/// gpurun's own hook subcommand (`gpurun cdi-hook SUB …`).
pub const GPURUN_SUBCOMMAND: &str = "cdi-hook";
/// The variable NVIDIA's CDI spec sets beside its edits.
pub const LIBCUDA_DIR_ENV: &str = "NVIDIA_CTK_LIBCUDA_DIR";
pub(super) const APPLICATION_PROFILE: &str =
    "/etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf";
pub(super) const PARAMS: &str = "/proc/driver/nvidia/params";
/// Largest image ld.so.cache read; real ones are well under 1 MiB.
pub(super) const MAX_IMAGE_LDCACHE: u64 = 16 << 20;

mod apply;
mod in_place;
mod parse;
mod plan;
mod view;

// The view's items for the other parts (`use super::*`), and the public API.
pub use apply::{apply, Done};
pub use in_place::run_in_place;
pub use parse::{carries_nvidia_cdi_edits, in_container, nvidia_hook_args, parse, take, Link, Op};
pub use plan::{gpu_minors, plan, HookPlan, HostFacts};
use view::*;

#[cfg(test)]
mod tests;
