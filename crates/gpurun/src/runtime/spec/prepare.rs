//! Turning a user's bundle into the spec libcontainer runs.
//!
//! libcontainer always reads `<bundle>/config.json`, so gpurun writes its
//! edited spec into a directory of its own, `<root>/<id>@creating`. Making
//! that directory is also the lock that lets exactly one of two concurrent
//! creates of an id go on. The user's bundle is never written to.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};

use gpurun_gpu::apply::{self, Phase};
use gpurun_gpu::request::slurm::StepCgroup;
use gpurun_gpu::{flow, request};

use crate::runtime::context::Settings;
use crate::runtime::logging::Step;
use crate::runtime::{cgroups, logging, spec::driver_paths, state::containers};

/// A config.json larger than this is refused before it is parsed.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// What a file that is not a regular file is, in words.
fn not_regular(t: fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else {
        None
    }
}

/// `<bundle>/config.json`, opened only as a regular file and without
/// blocking: a FIFO there would hang the engine's call for ever (runc
/// 1.1.5 hangs), a device could act on its open. As the init reads the
/// image's /etc/passwd (libcontainer's `get_user_home`): looked at through
/// an `O_PATH` descriptor, then that very inode reopened for reading.
fn open_config(bundle: &Path) -> Result<fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = bundle.join("config.json");
    let handle = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(&path)
    {
        Ok(handle) => handle,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !bundle.is_dir() => bail!(
            "the bundle directory {} does not exist: make it and write its config with \"gpurun spec --bundle {}\"",
            bundle.display(),
            bundle.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "no config.json in bundle {}: create one with \"gpurun spec\"",
            bundle.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("open {}", path.display())),
    };
    let meta = handle
        .metadata()
        .with_context(|| format!("look at {}", path.display()))?;
    if let Some(kind) = not_regular(meta.file_type()) {
        bail!(
            "{} is {kind}, not a file: the bundle's config must be a regular file (write one with \"gpurun spec\")",
            path.display()
        );
    }
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .with_context(|| format!("open {}", path.display()))
}

/// Reads and checks `<bundle>/config.json`.
pub fn load_spec(bundle: &Path) -> Result<Spec> {
    let path = bundle.join("config.json");
    let file = open_config(bundle)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("read {}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!(
            "{} is larger than {} MiB: that is no OCI runtime config",
            path.display(),
            MAX_CONFIG_BYTES >> 20
        );
    }
    // oci-spec fills a missing ociVersion with its own default, so `{}`
    // would pass for a config and fail later on a missing root.
    #[derive(serde::Deserialize)]
    struct Version {
        #[serde(rename = "ociVersion")]
        oci_version: Option<serde::de::IgnoredAny>,
    }
    if let Ok(Version { oci_version: None }) = serde_json::from_slice::<Version>(&bytes) {
        bail!(
            "{}: ociVersion missing: an OCI runtime config names its version (\"ociVersion\": \"1.0.2\"); regenerate it with \"gpurun spec\"",
            path.display()
        );
    }
    let spec: Spec = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a valid OCI runtime config: {e}; fix it or regenerate it with \"gpurun spec\"",
            path.display()
        )
    })?;
    if !spec.version().starts_with("1.") {
        bail!(
            "unsupported ociVersion {:?} in {}: gpurun runs OCI runtime spec 1.x configs",
            spec.version(),
            path.display()
        );
    }
    Ok(spec)
}

/// The absolute rootfs of a spec, which must be an existing directory.
pub fn rootfs_of(spec: &Spec, bundle: &Path) -> Result<PathBuf> {
    let root = spec
        .root()
        .as_ref()
        .context("config.json has no \"root\": set root.path to the container's root filesystem")?;
    let path = bundle.join(root.path());
    if !path.is_dir() {
        bail!(
            "rootfs {} does not exist: set root.path in config.json to an existing directory",
            path.display()
        );
    }
    fs::canonicalize(&path).with_context(|| format!("rootfs {}", path.display()))
}

