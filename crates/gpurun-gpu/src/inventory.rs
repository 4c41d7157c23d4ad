//! Inventory: what GPUs, device nodes and driver files this host has.
//!
//! GPU facts come from NVML (loaded at run time from the driver root) when
//! it initialises, else from `/proc/driver/nvidia`. Driver files are found in
//! the driver root; a library counts only if its file name ends in the
//! driver version.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::caps::Capability;
use crate::roots::Roots;
use crate::{elf, ldcache};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub roots: Roots,
    /// "nvml" or "procfs": where the GPU facts came from.
    pub source: String,
    pub driver_version: String,
    pub cuda_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Nodes every GPU container needs: nvidiactl, nvidia-uvm, ...
    pub control_nodes: Vec<DeviceNode>,
    /// MIG capability nodes and IMEX channels.
    pub other_nodes: Vec<DeviceNode>,
    pub files: BTreeMap<Capability, Vec<DriverFile>>,
    pub firmware: Vec<DriverFile>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    pub index: u32,
    pub minor: u32,
    pub uuid: String,
    pub pci_bus_id: String,
    pub model: String,
    /// Compute capability, e.g. "9.0".
    pub arch: Option<String>,
    pub brand: Option<String>,
    pub node: Option<DeviceNode>,
    pub migs: Vec<MigDevice>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigDevice {
    pub index: u32,
    pub uuid: String,
    pub gpu_instance: Option<u32>,
    pub compute_instance: Option<u32>,
    pub nodes: Vec<DeviceNode>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    /// Where the node is inside the container, e.g. `/dev/nvidia0`.
    pub path: String,
    /// Where it is on the host (under the dev root).
    pub host_path: PathBuf,
    pub major: u32,
    pub minor: u32,
    pub file_mode: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Library,
    Binary,
    Firmware,
    Socket,
    Directory,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriverFile {
    pub kind: FileKind,
    /// The file's path on the host.
    pub host_path: PathBuf,
    /// Its path relative to the driver root, as the host sees it.
    pub path_in_root: PathBuf,
    /// For libraries: the SONAME, e.g. `libcuda.so.1`.
    pub soname: Option<String>,
    /// 32-bit (compat32) libraries go to the image's 32-bit directory.
    pub compat32: bool,
}

/// Library name prefixes and binaries per capability, after
/// libnvidia-container's `nvc_info.c`.
fn libraries_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &["libnvidia-ml.so", "libnvidia-cfg.so"],
        Capability::Compute => &[
            "libcuda.so",
            "libcudadebugger.so",
            "libnvidia-opencl.so",
            "libnvidia-ptxjitcompiler.so",
            "libnvidia-fatbinaryloader.so",
            "libnvidia-allocator.so",
            "libnvidia-compiler.so",
            "libnvidia-nvvm.so",
            "libnvidia-pkcs11.so",
            "libnvidia-pkcs11-openssl3.so",
            "libnvidia-gpucomp.so",
        ],
        Capability::Video => &[
            "libvdpau_nvidia.so",
            "libnvidia-encode.so",
            "libnvidia-opticalflow.so",
            "libnvcuvid.so",
        ],
        Capability::Graphics => &[
            "libnvidia-eglcore.so",
            "libnvidia-glcore.so",
            "libnvidia-tls.so",
            "libnvidia-glsi.so",
            "libnvidia-fbc.so",
            "libnvidia-ifr.so",
            "libnvidia-rtcore.so",
            "libnvoptix.so",
            "libGLX_nvidia.so",
            "libEGL_nvidia.so",
            "libGLESv2_nvidia.so",
            "libGLESv1_CM_nvidia.so",
            "libnvidia-glvkspirv.so",
            "libnvidia-cbl.so",
        ],
        Capability::Display => &["libnvidia-wayland-client.so"],
        Capability::Ngx => &["libnvidia-ngx.so"],
        Capability::Compat32 => &[],
    }
}

fn binaries_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &["nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"],
        Capability::Compute => &["nvidia-cuda-mps-control", "nvidia-cuda-mps-server"],
        Capability::Ngx => &["nvidia-ngx-updater"],
        _ => &[],
    }
}

