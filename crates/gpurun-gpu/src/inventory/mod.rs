//! Inventory: what GPUs, device nodes and driver files this host has.
//!
//! GPU facts come from NVML (loaded at run time from the driver's own
//! library, in a child process that cannot change the host) when asked and
//! when it initialises, else from `/proc/driver/nvidia`. Driver files are
//! found in the driver root (see `driver_files`); a library counts only if
//! its file name ends in the driver version.

pub mod cache;
pub mod caps;
pub mod driver_files;
pub mod gated;
pub mod gpu_models;
pub mod gpus;
pub mod nvml;
pub mod tegra;
pub mod wsl;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::formats::platform::Platform;
use crate::inventory::cache::PathState;
use crate::inventory::caps::Capability;
pub use crate::inventory::driver_files::{DriverFile, FileKind};
use crate::inventory::driver_files::{DriverFiles, Looked};
use crate::inventory::gated::Gated;
use crate::inventory::gpu_models::{arch_for_model, brand_for_model, cuda_version_for_driver};
pub use crate::inventory::gpus::{DeviceNode, Gpu, MigDevice};
use crate::inventory::tegra::TegraHost;
use crate::inventory::wsl::WslHost;
use crate::roots::Roots;
use safe_fs::Rootfs;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub roots: Roots,
    /// "nvml" or "procfs": where the GPU facts came from.
    pub source: String,
    pub driver_version: String,
    /// "open" or "proprietary", from the kernel module's version line.
    pub kernel_module: Option<String>,
    pub cuda_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Nodes every GPU container needs: nvidiactl, nvidia-uvm, ...
    pub control_nodes: Vec<DeviceNode>,
    /// MIG capability nodes and IMEX channels.
    pub other_nodes: Vec<DeviceNode>,
    /// The IMEX channels' major (/proc/devices), where the driver has them.
    pub imex_major: Option<u32>,
    /// The gated devices' nodes (GDS, MOFED, GDRCopy, NVSwitch).
    pub gated_nodes: BTreeMap<Gated, Vec<DeviceNode>>,
    /// GPUDirect Storage's /etc/cufile.json, where the host has one.
    pub cufile: Option<PathBuf>,
    pub files: BTreeMap<Capability, Vec<DriverFile>>,
    pub firmware: Vec<DriverFile>,
    /// What discovery left out, and why.
    pub notes: Vec<String>,
    /// The host's architecture: its library directories and linker-cache
    /// flags.
    pub platform: &'static Platform,
    /// A WSL2 host's driver store and dxcore, where this is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wsl: Option<WslHost>,
    /// A Tegra host's CSV files and what they list (CSV mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tegra: Option<TegraHost>,
}

impl Inventory {
    /// One set of nodes serves every GPU (WSL2's /dev/dxg, a Tegra's CSV
    /// nodes): a GPU request gets them whichever GPUs it names.
    pub fn one_node_set(&self) -> bool {
        self.wsl.is_some() || self.tegra.is_some()
    }
}

impl Inventory {
    /// The host's IMEX channel nodes: those under
    /// /dev/nvidia-caps-imex-channels of the major /proc/devices names
    /// (none where it names none).
    pub fn imex_channels(&self) -> impl Iterator<Item = &DeviceNode> {
        let prefix = format!("{}/", gated::IMEX_DIR);
        self.other_nodes
            .iter()
            .filter(move |n| Some(n.major) == self.imex_major && n.path.starts_with(&prefix))
    }
}

/// Which source of GPU facts to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// NVML if it initialises, else procfs.
    Auto,
    /// procfs only: no library is loaded into this process. A runtime that
    /// is about to clone a container uses this.
    Procfs,
}

/// The kernel module's version line, read from procfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModule {
    pub version: String,
    /// "open" or "proprietary".
    pub flavor: &'static str,
}

pub fn discover(roots: &Roots, source: Source) -> Result<Inventory> {
    discover_cached(roots, source, None)
}

