//! The one path from a request to a plan. `run` (and `create`), `gpu plan`,
//! `gpu verify` and `doctor` all take it, so what doctor or plan says about
//! a container is what the container gets.

/// Where under the state root the driver's files are cached.
pub const CACHE_DIR: &str = "@driver-cache";

use std::path::Path;

use anyhow::Result;

use crate::inventory::{self, Inventory, Source};
use crate::plan::{self, Plan};
use crate::request::Request;
use crate::roots::Roots;

/// The inventory a container is made from: procfs facts only, so no
/// driver library is ever loaded into the runtime; the driver's files kept
/// in `cache_dir` (the state root's `driver-cache`) between starts.
pub fn inventory(roots: &Roots, cache_dir: Option<&Path>) -> Result<Inventory> {
    inventory::discover_cached(roots, Source::Procfs, cache_dir)
}

/// The plan for `request` on this host, for a container whose rootfs is
/// `rootfs` (`None`: the plan's destinations are the usual ones).
pub fn plan(
    roots: &Roots,
    request: &Request,
    rootfs: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<(Inventory, Plan)> {
    let inv = inventory(roots, cache_dir)?;
    let plan = plan::make(&inv, request, rootfs)?;
    Ok((inv, plan))
}
