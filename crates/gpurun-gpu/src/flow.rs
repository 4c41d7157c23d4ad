//! The one path from a request to a plan, and from a plan to the spec's
//! edits. A container's config takes `decide` (create, `gpu plan`, `gpu
//! verify`), whose decision `carry_out` makes into edits; a request made
//! elsewhere (the LXC hook's environment, doctor's) takes `resolve`, the
//! same path past the config. A Slurm job's allocation counts on both, so
//! what doctor or plan says about a container is what the container gets.

/// Where under the state root the driver's files are cached.
pub const CACHE_DIR: &str = "@driver-cache";

use std::path::Path;

use anyhow::Result;

use crate::formats::devlist::DeviceSelection;
use crate::inventory::{self, Gpu, Inventory, Source};
use crate::plan::{self, Plan};
use crate::request::slurm;
use crate::request::Request;
use crate::roots::Roots;

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

/// The one decision for a request, whoever made it: a container's config
/// (`decide`), an LXC container's environment, `doctor`'s "every GPU".
/// The request as the container gets it (a Slurm job's allocation
/// applied) and, when it asks for a GPU, the inventory and plan, for a
/// container whose rootfs is `rootfs` (`None`: the plan's destinations are
/// the usual ones). `roots` is called only when the host's GPUs are looked
/// at: a container that asks for none reads no config file.
pub fn decide_request(
    roots: impl FnOnce() -> Result<Roots>,
    request: Request,
    job: Option<&SlurmJob>,
    rootfs: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<Decision> {
    Ok(
        match plan_request(roots, request, job, rootfs, cache_dir)? {
            (request, Some((inventory, plan))) => Decision::Planned {
                request,
                inventory: Box::new(inventory),
                plan: Box::new(plan),
            },
            (request, None) => Decision::Nothing { request },
        },
    )
}

fn plan_request(
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

/// What a container's config, and where it is started, say it gets: the
/// one decision `create` carries out and `gpu plan` prints.
#[derive(Debug)]
pub enum Decision {
    /// NVIDIA's CDI edits are in the spec (applied by the engine, or just
    /// now from a CDI spec on this host): they say what the container
    /// gets, their hooks are done natively, and gpurun's own request adds
    /// nothing. `request.sources` are the requests that were passed over.
    CdiEdits { request: Request },
    /// gpurun's own plan.
    Planned {
        request: Request,
        inventory: Box<Inventory>,
        plan: Box<Plan>,
    },
    /// No GPU.
    Nothing { request: Request },
}

impl Decision {
    pub fn request(&self) -> &Request {
        match self {
            Decision::CdiEdits { request }
            | Decision::Planned { request, .. }
            | Decision::Nothing { request } => request,
        }
    }
}

/// `gpurun run --gpus LIST --gpu-capabilities CAPS` (and `gpu plan
/// --gpus`): the invoker's own request, which counts whatever the
/// shared-node settings say of a tenant's env. The container's environment
/// shows it, as NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvokerGpus {
    pub devices: Option<String>,
    pub capabilities: Option<String>,
}

impl InvokerGpus {
    fn env(&self) -> Vec<String> {
        let mut env = Vec::new();
        if let Some(devices) = &self.devices {
            env.push(format!("NVIDIA_VISIBLE_DEVICES={devices}"));
        }
        if let Some(caps) = &self.capabilities {
            env.push(format!("NVIDIA_DRIVER_CAPABILITIES={caps}"));
        }
        env
    }
}

/// Where a container is being started, beyond its config.
pub struct Surroundings<'a> {
    /// The invoker's own request (`run --gpus`), if any.
    pub invoker: Option<&'a InvokerGpus>,
    /// Inside a Slurm job, a container that asks for no GPU gets the job's.
    pub slurm_gpus_by_default: bool,
    /// The step slurmstepd started us in (`srun --container`), when
    /// Slurm's environment is not there.
    pub slurm_step: Option<&'a slurm::StepCgroup>,
    pub rootfs: &'a Path,
    pub cache_dir: Option<&'a Path>,
}