/// What a create needs beyond the bundle.
pub struct CreateOptions<'a> {
    pub root: &'a Path,
    pub id: &'a str,
    pub bundle: &'a Path,
    pub settings: &'a Settings,
    /// The invoker's own GPU request (`run --gpus`), if any.
    pub invoker_gpus: Option<&'a flow::InvokerGpus>,
    /// A spec made on the fly (`run --rootfs`) instead of `<bundle>/config.json`.
    pub spec: Option<Spec>,
    /// Inside a Slurm job, a container that asks for no GPU gets the job's
    /// (`run --rootfs` without --gpus).
    pub slurm_gpus_by_default: bool,
}

/// gpurun's working copy of a bundle. Dropping it removes the copy, which is
/// no longer needed once libcontainer has saved its own state.
pub struct PreparedBundle {
    pub user_bundle: PathBuf,
    pub spec: Spec,
    /// The `@creating` directory, its creator lock held by this create
    /// and inherited by every process it forks, so a `delete --force`
    /// after a killed create can wait for them all. Dropping it removes
    /// the copy.
    claim: containers::ClaimedDir,
    /// The config has no `process`: the container can be created, not started.
    pub no_process: bool,
}

pub fn prepare(opts: &CreateOptions) -> Result<PreparedBundle> {
    containers::validate_id(opts.id)?;
    let user_bundle = fs::canonicalize(opts.bundle)
        .map_err(|_| anyhow::anyhow!("bundle {} does not exist", opts.bundle.display()))?;
    let mut spec = match &opts.spec {
        Some(spec) => spec.clone(),
        None => load_spec(&user_bundle)?,
    };
    let rootfs = rootfs_of(&spec, &user_bundle)?;
    if spec.linux().is_none() {
        bail!("config.json has no \"linux\" section: gpurun runs Linux containers only");
    }
    crate::runtime::spec::validate::normalize_rootfs_propagation(&mut spec);
    crate::runtime::spec::validate::normalize_device_access(&mut spec);
    crate::runtime::spec::validate::check(&spec)?;

    let mut prepared = claim(opts, user_bundle)?;
    prepared.no_process = give_a_stand_in_process(&mut spec);
    check_process(&spec, &rootfs)?;
    bind_sources_from_the_bundle(&mut spec, &prepared.user_bundle);
    resolve_mount_destinations(&mut spec, &rootfs)?;
    if let Some(root) = spec.root_mut().as_mut() {
        root.set_path(rootfs);
    }
    let slurm_step = slurm_step_we_run_in();
    apply_cgroup_path(&mut spec, opts, slurm_step.as_ref())?;
    let rootfs = spec
        .root()
        .as_ref()
        .map(|r| r.path().clone())
        .unwrap_or_default();
    apply_gpu(&mut spec, opts, &rootfs, slurm_step.as_ref())?;
    apply_rootless(&mut spec)?;
    check_devices_can_be_opened(&spec)?;
    write_config(prepared.dir(), &spec, opts.root)?;
    prepared.spec = spec;
    Ok(prepared)
}

/// Takes the id: makes its creating dir, the lock that lets exactly one
/// create of this id past, and holds the creator lock in it.
fn claim(opts: &CreateOptions, user_bundle: PathBuf) -> Result<PreparedBundle> {
    let Some(claim) = containers::claim_creating_dir(opts.root, opts.id)? else {
        bail!(
            "container {:?} is being created by another gpurun; if that one died, run \"gpurun delete --force {}\"",
            opts.id,
            opts.id
        );
    };
    let prepared = PreparedBundle {
        claim,
        no_process: false,
        user_bundle,
        spec: Spec::default(),
    };
    if containers::exists(opts.root, opts.id) || containers::state_dir(opts.root, opts.id).exists()
    {
        bail!(
            "container {:?} already exists: pick another id, or remove it with \"gpurun delete {}\"",
            opts.id,
            opts.id
        );
    }
    Ok(prepared)
}