pub(crate) const LIB_DIRS_64: &[&str] = &[
    "usr/lib/x86_64-linux-gnu/nvidia/current",
    "usr/lib/x86_64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "usr/lib64",
    "lib64",
    "usr/lib",
    "lib",
];
const LIB_DIRS_32: &[&str] = &[
    "usr/lib/i386-linux-gnu/nvidia/current",
    "usr/lib/i386-linux-gnu",
    "usr/lib32",
    "lib32",
];
const BIN_DIRS: &[&str] = &[
    "usr/bin",
    "usr/sbin",
    "bin",
    "sbin",
    "usr/lib/nvidia/current",
];

/// Which source of GPU facts to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// NVML if it initialises, else procfs.
    Auto,
    /// procfs only: no library is loaded into this process. A runtime that
    /// is about to clone a container uses this.
    Procfs,
}

pub fn discover(roots: &Roots, source: Source) -> Result<Inventory> {
    let nodes = scan_nodes(&roots.dev_root);
    let proc_version = read_proc_driver_version(&roots.proc_root);
    let lib_version = library_driver_version(&roots.driver_root);
    let mut facts = None;
    if source == Source::Auto {
        facts = crate::nvml::query(&roots.driver_root);
    }
    let (source_name, driver_version, cuda_version, mut gpus) = match facts {
        Some(f) => ("nvml", f.driver_version, f.cuda_version, f.gpus),
        None => {
            let Some(version) = proc_version.clone().or(lib_version) else {
                bail!(
                    "no NVIDIA driver found: no {}/driver/nvidia/version and no libnvidia-ml.so.<version> under {}; set --driver-root / --proc-root (or GPURUN_DRIVER_ROOT / GPURUN_PROC_ROOT)",
                    roots.proc_root.display(),
                    roots.driver_root.display()
                );
            };
            let cuda = cuda_version_for_driver(&version);
            ("procfs", version, cuda, read_proc_gpus(&roots.proc_root))
        }
    };
    for gpu in &mut gpus {
        gpu.node = nodes
            .iter()
            .find(|n| n.path == format!("/dev/nvidia{}", gpu.minor))
            .cloned();
        attach_mig_nodes(gpu, &roots.proc_root, &nodes);
    }
    let control_nodes = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
    ]
    .iter()
    .filter_map(|p| nodes.iter().find(|n| n.path == *p).cloned())
    .collect();
    let other_nodes = nodes
        .iter()
        .filter(|n| n.path.starts_with("/dev/nvidia-caps"))
        .cloned()
        .collect();
    let files = scan_files(&roots.driver_root, &driver_version);
    let firmware = scan_firmware(&roots.driver_root, &driver_version);
    Ok(Inventory {
        roots: roots.clone(),
        source: source_name.into(),
        driver_version,
        cuda_version,
        gpus,
        control_nodes,
        other_nodes,
        files,
        firmware,
    })
}

/// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Thu ..." → "535.309.01"
pub fn read_proc_driver_version(proc_root: &Path) -> Option<String> {
    let text = fs::read_to_string(proc_root.join("driver/nvidia/version")).ok()?;
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let after = line.split("Kernel Module").nth(1)?;
    let version = after.split_whitespace().next()?;
    crate::require::parse_version(version).map(|_| version.to_owned())
}

/// The version in the name of `libnvidia-ml.so.<version>` or `libcuda.so.<version>`.
fn library_driver_version(driver_root: &Path) -> Option<String> {
    for dir in LIB_DIRS_64 {
        let Ok(entries) = fs::read_dir(driver_root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            for prefix in ["libnvidia-ml.so.", "libcuda.so."] {
                if let Some(v) = name.strip_prefix(prefix) {
                    if v.split('.').count() >= 2 && crate::require::parse_version(v).is_some() {
                        return Some(v.to_owned());
                    }
                }
            }
        }
    }
    None
}

/// The CUDA version a driver branch supports, for hosts without NVML.
pub fn cuda_version_for_driver(driver: &str) -> Option<String> {
    let major: u32 = driver.split('.').next()?.parse().ok()?;
    let table = [
        (580, "13.0"),
        (575, "12.9"),
        (570, "12.8"),
        (565, "12.7"),
        (560, "12.6"),
        (555, "12.5"),
        (550, "12.4"),
        (545, "12.3"),
        (535, "12.2"),
        (530, "12.1"),
        (525, "12.0"),
        (520, "11.8"),
        (515, "11.7"),
        (510, "11.6"),
        (495, "11.5"),
        (470, "11.4"),
        (465, "11.3"),
        (460, "11.2"),
        (455, "11.1"),
        (450, "11.0"),
    ];
    table
        .iter()
        .find(|(m, _)| major >= *m)
        .map(|(_, v)| v.to_string())
}

