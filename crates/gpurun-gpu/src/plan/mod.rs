//! Plan: exactly what a container gets, shaped like CDI's `containerEdits`.
//! The same inventory, request and rootfs give a byte-identical plan.

pub mod cuda_compat;
pub mod mount_points;
pub mod musl;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::formats::devlist::{DeviceRef, DeviceSelection};
use crate::formats::ldcache::Entry;
use crate::formats::platform::Platform;
use crate::formats::require::Facts;
use crate::inventory::caps::Capability;
use crate::inventory::gated::{self, Gated, ImexChannels};
use crate::inventory::{DeviceNode, DriverFile, FileKind, Gpu, Inventory};
use crate::request::Request;
use safe_fs::Rootfs;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub driver_version: String,
    pub gpus: Vec<PlannedGpu>,
    pub capabilities: Vec<Capability>,
    pub device_nodes: Vec<DeviceNode>,
    pub mounts: Vec<PlannedMount>,
    pub env: Vec<String>,
    /// Entries added to the image's /etc/ld.so.cache (container paths).
    pub ldcache: Vec<Entry>,
    /// What replaces /proc/driver/nvidia inside the container.
    pub proc_driver_nvidia: Option<ProcDriverNvidia>,
    /// Indexes into hooks.prestart to remove (Docker's toolkit hook).
    pub drop_prestart_hooks: Vec<usize>,
    /// The image's CUDA forward-compatibility library, and whether it is
    /// put before the host's in the linker cache.
    pub cuda_compat: Option<CudaCompat>,
    /// The host groups of the nodes that only a member can open: given to
    /// the container's process (`apply::device_group_gids`).
    pub device_groups: Vec<u32>,
    /// A musl image's `/etc/ld-musl-<arch>.path`, where its loader would
    /// not find the injected libraries otherwise.
    pub musl_path: Option<crate::plan::musl::MuslPath>,
    /// Links made in the container's /dev: (LINK relative to /dev,
    /// TARGET), the DRM nodes' `dri/by-path` links udev makes on a host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dev_links: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CudaCompat {
    /// The library, as the container sees it.
    pub library: PathBuf,
    pub used: bool,
    pub why: String,
    #[serde(skip)]
    pub dir: PathBuf,
    /// The library names in the directory.
    #[serde(skip)]
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGpu {
    pub index: u32,
    pub uuid: String,
    pub minor: u32,
    pub model: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct PlannedMount {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub options: Vec<String>,
}

/// Copies of the host's files, so the container sees the driver version
/// but not the other GPUs, with `ModifyDeviceFiles` off so nothing inside
/// tries to create device nodes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProcDriverNvidia {
    pub params: String,
    pub version: String,
    pub registry: String,
    /// The given GPUs' directories under /proc/driver/nvidia/gpus (their
    /// PCI addresses), bound in read-only as libnvidia-container binds
    /// them: what reads a GPU's `information` there sees exactly the
    /// given GPUs, and no other.
    pub gpus: Vec<String>,
}

/// Read-only, no setuid, no devices. Libraries and binaries must stay
/// executable (a library on a noexec mount cannot be mapped); firmware and
/// data need not.
fn ro_options(exec: bool) -> Vec<String> {
    let mut o = vec!["ro", "nosuid", "nodev", "bind"];
    if !exec {
        o.push("noexec");
    }
    o.into_iter().map(str::to_owned).collect()
}

/// The image's own library directory (the platform's, most specific
/// first), resolved inside the rootfs. A symlink that points out of the
/// rootfs resolves to inside it instead, so a hostile image gets its
/// libraries at a harmless place, never on the host.
pub fn image_lib_dir(rootfs: Option<&Rootfs>, compat32: bool, platform: &Platform) -> PathBuf {
    let candidates = if compat32 {
        platform.image_lib32_dirs()
    } else {
        platform.image_lib_dirs()
    };
    if let Some(rootfs) = rootfs {
        for dir in &candidates {
            if let Some(real) = rootfs.real_dir(Path::new(dir)) {
                return real;
            }
        }
    }
    PathBuf::from(if compat32 { "/usr/lib32" } else { "/usr/lib" })
}

fn no_gpu_error(what: &str, inv: &Inventory) -> anyhow::Error {
    let have = match inv.gpus.len() {
        0 => "this host has no GPUs".to_owned(),
        1 => "this host has 0".to_owned(),
        n => format!("this host has 0-{}", n - 1),
    };
    anyhow::anyhow!("NVIDIA_VISIBLE_DEVICES: no GPU {what:?} ({have})")
}