impl PreparedBundle {
    /// The working copy's directory, the id's `@creating`.
    pub fn dir(&self) -> &Path {
        &self.claim.path
    }
}

/// A config with no `process` is created with a stand-in that `start`
/// refuses (see executor::NO_PROCESS_MARKER). True if it was given one.
fn give_a_stand_in_process(spec: &mut Spec) -> bool {
    if spec.process().is_some() {
        return false;
    }
    let mut stand_in = libcontainer::oci_spec::runtime::Process::default();
    stand_in.set_args(Some(vec!["gpurun-no-process".into()]));
    stand_in.set_env(Some(vec![
        crate::runtime::launch::executor::NO_PROCESS_MARKER.into(),
    ]));
    stand_in.set_terminal(Some(false));
    spec.set_process(Some(stand_in));
    true
}

/// The process's cwd and CPU affinity, checked before anything is made.
fn check_process(spec: &Spec, rootfs: &Path) -> Result<()> {
    check_process_cwd(spec, rootfs)?;
    if let Some(affinity) = spec
        .process()
        .as_ref()
        .and_then(|p| p.exec_cpu_affinity().as_ref())
    {
        check_cpu_affinity("initial", affinity.initial().as_deref())?;
        check_cpu_affinity("final", affinity.cpu_affinity_final().as_deref())?;
    }
    Ok(())
}

/// Under `srun --container` slurmstepd starts the runtime in the step's
/// cgroup with slurmd's environment, not the step's.
pub fn slurm_step_we_run_in() -> Option<StepCgroup> {
    if std::env::var_os("SLURM_JOB_ID").is_some() {
        return None;
    }
    fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| StepCgroup::parse(&text))
}

/// Written whole and checked: a write that fails (a full state root)
/// must say so, not leave an empty file for the create to misread.
fn write_config(dir: &Path, spec: &Spec, state_root: &Path) -> Result<()> {
    let config = dir.join("config.json");
    let text = serde_json::to_vec(spec).context("serialize the container's config")?;
    fs::write(&config, text).map_err(|e| {
        let err = anyhow::Error::from(e).context(format!("write {}", config.display()));
        state_root_full(err, state_root)
    })
}

/// The GPU flow: request → inventory → plan → apply, as spec edits that
/// libcontainer carries out in the container's init. Runs before anything
/// is cloned, so a bad request fails with nothing to clean up. What the
/// container gets is `flow::decide`'s, as `gpu plan` prints it; this
/// carries it out, with the logging.
fn apply_gpu(
    spec: &mut Spec,
    opts: &CreateOptions,
    rootfs: &Path,
    slurm_step: Option<&StepCgroup>,
) -> Result<()> {
    logging::start_steps();
    let store = opts.root.join(flow::CACHE_DIR);
    let around = flow::Surroundings {
        invoker: opts.invoker_gpus,
        slurm_gpus_by_default: opts.slurm_gpus_by_default,
        slurm_step,
        rootfs,
        cache_dir: Some(&store),
    };
    let decision = flow::decide(
        spec,
        || driver_paths::resolve(opts.settings),
        driver_paths::request_policy,
        &around,
    )?;
    let req = decision.request();
    for ignored in &req.ignored {
        tracing::warn!("{ignored}");
    }
    log_cdi_devices(req);
    match &decision {
        flow::Decision::Planned { plan, .. } => log_plan(plan),
        flow::Decision::CdiEdits { request } if request.wants_gpu() => {
            for source in &request.sources {
                tracing::warn!(
                    "ignoring the GPU request from {source}: NVIDIA's CDI edits are applied, and they say what this container gets"
                );
            }
        }
        _ => {}
    }
    let done = flow::carry_out(spec, &decision, rootfs, &store, &mut log_phase)?;
    if let Some(hooks) = &done.hooks {
        tracing::debug!(
            target: "gpurun::steps",
            "{} NVIDIA CDI hooks done natively (no hook process): {}",
            Step::GpuRequest.number(),
            hooks.plan.done.join("; ")
        );
        for skipped in &hooks.plan.skipped {
            tracing::warn!("{skipped}");
        }
    }
    if let Some(problem) = done
        .applied
        .as_ref()
        .and_then(|a| a.image_ldcache_problem.as_ref())
    {
        tracing::debug!("the image's own ld.so.cache was not used: {problem}");
    }
    if done.hooks.is_some() || done.applied.is_some() {
        let_a_user_namespace_reach_the_store(spec, opts.root)?;
    }
    Ok(())
}