/// Compute capability from the model name, for hosts without NVML.
pub fn arch_for_model(model: &str) -> Option<String> {
    let m = model.to_ascii_uppercase();
    let table = [
        ("B200", "10.0"),
        ("B100", "10.0"),
        ("GH200", "9.0"),
        ("H200", "9.0"),
        ("H100", "9.0"),
        ("H800", "9.0"),
        ("L40", "8.9"),
        ("L4", "8.9"),
        ("RTX 40", "8.9"),
        ("A100", "8.0"),
        ("A800", "8.0"),
        ("A30", "8.0"),
        ("A40", "8.6"),
        ("A10", "8.6"),
        ("A16", "8.6"),
        ("A2", "8.6"),
        ("RTX 30", "8.6"),
        ("T4", "7.5"),
        ("RTX 20", "7.5"),
        ("V100", "7.0"),
        ("P100", "6.0"),
        ("P40", "6.1"),
        ("P4", "6.1"),
    ];
    table
        .iter()
        .find(|(k, _)| m.contains(k))
        .map(|(_, v)| v.to_string())
}

/// Brand from the model name, in NVML's lower-case words.
pub fn brand_for_model(model: &str) -> Option<String> {
    let m = model.to_ascii_lowercase();
    let brand = if m.contains("geforce") {
        "geforce"
    } else if m.contains("quadro") {
        "quadro"
    } else if m.contains("titan") {
        "titan"
    } else if m.contains("tesla") {
        "tesla"
    } else if m.contains("nvidia") {
        "nvidia"
    } else {
        return None;
    };
    Some(brand.to_owned())
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
    })
}