/// `discover`, keeping the driver's files in `cache_dir` (see
/// `inventory_cache`) when the facts come from procfs.
pub fn discover_cached(
    roots: &Roots,
    source: Source,
    cache_dir: Option<&Path>,
) -> Result<Inventory> {
    let root = Rootfs::open(&roots.driver_root).map_err(|e| {
        anyhow::anyhow!(
            "no NVIDIA driver found: driver root {}: {e}; set --driver-root (or GPURUN_DRIVER_ROOT) to where the NVIDIA driver's files are",
            roots.driver_root.display()
        )
    })?;
    if let Some(host) = wsl::detect(&root, &roots.dev_root, &mut Looked::default()) {
        return wsl_inventory(roots, &root, host);
    }
    let module = read_proc_driver(&roots.proc_root);
    if module.is_none() {
        if let Some(host) = tegra::detect(&root, &roots.dev_root, &mut Looked::default()) {
            return Ok(tegra_inventory(roots, &root, host));
        }
    }
    let cache = cache_dir
        .filter(|_| source == Source::Procfs)
        .zip(module.as_ref());
    if let Some((dir, m)) = cache {
        if let Some(hit) = cache::load(dir, &roots.driver_root, &m.version) {
            let gpus = read_proc_gpus(&roots.proc_root);
            let cuda = cuda_version_for_driver(&hit.version);
            return Ok(assemble(
                roots,
                "procfs",
                hit.version,
                module,
                cuda,
                gpus,
                hit.files,
            ));
        }
    }
    let mut looked = Looked::default();
    let platform = Platform::native();
    let dirs = driver_files::library_dirs(&root, &mut looked, platform);
    let (source_name, facts) =
        gpu_facts(roots, &root, &dirs, source, module.as_ref(), &mut looked)?;
    let version = facts.driver_version;
    let found = driver_files::scan(&root, &version, &dirs, &mut looked, platform);
    check_libraries_match_the_module(roots, &root, &dirs, &found, &version, &mut looked)?;
    if let Some((dir, m)) = cache {
        let watched = looked.0.iter().map(|p| PathState::of(p)).collect();
        cache::store(
            dir,
            &roots.driver_root,
            &m.version,
            &version,
            &dirs,
            &found,
            watched,
        );
    }
    Ok(assemble(
        roots,
        source_name,
        version,
        module,
        facts.cuda_version,
        facts.gpus,
        found,
    ))
}

/// A WSL2 host's inventory: no procfs driver there, so the facts come from
/// the store's NVML (in a child, as always) whatever the source; without
/// it the version is "unknown", and a requirement on it is refused.
fn wsl_inventory(roots: &Roots, root: &Rootfs, host: WslHost) -> Result<Inventory> {
    if host.driver_stores.is_empty() {
        bail!(
            "a WSL2 host ({} is there) with no NVIDIA driver store under {}{}: install the NVIDIA driver on Windows, or set --driver-root to where WSL's /usr/lib/wsl is",
            wsl::DXG,
            roots.driver_root.display(),
            wsl::DRIVER_STORE_DIR
        );
    }
    let mut looked = Looked::default();
    let platform = Platform::native();
    let found = wsl::files(root, &host, &mut looked, platform);
    let nvml = found
        .files
        .get(&Capability::Utility)
        .into_iter()
        .flatten()
        .find(|f| f.soname.as_deref() == Some("libnvidia-ml.so.1"))
        .and_then(|f| crate::inventory::nvml::query_isolated(&f.host_path));
    let (source, version, cuda, gpus) = match nvml {
        Some(facts) => ("nvml", facts.driver_version, facts.cuda_version, facts.gpus),
        None => ("none", "unknown".to_owned(), None, Vec::new()),
    };
    let mut inventory = assemble(roots, source, version, None, cuda, gpus, found);
    if source == "none" {
        inventory.notes.push(
            "WSL2: the driver store's NVML did not answer: driver version and GPUs unknown".into(),
        );
    }
    inventory.wsl = Some(host);
    Ok(inventory)
}