/// CDI devices a spec on this host defines (containerd 1.6 and the device
/// plugin pass them as annotations), whose edits `decide` applied as the
/// engines that resolve CDI themselves would have.
fn log_cdi_devices(req: &request::Request) {
    if req.cdi_devices.is_empty() {
        return;
    }
    let shown: Vec<String> = req
        .cdi_devices
        .iter()
        .map(|d| format!("{} ({})", d.name, d.spec))
        .collect();
    tracing::debug!(
        target: "gpurun::steps",
        "{} CDI devices resolved from specs and their edits applied: {}",
        Step::GpuRequest.number(),
        shown.join(", ")
    );
}

/// The resolved request, as the lifecycle's GPU step says it.
fn log_plan(plan: &gpurun_gpu::plan::Plan) {
    let gpus: Vec<String> = plan
        .gpus
        .iter()
        .map(|g| format!("{} {}", g.index, g.uuid))
        .collect();
    let caps: Vec<&str> = plan.capabilities.iter().map(|c| c.name()).collect();
    tracing::debug!(
        target: "gpurun::steps",
        "{} GPU request resolved: GPUs [{}], capabilities {}, driver {}",
        Step::GpuRequest.number(),
        gpus.join(", "),
        caps.join(","),
        plan.driver_version
    );
}

/// Each phase of the plan's apply, as its numbered lifecycle step.
fn log_phase(phase: Phase, a: &apply::Applied) {
    let (step, what) = match phase {
        Phase::DeviceNodes => (
            Step::DeviceNodes,
            format!(
                "device nodes added: {} as {}{}",
                a.device_nodes,
                a.device_mode,
                groups_given(&a.device_groups)
            ),
        ),
        Phase::CgroupRules => (
            Step::CgroupRules,
            format!("cgroup rules set: {} allow rules", a.cgroup_rules),
        ),
        Phase::DriverFiles => (
            Step::DriverFiles,
            format!("driver files mounted: {} read-only binds", a.file_mounts),
        ),
        Phase::LinkerCache => (
            Step::LinkerCache,
            format!("linker cache written: {} entries added", a.ldcache_entries),
        ),
    };
    tracing::debug!(target: "gpurun::steps", "{} {what}", step.number());
}

/// ", groups 44,109 given" for the device-node step, or nothing.
fn groups_given(gids: &[u32]) -> String {
    if gids.is_empty() {
        return String::new();
    }
    let list: Vec<String> = gids.iter().map(u32::to_string).collect();
    format!(", groups {} given", list.join(","))
}

/// `process.execCPUAffinity.{field}`, checked before anything is cloned,
/// so a bad list fails the create cleanly rather than in its init.
pub fn check_cpu_affinity(field: &str, cpus: Option<&str>) -> Result<()> {
    let Some(cpus) = cpus else {
        return Ok(());
    };
    libcontainer::process::cpu_affinity::to_cpuset(cpus)
        .map(|_| ())
        .map_err(|e| {
            anyhow::anyhow!(
                "process.execCPUAffinity.{field} {cpus:?}: {e}; give a CPU list such as \"0-3,6\""
            )
        })
}