/// The GPU decision for `spec`: the request (the config's policy, with
/// `--gpus` counting), CDI devices from this host's specs injected into
/// `spec`, NVIDIA's CDI edits taken as the answer where present, and
/// otherwise a Slurm job's allocation and gpurun's plan. `roots` and
/// `policy` are read only when needed: a container that asks for no GPU
/// reads no config file.
pub fn decide(
    spec: &mut oci_spec::runtime::Spec,
    roots: impl FnOnce() -> Result<Roots>,
    policy: impl FnOnce() -> Result<crate::request::RequestPolicy>,
    around: &Surroundings,
) -> Result<Decision> {
    let invoker_devices = around.invoker.is_some_and(|g| g.devices.is_some());
    if let Some(invoker) = around.invoker {
        crate::apply::spec_env::set_env(spec, &invoker.env());
    }
    let request = crate::request::from_spec(spec, || {
        let mut policy = policy()?;
        policy.accept_envvar_unprivileged |= invoker_devices;
        Ok(policy)
    })?;
    if !request.cdi_devices.is_empty() {
        crate::request::cdi_registry::inject(spec, &request.cdi_devices)?;
    }
    if crate::cdi::hooks::carries_nvidia_cdi_edits(spec) {
        return Ok(Decision::CdiEdits { request });
    }
    // Inside a step started for `srun --container`, the step's device
    // cgroup says which GPUs it holds; only a bundle that says `void`
    // itself opts out.
    let says_void = crate::request::environment(spec)
        .get("NVIDIA_VISIBLE_DEVICES")
        .is_some_and(|v| matches!(v.trim(), "" | "void"));
    let job = match SlurmJob::from_env(around.slurm_gpus_by_default)? {
        Some(job) => Some(job),
        None => around
            .slurm_step
            .filter(|_| !says_void)
            .map(SlurmJob::from_step),
    };
    decide_request(
        roots,
        request,
        job.as_ref(),
        Some(around.rootfs),
        around.cache_dir,
    )
}

/// Whether gpurun carries out this hook itself (NVIDIA's CDI hooks, in
/// the lists before the program starts), so that it never runs as a
/// process.
pub fn hook_done_natively(hook: &oci_spec::runtime::Hook) -> bool {
    let args = hook.args().clone().unwrap_or_default();
    crate::cdi::hooks::nvidia_hook_args(hook.path(), &args).is_some()
}

/// Whether the GPU flow may add hooks to `spec` when it is created: CDI
/// device names, which a CDI spec may answer with hooks of its own.
pub fn may_add_hooks(spec: &oci_spec::runtime::Spec) -> bool {
    crate::request::names_cdi_devices(spec)
}

/// What carrying out a decision did, for the runtime's log.
pub struct CarriedOut {
    /// NVIDIA's CDI hooks done natively, wherever the spec carried them.
    pub hooks: Option<crate::cdi::hooks::Done>,
    /// The plan's edits, for a planned decision.
    pub applied: Option<crate::apply::Applied>,
}

/// Carries `decision` out on `spec` (the spec `decide` read): NVIDIA's CDI
/// hooks done natively, then gpurun's plan applied; where CDI edits or
/// nothing answer, Docker's toolkit hook is dropped unrun. Files the edits
/// need go in `store`; `on_phase` hears each phase of the plan's apply.
pub fn carry_out(
    spec: &mut oci_spec::runtime::Spec,
    decision: &Decision,
    rootfs: &Path,
    store: &Path,
    on_phase: &mut dyn FnMut(crate::apply::Phase, &crate::apply::Applied),
) -> Result<CarriedOut> {
    use crate::cdi::hooks;
    let mut done = CarriedOut {
        hooks: hooks::apply(spec, rootfs, store, &hooks::HostFacts::read())?,
        applied: None,
    };
    match decision {
        Decision::Planned { plan, .. } => {
            done.applied = Some(crate::apply::apply(spec, plan, rootfs, store, on_phase)?);
        }
        Decision::CdiEdits { request } | Decision::Nothing { request } => {
            crate::apply::drop_prestart_hooks(spec, &request.docker_hooks);
        }
    }
    Ok(done)
}