/// The GPUs a selection names, in inventory order.
pub fn select_gpus<'a>(inv: &'a Inventory, devices: &DeviceSelection) -> Result<Vec<&'a Gpu>> {
    let mut picked: BTreeSet<u32> = BTreeSet::new();
    match devices {
        DeviceSelection::Void | DeviceSelection::None => {}
        DeviceSelection::All => picked.extend(inv.gpus.iter().map(|g| g.index)),
        DeviceSelection::List(list) => {
            for d in list {
                let found: Vec<u32> = match d {
                    DeviceRef::Index { index } => inv
                        .gpus
                        .iter()
                        .find(|g| g.index == *index)
                        .map(|g| vec![g.index])
                        .ok_or_else(|| no_gpu_error(&index.to_string(), inv))?,
                    DeviceRef::Uuid { uuid } => inv
                        .gpus
                        .iter()
                        .find(|g| g.uuid.eq_ignore_ascii_case(uuid))
                        .map(|g| vec![g.index])
                        .ok_or_else(|| {
                            let known: Vec<&str> =
                                inv.gpus.iter().map(|g| g.uuid.as_str()).collect();
                            anyhow::anyhow!(
                                "NVIDIA_VISIBLE_DEVICES: no GPU {uuid:?} (this host has {})",
                                if known.is_empty() {
                                    "no GPUs".to_owned()
                                } else {
                                    known.join(", ")
                                }
                            )
                        })?,
                    DeviceRef::Cdi { kind, name } => {
                        if kind != "nvidia.com/gpu" {
                            bail!("CDI device {kind}={name}: gpurun provides nvidia.com/gpu devices only");
                        }
                        if name == "all" {
                            inv.gpus.iter().map(|g| g.index).collect()
                        } else {
                            let by = DeviceSelection::List(vec![match name.parse::<u32>() {
                                Ok(index) => DeviceRef::Index { index },
                                Err(_) => DeviceRef::Uuid { uuid: name.clone() },
                            }]);
                            select_gpus(inv, &by)?.iter().map(|g| g.index).collect()
                        }
                    }
                    DeviceRef::MigIndex { gpu, mig } => {
                        let parent = inv
                            .gpus
                            .iter()
                            .find(|g| g.index == *gpu && g.migs.iter().any(|m| m.index == *mig))
                            .ok_or_else(|| {
                                anyhow::anyhow!(
                                    "NVIDIA_VISIBLE_DEVICES: no MIG device {gpu}:{mig} (enable MIG and create instances, or pick a GPU index)"
                                )
                            })?;
                        vec![parent.index]
                    }
                    DeviceRef::MigUuid { uuid } => {
                        let parent = inv
                            .gpus
                            .iter()
                            .find(|g| g.migs.iter().any(|m| m.uuid == *uuid))
                            .ok_or_else(|| {
                                anyhow::anyhow!(
                                    "NVIDIA_VISIBLE_DEVICES: no MIG device {uuid:?} on this host"
                                )
                            })?;
                        vec![parent.index]
                    }
                };
                picked.extend(found);
            }
        }
    }
    Ok(inv
        .gpus
        .iter()
        .filter(|g| picked.contains(&g.index))
        .collect())
}

/// The /dev/nvidia-caps nodes of the MIG devices a selection names.
fn mig_nodes(inv: &Inventory, devices: &DeviceSelection) -> Vec<DeviceNode> {
    let DeviceSelection::List(list) = devices else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in list {
        for gpu in &inv.gpus {
            for mig in &gpu.migs {
                let hit = match d {
                    DeviceRef::MigUuid { uuid } => mig.uuid == *uuid,
                    DeviceRef::MigIndex { gpu: g, mig: m } => gpu.index == *g && mig.index == *m,
                    _ => false,
                };
                if hit {
                    out.extend(mig.nodes.iter().cloned());
                }
            }
        }
    }
    out
}

/// The MIG config or monitor capability node, named by
/// /proc/driver/nvidia/capabilities/mig/<which>'s DeviceFileMinor.
fn mig_global_node(inv: &Inventory, which: &str) -> Option<DeviceNode> {
    let access = inv
        .roots
        .proc_root
        .join("driver/nvidia/capabilities/mig")
        .join(which);
    crate::inventory::cap_node(&access, &inv.other_nodes)
}

/// The nodes of the IMEX channels asked for: the host's
/// `/dev/nvidia-caps-imex-channels/channelN`, whose major must be the one
/// /proc/devices names and whose minor is N.
fn imex_nodes(inv: &Inventory, channels: &ImexChannels) -> Result<Vec<DeviceNode>> {
    let Some(major) = inv.imex_major else {
        bail!(
            "IMEX channels requested, but this host's driver has none ({}/devices has no {} line): load the driver with IMEX support, or drop the request",
            inv.roots.proc_root.display(),
            gated::IMEX_PROC_DEVICES_NAME
        );
    };
    match channels {
        ImexChannels::All => Ok(inv.imex_channels().cloned().collect()),
        ImexChannels::List(ids) => ids
            .iter()
            .map(|id| {
                inv.imex_channels()
                    .find(|n| n.minor == *id && n.path == format!("{}/channel{id}", gated::IMEX_DIR))
                    .cloned()
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "IMEX channel {id}: this host has no {}/channel{id} (c {major}:{id}): create it (nvidia-modprobe -i {id}) or ask for a channel the host has",
                            inv.roots.dev_root.join(&gated::IMEX_DIR[1..]).display()
                        )
                    })
            })
            .collect(),
    }
}