/// A Tegra host's inventory (CSV mode): the integrated GPU as GPU 0
/// (`igpu0`, the name LXD and the toolkit give it), the CSV's nodes for
/// every GPU request, and its files for every capability, as the toolkit
/// mounts the whole list whatever is asked.
fn tegra_inventory(roots: &Roots, root: &Rootfs, mut host: TegraHost) -> Inventory {
    let platform = Platform::native();
    let mut notes: Vec<String> = host
        .list
        .skipped
        .iter()
        .map(|line| {
            format!(
                "{}: line not understood, passed over: {line:?}",
                tegra::CSV_DIR
            )
        })
        .collect();
    let listed = tegra::files(root, &host, platform, &mut notes);
    let mut nodes = Vec::new();
    for (_, entry) in host
        .list
        .entries
        .iter()
        .filter(|(k, _)| *k == tegra::Kind::Dev)
    {
        let path = tegra::device_path(entry);
        match node_at(&roots.dev_root, &path) {
            Some(node) => nodes.push(node),
            None => notes.push(format!(
                "{path} (listed in {}) is no device node here: not injected",
                tegra::CSV_DIR
            )),
        }
    }
    let mut files = BTreeMap::new();
    for cap in Capability::ALL {
        files.insert(cap, listed.clone());
    }
    let found = DriverFiles {
        files,
        firmware: Vec::new(),
        notes,
    };
    let igpu = Gpu {
        index: 0,
        minor: 0,
        uuid: "igpu0".into(),
        pci_bus_id: String::new(),
        model: match host.release.as_deref().and_then(tegra::l4t_release) {
            Some(release) => format!("Tegra integrated GPU (L4T {release})"),
            None => "Tegra integrated GPU".into(),
        },
        arch: None,
        brand: None,
        node: None,
        drm_nodes: Vec::new(),
        migs: Vec::new(),
    };
    let mut inventory = assemble(
        roots,
        "csv",
        "unknown".into(),
        None,
        None,
        vec![igpu],
        found,
    );
    nodes.sort();
    inventory.control_nodes = nodes;
    // Only what the CSV lists: not a /dev/nvidia0 or DRM node of the dev
    // root that assemble matched to GPU 0.
    for gpu in &mut inventory.gpus {
        gpu.node = None;
        gpu.drm_nodes.clear();
    }
    add_tegra_nvml(&mut inventory, &mut host, root, platform);
    inventory.tegra = Some(host);
    inventory
}

/// What NVML says on a Tegra host where it initialises (JetPack 6 ships
/// it): the CUDA version and the GPU's name, which tells an Orin, as the
/// toolkit asks them for CUDA forward compatibility. The driver version
/// stays unknown: Tegra's libraries carry none.
fn add_tegra_nvml(
    inventory: &mut Inventory,
    host: &mut TegraHost,
    root: &Rootfs,
    platform: &Platform,
) {
    let dirs = driver_files::library_dirs(root, &mut Looked::default(), platform);
    let Some(facts) = driver_files::nvml_library(root, &dirs)
        .and_then(|lib| crate::inventory::nvml::query_isolated(&lib))
    else {
        tracing::debug!(
            "Tegra host: NVML does not answer; no CUDA version for forward compatibility"
        );
        return;
    };
    let names: Vec<&str> = facts.gpus.iter().map(|g| g.model.as_str()).collect();
    host.orin = tegra::is_orin(&names);
    if let (Some(igpu), Some(name)) = (inventory.gpus.first_mut(), names.first()) {
        igpu.model = (*name).to_owned();
    }
    inventory.cuda_version = facts.cuda_version;
}

/// The driver version and GPUs: from NVML where `source` allows and it
/// initialises, else from procfs and the driver's library names.
fn gpu_facts(
    roots: &Roots,
    root: &Rootfs,
    dirs: &driver_files::LibraryDirs,
    source: Source,
    module: Option<&KernelModule>,
    looked: &mut Looked,
) -> Result<(&'static str, crate::inventory::nvml::NvmlFacts)> {
    if source == Source::Auto {
        let nvml = driver_files::nvml_library(root, dirs)
            .and_then(|lib| crate::inventory::nvml::query_isolated(&lib));
        if let Some(facts) = nvml {
            return Ok(("nvml", facts));
        }
    }
    let Some(version) = module
        .map(|m| m.version.clone())
        .or_else(|| driver_files::library_version(root, dirs, looked))
    else {
        bail!(
            "no NVIDIA driver found: no {}/driver/nvidia/version and no libnvidia-ml.so.<version> in the library directories under {}: the driver is not installed or not loaded; if its files are elsewhere (a driver container), set --driver-root / --proc-root (or GPURUN_DRIVER_ROOT / GPURUN_PROC_ROOT)",
            roots.proc_root.display(),
            roots.driver_root.display()
        );
    };
    let facts = crate::inventory::nvml::NvmlFacts {
        cuda_version: cuda_version_for_driver(&version),
        driver_version: version,
        gpus: read_proc_gpus(&roots.proc_root),
    };
    Ok(("procfs", facts))
}

