//! The one path from a request to a plan. `run` (and `create`), `gpu plan`,
//! `gpu verify`, `doctor` and the LXC hook all take it (`resolve`), a Slurm
//! job's allocation included, so what doctor or plan says about a container
//! is what the container gets.

/// Where under the state root the driver's files are cached.
pub const CACHE_DIR: &str = "@driver-cache";

use std::path::Path;

use anyhow::Result;

use crate::devlist::DeviceSelection;
use crate::inventory::{self, Gpu, Inventory, Source};
use crate::plan::{self, Plan};
use crate::request::Request;
use crate::roots::Roots;
use crate::slurm;

/// The inventory a container is made from: procfs facts only, so no
/// driver library is ever loaded into the runtime; the driver's files kept
/// in `cache_dir` (the state root's `driver-cache`) between starts.
pub fn inventory(roots: &Roots, cache_dir: Option<&Path>) -> Result<Inventory> {
    inventory::discover_cached(roots, Source::Procfs, cache_dir)
}

/// A Slurm job's say in which GPUs a container gets.
#[derive(Debug, Clone)]
pub struct SlurmJob {
    pub allocation: slurm::Allocation,
    /// A container that asks for no GPU gets the job's (`gpurun run` of a
    /// rootfs without --gpus); otherwise the request is only bounded.
    pub gpus_by_default: bool,
}

impl SlurmJob {
    /// The job this process runs in, from Slurm's environment; `None`
    /// outside one.
    pub fn from_env(gpus_by_default: bool) -> Result<Option<SlurmJob>> {
        Ok(
            slurm::from_env(|k| std::env::var(k).ok())?.map(|allocation| SlurmJob {
                allocation,
                gpus_by_default,
            }),
        )
    }

    /// The step slurmstepd started this process in (`srun --container`),
    /// from its own cgroup: the container gets the GPUs the step's device
    /// cgroup lets it open, whether its bundle says nothing or `all`.
    pub fn from_step(step: &slurm::StepCgroup) -> SlurmJob {
        SlurmJob {
            allocation: slurm::from_step_cgroup(step),
            gpus_by_default: true,
        }
    }
}

/// Whether this process may open a GPU's node: under Slurm's device
/// cgroup, the GPUs of other steps give EPERM.
fn may_open(gpu: &Gpu) -> bool {
    let Some(node) = &gpu.node else { return true };
    match std::fs::File::open(&node.host_path) {
        Err(e) => e.raw_os_error() != Some(libc::EPERM),
        Ok(_) => true,
    }
}

/// The request as the container gets it (a Slurm job's allocation
/// applied) and, when it asks for a GPU, the inventory and plan, for a
/// container whose rootfs is `rootfs` (`None`: the plan's destinations are
/// the usual ones). `roots` is called only when the host's GPUs are looked
/// at: a container that asks for none reads no config file.
pub fn resolve(
    roots: impl FnOnce() -> Result<Roots>,
    mut request: Request,
    job: Option<&SlurmJob>,
    rootfs: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<(Request, Option<(Inventory, Plan)>)> {
    if !request.wants_gpu() && !job.is_some_and(|j| j.gpus_by_default) {
        return Ok((request, None));
    }
    let inv = inventory(&roots()?, cache_dir)?;
    if let Some(job) = job {
        let allowed = job.allocation.gpu_indexes(&inv.gpus, may_open)?;
        // An image's blanket `all` (CUDA images set it) in a step Slurm
        // gave no GPU: the container runs without one, as the step would.
        if matches!(job.allocation.gpus, slurm::Allocated::StepCgroup { .. })
            && allowed.is_empty()
            && request.devices == DeviceSelection::All
        {
            request.devices = DeviceSelection::Void;
            return Ok((request, None));
        }
        let selected: Vec<u32> = plan::select_gpus(&inv, &request.devices)?
            .iter()
            .map(|g| g.index)
            .collect();
        request.devices = slurm::constrain(
            &request.devices,
            !job.gpus_by_default,
            &allowed,
            &selected,
            &job.allocation,
        )?;
        tracing::debug!(
            "Slurm job {} ({}): GPUs {allowed:?} allocated",
            job.allocation.job_id,
            job.allocation.source
        );
    }
    if !request.wants_gpu() {
        return Ok((request, None));
    }
    let plan = plan::make(&inv, &request, rootfs)?;
    Ok((request, Some((inv, plan))))
}