/// Called once the GPU edits put files in the shared store. A container
/// in a user namespace started by root reaches the store's files (mount-point layers, linker caches, driver copies: none
/// secret) as its own root, a host uid the state root (0700) does not let
/// through. The root is then made traversable, not readable (0711, as runc
/// makes its container directories); each container's directory stays
/// 0700, since its config holds the process's environment.
fn let_a_user_namespace_reach_the_store(spec: &Spec, root: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !apply::has_user_namespace(spec) || !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let meta = fs::metadata(root).with_context(|| format!("state directory {}", root.display()))?;
    if meta.uid() != 0 || meta.mode() & 0o011 == 0o011 {
        return Ok(());
    }
    fs::set_permissions(
        root,
        fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o011),
    )
    .with_context(|| {
        format!(
            "let the container's user namespace through {}",
            root.display()
        )
    })
}

/// A working directory under /proc reaches file descriptors and roots of
/// other processes (the CVE-2024-21626 pattern), also through a symlink in
/// the image: no container needs one.
fn check_process_cwd(spec: &Spec, rootfs: &Path) -> Result<()> {
    let Some(cwd) = spec.process().as_ref().map(|p| p.cwd().clone()) else {
        return Ok(());
    };
    let root = safe_fs::Rootfs::open(rootfs)
        .with_context(|| format!("open rootfs {}", rootfs.display()))?;
    let resolved = root.resolve(&cwd).map(|(path, _)| path).map_err(|e| {
        anyhow::anyhow!(
            "process.cwd {}: {e}; set process.cwd to a directory of the image",
            cwd.display()
        )
    })?;
    if resolved.starts_with("/proc") {
        bail!(
            "process.cwd {} is under /proc ({}), which would reach outside the container: set process.cwd to a directory of the image",
            cwd.display(),
            resolved.display()
        );
    }
    Ok(())
}

/// A relative bind source is relative to the bundle, as the runtime spec
/// says (and runc does), never to whatever directory gpurun was started in.
fn bind_sources_from_the_bundle(spec: &mut Spec, bundle: &Path) {
    let Some(mounts) = spec.mounts_mut().as_mut() else {
        return;
    };
    for mount in mounts.iter_mut() {
        let is_bind = mount.typ().as_deref() == Some("bind")
            || mount
                .options()
                .iter()
                .flatten()
                .any(|o| o == "bind" || o == "rbind");
        match mount.source() {
            Some(source) if is_bind && source.is_relative() => {
                let absolute = bundle.join(source);
                mount.set_source(Some(absolute));
            }
            _ => {}
        }
    }
}

/// Mount destinations are resolved inside the rootfs here, as runc's
/// securejoin does: a symlink in the image (even a dangling one, such as
/// /etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf) is followed
/// with `..` and absolute targets stopping at the rootfs, and the mount
/// goes to the symlink-free result. libcontainer then creates what is
/// missing without following anything. procfs, sysfs and /dev must not be
/// symlinks at all: a hostile image would move them under its control.
fn resolve_mount_destinations(spec: &mut Spec, rootfs: &Path) -> Result<()> {
    let root = safe_fs::Rootfs::open(rootfs)
        .with_context(|| format!("open rootfs {}", rootfs.display()))?;
    let Some(mounts) = spec.mounts_mut().as_mut() else {
        return Ok(());
    };
    for mount in mounts.iter_mut() {
        let dest = mount.destination().clone();
        // runc's words, which test suites match: procfs and sysfs only on a
        // directory of the image's own, never through a symlink or on a file.
        if let Some(fs) = mount
            .typ()
            .as_deref()
            .filter(|t| matches!(*t, "proc" | "sysfs"))
        {
            match root.file_type(&dest) {
                Ok(t) if !t.is_dir() => bail!(
                    "filesystem {fs:?} must be mounted on ordinary directory: {} in the image is {}; make it a directory in the image",
                    dest.display(),
                    if t.is_symlink() { "a symlink" } else { "not a directory" }
                ),
                _ => {}
            }
        }
        let (resolved, followed) = root.resolve(&dest).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => anyhow::anyhow!(
                "mount destination {}: a symlink loop in the image; fix the image, or mount elsewhere",
                dest.display()
            ),
            _ => anyhow::Error::new(e).context(format!("mount destination {}", dest.display())),
        })?;
        if !followed {
            continue;
        }
        let special = matches!(mount.typ().as_deref(), Some("proc" | "sysfs"))
            || ["/proc", "/sys", "/dev"]
                .iter()
                .any(|p| dest.starts_with(p));
        if special {
            bail!(
                "mount destination {} goes through a symlink in the image ({} on the way): /proc, /sys and /dev must be directories; fix the image",
                dest.display(),
                resolved.display()
            );
        }
        tracing::debug!(
            "mount destination {} resolved to {}",
            dest.display(),
            resolved.display()
        );
        mount.set_destination(resolved);
    }
    Ok(())
}