/// No library of the module's version but libraries of another: the
/// module and the libraries disagree, which the user must fix.
fn check_libraries_match_the_module(
    roots: &Roots,
    root: &Rootfs,
    dirs: &driver_files::LibraryDirs,
    found: &DriverFiles,
    version: &str,
    looked: &mut Looked,
) -> Result<()> {
    let has_libraries = found
        .files
        .values()
        .flatten()
        .any(|f| f.kind == FileKind::Library);
    if has_libraries {
        return Ok(());
    }
    if let Some(other) = driver_files::library_version(root, dirs, looked).filter(|v| v != version)
    {
        bail!(
            "the NVIDIA kernel module is version {version} but the driver's libraries under {} are {other}: reboot or reload the module (or reinstall the matching libraries)",
            roots.driver_root.display()
        );
    }
    Ok(())
}

/// The inventory from the driver's files and the GPU facts: each GPU's
/// nodes, and the control and capability nodes, read from the dev root.
fn assemble(
    roots: &Roots,
    source: &str,
    driver_version: String,
    module: Option<KernelModule>,
    cuda_version: Option<String>,
    mut gpus: Vec<Gpu>,
    found: DriverFiles,
) -> Inventory {
    let nodes = scan_nodes(&roots.dev_root);
    let sys = roots.dev_root.join("sys/bus/pci/devices");
    for gpu in &mut gpus {
        // On WSL2 one node, /dev/dxg, is every GPU's.
        gpu.node = nodes
            .iter()
            .find(|n| n.path == format!("/dev/nvidia{}", gpu.minor))
            .or_else(|| nodes.iter().find(|n| n.path == wsl::DXG))
            .cloned();
        gpu.drm_nodes = drm_nodes(&roots.dev_root, &sys, &gpu.pci_bus_id);
        attach_mig_nodes(gpu, &roots.proc_root, &nodes);
    }
    let control_nodes = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
        wsl::DXG,
    ]
    .iter()
    .filter_map(|p| nodes.iter().find(|n| n.path == *p).cloned())
    .collect();
    let other_nodes = nodes
        .iter()
        .filter(|n| n.path.starts_with("/dev/nvidia-caps"))
        .cloned()
        .collect();
    let imex_major = fs::read_to_string(roots.proc_root.join("devices"))
        .ok()
        .and_then(|text| gated::imex_major(&text));
    let gated_nodes = scan_gated_nodes(&roots.dev_root);
    let cufile = Some(roots.driver_root.join("etc/cufile.json")).filter(|p| p.is_file());
    let DriverFiles {
        files,
        firmware,
        notes,
    } = found;
    Inventory {
        roots: roots.clone(),
        source: source.into(),
        driver_version,
        kernel_module: module.map(|m| m.flavor.to_owned()),
        cuda_version,
        gpus,
        control_nodes,
        other_nodes,
        imex_major,
        gated_nodes,
        cufile,
        files,
        firmware,
        notes,
        platform: Platform::native(),
        wsl: None,
        tegra: None,
    }
}

