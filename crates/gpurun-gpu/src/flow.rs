//! The one path from a request to a plan. `run` (and `create`), `gpu plan`,
//! `gpu verify` and `doctor` all take it, so what doctor or plan says about
//! a container is what the container gets.

use std::path::Path;

use anyhow::Result;

use crate::inventory::{self, Inventory, Source};
use crate::plan::{self, Plan};
use crate::request::Request;
use crate::roots::Roots;

/// The inventory a container is made from: procfs facts only, so no
/// driver library is ever loaded into the runtime.
pub fn inventory(roots: &Roots) -> Result<Inventory> {
    inventory::discover(roots, Source::Procfs)
}

/// The plan for `request` on this host, for a container whose rootfs is
/// `rootfs` (`None`: the plan's destinations are the usual ones).
pub fn plan(roots: &Roots, request: &Request, rootfs: Option<&Path>) -> Result<(Inventory, Plan)> {
    let inv = inventory(roots)?;
    let plan = plan::make(&inv, request, rootfs)?;
    Ok((inv, plan))
}