/// Inside a Slurm step (root, cgroupfs), a container with no cgroup of
/// its own goes below the step's, so the job's limits and device
/// constraint hold for it; an explicit `cgroupsPath` is the caller's
/// choice, as under runc.
fn apply_cgroup_path(
    spec: &mut Spec,
    opts: &CreateOptions,
    slurm_step: Option<&StepCgroup>,
) -> Result<()> {
    let linux = spec.linux_mut().as_mut().expect("checked above");
    let given = linux
        .cgroups_path()
        .clone()
        .filter(|p| !p.as_os_str().is_empty());
    let in_step = slurm_step
        .filter(|_| {
            !opts.settings.systemd_cgroup && crate::runtime::protect::privilege::is_host_root()
        })
        .map(|step| PathBuf::from(step.container_cgroup(opts.id)));
    let path = cgroups::path::choose(
        given.or(in_step).as_deref(),
        opts.id,
        opts.settings.systemd_cgroup,
    )?;
    linux.set_cgroups_path(Some(path));
    Ok(())
}

/// Without host root, a container's device nodes are the host's, bound in:
/// one its user cannot open would start a container whose device fails on
/// every open. Say so, naming the device, before anything is made.
fn check_devices_can_be_opened(spec: &Spec) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    if crate::runtime::protect::privilege::is_host_root() {
        return Ok(());
    }
    let mut nodes: Vec<PathBuf> = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .map(|d| d.iter().map(|d| d.path().clone()).collect())
        .unwrap_or_default();
    nodes.extend(
        spec.mounts()
            .iter()
            .flatten()
            .filter_map(|m| m.source().clone())
            .filter(|s| {
                fs::metadata(s).is_ok_and(|m| {
                    m.file_type().is_char_device() || m.file_type().is_block_device()
                })
            }),
    );
    for node in nodes {
        let flags = nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK;
        if let Err(e) = nix::unistd::access(&node, flags) {
            bail!(
                "device {}: uid {} cannot open it ({e}): ask the administrator to make it accessible (mode 0666 or a group of yours), or leave it out of the container",
                node.display(),
                nix::unistd::getuid()
            );
        }
    }
    Ok(())
}