/// The gated devices' nodes under the dev root, by family.
fn scan_gated_nodes(dev_root: &Path) -> BTreeMap<Gated, Vec<DeviceNode>> {
    let mut paths: Vec<String> = Vec::new();
    for (dir, prefix) in [("dev", "/dev"), ("dev/infiniband", "/dev/infiniband")] {
        if let Ok(entries) = fs::read_dir(dev_root.join(dir)) {
            for e in entries.flatten() {
                paths.push(format!("{prefix}/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    let mut out: BTreeMap<Gated, Vec<DeviceNode>> = BTreeMap::new();
    for path in paths {
        let Some(family) = Gated::ALL.into_iter().find(|g| g.owns(&path)) else {
            continue;
        };
        if let Some(node) = node_at(dev_root, &path) {
            out.entry(family).or_default().push(node);
        }
    }
    for nodes in out.values_mut() {
        nodes.sort();
    }
    out
}

/// The version in the kernel module's "NVRM version:" line: the first word
/// that is a dotted version. Both wordings:
/// "NVIDIA UNIX x86_64 Kernel Module  535.309.01  Thu ..." (proprietary),
/// "NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build" (open).
pub fn parse_proc_version(text: &str) -> Option<KernelModule> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let version = line
        .split_whitespace()
        .find(|w| w.contains('.') && crate::formats::require::parse_version(w).is_some())?;
    Some(KernelModule {
        version: version.to_owned(),
        flavor: if line.contains("Open Kernel Module") {
            "open"
        } else {
            "proprietary"
        },
    })
}

pub fn read_proc_driver(proc_root: &Path) -> Option<KernelModule> {
    parse_proc_version(&fs::read_to_string(proc_root.join("driver/nvidia/version")).ok()?)
}

/// "0000:1A:00.0" or NVML's "00000000:1A:00.0" → sysfs's "0000:1a:00.0".
pub(crate) fn sysfs_bus_id(bus: &str) -> Option<String> {
    let (domain, rest) = bus.split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some(format!("{domain:04x}:{}", rest.to_ascii_lowercase()))
}

/// The DRM nodes sysfs names for a GPU: `<pci device>/drm/card*` and
/// `renderD*`, found as `/dev/dri/<name>`.
fn drm_nodes(dev_root: &Path, sys_devices: &Path, bus: &str) -> Vec<DeviceNode> {
    let Some(bus) = sysfs_bus_id(bus) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(sys_devices.join(bus).join("drm")) else {
        return Vec::new();
    };
    let mut nodes: Vec<DeviceNode> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("card") || n.starts_with("renderD"))
        .filter_map(|n| node_at(dev_root, &format!("/dev/dri/{n}")))
        .collect();
    nodes.sort();
    nodes
}

/// GPUs from `/proc/driver/nvidia/gpus/<bus id>/information`, indexed in
/// PCI bus order as NVML does.
fn read_proc_gpus(proc_root: &Path) -> Vec<Gpu> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(proc_root.join("driver/nvidia/gpus"))
        .map(|e| e.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    let mut gpus = Vec::new();
    for dir in dirs {
        let Ok(text) = fs::read_to_string(dir.join("information")) else {
            continue;
        };
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim_start_matches(':').trim().to_owned())
        };
        let (Some(model), Some(uuid), Some(minor)) =
            (field("Model"), field("GPU UUID"), field("Device Minor"))
        else {
            continue;
        };
        let Ok(minor) = minor.parse() else { continue };
        let bus = field("Bus Location").unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        gpus.push(Gpu {
            index: gpus.len() as u32,
            minor,
            uuid,
            pci_bus_id: bus,
            arch: arch_for_model(&model),
            brand: brand_for_model(&model),
            model,
            node: None,
            drm_nodes: Vec::new(),
            migs: Vec::new(),
        });
    }
    gpus
}

/// MIG capability nodes from `/proc/driver/nvidia/capabilities/gpu<minor>/mig`.
fn attach_mig_nodes(gpu: &mut Gpu, proc_root: &Path, nodes: &[DeviceNode]) {
    let base = proc_root.join(format!("driver/nvidia/capabilities/gpu{}/mig", gpu.minor));
    let Ok(gis) = fs::read_dir(&base) else { return };
    let mut found: Vec<(u32, u32, Vec<DeviceNode>)> = Vec::new();
    for gi in gis.flatten() {
        let name = gi.file_name().to_string_lossy().into_owned();
        let Some(gi_id) = name.strip_prefix("gi").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let gi_node = cap_node(&gi.path().join("access"), nodes);
        let Ok(cis) = fs::read_dir(gi.path()) else {
            continue;
        };
        for ci in cis.flatten() {
            let cname = ci.file_name().to_string_lossy().into_owned();
            let Some(ci_id) = cname.strip_prefix("ci").and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let mut list: Vec<DeviceNode> = gi_node.iter().cloned().collect();
            list.extend(cap_node(&ci.path().join("access"), nodes));
            found.push((gi_id, ci_id, list));
        }
    }
    found.sort_by_key(|(gi, ci, _)| (*gi, *ci));
    for (i, (gi, ci, list)) in found.into_iter().enumerate() {
        match gpu.migs.get_mut(i) {
            Some(mig) => {
                mig.gpu_instance = Some(gi);
                mig.compute_instance = Some(ci);
                mig.nodes = list;
            }
            None => gpu.migs.push(MigDevice {
                index: i as u32,
                uuid: String::new(),
                gpu_instance: Some(gi),
                compute_instance: Some(ci),
                nodes: list,
                profile: None,
            }),
        }
    }
}

/// The /dev/nvidia-caps node named by a capability `access` file's
/// `DeviceFileMinor`.
pub(crate) fn cap_node(access: &Path, nodes: &[DeviceNode]) -> Option<DeviceNode> {
    let text = fs::read_to_string(access).ok()?;
    let minor: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("DeviceFileMinor:"))?
        .trim()
        .parse()
        .ok()?;
    nodes
        .iter()
        .find(|n| n.path == format!("/dev/nvidia-caps/nvidia-cap{minor}"))
        .cloned()
}