/// `params` with device-file modification off, so nothing inside the
/// container tries to create device nodes.
pub fn params_without_device_modification(params: &str) -> String {
    params
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("ModifyDeviceFiles") {
                "ModifyDeviceFiles: 0".to_owned()
            } else {
                l.to_owned()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// Reads the host's /proc/driver/nvidia files for the masked copy.
fn proc_copy(inv: &Inventory, gpus: &[&Gpu]) -> Option<ProcDriverNvidia> {
    let base = inv.roots.proc_root.join("driver/nvidia");
    let read = |f: &str| std::fs::read_to_string(base.join(f)).unwrap_or_default();
    let version = read("version");
    if version.is_empty() {
        return None;
    }
    let params = params_without_device_modification(&read("params"));
    Some(ProcDriverNvidia {
        params,
        version,
        registry: read("registry"),
        gpus: gpus
            .iter()
            .filter_map(|g| crate::inventory::sysfs_bus_id(&g.pci_bus_id))
            .filter(|bus| base.join("gpus").join(bus).is_dir())
            .collect(),
    })
}

/// The plan, as the algorithm reads: the GPUs and the requirement check;
/// the device nodes; the driver files as mounts with their linker-cache
/// entries, resolved inside the rootfs; CUDA compat; the visible env.
pub fn make(inv: &Inventory, req: &Request, rootfs: Option<&Path>) -> Result<Plan> {
    let gpus = select_gpus(inv, &req.devices)?;
    check_requirements(inv, req, &gpus)?;
    // A request of IMEX channels alone (`nvidia.com/imex-channel=N`) gets
    // the channels only: no GPU, no control node, no driver file.
    let gpu_request = req.devices != DeviceSelection::Void;
    let no_caps = BTreeSet::new();
    let caps = if gpu_request {
        &req.capabilities
    } else {
        &no_caps
    };
    let nodes = device_nodes(inv, req, &gpus, caps)?;
    let rootfs_handle = rootfs.and_then(|p| Rootfs::open(p).ok());
    let (mut mounts, mut ldcache_entries) = driver_mounts(inv, caps, rootfs_handle.as_ref());
    withhold_node_wide(&mut mounts, req);
    if let Some(root) = &rootfs_handle {
        resolve_in_rootfs(root, &mut mounts);
    }
    if let Some(cufile) = inv
        .cufile
        .as_ref()
        .filter(|_| req.gated.contains(&Gated::Gds))
    {
        mounts.push(PlannedMount {
            source: cufile.clone(),
            destination: PathBuf::from("/etc/cufile.json"),
            options: ro_options(false),
        });
    }
    mounts.sort_by(|a, b| a.destination.cmp(&b.destination));
    mounts.dedup_by(|a, b| a.destination == b.destination);
    let cuda_compat = match &rootfs_handle {
        Some(root)
            if gpu_request && caps.contains(&Capability::Compute) && !req.cuda_compat_disabled =>
        {
            find_cuda_compat(
                root,
                cuda_compat::compat_dir(inv),
                &inv.driver_version,
                inv.cuda_version.as_deref(),
            )
        }
        _ => None,
    };
    if let Some(compat) = cuda_compat.as_ref().filter(|c| c.used) {
        compat_first(compat, inv.platform, &mut ldcache_entries);
    }
    ldcache_entries.sort_by(|a, b| a.name.cmp(&b.name));
    ldcache_entries.dedup();
    let musl_path = rootfs_handle
        .as_ref()
        .and_then(|root| crate::plan::musl::plan(root, &ldcache_entries, inv.platform));
    let device_groups = if req.device_groups_disabled {
        Vec::new()
    } else {
        groups_needed(&nodes)
    };
    let dev_links = drm_by_path_links(&gpus, &nodes);
    Ok(Plan {
        driver_version: inv.driver_version.clone(),
        gpus: gpus
            .iter()
            .map(|g| PlannedGpu {
                index: g.index,
                uuid: g.uuid.clone(),
                minor: g.minor,
                model: g.model.clone(),
            })
            .collect(),
        capabilities: caps.iter().copied().collect(),
        device_nodes: nodes,
        mounts,
        env: visible_env(req, &gpus, caps, inv.one_node_set()),
        ldcache: ldcache_entries,
        proc_driver_nvidia: gpu_request.then(|| proc_copy(inv, &gpus)).flatten(),
        drop_prestart_hooks: req.docker_hooks.clone(),
        cuda_compat,
        device_groups,
        musl_path,
        dev_links,
    })
}

/// Whether a GPU given for graphics or display gets its DRM nodes: given
/// whole, yes; through its MIG devices only, when one of them is of a
/// profile with graphics (`+gfx`, as the device plugin and the toolkit
/// give them): the GPU's other MIG devices have no graphics engine.
fn drm_for(gpu: &Gpu, devices: &DeviceSelection) -> bool {
    let DeviceSelection::List(refs) = devices else {
        return true;
    };
    let mine: Vec<&crate::inventory::MigDevice> = refs
        .iter()
        .filter_map(|r| match r {
            DeviceRef::MigIndex { gpu: g, mig } if *g == gpu.index => {
                gpu.migs.iter().find(|m| m.index == *mig)
            }
            DeviceRef::MigUuid { uuid } => gpu.migs.iter().find(|m| m.uuid == *uuid),
            _ => None,
        })
        .collect();
    let whole = refs.iter().any(|r| match r {
        DeviceRef::Index { index } => *index == gpu.index,
        DeviceRef::Uuid { uuid } => *uuid == gpu.uuid,
        DeviceRef::Cdi { .. } => true,
        DeviceRef::MigIndex { .. } | DeviceRef::MigUuid { .. } => false,
    });
    whole
        || mine.is_empty()
        || mine
            .iter()
            .any(|m| m.profile.as_deref().is_some_and(|p| p.contains("+gfx")))
}

/// `/dev/dri/by-path/pci-<bus>-card` and `-render` for each GPU's DRM
/// nodes the container gets, pointing at them, as udev names them on the
/// host and as the NVIDIA toolkit links them (applications and Vulkan's
/// device selection look a GPU's node up by its PCI address).
pub fn drm_by_path_links(gpus: &[&Gpu], nodes: &[DeviceNode]) -> Vec<(String, String)> {
    let mut links = Vec::new();
    for gpu in gpus {
        for node in gpu.drm_nodes.iter().filter(|n| nodes.contains(n)) {
            let Some(name) = node.path.strip_prefix("/dev/dri/") else {
                continue;
            };
            let kind = if name.starts_with("renderD") {
                "render"
            } else {
                "card"
            };
            let bus = crate::inventory::sysfs_bus_id(&gpu.pci_bus_id)
                .unwrap_or_else(|| gpu.pci_bus_id.to_ascii_lowercase());
            links.push((
                format!("dri/by-path/pci-{bus}-{kind}"),
                format!("../{name}"),
            ));
        }
    }
    links.sort();
    links.dedup();
    links
}

/// The groups a process needs to open `nodes`, each once, in order.
pub fn groups_needed(nodes: &[DeviceNode]) -> Vec<u32> {
    let groups: BTreeSet<u32> = nodes.iter().filter_map(DeviceNode::group_needed).collect();
    groups.into_iter().collect()
}

/// Each `NVIDIA_REQUIRE_*` against the host, and against each GPU asked for.
fn check_requirements(inv: &Inventory, req: &Request, gpus: &[&Gpu]) -> Result<()> {
    for requirement in &req.requirements {
        let host = Facts {
            cuda: inv.cuda_version.as_deref(),
            driver: Some(&inv.driver_version),
            ..Facts::default()
        };
        if gpus.is_empty() {
            requirement.check(&host)?;
        }
        for gpu in gpus {
            let name = format!("GPU {}", gpu.index);
            requirement.check(&Facts {
                arch: gpu.arch.as_deref(),
                brand: gpu.brand.as_deref(),
                gpu: Some(&name),
                ..host.clone()
            })?;
        }
    }
    Ok(())
}

/// The nodes the container gets: the control nodes its capabilities need,
/// each GPU's (and DRM nodes for display or graphics), MIG, MIG control,
/// IMEX channels and gated devices; sorted, once each.
fn device_nodes(
    inv: &Inventory,
    req: &Request,
    gpus: &[&Gpu],
    caps: &BTreeSet<Capability>,
) -> Result<Vec<DeviceNode>> {
    let gpu_request = req.devices != DeviceSelection::Void;
    let wants_drm = caps.contains(&Capability::Display) || caps.contains(&Capability::Graphics);
    let mut nodes: Vec<DeviceNode> = Vec::new();
    for n in inv.control_nodes.iter().filter(|_| gpu_request) {
        let wanted = match n.path.as_str() {
            "/dev/nvidiactl" | crate::inventory::wsl::DXG => true,
            "/dev/nvidia-uvm" | "/dev/nvidia-uvm-tools" => caps.contains(&Capability::Compute),
            "/dev/nvidia-modeset" => wants_drm,
            // A Tegra's CSV lists the nodes every GPU container gets.
            _ => inv.tegra.is_some(),
        };
        if wanted {
            nodes.push(n.clone());
        }
    }
    for gpu in gpus {
        if wants_drm && drm_for(gpu, &req.devices) {
            nodes.extend(gpu.drm_nodes.iter().cloned());
        }
        match &gpu.node {
            Some(node) => nodes.push(node.clone()),
            None if inv.tegra.is_some() => {}
            None => bail!(
                "GPU {} ({}) has no device node {}/dev/nvidia{}: create it, or check --dev-root",
                gpu.index,
                gpu.uuid,
                inv.roots.dev_root.display(),
                gpu.minor
            ),
        }
    }
    if req.management {
        nodes.extend(management_nodes(inv));
    }
    nodes.extend(mig_nodes(inv, &req.devices));
    nodes.extend(mig_control_nodes(inv, req)?);
    if let Some(channels) = &req.imex_channels {
        nodes.extend(imex_nodes(inv, channels)?);
    }
    for family in &req.gated {
        nodes.extend(inv.gated_nodes.get(family).into_iter().flatten().cloned());
    }
    nodes.sort();
    nodes.dedup();
    Ok(nodes)
}

/// The management device's nodes, as the toolkit's management spec has
/// them: every top-level /dev/nvidia* node but GDS's, NVSwitch's and
/// NVLink's (gated devices of their own), every /dev/nvidia-caps/nvidia-cap*
/// node (MIG config and monitor among them), and the IMEX channels.
pub fn management_nodes(inv: &Inventory) -> Vec<DeviceNode> {
    let blocked = ["nvidia-fs", "nvidia-nvswitch", "nvidia-nvlink"];
    let top_level = |n: &&DeviceNode| {
        n.path
            .strip_prefix("/dev/")
            .is_some_and(|name| !name.contains('/') && !blocked.iter().any(|b| name.starts_with(b)))
    };
    let caps = |n: &&DeviceNode| n.path.starts_with("/dev/nvidia-caps/nvidia-cap");
    let gpus = inv.gpus.iter().filter_map(|g| g.node.as_ref());
    let mut nodes: Vec<DeviceNode> = inv
        .control_nodes
        .iter()
        .chain(gpus)
        .filter(top_level)
        .chain(inv.other_nodes.iter().filter(caps))
        .chain(inv.imex_channels())
        .cloned()
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The MIG config and monitor capability nodes asked for.
fn mig_control_nodes(inv: &Inventory, req: &Request) -> Result<Vec<DeviceNode>> {
    let mut nodes = Vec::new();
    for (selection, which) in [(&req.mig_config, "config"), (&req.mig_monitor, "monitor")] {
        if !matches!(
            selection,
            Some(DeviceSelection::All | DeviceSelection::List(_))
        ) {
            continue;
        }
        match mig_global_node(inv, which) {
            Some(node) => nodes.push(node),
            None => bail!(
                "NVIDIA_MIG_{}_DEVICES: this host has no MIG {which} capability ({}/driver/nvidia/capabilities/mig/{which})",
                which.to_uppercase(),
                inv.roots.proc_root.display()
            ),
        }
    }
    Ok(nodes)
}

/// The driver files the capabilities bring (32-bit ones only with
/// compat32, firmware with any), sorted, once each.
fn driver_files<'a>(inv: &'a Inventory, caps: &BTreeSet<Capability>) -> Vec<&'a DriverFile> {
    let mut files: Vec<&DriverFile> = Vec::new();
    for cap in caps {
        if let Some(list) = inv.files.get(cap) {
            files.extend(list.iter().filter(|f| {
                // 32-bit libraries only with compat32.
                !f.compat32 || caps.contains(&Capability::Compat32)
            }));
        }
    }
    if caps.contains(&Capability::Compat32) {
        // compat32 brings the 32-bit builds of the other capabilities.
        files.extend(inv.files.get(&Capability::Compat32).into_iter().flatten());
    }
    if !caps.is_empty() {
        files.extend(inv.firmware.iter());
    }
    files.sort();
    files.dedup();
    files
}

/// Each driver file as a mount (libraries in the image's own library
/// directory, under their name and their SONAME) and each library's
/// linker-cache entry.
fn driver_mounts(
    inv: &Inventory,
    caps: &BTreeSet<Capability>,
    rootfs: Option<&Rootfs>,
) -> (Vec<PlannedMount>, Vec<Entry>) {
    let platform = inv.platform;
    let lib_dir = image_lib_dir(rootfs, false, platform);
    let lib32_dir = image_lib_dir(rootfs, true, platform);
    let mut mounts: Vec<PlannedMount> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    for f in driver_files(inv, caps) {
        let name = f
            .host_path
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_default();
        let mount = |destination: PathBuf, options| PlannedMount {
            source: f.host_path.clone(),
            destination,
            options,
        };
        match f.kind {
            FileKind::Library => {
                // A library with a place of its own (WSL2's driver store,
                // a Tegra's CSV, X modules) goes there, under that name.
                let own_dir = f.container_path.as_deref().and_then(Path::parent);
                let name = f
                    .container_path
                    .as_deref()
                    .and_then(Path::file_name)
                    .map(PathBuf::from)
                    .unwrap_or(name);
                let dir = match own_dir {
                    Some(own) => own,
                    None if f.compat32 => &lib32_dir,
                    None => &lib_dir,
                };
                mounts.push(mount(dir.join(&name), ro_options(true)));
                // WSL2's store libraries without a SONAME are listed under
                // their name, as ldconfig lists them; X modules are not.
                let listed = f.soname.clone().or_else(|| {
                    own_dir
                        .filter(|_| inv.wsl.is_some())
                        .map(|_| name.to_string_lossy().into_owned())
                });
                if let Some(soname) = &listed {
                    if Path::new(soname) != name {
                        mounts.push(mount(dir.join(soname), ro_options(true)));
                    }
                    entries.push(Entry {
                        name: soname.clone(),
                        path: dir.join(soname).to_string_lossy().into_owned(),
                        flags: match platform.compat32_cache_flags() {
                            Some(flags) if f.compat32 => flags,
                            _ => platform.cache_flags,
                        },
                        hwcap: 0,
                    });
                }
            }
            FileKind::Binary => {
                mounts.push(mount(Path::new("/usr/bin").join(&name), ro_options(true)))
            }
            FileKind::Firmware
            | FileKind::Socket
            | FileKind::Directory
            | FileKind::Config
            | FileKind::Data => {
                let destination = f
                    .container_path
                    .clone()
                    .unwrap_or_else(|| Path::new("/").join(&f.path_in_root));
                mounts.push(mount(destination, other_file_options(f.kind)));
            }
        }
    }
    (mounts, entries)
}

/// On a shared node an unprivileged container gets no node-wide directory:
/// the host's default MPS pipe directory (writable, and every tenant's MPS
/// clients' way to the host's default server). MPS sharing for a tenant
/// comes from the device plugin's or DRA driver's own per-claim mounts.
fn withhold_node_wide(mounts: &mut Vec<PlannedMount>, req: &Request) {
    if !req.shared_node || req.privileged {
        return;
    }
    let before = mounts.len();
    mounts.retain(|m| m.destination != Path::new(crate::inventory::driver_files::MPS_PIPE_DIR));
    if mounts.len() != before {
        tracing::debug!(
            "{} left out: the host's MPS pipe directory is not given to an unprivileged container on a shared node",
            crate::inventory::driver_files::MPS_PIPE_DIR
        );
    }
}

/// Mount options of a driver file that is no library or program.
fn other_file_options(kind: FileKind) -> Vec<String> {
    match kind {
        // A read-only mount refuses writes to files, not connects to a
        // socket in it.
        FileKind::Firmware | FileKind::Config | FileKind::Socket | FileKind::Data => {
            ro_options(false)
        }
        _ => vec![
            "nosuid".into(),
            "nodev".into(),
            "noexec".into(),
            "bind".into(),
        ],
    }
}

/// Destinations in the directories as the image has them, symlinks
/// resolved inside it (`/lib/firmware` is `/usr/lib/firmware` with a
/// merged /usr), so the mounts and their mount points land where the
/// container will look. Most share a directory: each is resolved once.
fn resolve_in_rootfs(root: &Rootfs, mounts: &mut [PlannedMount]) {
    let mut real_parents: std::collections::HashMap<PathBuf, PathBuf> = Default::default();
    for m in mounts {
        let (Some(parent), Some(name)) = (m.destination.parent(), m.destination.file_name()) else {
            continue;
        };
        // An existing directory in one openat2; a missing one (made in a
        // private overlay) component by component.
        let real = real_parents.entry(parent.to_path_buf()).or_insert_with(|| {
            root.real_dir(parent).unwrap_or_else(|| {
                root.resolve(parent)
                    .map_or_else(|_| parent.to_path_buf(), |(p, _)| p)
            })
        });
        m.destination = real.join(name);
    }
}

/// The compat directory first in the linker cache: its libraries' names
/// point there.
fn compat_first(compat: &CudaCompat, platform: &Platform, entries: &mut [Entry]) {
    for entry in entries
        .iter_mut()
        .filter(|e| e.flags == platform.cache_flags)
    {
        if compat.names.contains(&entry.name) {
            entry.path = compat.dir.join(&entry.name).to_string_lossy().into_owned();
        }
    }
}

/// `NVIDIA_VISIBLE_DEVICES` as the GPUs' UUIDs (when the request came from
/// elsewhere than the env, or was "all") and `NVIDIA_DRIVER_CAPABILITIES`.
fn visible_env(
    req: &Request,
    gpus: &[&Gpu],
    caps: &BTreeSet<Capability>,
    one_node_set: bool,
) -> Vec<String> {
    let mut env = Vec::new();
    if req.devices == DeviceSelection::Void {
        return env;
    }
    if req.sources.iter().any(|s| s != "env") || req.devices == DeviceSelection::All {
        let list = if one_node_set {
            // One node set is every GPU, whether they are named or not.
            "all".to_owned()
        } else if gpus.is_empty() {
            "none".to_owned()
        } else {
            gpus.iter()
                .map(|g| g.uuid.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        env.push(format!("NVIDIA_VISIBLE_DEVICES={list}"));
    }
    let cap_names: Vec<&str> = caps.iter().map(|c| c.name()).collect();
    env.push(format!(
        "NVIDIA_DRIVER_CAPABILITIES={}",
        cap_names.join(",")
    ));
    env
}

/// The image's CUDA forward-compatibility library, if it has one, and
/// whether it is used. The directory is resolved inside the rootfs and the
/// library opened there without following a final symlink: an image's
/// links never lead gpurun to a host file.
pub fn find_cuda_compat(
    root: &Rootfs,
    compat_dir: &Path,
    host_driver: &str,
    host_cuda: Option<&str>,
) -> Option<CudaCompat> {
    let dir = root.real_dir(compat_dir)?;
    let host_dir = root.host_path().join(dir.strip_prefix("/").unwrap_or(&dir));
    let names: Vec<String> = std::fs::read_dir(&host_dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // libcuda.so.<major>.<minor>[.<patch>]: exactly one, as the toolkit wants.
    let libraries: Vec<&String> = names
        .iter()
        .filter(|n| {
            n.strip_prefix("libcuda.so.")
                .is_some_and(|v| v.contains('.'))
        })
        .collect();
    let [library] = libraries.as_slice() else {
        return Some(CudaCompat {
            library: dir.clone(),
            used: false,
            why: format!("{} libcuda.so.*.* files in it, not one", libraries.len()),
            dir,
            names: Vec::new(),
        });
    };
    let version = library.trim_start_matches("libcuda.so.").to_owned();
    let path = dir.join(library);
    let note = root
        .open_in(
            &path,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
        .and_then(|mut f| {
            crate::formats::elf::note_section(&mut f, cuda_compat::NOTE_SECTION, Platform::native())
        })
        .and_then(|(bytes, align)| cuda_compat::parse_note(&bytes, align));
    let (used, why) = cuda_compat::decide(&version, note.as_ref(), host_driver, host_cuda);
    let mut names: Vec<String> = names.into_iter().filter(|n| n.contains(".so.")).collect();
    names.sort();
    Some(CudaCompat {
        library: path,
        used,
        why,
        dir,
        names,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::inventory::MigDevice;
    use crate::roots::Roots;

    fn node(path: &str, major: u32, minor: u32) -> DeviceNode {
        DeviceNode {
            path: path.into(),
            host_path: PathBuf::from(path),
            major,
            minor,
            file_mode: 0o666,
            gid: 0,
        }
    }

    fn inventory(proc_root: PathBuf) -> Inventory {
        Inventory {
            roots: Roots {
                proc_root,
                ..Roots::default()
            },
            source: "test".into(),
            driver_version: "535.309.01".into(),
            cuda_version: Some("12.2".into()),
            gpus: vec![Gpu {
                index: 0,
                minor: 0,
                uuid: "GPU-11111111-2222-3333-4444-555555555555".into(),
                pci_bus_id: "0000:3b:00.0".into(),
                model: "NVIDIA A100".into(),
                arch: Some("8.0".into()),
                brand: Some("nvidia".into()),
                node: Some(node("/dev/nvidia0", 195, 0)),
                drm_nodes: Vec::new(),
                migs: vec![MigDevice {
                    index: 0,
                    uuid: "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into(),
                    gpu_instance: Some(1),
                    compute_instance: Some(0),
                    nodes: vec![
                        node("/dev/nvidia-caps/nvidia-cap12", 508, 12),
                        node("/dev/nvidia-caps/nvidia-cap13", 508, 13),
                    ],
                    profile: Some("1g.5gb".into()),
                }],
            }],
            control_nodes: vec![node("/dev/nvidiactl", 195, 255)],
            other_nodes: vec![
                node("/dev/nvidia-caps/nvidia-cap1", 508, 1),
                node("/dev/nvidia-caps/nvidia-cap2", 508, 2),
                node("/dev/nvidia-caps-imex-channels/channel0", 234, 0),
                node("/dev/nvidia-caps-imex-channels/channel5", 234, 5),
                // A stale node of another major is no channel.
                node("/dev/nvidia-caps-imex-channels/channel6", 99, 6),
            ],
            imex_major: Some(234),
            gated_nodes: [
                (Gated::Gds, vec![node("/dev/nvidia-fs0", 240, 0)]),
                (
                    Gated::Mofed,
                    vec![node("/dev/infiniband/uverbs0", 231, 192)],
                ),
            ]
            .into(),
            cufile: Some(PathBuf::from("/etc/cufile.json")),
            kernel_module: None,
            files: BTreeMap::new(),
            firmware: Vec::new(),
            notes: Vec::new(),
            platform: crate::formats::platform::Platform::native(),
            wsl: None,
            tegra: None,
        }
    }

    /// As the host's administrator writes it (MIG config included).
    fn request(env: &[&str]) -> Request {
        crate::request::from_env(env).unwrap()
    }

    fn paths(plan: &Plan) -> Vec<&str> {
        plan.device_nodes.iter().map(|n| n.path.as_str()).collect()
    }

    #[test]
    fn mig_devices_bring_their_capability_nodes() {
        let inv = inventory(PathBuf::from("/nonexistent"));
        for sel in ["MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "0:0"] {
            let plan = make(
                &inv,
                &request(&[&format!("NVIDIA_VISIBLE_DEVICES={sel}")]),
                None,
            )
            .unwrap();
            assert_eq!(
                paths(&plan),
                [
                    "/dev/nvidia-caps/nvidia-cap12",
                    "/dev/nvidia-caps/nvidia-cap13",
                    "/dev/nvidia0",
                    "/dev/nvidiactl"
                ],
                "{sel}"
            );
        }
        let err = make(&inv, &request(&["NVIDIA_VISIBLE_DEVICES=0:5"]), None).unwrap_err();
        assert!(err.to_string().contains("no MIG device 0:5"), "{err}");
    }

    /// With graphics, a GPU given whole gets its DRM nodes and their
    /// by-path links; given through a MIG device, only when the device's
    /// profile has graphics (`+gfx`).
    #[test]
    fn drm_nodes_come_with_a_whole_gpu_or_a_gfx_mig_device() {
        let mut inv = inventory(PathBuf::from("/nonexistent"));
        let gpu = &mut inv.gpus[0];
        gpu.drm_nodes = vec![
            node("/dev/dri/card1", 226, 1),
            node("/dev/dri/renderD128", 226, 128),
        ];
        let mut gfx = gpu.migs[0].clone();
        (gfx.index, gfx.uuid, gfx.profile) = (
            1,
            "MIG-ffffffff-0000-0000-0000-000000000001".into(),
            Some("1g.24gb+gfx".into()),
        );
        gpu.migs.push(gfx);
        let drm = |sel: &str| {
            let req = request(&[
                &format!("NVIDIA_VISIBLE_DEVICES={sel}"),
                "NVIDIA_DRIVER_CAPABILITIES=graphics,utility",
            ]);
            let plan = make(&inv, &req, None).unwrap();
            let nodes: Vec<String> = paths(&plan)
                .into_iter()
                .filter(|p| p.starts_with("/dev/dri/"))
                .map(str::to_owned)
                .collect();
            (nodes, plan.dev_links)
        };
        let with_drm = (
            vec![
                "/dev/dri/card1".to_owned(),
                "/dev/dri/renderD128".to_owned(),
            ],
            vec![
                (
                    "dri/by-path/pci-0000:3b:00.0-card".to_owned(),
                    "../card1".to_owned(),
                ),
                (
                    "dri/by-path/pci-0000:3b:00.0-render".to_owned(),
                    "../renderD128".to_owned(),
                ),
            ],
        );
        assert_eq!(drm("0"), with_drm, "the whole GPU");
        assert_eq!(drm("0:1"), with_drm, "a +gfx MIG device");
        assert_eq!(drm("MIG-ffffffff-0000-0000-0000-000000000001"), with_drm);
        assert_eq!(
            drm("0:0"),
            (vec![], vec![]),
            "a MIG device without graphics"
        );
    }

    /// On aarch64 the libraries go to the image's aarch64 multiarch
    /// directory with aarch64's linker-cache flags; on x86_64 to x86_64's.
    #[test]
    fn libraries_follow_the_platforms_directory_and_cache_flags() {
        use crate::formats::platform::{AARCH64, X86_64};
        let dir = std::env::temp_dir().join(format!("plan-platform-{}", std::process::id()));
        for platform in [&AARCH64, &X86_64] {
            let rootfs = dir.join(platform.arch);
            std::fs::create_dir_all(rootfs.join("usr/lib").join(platform.triplet)).unwrap();
            let mut inv = inventory(PathBuf::from("/nonexistent"));
            inv.platform = platform;
            let libcuda = DriverFile {
                kind: FileKind::Library,
                host_path: PathBuf::from("/drv/libcuda.so.535.261.03"),
                path_in_root: PathBuf::from("drv/libcuda.so.535.261.03"),
                soname: Some("libcuda.so.1".into()),
                compat32: false,
                container_path: None,
            };
            inv.files = BTreeMap::from([(Capability::Compute, vec![libcuda])]);
            let req = request(&[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_DRIVER_CAPABILITIES=compute",
            ]);
            let plan = make(&inv, &req, Some(&rootfs)).unwrap();
            let want = format!("/usr/lib/{}/libcuda.so.1", platform.triplet);
            let entry = plan
                .ldcache
                .iter()
                .find(|e| e.name == "libcuda.so.1")
                .unwrap();
            assert_eq!(
                (entry.path.as_str(), entry.flags),
                (want.as_str(), platform.cache_flags)
            );
            assert!(
                plan.mounts
                    .iter()
                    .any(|m| m.destination == Path::new(&want)),
                "{:?}",
                plan.mounts
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_given_gpus_proc_directories_are_bound_in() {
        let dir = std::env::temp_dir().join(format!("plan-proc-gpus-{}", std::process::id()));
        let proc = dir.join("driver/nvidia");
        std::fs::create_dir_all(proc.join("gpus/0000:3b:00.0")).unwrap();
        std::fs::create_dir_all(proc.join("gpus/0000:5e:00.0")).unwrap();
        std::fs::write(proc.join("version"), "NVRM version: 535.309.01\n").unwrap();
        let mut inv = inventory(dir.clone());
        // NVML's form of the address; /proc names the directory in sysfs's.
        inv.gpus[0].pci_bus_id = "00000000:3B:00.0".into();
        let plan = make(&inv, &request(&["NVIDIA_VISIBLE_DEVICES=0"]), None).unwrap();
        let copy = plan
            .proc_driver_nvidia
            .expect("a GPU request masks /proc/driver/nvidia");
        assert_eq!(copy.gpus, ["0000:3b:00.0"]);
        std::fs::remove_dir_all(proc.join("gpus/0000:3b:00.0")).unwrap();
        let plan = make(&inv, &request(&["NVIDIA_VISIBLE_DEVICES=0"]), None).unwrap();
        assert!(plan.proc_driver_nvidia.unwrap().gpus.is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn mig_config_and_monitor_nodes_come_from_procfs() {
        let dir = std::env::temp_dir().join(format!("plan-mig-{}", std::process::id()));
        let caps = dir.join("driver/nvidia/capabilities/mig");
        std::fs::create_dir_all(&caps).unwrap();
        std::fs::write(
            caps.join("config"),
            "DeviceFileMinor: 1\nDeviceFileMode: 256\n",
        )
        .unwrap();
        std::fs::write(
            caps.join("monitor"),
            "DeviceFileMinor: 2\nDeviceFileMode: 292\n",
        )
        .unwrap();
        let inv = inventory(dir.clone());
        let plan = make(
            &inv,
            &request(&[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_MIG_CONFIG_DEVICES=all",
                "NVIDIA_MIG_MONITOR_DEVICES=all",
            ]),
            None,
        )
        .unwrap();
        let p = paths(&plan);
        assert!(
            p.contains(&"/dev/nvidia-caps/nvidia-cap1")
                && p.contains(&"/dev/nvidia-caps/nvidia-cap2"),
            "{p:?}"
        );
        let plain = make(&inv, &request(&["NVIDIA_VISIBLE_DEVICES=0"]), None).unwrap();
        assert!(!paths(&plain).iter().any(|p| p.contains("nvidia-cap")));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn imex_channels_by_each_form_and_a_missing_one() {
        let inv = inventory(PathBuf::from("/nonexistent"));
        for env in [
            &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=5"][..],
            &["NVIDIA_VISIBLE_DEVICES=0,nvidia.com/imex-channel=channel5"][..],
        ] {
            let plan = make(&inv, &request(env), None).unwrap();
            assert_eq!(
                paths(&plan),
                [
                    "/dev/nvidia-caps-imex-channels/channel5",
                    "/dev/nvidia0",
                    "/dev/nvidiactl"
                ],
                "{env:?}"
            );
        }
        // A channel alone, by CDI name: the channel, nothing else.
        let plan = make(
            &inv,
            &request(&["NVIDIA_VISIBLE_DEVICES=nvidia.com/imex-channel=all"]),
            None,
        )
        .unwrap();
        assert_eq!(
            paths(&plan),
            [
                "/dev/nvidia-caps-imex-channels/channel0",
                "/dev/nvidia-caps-imex-channels/channel5"
            ]
        );
        assert!(plan.mounts.is_empty() && plan.env.is_empty() && plan.proc_driver_nvidia.is_none());
        for (ask, want) in [
            (
                "NVIDIA_IMEX_CHANNELS=6",
                "no /dev/nvidia-caps-imex-channels/channel6 (c 234:6)",
            ),
            ("NVIDIA_IMEX_CHANNELS=7", "channel7"),
        ] {
            let err = make(&inv, &request(&["NVIDIA_VISIBLE_DEVICES=0", ask]), None).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
        let mut no_imex = inv.clone();
        no_imex.imex_major = None;
        let err = make(
            &no_imex,
            &request(&["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=0"]),
            None,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("no nvidia-caps-imex-channels line"),
            "{err}"
        );
        // A bare `all` in the env is no request.
        let plan = make(
            &inv,
            &request(&["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=all"]),
            None,
        )
        .unwrap();
        assert_eq!(paths(&plan), ["/dev/nvidia0", "/dev/nvidiactl"]);
    }

    #[test]
    fn gated_devices_come_only_when_enabled_and_with_a_gpu() {
        let inv = inventory(PathBuf::from("/nonexistent"));
        let plan = make(
            &inv,
            &request(&[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_GDS=enabled",
                "NVIDIA_MOFED=yes",
            ]),
            None,
        )
        .unwrap();
        assert_eq!(
            paths(&plan),
            ["/dev/nvidia-fs0", "/dev/nvidia0", "/dev/nvidiactl"]
        );
        assert!(plan
            .mounts
            .iter()
            .any(|m| m.destination == Path::new("/etc/cufile.json")));
        let plan = make(
            &inv,
            &request(&["NVIDIA_VISIBLE_DEVICES=0,nvidia.com/mofed=all,nvidia.com/gdrcopy=all"]),
            None,
        )
        .unwrap();
        assert_eq!(
            paths(&plan),
            ["/dev/infiniband/uverbs0", "/dev/nvidia0", "/dev/nvidiactl"]
        );
        let alone = request(&["NVIDIA_GDS=enabled"]);
        assert!(!alone.wants_gpu() && alone.gated.is_empty() && alone.ignored.len() == 1);
    }
}