fn scan_nodes(dev_root: &Path) -> Vec<DeviceNode> {
    let mut paths: Vec<String> = Vec::new();
    if let Ok(entries) = fs::read_dir(dev_root.join("dev")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let wanted = matches!(
                name.as_str(),
                "nvidiactl" | "nvidia-uvm" | "nvidia-uvm-tools" | "nvidia-modeset"
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

/// Directories to search for libraries: those the driver root's own
/// ld.so.cache names for NVIDIA libraries, then the usual ones.
fn library_dirs(driver_root: &Path, compat32: bool) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(bytes) = fs::read(driver_root.join("etc/ld.so.cache")) {
        if let Ok(entries) = ldcache::parse(&bytes) {
            let is_64 = |flags: i32| flags & 0x0300 == 0x0300;
            for e in entries {
                if (e.name.starts_with("libnvidia") || e.name.starts_with("libcuda"))
                    && is_64(e.flags) != compat32
                {
                    if let Some(parent) = Path::new(&e.path).parent() {
                        let rel = parent.strip_prefix("/").unwrap_or(parent).to_path_buf();
                        if !dirs.contains(&rel) {
                            dirs.push(rel);
                        }
                    }
                }
            }
        }
    }
    let defaults = if compat32 { LIB_DIRS_32 } else { LIB_DIRS_64 };
    for d in defaults {
        let d = PathBuf::from(d);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// The canonical path of `rel` under `root`, if it stays under `root`.
fn inside_root(root: &Path, rel: &Path) -> Option<(PathBuf, PathBuf)> {
    let canonical_root = fs::canonicalize(root).ok()?;
    let canonical = fs::canonicalize(root.join(rel)).ok()?;
    let in_root = canonical.strip_prefix(&canonical_root).ok()?.to_path_buf();
    Some((canonical, in_root))
}

fn scan_files(driver_root: &Path, version: &str) -> BTreeMap<Capability, Vec<DriverFile>> {
    let mut files: BTreeMap<Capability, Vec<DriverFile>> = BTreeMap::new();
    for compat32 in [false, true] {
        for dir in library_dirs(driver_root, compat32) {
            let Ok(entries) = fs::read_dir(driver_root.join(&dir)) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for name in names {
                let Some(prefix) = name.strip_suffix(&format!(".{version}")) else {
                    continue;
                };
                let Some(cap) = Capability::ALL
                    .into_iter()
                    .find(|c| libraries_for(*c).contains(&prefix))
                else {
                    continue;
                };
                let Some((host_path, path_in_root)) = inside_root(driver_root, &dir.join(&name))
                else {
                    continue;
                };
                if !host_path.is_file() {
                    continue;
                }
                let cap = if compat32 { Capability::Compat32 } else { cap };
                let list = files.entry(cap).or_default();
                if list.iter().any(|f| f.host_path == host_path) {
                    continue;
                }
                list.push(DriverFile {
                    kind: FileKind::Library,
                    soname: elf::soname(&host_path),
                    host_path,
                    path_in_root,
                    compat32,
                });
            }
        }
    }
    for cap in Capability::ALL {
        for binary in binaries_for(cap) {
            for dir in BIN_DIRS {
                let rel = Path::new(dir).join(binary);
                let Some((host_path, path_in_root)) = inside_root(driver_root, &rel) else {
                    continue;
                };
                if host_path.is_file() {
                    files.entry(cap).or_default().push(DriverFile {
                        kind: FileKind::Binary,
                        host_path,
                        path_in_root,
                        soname: None,
                        compat32: false,
                    });
                    break;
                }
            }
        }
    }
    for (cap, rel, kind) in [
        (
            Capability::Utility,
            "run/nvidia-persistenced/socket",
            FileKind::Socket,
        ),
        (
            Capability::Utility,
            "run/nvidia-fabricmanager/socket",
            FileKind::Socket,
        ),
        (Capability::Compute, "tmp/nvidia-mps", FileKind::Directory),
    ] {
        let path = driver_root.join(rel);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let ok = match kind {
            FileKind::Socket => meta.file_type().is_socket(),
            _ => meta.is_dir(),
        };
        if ok {
            files.entry(cap).or_default().push(DriverFile {
                kind,
                host_path: path,
                path_in_root: PathBuf::from(rel),
                soname: None,
                compat32: false,
            });
        }
    }
    for list in files.values_mut() {
        list.sort();
    }
    files
}

fn scan_firmware(driver_root: &Path, version: &str) -> Vec<DriverFile> {
    let mut out = Vec::new();
    for base in ["lib/firmware/nvidia", "usr/lib/firmware/nvidia"] {
        let rel = Path::new(base).join(version);
        let Ok(entries) = fs::read_dir(driver_root.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("gsp") && name.ends_with(".bin")) {
                continue;
            }
            if let Some((host_path, path_in_root)) = inside_root(driver_root, &rel.join(&name)) {
                out.push(DriverFile {
                    kind: FileKind::Firmware,
                    host_path,
                    path_in_root,
                    soname: None,
                    compat32: false,
                });
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tables() {
        assert_eq!(
            cuda_version_for_driver("535.309.01").as_deref(),
            Some("12.2")
        );
        assert_eq!(
            cuda_version_for_driver("550.54.15").as_deref(),
            Some("12.4")
        );
        assert_eq!(cuda_version_for_driver("390.1"), None);
        assert_eq!(
            arch_for_model("NVIDIA H100 80GB HBM3").as_deref(),
            Some("9.0")
        );
        assert_eq!(
            arch_for_model("NVIDIA A100-SXM4-40GB").as_deref(),
            Some("8.0")
        );
        assert_eq!(
            brand_for_model("NVIDIA GeForce RTX 4090").as_deref(),
            Some("geforce")
        );
    }
}

#[cfg(test)]
mod fake_tree {
    use std::process::Command;

    use super::*;

    /// A shared library with the given SONAME, built with the host's cc.
    fn build_so(path: &Path, soname: &str) {
        let src = path.with_extension("c");
        fs::write(&src, "int gpurun_fake(void) { return 1; }\n").unwrap();
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
            .arg(path)
            .arg(&src)
            .status()
            .expect("cc (build-essential)");
        assert!(status.success());
        fs::remove_file(src).unwrap();
    }

    #[test]
    fn discovers_only_libraries_of_the_driver_version() {
        let root = std::env::temp_dir().join(format!("fake-tree-{}", std::process::id()));
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
        // A leftover of another driver version and an unknown library.
        build_so(&lib.join("libcuda.so.470.1.2"), "libcuda.so.1");
        build_so(&lib.join("libfoo.so.999.88.77"), "libfoo.so.1");
        fs::write(bin.join("nvidia-smi"), "#!/bin/sh\n").unwrap();
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
        let roots = Roots {
            driver_root: driver.clone(),
            dev_root: root.clone(),
            proc_root: root.join("proc"),
        };
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
                ("usr/bin/nvidia-smi".to_owned(), None),
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
                    "usr/lib64/libnvidia-nvvm.so.999.88.77".to_owned(),
                    Some("libnvidia-nvvm.so.4".to_owned())
                ),
            ]
        );
        let _ = fs::remove_dir_all(root);
    }
}