fn node_at(dev_root: &Path, path: &str) -> Option<DeviceNode> {
    let host_path = dev_root.join(path.trim_start_matches('/'));
    let meta = fs::metadata(&host_path).ok()?;
    if !meta.file_type().is_char_device() {
        return None;
    }
    let rdev = meta.rdev();
    Some(DeviceNode {
        path: path.to_owned(),
        host_path,
        major: libc::major(rdev),
        minor: libc::minor(rdev),
        file_mode: meta.mode() & 0o7777,
        gid: meta.gid(),
    })
}

fn scan_nodes(dev_root: &Path) -> Vec<DeviceNode> {
    let mut paths: Vec<String> = Vec::new();
    if let Ok(entries) = fs::read_dir(dev_root.join("dev")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let wanted = matches!(
                name.as_str(),
                "nvidiactl" | "nvidia-uvm" | "nvidia-uvm-tools" | "nvidia-modeset" | "dxg"
            ) || name
                .strip_prefix("nvidia")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if wanted {
                paths.push(format!("/dev/{name}"));
            }
        }
    }
    for dir in ["nvidia-caps", "nvidia-caps-imex-channels"] {
        if let Ok(entries) = fs::read_dir(dev_root.join("dev").join(dir)) {
            for e in entries.flatten() {
                paths.push(format!("/dev/{dir}/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    let mut nodes: Vec<DeviceNode> = paths.iter().filter_map(|p| node_at(dev_root, p)).collect();
    nodes.sort();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kernel_module_version_lines() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n";
        assert_eq!(
            parse_proc_version(open),
            Some(KernelModule {
                version: "580.159.04".into(),
                flavor: "open"
            })
        );
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Tue Jan  7 00:00:00 UTC 2025\n";
        assert_eq!(
            parse_proc_version(proprietary),
            Some(KernelModule {
                version: "535.309.01".into(),
                flavor: "proprietary"
            })
        );
        let arm =
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build\n";
        assert_eq!(parse_proc_version(arm).unwrap().version, "570.86.15");
        assert_eq!(parse_proc_version("NVRM version: garbage\n"), None);
        assert_eq!(parse_proc_version(""), None);
    }

    #[test]
    fn bus_ids_as_sysfs_names_them() {
        assert_eq!(
            sysfs_bus_id("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(
            sysfs_bus_id("0000:1a:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(sysfs_bus_id("nonsense"), None);
    }
}

#[cfg(test)]
mod fake_tree {
    use std::process::Command;

    use super::*;

    /// A shared library with the given SONAME, built with the host's cc.
    /// A shared library of the platform's machine: `GPURUN_TEST_CC` is
    /// the target's compiler where the tests run on another (aarch64 under
    /// qemu-user, scripts/ci/test-aarch64.sh).
    fn build_so(path: &Path, soname: &str) {
        let src = path.with_extension("c");
        fs::write(&src, "int gpurun_fake(void) { return 1; }\n").unwrap();
        let cc = std::env::var("GPURUN_TEST_CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(cc)
            .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
            .arg(path)
            .arg(&src)
            .status()
            .expect("cc (build-essential)");
        assert!(status.success());
        fs::remove_file(src).unwrap();
    }

    /// A driver 999.88.77 tree under `root`: its libraries, one of another
    /// version, an unknown one, a wrapper script, and procfs for one GPU.
    fn versioned_driver_tree(root: &Path) -> Roots {
        let driver = root.join("driver");
        let lib = driver.join("usr/lib64");
        let bin = driver.join("usr/bin");
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(&bin).unwrap();
        build_so(&lib.join("libnvidia-ml.so.999.88.77"), "libnvidia-ml.so.1");
        build_so(&lib.join("libcuda.so.999.88.77"), "libcuda.so.1");
        build_so(
            &lib.join("libnvidia-nvvm.so.999.88.77"),
            "libnvidia-nvvm.so.4",
        );
        // Linked by CUDA's and by GL/EGL's libraries alike.
        build_so(
            &lib.join("libnvidia-gpucomp.so.999.88.77"),
            "libnvidia-gpucomp.so.999.88.77",
        );
        // A leftover of another driver version and an unknown library.
        build_so(&lib.join("libcuda.so.470.1.2"), "libcuda.so.1");
        build_so(&lib.join("libfoo.so.999.88.77"), "libfoo.so.1");
        // A wrapper script on the PATH, the real program elsewhere.
        fs::write(
            bin.join("nvidia-smi"),
            "#!/bin/sh\nexec /usr/lib/nvidia/current/nvidia-smi\n",
        )
        .unwrap();
        let real_bin = driver.join("usr/lib/nvidia/current");
        fs::create_dir_all(&real_bin).unwrap();
        // A program of the platform's machine: this test binary.
        fs::copy(
            std::env::current_exe().unwrap(),
            real_bin.join("nvidia-smi"),
        )
        .unwrap();
        let proc_dir = root.join("proc/driver/nvidia");
        fs::create_dir_all(proc_dir.join("gpus/0000:3b:00.0")).unwrap();
        fs::write(
            proc_dir.join("version"),
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  999.88.77  Mon Jan 1\n",
        )
        .unwrap();
        fs::write(
            proc_dir.join("gpus/0000:3b:00.0/information"),
            "Model: \t\t NVIDIA A100-SXM4-40GB\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nBus Location: \t 0000:3b:00.0\nDevice Minor: \t 4\n",
        )
        .unwrap();
        Roots {
            driver_root: driver.clone(),
            dev_root: root.to_path_buf(),
            proc_root: root.join("proc"),
        }
    }

    #[test]
    fn discovers_only_libraries_of_the_driver_version() {
        let root = std::env::temp_dir().join(format!("fake-tree-{}", std::process::id()));
        let roots = versioned_driver_tree(&root);
        let inv = discover(&roots, Source::Procfs).unwrap();
        assert_eq!(inv.driver_version, "999.88.77");
        assert_eq!(inv.source, "procfs");
        assert_eq!(inv.gpus.len(), 1);
        assert_eq!(inv.gpus[0].minor, 4);
        assert_eq!(inv.gpus[0].arch.as_deref(), Some("8.0"));
        assert!(
            inv.gpus[0].node.is_none(),
            "no /dev/nvidia4 in the fake tree"
        );
        let names = |cap| -> Vec<(String, Option<String>)> {
            inv.files[&cap]
                .iter()
                .map(|f| {
                    (
                        f.path_in_root.to_string_lossy().into_owned(),
                        f.soname.clone(),
                    )
                })
                .collect()
        };
        assert_eq!(
            names(Capability::Utility),
            [
                (
                    "usr/lib64/libnvidia-ml.so.999.88.77".to_owned(),
                    Some("libnvidia-ml.so.1".to_owned())
                ),
                ("usr/lib/nvidia/current/nvidia-smi".to_owned(), None),
            ]
        );
        assert_eq!(
            names(Capability::Compute),
            [
                (
                    "usr/lib64/libcuda.so.999.88.77".to_owned(),
                    Some("libcuda.so.1".to_owned())
                ),
                (
                    "usr/lib64/libnvidia-gpucomp.so.999.88.77".to_owned(),
                    Some("libnvidia-gpucomp.so.999.88.77".to_owned())
                ),
                (
                    "usr/lib64/libnvidia-nvvm.so.999.88.77".to_owned(),
                    Some("libnvidia-nvvm.so.4".to_owned())
                ),
            ]
        );
        assert_eq!(
            names(Capability::Graphics),
            [(
                "usr/lib64/libnvidia-gpucomp.so.999.88.77".to_owned(),
                Some("libnvidia-gpucomp.so.999.88.77".to_owned())
            )]
        );
        assert!(
            inv.notes
                .iter()
                .any(|n| n.contains("/usr/bin/nvidia-smi is not an ELF program")),
            "{:?}",
            inv.notes
        );
        let _ = fs::remove_dir_all(root);
    }

    /// The layout of a cloud host: the driver in /usr/local/nvidia, soname
    /// links in /lib that are absolute symlinks, a linker cache naming both,
    /// wrapper scripts in /usr/bin, and the open kernel module's wording.
    /// Absolute links mean paths in the driver root, not on this host.
    #[test]
    fn usr_local_nvidia_layout_resolves_inside_the_driver_root() {
        let root = std::env::temp_dir().join(format!("fake-uln-{}", std::process::id()));
        let host = root.join("host");
        let lib64 = host.join("usr/local/nvidia/lib64");
        fs::create_dir_all(&lib64).unwrap();
        fs::create_dir_all(host.join("usr/local/nvidia/bin")).unwrap();
        fs::create_dir_all(host.join("usr/lib")).unwrap();
        fs::create_dir_all(host.join("usr/bin")).unwrap();
        fs::create_dir_all(host.join("etc")).unwrap();
        std::os::unix::fs::symlink("usr/lib", host.join("lib")).unwrap();
        std::os::unix::fs::symlink("lib64", host.join("usr/local/nvidia/lib")).unwrap();
        let v = "580.159.04";
        for (name, soname) in [
            ("libnvidia-ml", "libnvidia-ml.so.1"),
            ("libcuda", "libcuda.so.1"),
        ] {
            build_so(&lib64.join(format!("{name}.so.{v}")), soname);
            std::os::unix::fs::symlink(format!("{name}.so.{v}"), lib64.join(soname)).unwrap();
            std::os::unix::fs::symlink(
                format!("/usr/local/nvidia/lib64/{soname}"),
                host.join("usr/lib").join(soname),
            )
            .unwrap();
        }
        let entries: Vec<crate::formats::ldcache::Entry> = ["libcuda.so.1", "libnvidia-ml.so.1"]
            .iter()
            .flat_map(|so| {
                ["/usr/local/nvidia/lib64", "/lib"].map(|d| crate::formats::ldcache::Entry {
                    name: so.to_string(),
                    path: format!("{d}/{so}"),
                    flags: Platform::native().cache_flags,
                    hwcap: 0,
                })
            })
            .collect();
        fs::write(
            host.join("etc/ld.so.cache"),
            crate::formats::ldcache::write(&entries),
        )
        .unwrap();
        fs::write(
            host.join("usr/bin/nvidia-smi"),
            "#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n",
        )
        .unwrap();
        fs::copy(
            std::env::current_exe().unwrap(),
            host.join("usr/local/nvidia/bin/nvidia-smi"),
        )
        .unwrap();
        let proc_dir = root.join("proc/driver/nvidia");
        fs::create_dir_all(&proc_dir).unwrap();
        fs::write(
            proc_dir.join("version"),
            format!("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  (nixbld@)\n"),
        )
        .unwrap();
        let roots = Roots {
            driver_root: host.clone(),
            dev_root: root.clone(),
            proc_root: root.join("proc"),
        };
        let inv = discover(&roots, Source::Procfs).unwrap();
        assert_eq!(inv.driver_version, v);
        assert_eq!(inv.kernel_module.as_deref(), Some("open"));
        let files: Vec<String> = inv.files[&Capability::Utility]
            .iter()
            .map(|f| f.path_in_root.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            files,
            [
                format!("usr/local/nvidia/lib64/libnvidia-ml.so.{v}"),
                "usr/local/nvidia/bin/nvidia-smi".to_owned()
            ]
        );
        let host_real = host.canonicalize().unwrap();
        for f in inv.files.values().flatten() {
            assert!(
                f.host_path.starts_with(&host_real),
                "{f:?} left the driver root"
            );
        }
        // Without procfs, the version comes from the libraries the cache names.
        let roots = Roots {
            proc_root: root.join("no-proc"),
            ..roots
        };
        assert_eq!(discover(&roots, Source::Procfs).unwrap().driver_version, v);
        let _ = fs::remove_dir_all(root);
    }
}
