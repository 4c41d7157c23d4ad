//! Request: what a container asks for, read from its OCI spec with the
//! NVIDIA Container Toolkit's semantics.

pub mod cdi_registry;
pub mod slurm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;
use oci_spec::runtime::Spec;
use serde::Serialize;

use crate::formats::devlist::{self, DeviceRef, DeviceSelection};
use crate::formats::require::{self, Requirement};
use crate::inventory::caps::{self, Capability};
use crate::inventory::gated::{self, Gated, ImexChannels};
use crate::request::cdi_registry::{Registry, Resolved};
pub use crate::roots::{CudaCompatMode, RequestPolicy};

/// Docker's `--gpus` adds a prestart hook with this name; gpurun drops it
/// and does the work itself.
pub const DOCKER_HOOK: &str = "nvidia-container-runtime-hook";
/// Volume-mount requests: `/dev/null` bound at `<this>/<device>`.
pub const VOLUME_REQUEST_DIR: &str = "/var/run/nvidia-container-devices";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub devices: DeviceSelection,
    pub capabilities: BTreeSet<Capability>,
    pub requirements: Vec<Requirement>,
    pub require_disabled: bool,
    pub mig_config: Option<DeviceSelection>,
    pub mig_monitor: Option<DeviceSelection>,
    /// Indexes into `hooks.prestart` of Docker's toolkit hook.
    pub docker_hooks: Vec<usize>,
    /// Where the device request came from: env, volume-mounts or
    /// annotations (one of them: the first that asks wins).
    pub sources: Vec<String>,
    /// `CAP_SYS_ADMIN` in the bounding set, as the toolkit judges it.
    pub privileged: bool,
    /// Requests passed over, and why.
    pub ignored: Vec<Ignored>,
    /// IMEX channels: `NVIDIA_IMEX_CHANNELS`, `imex/<id>` volume mounts,
    /// `nvidia.com/imex-channel=N` CDI names.
    pub imex_channels: Option<ImexChannels>,
    /// GDS, MOFED, GDRCopy, NVSwitch: only with a GPU request.
    pub gated: BTreeSet<Gated>,
    /// `cuda-compat-mode = "disabled"`: the image's CUDA compat library is
    /// never used.
    pub cuda_compat_disabled: bool,
    /// `device-node-groups = false`: no node's group is given to the
    /// process.
    pub device_groups_disabled: bool,
    /// A node shared by tenants (`accept-nvidia-visible-devices-envvar-when-unprivileged
    /// = false`): what is the whole node's is withheld from an
    /// unprivileged container.
    pub shared_node: bool,
    /// `management.nvidia.com/gpu=all`: every GPU and every NVIDIA node
    /// (the GPU Operator's own pods: DCGM, feature discovery, MIG manager).
    pub management: bool,
    /// CDI devices a spec in the spec directories defines: their edits
    /// are applied as the spec writes them, and they are not in `devices`.
    pub cdi_devices: Vec<Resolved>,
}

/// A device request that did not count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ignored {
    pub source: String,
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ignoring {} {:?}: {}",
            self.source, self.value, self.reason
        )
    }
}

impl Request {
    /// Whether the container gets anything from gpurun at all.
    pub fn wants_gpu(&self) -> bool {
        self.devices != DeviceSelection::Void || self.imex_channels.is_some()
    }
}