/// A non-root user gets a user namespace or a clear error, and, without
/// cgroup delegation, a container without cgroup limits (as runc does) and
/// a warning that says so.
fn apply_rootless(spec: &mut Spec) -> Result<()> {
    if crate::runtime::protect::privilege::is_host_root() {
        return Ok(());
    }
    let linux = spec.linux_mut().as_mut().expect("checked above");
    let has_userns = linux
        .namespaces()
        .as_ref()
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == LinuxNamespaceType::User));
    // Root in a user namespace (rootless Podman) is namespaced already.
    if !has_userns && !nix::unistd::geteuid().is_root() {
        bail!(
            "running as uid {} needs a user namespace in config.json: make one with \"gpurun spec --rootless\"",
            nix::unistd::geteuid()
        );
    }
    let cgroup = linux.cgroups_path().clone().unwrap_or_default();
    if cgroups::host::writable_for_current_user(&cgroup) {
        return Ok(());
    }
    if let Some(resources) = linux.resources() {
        let asked: Vec<&str> = [
            ("memory", resources.memory().is_some()),
            ("cpu", resources.cpu().is_some()),
            ("pids", resources.pids().is_some()),
            ("blockIO", resources.block_io().is_some()),
            ("hugepageLimits", resources.hugepage_limits().is_some()),
            ("network", resources.network().is_some()),
            ("rdma", resources.rdma().is_some()),
            ("unified", resources.unified().is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        if !asked.is_empty() {
            tracing::warn!(
                "rootless: cgroup limits ({}) are not applied: this host gives uid {} no cgroup delegation",
                asked.join(", "),
                nix::unistd::geteuid()
            );
        }
    }
    linux.set_resources(None);
    Ok(())
}

/// `err`, and where a cause is a full disk or quota, the fix: the state
/// root is full. One line, as every error.
pub fn state_root_full(err: anyhow::Error, root: &Path) -> anyhow::Error {
    let full = err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .is_some_and(|errno| errno == libc::ENOSPC || errno == libc::EDQUOT)
            // libcontainer's errors carry theirs in their text only.
            || cause.to_string().contains(&format!("(os error {})", libc::ENOSPC))
    });
    if !full {
        return err;
    }
    anyhow::anyhow!(
        "{}: the state root {} is full; free space there or give another --root",
        crate::runtime::context::one_line(&err),
        root.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::symlink;

    /// A scratch directory of this test's own, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("prepare-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn spec_with_mounts(mounts: serde_json::Value) -> Spec {
        serde_json::from_value(json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "process": {"args": ["true"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "mounts": mounts
        }))
        .unwrap()
    }

    fn error_of(result: Result<impl std::fmt::Debug>) -> String {
        format!("{:#}", result.unwrap_err())
    }

    #[test]
    fn a_config_that_is_no_regular_file_or_names_no_1x_version_is_refused() {
        let bundle = Scratch::new("config");
        let err = error_of(load_spec(&bundle.0.join("missing")));
        assert!(
            err.contains("bundle directory") && err.contains("does not exist"),
            "{err}"
        );
        let err = error_of(load_spec(&bundle.0));
        assert!(err.contains("no config.json"), "{err}");
        // A FIFO is refused without being opened for reading (which would
        // block until a writer came).
        let config = bundle.0.join("config.json");
        nix::unistd::mkfifo(&config, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = error_of(load_spec(&bundle.0));
        assert!(err.contains("is a FIFO, not a file"), "{err}");
        fs::remove_file(&config).unwrap();
        for (text, want) in [
            (r#"{}"#, "ociVersion missing"),
            (
                r#"{"ociVersion": "2.0.0"}"#,
                "unsupported ociVersion \"2.0.0\"",
            ),
            (r#"{"ociVersion": 7}"#, "not a valid OCI runtime config"),
        ] {
            fs::write(&config, text).unwrap();
            let err = error_of(load_spec(&bundle.0));
            assert!(err.contains(want), "{text}: {err}");
        }
        fs::write(
            &config,
            r#"{"ociVersion": "1.0.2", "root": {"path": "rootfs"}}"#,
        )
        .unwrap();
        assert_eq!(load_spec(&bundle.0).unwrap().version(), "1.0.2");
    }

    #[test]
    fn a_relative_bind_source_is_the_bundles_and_nothing_else_changes() {
        let mut spec = spec_with_mounts(json!([
            {"destination": "/data", "type": "bind", "source": "data", "options": ["rbind"]},
            {"destination": "/opt", "source": "opt", "options": ["bind", "ro"]},
            {"destination": "/abs", "type": "bind", "source": "/srv/abs"},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}
        ]));
        bind_sources_from_the_bundle(&mut spec, Path::new("/bundles/b"));
        let sources: Vec<PathBuf> = spec
            .mounts()
            .iter()
            .flatten()
            .map(|m| m.source().clone().unwrap())
            .collect();
        assert_eq!(
            sources,
            ["/bundles/b/data", "/bundles/b/opt", "/srv/abs", "tmpfs"].map(PathBuf::from)
        );
    }

    #[test]
    fn mount_destinations_follow_the_images_links_inside_it_but_never_for_proc() {
        let bundle = Scratch::new("dest");
        let rootfs = bundle.0.join("rootfs");
        fs::create_dir_all(rootfs.join("etc")).unwrap();
        fs::create_dir_all(rootfs.join("proc")).unwrap();
        // A dangling relative link (systemd-resolved's) and one climbing
        // out with an absolute target: both stay in the rootfs.
        symlink("../run/resolve/stub.conf", rootfs.join("etc/resolv.conf")).unwrap();
        symlink("/../../../../srv", rootfs.join("data")).unwrap();
        let mut spec = spec_with_mounts(json!([
            {"destination": "/etc/resolv.conf", "type": "bind", "source": "/etc/resolv.conf"},
            {"destination": "/data", "type": "bind", "source": "/srv"},
            {"destination": "/proc", "type": "proc", "source": "proc"}
        ]));
        resolve_mount_destinations(&mut spec, &rootfs).unwrap();
        let destinations: Vec<PathBuf> = spec
            .mounts()
            .iter()
            .flatten()
            .map(|m| m.destination().clone())
            .collect();
        assert_eq!(
            destinations,
            ["/run/resolve/stub.conf", "/srv", "/proc"].map(PathBuf::from)
        );

        fs::remove_dir(rootfs.join("proc")).unwrap();
        symlink("/etc", rootfs.join("proc")).unwrap();
        let mut spec = spec_with_mounts(json!([
            {"destination": "/proc", "type": "proc", "source": "proc"}
        ]));
        let err = error_of(resolve_mount_destinations(&mut spec, &rootfs));
        assert!(
            err.contains("must be mounted on ordinary directory"),
            "{err}"
        );
        let mut spec = spec_with_mounts(json!([
            {"destination": "/proc/driver", "type": "bind", "source": "/srv"}
        ]));
        let err = error_of(resolve_mount_destinations(&mut spec, &rootfs));
        assert!(err.contains("goes through a symlink in the image"), "{err}");
    }

    #[test]
    fn a_working_directory_that_leads_into_proc_is_refused() {
        let bundle = Scratch::new("cwd");
        let rootfs = bundle.0.join("rootfs");
        fs::create_dir_all(rootfs.join("work")).unwrap();
        symlink("/proc/self/fd", rootfs.join("escape")).unwrap();
        let mut spec = spec_with_mounts(json!([]));
        for (cwd, refused) in [("/work", false), ("/escape", true)] {
            spec.process_mut().as_mut().unwrap().set_cwd(cwd.into());
            let result = check_process_cwd(&spec, &rootfs);
            assert_eq!(result.is_err(), refused, "{cwd}: {result:?}");
            if refused {
                assert!(error_of(result).contains("under /proc"), "{cwd}");
            }
        }
    }

    #[test]
    fn a_config_without_a_process_gets_the_stand_in_that_start_refuses() {
        let mut spec = spec_with_mounts(json!([]));
        assert!(!give_a_stand_in_process(&mut spec));
        spec.set_process(None);
        assert!(give_a_stand_in_process(&mut spec));
        let process = spec.process().as_ref().unwrap();
        assert_eq!(
            process.env().as_deref(),
            Some(&[crate::runtime::launch::executor::NO_PROCESS_MARKER.to_owned()][..])
        );
    }

    #[test]
    fn a_full_state_root_is_named_with_its_fix_and_other_errors_pass_as_they_are() {
        let full = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ENOSPC))
            .context("write /run/gpurun/x@creating/config.json");
        let err = state_root_full(full, Path::new("/run/gpurun")).to_string();
        assert!(err.contains("the state root /run/gpurun is full"), "{err}");
        let other = anyhow::anyhow!("something else");
        assert_eq!(
            state_root_full(other, Path::new("/run/gpurun")).to_string(),
            "something else"
        );
        assert_eq!(groups_given(&[]), "");
        assert_eq!(groups_given(&[44, 109]), ", groups 44,109 given");
    }
}