/// The container's environment as a map; a later entry wins.
pub fn environment(spec: &Spec) -> BTreeMap<String, String> {
    spec.process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .map(|env| {
            env.iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The toolkit's test for `--privileged`: `CAP_SYS_ADMIN` in the bounding
/// set (an unprivileged user may still be given the privileged NVIDIA
/// capabilities this way).
pub fn is_privileged(spec: &Spec) -> bool {
    spec.process()
        .as_ref()
        .and_then(|p| p.capabilities().as_ref())
        .and_then(|c| c.bounding().as_ref())
        .is_some_and(|b| b.contains(&oci_spec::runtime::Capability::SysAdmin))
}

/// The request of a container whose environment is `env` (`KEY=VALUE`),
/// as the host's administrator wrote it (the LXC hook, doctor): the env
/// counts as from a privileged container.
pub fn from_env(env: &[&str]) -> Result<Request> {
    let mut spec = Spec::default();
    if let Some(process) = spec.process_mut() {
        process.set_env(Some(env.iter().map(|e| e.to_string()).collect()));
    }
    read(&spec, true, || Ok(RequestPolicy::default()))
}

/// The device names in volume mounts of `/dev/null` under
/// `/var/run/nvidia-container-devices/`, as the device plugin's
/// `volume-mounts` strategy makes them: `<device>` and
/// `cdi/<vendor>/<class>/<device>` (as `vendor/class=device`).
fn volume_devices(spec: &Spec) -> (Vec<String>, Vec<String>) {
    let mut out: Vec<String> = Vec::new();
    let mut imex: Vec<String> = Vec::new();
    for m in spec.mounts().iter().flatten() {
        if m.source().as_deref() != Some(Path::new("/dev/null")) {
            continue;
        }
        let Ok(rest) = m.destination().strip_prefix(VOLUME_REQUEST_DIR) else {
            continue;
        };
        let rest = rest.to_string_lossy();
        if let Some(id) = rest.strip_prefix("imex/") {
            imex.push(id.to_owned());
            continue;
        }
        let name = match rest
            .strip_prefix("cdi/")
            .map(|r| r.splitn(3, '/').collect::<Vec<_>>())
        {
            Some(parts) if parts.len() == 3 => format!("{}/{}={}", parts[0], parts[1], parts[2]),
            _ => rest.into_owned(),
        };
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    (out, imex)
}

/// Whether the spec names CDI devices (`vendor.com/class=name`) in its
/// annotations, in NVIDIA_VISIBLE_DEVICES or as a volume-mount request,
/// for the spec directories to resolve.
pub fn names_cdi_devices(spec: &Spec) -> bool {
    spec.annotations()
        .iter()
        .flatten()
        .any(|(_, v)| names_a_cdi_device(v))
        || environment(spec)
            .get("NVIDIA_VISIBLE_DEVICES")
            .is_some_and(|v| names_a_cdi_device(v))
        || spec.mounts().iter().flatten().any(|m| {
            m.destination()
                .starts_with(Path::new(VOLUME_REQUEST_DIR).join("cdi"))
        })
}

/// Whether a comma list (an annotation's value, NVIDIA_VISIBLE_DEVICES)
/// names a CDI device, `vendor.com/class=name`.
pub fn names_a_cdi_device(value: &str) -> bool {
    value.split(',').any(|item| {
        item.trim()
            .split_once('=')
            .is_some_and(|(kind, _)| kind.contains('/'))
    })
}

/// The request of `spec`. `policy` is read only when the spec asks for
/// something, so a plain container reads no config file.
pub fn from_spec(spec: &Spec, policy: impl FnOnce() -> Result<RequestPolicy>) -> Result<Request> {
    read(spec, is_privileged(spec), policy)
}

/// The request, as the algorithm reads: what the spec holds that can ask;
/// the policy (read only then); which source wins; the CDI names a spec
/// defines; IMEX channels and gated devices taken out of the GPU list and
/// added from env or mounts; Docker's hook; capabilities, requirements
/// and MIG control.
fn read(
    spec: &Spec,
    privileged: bool,
    policy: impl FnOnce() -> Result<RequestPolicy>,
) -> Result<Request> {
    let asked = Asked::of(spec)?;
    let policy = if asked.anything() {
        policy()?
    } else {
        RequestPolicy::default()
    };
    let mut verdicts = Verdicts::default();
    let devices = winning_devices(&asked, &policy, privileged, &mut verdicts)?;
    let cdi_devices = resolve_cdi(&devices, &policy.spec_dirs)?;
    let (devices, mut imex, mut gated) = split_cdi_kinds(devices, &cdi_devices)?;
    let (devices, management) = take_management(devices, &policy, privileged)?;
    let gpu_request = devices != DeviceSelection::Void;
    let env_counts = privileged || policy.accept_envvar_unprivileged;
    add_imex(
        &mut imex,
        &asked,
        &policy,
        gpu_request,
        env_counts,
        &mut verdicts,
    )?;
    add_gated_env(&mut gated, &asked.env, gpu_request, &mut verdicts);
    let env = &asked.env;
    let mut capabilities = caps::parse(env.get("NVIDIA_DRIVER_CAPABILITIES").map(String::as_str))?;
    if management {
        // The management libraries: NVML and the rest of utility, and
        // compute's (the toolkit's management spec mounts the driver's).
        capabilities.extend([Capability::Utility, Capability::Compute]);
    }
    let (require_disabled, requirements) = requirements(env)?;
    let mig = |var| mig_request(env, var, gpu_request && !privileged);
    Ok(Request {
        mig_config: mig("NVIDIA_MIG_CONFIG_DEVICES")?,
        mig_monitor: mig("NVIDIA_MIG_MONITOR_DEVICES")?,
        devices,
        capabilities,
        requirements,
        require_disabled,
        docker_hooks: docker_hook_indexes(spec),
        sources: verdicts.sources,
        privileged,
        ignored: verdicts.ignored,
        imex_channels: imex,
        gated,
        cuda_compat_disabled: policy.cuda_compat_mode == CudaCompatMode::Disabled,
        device_groups_disabled: !policy.device_node_groups,
        management,
        shared_node: !policy.accept_envvar_unprivileged,
        cdi_devices,
    })
}

const NO_VOLUME_MOUNTS: &str = "accept-nvidia-visible-devices-as-volume-mounts is false";
const UNPRIVILEGED_ENV: &str = "unprivileged container (no CAP_SYS_ADMIN) and accept-nvidia-visible-devices-envvar-when-unprivileged is false";
const IMEX_NEEDS_GPU: &str = "IMEX channels come with a GPU request only";

/// What the spec holds that can ask for devices, before any policy.
struct Asked<'a> {
    env: BTreeMap<String, String>,
    /// `NVIDIA_VISIBLE_DEVICES`, or all for a legacy CUDA image.
    env_devices: DeviceSelection,
    /// The env request as warnings and `gpu plan` show it.
    env_shown: String,
    volume: Vec<String>,
    volume_imex: Vec<String>,
    annotations: Vec<(&'a String, &'a String)>,
}

impl<'a> Asked<'a> {
    fn of(spec: &'a Spec) -> Result<Self> {
        let env = environment(spec);
        let visible = env.get("NVIDIA_VISIBLE_DEVICES").map(String::as_str);
        // Legacy CUDA images: CUDA_VERSION without NVIDIA_REQUIRE_CUDA means all.
        let legacy = visible.is_none()
            && env.contains_key("CUDA_VERSION")
            && !env.contains_key("NVIDIA_REQUIRE_CUDA");
        let env_devices = if legacy {
            DeviceSelection::All
        } else if visible.is_some_and(|v| Path::new(v.trim()) == Path::new(VOLUME_REQUEST_DIR)) {
            // The device plugin's volume-mounts strategy points the variable
            // at the mounts: the list is there, not here.
            DeviceSelection::Void
        } else {
            devlist::parse(visible)?
        };
        let env_shown = if legacy {
            format!("CUDA_VERSION={} (legacy image: all)", env["CUDA_VERSION"])
        } else {
            format!("NVIDIA_VISIBLE_DEVICES={}", visible.unwrap_or_default())
        };
        let (volume, volume_imex) = volume_devices(spec);
        Ok(Asked {
            env,
            env_devices,
            env_shown,
            volume,
            volume_imex,
            annotations: spec.annotations().iter().flatten().collect(),
        })
    }

    /// Engines annotate every container: only one whose annotations name a
    /// CDI device may be asking.
    fn anything(&self) -> bool {
        self.env_devices != DeviceSelection::Void
            || !self.volume.is_empty()
            || !self.volume_imex.is_empty()
            || self.env.contains_key("NVIDIA_IMEX_CHANNELS")
            || self.annotations.iter().any(|(_, v)| names_a_cdi_device(v))
    }
}

/// Which sources counted, and what was passed over and why.
#[derive(Default)]
struct Verdicts {
    sources: Vec<String>,
    ignored: Vec<Ignored>,
}

impl Verdicts {
    fn pass_over(&mut self, source: &str, value: String, reason: &str) {
        self.ignored.push(Ignored {
            source: source.to_owned(),
            value,
            reason: reason.to_owned(),
        })
    }
}

/// CDI names in the annotations whose key has one of `prefixes`
/// (`<prefix><anything> = "nvidia.com/gpu=0,..."`), and those keys.
fn annotated_cdi_names<'a>(
    annotations: &[(&'a String, &String)],
    prefixes: &[String],
) -> (Vec<String>, Vec<&'a str>) {
    let mut names = Vec::new();
    let mut keys = Vec::new();
    for (key, value) in annotations {
        if prefixes
            .iter()
            .any(|p| !p.is_empty() && key.starts_with(p.as_str()))
        {
            names.extend(
                value
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty()),
            );
            keys.push(key.as_str());
        }
    }
    (names, keys)
}

/// The device request that counts: CDI annotations, else the volume
/// mounts (when accepted), else the env (privileged, or when accepted);
/// each other source that asked is passed over with its reason.
fn winning_devices(
    asked: &Asked,
    policy: &RequestPolicy,
    privileged: bool,
    verdicts: &mut Verdicts,
) -> Result<DeviceSelection> {
    let (annotated, keys) = annotated_cdi_names(&asked.annotations, &policy.annotation_prefixes);
    let env_asks = asked.env_devices != DeviceSelection::Void;
    if !annotated.is_empty() {
        let parsed = devlist::parse(Some(&annotated.join(",")))?;
        if let DeviceSelection::List(list) = &parsed {
            if let Some(bad) = list.iter().find(|d| !matches!(d, DeviceRef::Cdi { .. })) {
                anyhow::bail!(
                    "annotation {}: {bad} is not a CDI device name (vendor.com/class=name)",
                    keys.join(", ")
                );
            }
        }
        verdicts.sources.push("annotations".to_owned());
        let why = "the CDI annotations name the devices";
        if !asked.volume.is_empty() {
            verdicts.pass_over("volume-mounts", asked.volume.join(","), why);
        }
        if env_asks {
            verdicts.pass_over("env", asked.env_shown.clone(), why);
        }
        return Ok(parsed);
    }
    if !asked.volume.is_empty() && policy.accept_volume_mounts {
        verdicts.sources.push("volume-mounts".to_owned());
        if env_asks {
            let why = "the volume mounts name the devices";
            verdicts.pass_over("env", asked.env_shown.clone(), why);
        }
        return devlist::parse(Some(&asked.volume.join(",")));
    }
    if !asked.volume.is_empty() {
        verdicts.pass_over("volume-mounts", asked.volume.join(","), NO_VOLUME_MOUNTS);
    }
    if !env_asks {
        Ok(DeviceSelection::Void)
    } else if privileged || policy.accept_envvar_unprivileged {
        verdicts.sources.push("env".to_owned());
        Ok(asked.env_devices.clone())
    } else {
        verdicts.pass_over("env", asked.env_shown.clone(), UNPRIVILEGED_ENV);
        Ok(DeviceSelection::Void)
    }
}

/// The devices a spec in the spec directories defines, of the CDI names in
/// the winning list (the others are gpurun's own NVIDIA devices).
fn resolve_cdi(devices: &DeviceSelection, spec_dirs: &[PathBuf]) -> Result<Vec<Resolved>> {
    let names: Vec<String> = match devices {
        DeviceSelection::List(list) => list
            .iter()
            .filter(|d| matches!(d, DeviceRef::Cdi { .. }))
            .map(|d| d.to_string())
            .collect(),
        _ => Vec::new(),
    };
    if names.is_empty() {
        return Ok(Vec::new());
    }
    Registry::load(spec_dirs).resolve(&names)
}

/// The winning list without what is no GPU: devices a CDI spec defines,
/// and the IMEX channels and gated devices it names by CDI kind.
fn split_cdi_kinds(
    devices: DeviceSelection,
    defined: &[Resolved],
) -> Result<(DeviceSelection, Option<ImexChannels>, BTreeSet<Gated>)> {
    let list = match devices {
        DeviceSelection::List(list) => list,
        other => return Ok((other, None, BTreeSet::new())),
    };
    let mut imex: Option<ImexChannels> = None;
    let mut gated = BTreeSet::new();
    let mut rest = Vec::new();
    for d in list {
        match &d {
            _ if defined.iter().any(|r| r.name == d.to_string()) => {}
            DeviceRef::Cdi { kind, name } if kind == "nvidia.com/imex-channel" => {
                let more = if name == "all" {
                    ImexChannels::All
                } else {
                    ImexChannels::List(vec![gated::parse_imex_channel(name)?])
                };
                imex = Some(ImexChannels::union(imex.take(), more));
            }
            DeviceRef::Cdi { kind, name } => match Gated::from_cdi_kind(kind) {
                Some(g) if name == "all" => {
                    gated.insert(g);
                }
                Some(_) => {
                    anyhow::bail!("CDI device {kind}={name}: {kind} has one device, \"all\"")
                }
                None => rest.push(d),
            },
            _ => rest.push(d),
        }
    }
    let devices = if rest.is_empty() {
        DeviceSelection::Void
    } else {
        DeviceSelection::List(rest)
    };
    Ok((devices, imex, gated))
}

pub use crate::request::cdi_registry::MANAGEMENT_KIND;

/// The list without `management.nvidia.com/gpu=all`, and whether it was
/// there (then every GPU). On a shared node (the env not accepted from an
/// unprivileged container) only a privileged container may ask for it:
/// it holds every tenant's GPU and the node-wide MIG controls.
fn take_management(
    devices: DeviceSelection,
    policy: &RequestPolicy,
    privileged: bool,
) -> Result<(DeviceSelection, bool)> {
    let DeviceSelection::List(list) = devices else {
        return Ok((devices, false));
    };
    let (ours, rest): (Vec<DeviceRef>, Vec<DeviceRef>) = list
        .into_iter()
        .partition(|d| matches!(d, DeviceRef::Cdi { kind, .. } if kind == MANAGEMENT_KIND));
    if ours.is_empty() {
        return Ok((DeviceSelection::List(rest), false));
    }
    if let Some(DeviceRef::Cdi { name, .. }) = ours
        .iter()
        .find(|d| d.to_string() != format!("{MANAGEMENT_KIND}=all"))
    {
        anyhow::bail!(
            "CDI device {MANAGEMENT_KIND}={name}: {MANAGEMENT_KIND} has one device, \"all\""
        );
    }
    if !privileged && !policy.accept_envvar_unprivileged {
        anyhow::bail!(
            "CDI device {MANAGEMENT_KIND}=all: refused in an unprivileged container on a shared node (it holds every GPU and the node-wide MIG controls); run it privileged (CAP_SYS_ADMIN), or ask for nvidia.com/gpu devices"
        );
    }
    Ok((DeviceSelection::All, true))
}

/// IMEX channels by volume mount (when accepted) or env, as the toolkit's
/// hook reads them: only beside a GPU request, under the same rules as
/// NVIDIA_VISIBLE_DEVICES.
fn add_imex(
    imex: &mut Option<ImexChannels>,
    asked: &Asked,
    policy: &RequestPolicy,
    gpu_request: bool,
    env_counts: bool,
    verdicts: &mut Verdicts,
) -> Result<()> {
    let volume_imex = &asked.volume_imex;
    if !volume_imex.is_empty() && policy.accept_volume_mounts && gpu_request {
        let ids = gated::parse_imex_list(&volume_imex.join(","))?;
        *imex = Some(ImexChannels::union(imex.take(), ImexChannels::List(ids)));
        return Ok(());
    }
    if !volume_imex.is_empty() {
        let mounts = format!("imex/{}", volume_imex.join(",imex/"));
        let why = if policy.accept_volume_mounts {
            IMEX_NEEDS_GPU
        } else {
            NO_VOLUME_MOUNTS
        };
        verdicts.pass_over("volume-mounts", mounts, why);
    }
    let Some(value) = asked
        .env
        .get("NVIDIA_IMEX_CHANNELS")
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(());
    };
    let shown = format!("NVIDIA_IMEX_CHANNELS={value}");
    if value.trim() == "all" {
        verdicts.pass_over("env", shown, "a bare \"all\" is no channel list (as the toolkit reads it since 1.17.2): name the channels");
    } else if !gpu_request {
        verdicts.pass_over("env", shown, IMEX_NEEDS_GPU);
    } else if !env_counts {
        verdicts.pass_over("env", shown, UNPRIVILEGED_ENV);
    } else {
        let ids = gated::parse_imex_list(value)?;
        if !ids.is_empty() {
            *imex = Some(ImexChannels::union(imex.take(), ImexChannels::List(ids)));
        }
    }
    Ok(())
}

/// The gated devices by env: exactly "enabled", and only with a GPU.
fn add_gated_env(
    gated: &mut BTreeSet<Gated>,
    env: &BTreeMap<String, String>,
    gpu_request: bool,
    verdicts: &mut Verdicts,
) {
    for g in Gated::ALL {
        if env.get(g.env_var()).map(String::as_str) == Some("enabled") {
            gated.insert(g);
        }
    }
    if !gpu_request {
        for g in std::mem::take(gated) {
            let shown = format!("{}=enabled", g.env_var());
            verdicts.pass_over("env", shown, "gated devices come with a GPU request only");
        }
    }
}

/// Indexes into `hooks.prestart` of Docker's toolkit hook.
fn docker_hook_indexes(spec: &Spec) -> Vec<usize> {
    let is_docker_hook = |h: &oci_spec::runtime::Hook| {
        h.path().file_name().is_some_and(|n| n == DOCKER_HOOK)
            || h.args()
                .as_ref()
                .and_then(|a| a.first())
                .is_some_and(|a| a.rsplit('/').next() == Some(DOCKER_HOOK))
    };
    spec.hooks()
        .as_ref()
        .and_then(|h| h.prestart().as_ref())
        .map(|hooks| {
            hooks
                .iter()
                .enumerate()
                .filter(|(_, h)| is_docker_hook(h))
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default()
}

/// `NVIDIA_REQUIRE_*`, unless `NVIDIA_DISABLE_REQUIRE` says otherwise.
fn requirements(env: &BTreeMap<String, String>) -> Result<(bool, Vec<Requirement>)> {
    let disabled = env
        .get("NVIDIA_DISABLE_REQUIRE")
        .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    let mut requirements = Vec::new();
    if !disabled {
        for (key, value) in env {
            if key.starts_with("NVIDIA_REQUIRE_") {
                requirements.push(require::parse(key, value)?);
            }
        }
    }
    Ok((disabled, requirements))
}

/// MIG config or monitor (`var`). They are node-wide: repartitioning a GPU
/// changes it under every tenant, so the toolkit refuses them beside a
/// GPU request in an unprivileged container, and so does gpurun.
fn mig_request(
    env: &BTreeMap<String, String>,
    var: &str,
    unprivileged_gpu: bool,
) -> Result<Option<DeviceSelection>> {
    let Some(value) = env.get(var) else {
        return Ok(None);
    };
    if unprivileged_gpu {
        anyhow::bail!(
            "{var}={value}: refused in an unprivileged container (MIG configuration and monitoring are node-wide); run it privileged (CAP_SYS_ADMIN), or unset {var}"
        );
    }
    devlist::parse(Some(value)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Spec {
        let mut base = serde_json::to_value(Spec::default()).unwrap();
        for (k, v) in json.as_object().unwrap() {
            if k == "env" {
                base["process"]["env"] = v.clone();
            } else if k == "bounding" {
                base["process"]["capabilities"]["bounding"] = v.clone();
            } else {
                base[k] = v.clone();
            }
        }
        serde_json::from_value(base).unwrap()
    }

    /// The defaults, with no CDI spec directory: this host's specs are
    /// not the test's.
    fn defaults() -> Result<RequestPolicy> {
        Ok(RequestPolicy {
            spec_dirs: Vec::new(),
            ..RequestPolicy::default()
        })
    }

    fn strict() -> Result<RequestPolicy> {
        Ok(RequestPolicy {
            accept_envvar_unprivileged: false,
            accept_volume_mounts: true,
            spec_dirs: Vec::new(),
            ..RequestPolicy::default()
        })
    }

    fn gpu(index: u32) -> DeviceRef {
        DeviceRef::Index { index }
    }

    #[test]
    fn unset_is_void_and_legacy_cuda_is_all() {
        let r = from_spec(&spec(serde_json::json!({"env": ["PATH=/bin"]})), defaults).unwrap();
        assert!(!r.wants_gpu());
        let r = from_spec(
            &spec(serde_json::json!({"env": ["CUDA_VERSION=11.0"]})),
            defaults,
        )
        .unwrap();
        assert_eq!(r.devices, DeviceSelection::All);
        let r = from_spec(
            &spec(
                serde_json::json!({"env": ["CUDA_VERSION=11.0", "NVIDIA_REQUIRE_CUDA=cuda>=11.0"]}),
            ),
            defaults,
        )
        .unwrap();
        assert!(!r.wants_gpu());
    }

    #[test]
    fn a_plain_container_reads_no_policy() {
        let r = from_spec(&spec(serde_json::json!({"env": ["PATH=/bin"]})), || {
            anyhow::bail!("read")
        });
        assert!(r.is_ok());
        let r = from_spec(
            &spec(serde_json::json!({"env": ["NVIDIA_VISIBLE_DEVICES=0"]})),
            || anyhow::bail!("read"),
        );
        assert!(r.is_err());
        // An engine's own annotations are no request.
        let engine = spec(serde_json::json!({
            "env": ["PATH=/bin"],
            "annotations": {"io.kubernetes.cri.container-type": "container", "org.example/args": "a=b"}
        }));
        assert!(from_spec(&engine, || anyhow::bail!("read")).is_ok());
    }

    #[test]
    fn env_caps_requirements() {
        let r = from_spec(
            &spec(serde_json::json!({"env": [
                "NVIDIA_VISIBLE_DEVICES=0,1",
                "NVIDIA_DRIVER_CAPABILITIES=utility",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.0",
                "NVIDIA_REQUIRE_ARCH=arch>=8.0"
            ]})),
            defaults,
        )
        .unwrap();
        assert_eq!(r.capabilities, [Capability::Utility].into());
        assert_eq!(r.requirements.len(), 2);
        let r = from_spec(&spec(serde_json::json!({"env": [
            "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=1"
        ]})), defaults)
        .unwrap();
        assert!(r.requirements.is_empty());
    }

    fn tenant(extra: serde_json::Value) -> Spec {
        let mut json = serde_json::json!({
            "env": ["NVIDIA_VISIBLE_DEVICES=all"],
            "mounts": [
                {"destination": "/var/run/nvidia-container-devices/1", "type": "bind", "source": "/dev/null"},
                {"destination": "/var/run/nvidia-container-devices/cdi/nvidia.com/gpu/0", "type": "bind", "source": "/dev/null"},
                {"destination": "/var/run/nvidia-container-devices/3", "type": "bind", "source": "/etc/hostname"}
            ],
        });
        for (k, v) in extra.as_object().unwrap() {
            json[k] = v.clone();
        }
        spec(json)
    }

    #[test]
    fn annotations_win_then_volume_mounts_then_env() {
        let annotated =
            tenant(serde_json::json!({"annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=2"}}));
        let r = from_spec(&annotated, strict).unwrap();
        assert_eq!(r.sources, ["annotations"]);
        assert_eq!(
            r.devices,
            DeviceSelection::List(vec![DeviceRef::Cdi {
                kind: "nvidia.com/gpu".into(),
                name: "2".into()
            }])
        );
        let why: Vec<&str> = r.ignored.iter().map(|i| i.source.as_str()).collect();
        assert_eq!(why, ["volume-mounts", "env"]);

        // Volume mounts, only of /dev/null, in both forms.
        let r = from_spec(&tenant(serde_json::json!({})), strict).unwrap();
        assert_eq!(r.sources, ["volume-mounts"]);
        assert_eq!(
            r.devices,
            DeviceSelection::List(vec![
                gpu(1),
                DeviceRef::Cdi {
                    kind: "nvidia.com/gpu".into(),
                    name: "0".into()
                }
            ])
        );
        assert_eq!(r.ignored.len(), 1);
        assert!(
            r.ignored[0]
                .to_string()
                .contains("NVIDIA_VISIBLE_DEVICES=all"),
            "{}",
            r.ignored[0]
        );

        // Volume mounts not accepted (the default): the env wins, and the
        // mounts are reported.
        let r = from_spec(&tenant(serde_json::json!({})), defaults).unwrap();
        assert_eq!(
            (r.sources.as_slice(), &r.devices),
            (&["env".to_owned()][..], &DeviceSelection::All)
        );
        assert!(
            r.ignored[0].reason.contains("as-volume-mounts is false"),
            "{:?}",
            r.ignored
        );

        // Other annotation prefixes count only when configured.
        let other =
            tenant(serde_json::json!({"annotations": {"example.com/gpu": "nvidia.com/gpu=2"}}));
        assert_eq!(
            from_spec(&other, strict).unwrap().sources,
            ["volume-mounts"]
        );
        let r = from_spec(&other, || {
            Ok(RequestPolicy {
                annotation_prefixes: vec!["example.com/".into()],
                ..strict()?
            })
        })
        .unwrap();
        assert_eq!(r.sources, ["annotations"]);
    }

    #[test]
    fn an_unprivileged_containers_env_counts_only_where_accepted() {
        let own = spec(serde_json::json!({"env": ["NVIDIA_VISIBLE_DEVICES=all"]}));
        let r = from_spec(&own, strict).unwrap();
        assert!(!r.wants_gpu());
        assert!(
            r.ignored[0].reason.contains("unprivileged"),
            "{:?}",
            r.ignored
        );
        assert_eq!(
            from_spec(&own, defaults).unwrap().devices,
            DeviceSelection::All
        );
        // Legacy CUDA images' implicit `all` too.
        let legacy = spec(serde_json::json!({"env": ["CUDA_VERSION=12.2"]}));
        assert!(!from_spec(&legacy, strict).unwrap().wants_gpu());
        let privileged = spec(serde_json::json!({
            "env": ["NVIDIA_VISIBLE_DEVICES=all"],
            "bounding": ["CAP_SYS_ADMIN", "CAP_KILL"]
        }));
        let r = from_spec(&privileged, strict).unwrap();
        assert!(r.privileged && r.devices == DeviceSelection::All && r.ignored.is_empty());
        // The device plugin's own pointer at the mounts is no request.
        let pointer = spec(
            serde_json::json!({"env": ["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"]}),
        );
        let r = from_spec(&pointer, defaults).unwrap();
        assert!(!r.wants_gpu() && r.ignored.is_empty());
    }

    #[test]
    fn mig_config_and_monitor_need_a_privileged_container() {
        for var in ["NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"] {
            let env = format!("{var}=all");
            let err = from_spec(
                &spec(serde_json::json!({"env": ["NVIDIA_VISIBLE_DEVICES=0", env]})),
                defaults,
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("refused in an unprivileged container") && err.contains(var),
                "{err}"
            );
            let r = from_spec(
                &spec(serde_json::json!({"env": ["NVIDIA_VISIBLE_DEVICES=0", env], "bounding": ["CAP_SYS_ADMIN"]})),
                defaults,
            )
            .unwrap();
            assert!(r.mig_config.is_some() || r.mig_monitor.is_some());
            // Without a GPU request nothing is injected, so nothing to refuse.
            assert!(from_spec(&spec(serde_json::json!({"env": [env]})), defaults).is_ok());
        }
    }

    #[test]
    fn the_docker_hook_is_found() {
        let r = from_spec(&spec(serde_json::json!({
            "env": ["NVIDIA_VISIBLE_DEVICES=0"],
            "hooks": {"prestart": [
                {"path": "/usr/bin/true"},
                {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
            ]}
        })), defaults)
        .unwrap();
        assert_eq!(r.docker_hooks, vec![1]);
    }

    #[test]
    fn hostile_values_are_errors() {
        for env in [
            "NVIDIA_VISIBLE_DEVICES=GPU-/../../etc",
            "NVIDIA_DRIVER_CAPABILITIES=everything",
            "NVIDIA_REQUIRE_CUDA=cuda>>1",
        ] {
            assert!(
                from_spec(&spec(serde_json::json!({"env": [env]})), defaults).is_err(),
                "{env}"
            );
        }
    }

    #[test]
    fn the_management_device_is_every_gpu_and_only_privileged_on_a_shared_node() {
        let asking = |bounding: serde_json::Value| {
            spec(serde_json::json!({
                "annotations": {"cdi.k8s.io/m": "management.nvidia.com/gpu=all"},
                "bounding": bounding
            }))
        };
        let r = from_spec(&asking(serde_json::json!([])), defaults).unwrap();
        assert!(r.management);
        assert_eq!(r.devices, DeviceSelection::All);
        assert!(
            r.capabilities.contains(&Capability::Utility)
                && r.capabilities.contains(&Capability::Compute)
        );
        let err = from_spec(&asking(serde_json::json!([])), strict)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refused in an unprivileged container on a shared node"),
            "{err}"
        );
        let r = from_spec(&asking(serde_json::json!(["CAP_SYS_ADMIN"])), strict).unwrap();
        assert!(r.management && r.shared_node && r.privileged);
        let one = spec(
            serde_json::json!({"annotations": {"cdi.k8s.io/m": "management.nvidia.com/gpu=0"}}),
        );
        let err = from_spec(&one, defaults).unwrap_err().to_string();
        assert!(err.contains("has one device, \"all\""), "{err}");
    }
}
