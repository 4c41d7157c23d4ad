//! The driver's user-space files on the host, per capability.
//!
//! Real hosts put them in many places: Debian's `nvidia/current`, Ubuntu's
//! multiarch directory, RHEL's `/usr/lib64`, `/usr/local/nvidia/lib64` with
//! soname links in `/lib` and wrapper scripts in `/usr/bin` (clouds), or a
//! whole driver root such as the GPU Operator's `/run/nvidia/driver`. So the
//! library directories are the ones the driver root's own linker cache
//! names for NVIDIA libraries (and where those entries really lead), then
//! the usual ones; programs are taken from the `bin` beside those library
//! directories first, and only if they are ELF files, never a wrapper
//! script. Every path is resolved inside the driver root, so an absolute
//! symlink there means a path under that root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::formats::elf;
use crate::formats::ldcache;
use crate::formats::platform::{CacheWidth, Platform};
use crate::inventory::caps::Capability;
use safe_fs::Rootfs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Library,
    Binary,
    Firmware,
    Socket,
    Directory,
    /// A loader's vendor file (glvnd, Vulkan, EGL external platforms).
    Config,
    /// A file the driver reads beside its libraries (WSL2's driver store:
    /// `nvcubins.bin`, DLLs).
    Data,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
    /// Where it goes in the container, for files with a fixed place there
    /// (libraries and programs go where the image keeps its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_path: Option<PathBuf>,
}

/// Everything found for one driver version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriverFiles {
    pub files: BTreeMap<Capability, Vec<DriverFile>>,
    pub firmware: Vec<DriverFile>,
    /// What was looked at and left out, and why (wrapper scripts, ...).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Library name prefixes per capability, after libnvidia-container's
/// `nvc_info.c`; a library counts only if its name is one of these plus
/// `.<driver version>`.
pub fn libraries_for(cap: Capability) -> &'static [&'static str] {
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
            // Toolkit 1.19 and 1.20 mount these of newer drivers (CUDA
            // Tile IR, the NVVM 7.0 compiler).
            "libnvidia-tileiras.so",
            "libnvidia-nvvm70.so",
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
            "libnvidia-vulkan-producer.so",
            // libnvidia-eglcore and -glcore link it (545 and later): without
            // it eglInitialize fails in a graphics-only container
            // (seen on an H200 with 580).
            "libnvidia-gpucomp.so",
            // Vulkan SC's core (toolkit 1.19).
            "libnvidia-vksc-core.so",
        ],
        Capability::Display => &["libnvidia-wayland-client.so"],
        Capability::Ngx => &["libnvidia-ngx.so"],
        Capability::Compat32 => &[],
    }
}

/// EGL external platform libraries carry their own version, not the
/// driver's (`libnvidia-egl-wayland.so.1.1.13`).
const OWN_VERSION_LIBRARIES: &[(Capability, &str)] = &[
    (Capability::Graphics, "libnvidia-egl-wayland.so."),
    (Capability::Graphics, "libnvidia-egl-gbm.so."),
    (Capability::Graphics, "libnvidia-egl-xcb.so."),
    (Capability::Graphics, "libnvidia-egl-xlib.so."),
];

pub fn binaries_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &["nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"],
        Capability::Compute => &["nvidia-cuda-mps-control", "nvidia-cuda-mps-server"],
        Capability::Ngx => &["nvidia-ngx-updater"],
        _ => &[],
    }
}

/// The loaders' vendor files: where below a `share` (or `etc`) directory
/// they live; in the container they go to the same place under
/// `/usr/share` (or `/etc`), where glvnd and the Vulkan loader look. The
/// architecture's own Vulkan ICD file is added by `config_files`.
const CONFIG_FILES: &[(Capability, &str)] = &[
    // The OpenCL ICD loader's vendor file (/etc/OpenCL/vendors).
    (Capability::Compute, "OpenCL/vendors/nvidia.icd"),
    (Capability::Graphics, "glvnd/egl_vendor.d/10_nvidia.json"),
    (Capability::Graphics, "vulkan/icd.d/nvidia_icd.json"),
    (
        Capability::Graphics,
        "vulkan/implicit_layer.d/nvidia_layers.json",
    ),
    (
        Capability::Graphics,
        "egl/egl_external_platform.d/09_nvidia_wayland2.json",
    ),
    (
        Capability::Graphics,
        "egl/egl_external_platform.d/10_nvidia_wayland.json",
    ),
    (
        Capability::Graphics,
        "egl/egl_external_platform.d/15_nvidia_gbm.json",
    ),
    (
        Capability::Graphics,
        "egl/egl_external_platform.d/20_nvidia_xcb.json",
    ),
    (
        Capability::Graphics,
        "egl/egl_external_platform.d/20_nvidia_xlib.json",
    ),
    (Capability::Graphics, "nvidia/nvoptix.bin"),
    // The X server's: its driver's config snippets (toolkit 1.17+).
    (Capability::Graphics, "X11/xorg.conf.d/10-nvidia.conf"),
    (Capability::Display, "X11/xorg.conf.d/10-nvidia.conf"),
    (
        Capability::Graphics,
        "X11/xorg.conf.d/nvidia-drm-outputclass.conf",
    ),
    (
        Capability::Display,
        "X11/xorg.conf.d/nvidia-drm-outputclass.conf",
    ),
];

/// Every vendor file to look for on `platform`.
fn config_files(platform: &Platform) -> Vec<(Capability, String)> {
    let own_icd = format!("vulkan/icd.d/{}", platform.vulkan_icd);
    CONFIG_FILES
        .iter()
        .map(|(cap, sub)| (*cap, (*sub).to_owned()))
        .chain([(Capability::Graphics, own_icd)])
        .collect()
}
/// The usual program directories, after the `bin` beside each library
/// directory.
const BIN_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/usr/lib/nvidia/current",
];

/// Largest linker cache read from a driver root.
const MAX_LDCACHE: u64 = 16 << 20;

/// Where the driver's libraries are, as symlink-free paths in the root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryDirs {
    pub lib64: Vec<PathBuf>,
    pub lib32: Vec<PathBuf>,
}

fn is_nvidia_library(name: &str) -> bool {
    name.contains("nvidia")
        || name.starts_with("libcuda")
        || name.starts_with("libnvcuvid")
        || name.starts_with("libnvoptix")
}

fn push_unique(list: &mut Vec<PathBuf>, dir: PathBuf) {
    if !list.contains(&dir) {
        list.push(dir);
    }
}

/// The host paths a search looked at (directories listed, files read,
/// candidates that were not there), so that a cached result can tell
/// whether it still holds.
#[derive(Debug, Default)]
pub struct Looked(pub Vec<PathBuf>);

impl Looked {
    fn at(&mut self, root: &Rootfs, in_root: &Path) {
        let host = root
            .host_path()
            .join(in_root.strip_prefix("/").unwrap_or(in_root));
        if !self.0.contains(&host) {
            self.0.push(host);
        }
    }
}

/// The library directories: those of the NVIDIA entries in the root's own
/// `/etc/ld.so.cache` (the entry's directory and the one its file really
/// is in), then the usual ones that exist. Entries of another
/// architecture are not the host's driver.
pub fn library_dirs(root: &Rootfs, looked: &mut Looked, platform: &Platform) -> LibraryDirs {
    let mut dirs = LibraryDirs::default();
    looked.at(root, Path::new("/etc/ld.so.cache"));
    let entries = root
        .read(Path::new("/etc/ld.so.cache"), MAX_LDCACHE)
        .ok()
        .and_then(|bytes| ldcache::parse(&bytes).ok())
        .unwrap_or_default();
    for e in entries.iter().filter(|e| is_nvidia_library(&e.name)) {
        let list = match platform.cache_width(e.flags) {
            CacheWidth::Native => &mut dirs.lib64,
            CacheWidth::Compat32 => &mut dirs.lib32,
            CacheWidth::Foreign => continue,
        };
        let path = Path::new(&e.path);
        if let Some(dir) = path.parent().and_then(|p| root.real_dir(p)) {
            push_unique(list, dir);
        }
        if let Ok(found) = root.find(path, false) {
            if let Some(dir) = found.in_root.parent() {
                push_unique(list, dir.to_path_buf());
            }
        }
    }
    for (list, defaults) in [
        (&mut dirs.lib64, platform.host_lib_dirs()),
        (&mut dirs.lib32, platform.host_lib32_dirs()),
    ] {
        for d in defaults {
            if let Some(dir) = root.real_dir(Path::new(&d)) {
                push_unique(list, dir);
            }
        }
    }
    dirs
}

/// The names in a directory of the root, read through a descriptor
/// opened inside it.
pub(crate) fn names_in(root: &Rootfs, dir: &Path, looked: &mut Looked) -> Vec<String> {
    looked.at(root, dir);
    let Ok(handle) = root.open_in(dir, libc::O_RDONLY | libc::O_DIRECTORY) else {
        return Vec::new();
    };
    use std::os::fd::AsRawFd;
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The driver version in the name of `libnvidia-ml.so.<version>` or
/// `libcuda.so.<version>` in the library directories.
pub fn library_version(root: &Rootfs, dirs: &LibraryDirs, looked: &mut Looked) -> Option<String> {
    for dir in &dirs.lib64 {
        for name in names_in(root, dir, looked) {
            for prefix in ["libnvidia-ml.so.", "libcuda.so."] {
                if let Some(v) = name.strip_prefix(prefix) {
                    if v.split('.').count() >= 2
                        && crate::formats::require::parse_version(v).is_some()
                    {
                        return Some(v.to_owned());
                    }
                }
            }
        }
    }
    None
}

pub(crate) fn relative(in_root: &Path) -> PathBuf {
    in_root.strip_prefix("/").unwrap_or(in_root).to_path_buf()
}

const ELF_MAGIC: &[u8] = b"\x7fELF";

/// Every file of driver `version` in `root`: its libraries (by
/// capability, 64- and 32-bit), programs, the loaders' vendor files, the
/// daemons' sockets and GSP firmware.
pub fn scan(
    root: &Rootfs,
    version: &str,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    platform: &Platform,
) -> DriverFiles {
    let mut out = DriverFiles::default();
    scan_libraries(root, version, dirs, looked, platform, &mut out);
    scan_programs(root, dirs, looked, platform, &mut out);
    scan_config_files(root, dirs, looked, platform, &mut out);
    scan_xorg(root, version, dirs, looked, platform, &mut out);
    scan_sockets(root, looked, &mut out);
    scan_firmware(root, version, dirs, looked, &mut out);
    for list in out.files.values_mut() {
        list.sort();
    }
    out.firmware.sort();
    out
}

/// The libraries of the driver's version (and those with their own
/// version), for every capability that needs each.
fn scan_libraries(
    root: &Rootfs,
    version: &str,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    platform: &Platform,
    out: &mut DriverFiles,
) {
    let suffix = format!(".{version}");
    for (compat32, list) in [(false, &dirs.lib64), (true, &dirs.lib32)] {
        for dir in list {
            for name in names_in(root, dir, looked) {
                // Every capability that needs it (libnvidia-gpucomp serves
                // CUDA and GL/EGL alike).
                let caps: Vec<Capability> = match name.strip_suffix(&suffix) {
                    Some(prefix) => Capability::ALL
                        .into_iter()
                        .filter(|c| libraries_for(*c).contains(&prefix))
                        .collect(),
                    None => OWN_VERSION_LIBRARIES
                        .iter()
                        .filter(|(_, p)| {
                            name.strip_prefix(p).is_some_and(|v| {
                                v.split('.').count() >= 3
                                    && crate::formats::require::parse_version(v).is_some()
                            })
                        })
                        .map(|(c, _)| *c)
                        .collect(),
                };
                if caps.is_empty() {
                    continue;
                }
                let Ok(found) = root.find(&dir.join(&name), false) else {
                    continue;
                };
                let Ok(mut file) = found.reopen_regular() else {
                    continue;
                };
                // A native library is an ELF file of the host's machine:
                // another architecture's copy in a shared directory is not.
                if !compat32 && !elf::is_machine(&mut file, platform) {
                    continue;
                }
                let caps = if compat32 {
                    vec![Capability::Compat32]
                } else {
                    caps
                };
                let library = DriverFile {
                    kind: FileKind::Library,
                    soname: elf::soname_of(&mut file, platform),
                    host_path: found.host,
                    path_in_root: relative(&found.in_root),
                    compat32,
                    container_path: None,
                };
                for cap in caps {
                    let list = out.files.entry(cap).or_default();
                    if !list.iter().any(|f| f.host_path == library.host_path) {
                        list.push(library.clone());
                    }
                }
            }
        }
    }
}

/// Programs: the `bin` beside each library directory, then the usual; an
/// ELF program of the platform's machine only.
fn scan_programs(
    root: &Rootfs,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    platform: &Platform,
    out: &mut DriverFiles,
) {
    let mut bin_dirs: Vec<PathBuf> = Vec::new();
    for dir in &dirs.lib64 {
        if let Some(parent) = dir.parent() {
            looked.at(root, &parent.join("bin"));
            if let Some(bin) = root.real_dir(&parent.join("bin")) {
                push_unique(&mut bin_dirs, bin);
            }
        }
    }
    for d in BIN_DIRS {
        push_unique(&mut bin_dirs, PathBuf::from(d));
    }
    for dir in &bin_dirs {
        looked.at(root, dir);
    }
    for cap in Capability::ALL {
        for program in binaries_for(cap) {
            for dir in &bin_dirs {
                let Ok(found) = root.find(&dir.join(program), false) else {
                    continue;
                };
                // One read: the magic, and the machine of an ELF file.
                match found.head(20) {
                    Ok(header)
                        if header.starts_with(ELF_MAGIC)
                            && !elf::header_machine(&header)
                                .is_some_and(|m| platform.is_native_machine(m)) =>
                    {
                        out.notes.push(format!(
                            "{} is another machine's program: not injected",
                            found.in_root.display()
                        ))
                    }
                    Ok(header) if header.starts_with(ELF_MAGIC) => {
                        out.files.entry(cap).or_default().push(DriverFile {
                            kind: FileKind::Binary,
                            host_path: found.host,
                            path_in_root: relative(&found.in_root),
                            soname: None,
                            compat32: false,
                            container_path: None,
                        });
                        break;
                    }
                    Ok(_) => out.notes.push(format!(
                        "{} is not an ELF program (a wrapper script?): not injected",
                        found.in_root.display()
                    )),
                    Err(_) => {}
                }
            }
        }
    }
}

/// Vendor files of the loaders: beside the library directories' `share`
/// first, then the system's.
fn scan_config_files(
    root: &Rootfs,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    platform: &Platform,
    out: &mut DriverFiles,
) {
    let mut share_dirs: Vec<(PathBuf, &str)> = Vec::new();
    for dir in &dirs.lib64 {
        if let Some(parent) = dir.parent() {
            looked.at(root, &parent.join("share"));
            if let Some(share) = root.real_dir(&parent.join("share")) {
                if !share_dirs.iter().any(|(d, _)| *d == share) {
                    share_dirs.push((share, "/usr/share"));
                }
            }
        }
    }
    share_dirs.extend([
        (PathBuf::from("/etc"), "/etc"),
        (PathBuf::from("/usr/share"), "/usr/share"),
        (PathBuf::from("/usr/local/share"), "/usr/share"),
    ]);
    for (cap, sub) in &config_files(platform) {
        for (base, container_base) in &share_dirs {
            if let Some(parent) = base.join(sub).parent() {
                looked.at(root, parent);
            }
            let Ok(found) = root.find(&base.join(sub), false) else {
                continue;
            };
            if !found.meta.is_file() {
                continue;
            }
            out.files.entry(*cap).or_default().push(DriverFile {
                kind: FileKind::Config,
                host_path: found.host,
                path_in_root: relative(&found.in_root),
                soname: None,
                compat32: false,
                container_path: Some(Path::new(container_base).join(sub)),
            });
            break;
        }
    }
}

/// Where X servers look for their modules, after those beside each library
/// directory (`<dir>/nvidia/xorg`, Ubuntu's; `<dir>/xorg/modules/...`), as
/// the toolkit searches (`internal/discover/graphics.go`).
const XORG_DIRS: &[&str] = &[
    "/usr/lib/xorg/modules/drivers",
    "/usr/lib/xorg/modules/extensions",
    "/usr/lib/xorg/modules/updates/drivers",
    "/usr/lib/xorg/modules/updates/extensions",
    "/usr/lib64/xorg/modules/drivers",
    "/usr/lib64/xorg/modules/extensions",
    "/usr/lib64/xorg/modules/updates/drivers",
    "/usr/lib64/xorg/modules/updates/extensions",
    "/usr/X11R6/lib/modules/drivers",
    "/usr/X11R6/lib/modules/extensions",
    "/usr/X11R6/lib64/modules/drivers",
    "/usr/X11R6/lib64/modules/extensions",
];

/// The X.Org driver (`nvidia_drv.so`) and GLX module
/// (`libglxserver_nvidia.so.<version>`, or Debian's unversioned link to
/// it), each the first found, for graphics and display: at the path X
/// looks in, where it was found; the versioned module also as
/// `libglxserver_nvidia.so` beside it, the link the toolkit makes. These
/// directories are shared between architectures, so each module must be
/// an ELF file of the platform's machine.
fn scan_xorg(
    root: &Rootfs,
    version: &str,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    platform: &Platform,
    out: &mut DriverFiles,
) {
    let mut search: Vec<PathBuf> = Vec::new();
    for dir in &dirs.lib64 {
        for sub in [
            "nvidia/xorg",
            "xorg/modules/drivers",
            "xorg/modules/extensions",
        ] {
            push_unique(&mut search, dir.join(sub));
        }
    }
    for dir in XORG_DIRS {
        push_unique(&mut search, PathBuf::from(dir));
    }
    let glx = format!("libglxserver_nvidia.so.{version}");
    let wanted = [
        vec!["nvidia_drv.so"],
        vec![glx.as_str(), "libglxserver_nvidia.so"],
    ];
    for names in wanted {
        let first = names.iter().find_map(|name| {
            search.iter().find_map(|dir| {
                looked.at(root, dir);
                let at = dir.join(name);
                let found = root.find(&at, false).ok()?;
                let mut file = found.reopen_regular().ok()?;
                elf::is_machine(&mut file, platform).then_some((at, found))
            })
        });
        let Some((at, found)) = first else { continue };
        let file = |container: PathBuf| DriverFile {
            kind: FileKind::Library,
            host_path: found.host.clone(),
            path_in_root: relative(&found.in_root),
            soname: None,
            compat32: false,
            container_path: Some(container),
        };
        let mut files = vec![file(at.clone())];
        if at.file_name().is_some_and(|n| n == glx.as_str()) {
            files.push(file(at.with_file_name("libglxserver_nvidia.so")));
        }
        for cap in [Capability::Graphics, Capability::Display] {
            out.files
                .entry(cap)
                .or_default()
                .extend(files.iter().cloned());
        }
    }
}

/// The MPS control daemon's default pipe directory, shared by every client
/// of the host's default MPS server.
pub const MPS_PIPE_DIR: &str = "/tmp/nvidia-mps";

/// The persistence and fabric-manager daemons' sockets, and MPS's directory.
fn scan_sockets(root: &Rootfs, looked: &mut Looked, out: &mut DriverFiles) {
    for (cap, rel, kind) in [
        (
            Capability::Utility,
            "/run/nvidia-persistenced/socket",
            FileKind::Socket,
        ),
        (
            Capability::Utility,
            "/run/nvidia-fabricmanager/socket",
            FileKind::Socket,
        ),
        (Capability::Compute, MPS_PIPE_DIR, FileKind::Directory),
    ] {
        looked.at(root, Path::new(rel));
        let Ok(found) = root.find(Path::new(rel), true) else {
            continue;
        };
        let ok = match kind {
            FileKind::Socket => {
                use std::os::unix::fs::FileTypeExt;
                found.meta.file_type().is_socket()
            }
            _ => found.meta.is_dir(),
        };
        if ok {
            out.files.entry(cap).or_default().push(DriverFile {
                kind,
                host_path: found.host,
                path_in_root: relative(&found.in_root),
                soname: None,
                compat32: false,
                container_path: Some(PathBuf::from(rel)),
            });
        }
    }
}

/// GSP firmware, which the container sees where the kernel looks.
fn scan_firmware(
    root: &Rootfs,
    version: &str,
    dirs: &LibraryDirs,
    looked: &mut Looked,
    out: &mut DriverFiles,
) {
    let mut firmware_dirs: Vec<PathBuf> = vec![
        PathBuf::from("/lib/firmware/nvidia"),
        PathBuf::from("/usr/lib/firmware/nvidia"),
    ];
    for dir in &dirs.lib64 {
        if let Some(parent) = dir.parent() {
            push_unique(&mut firmware_dirs, parent.join("firmware/nvidia"));
        }
    }
    for base in firmware_dirs {
        let dir = base.join(version);
        for name in names_in(root, &dir, looked) {
            if !(name.starts_with("gsp") && name.ends_with(".bin")) {
                continue;
            }
            if let Ok(found) = root.find(&dir.join(&name), false) {
                if found.meta.is_file() {
                    out.firmware.push(DriverFile {
                        kind: FileKind::Firmware,
                        host_path: found.host,
                        path_in_root: relative(&found.in_root),
                        soname: None,
                        compat32: false,
                        container_path: Some(
                            Path::new("/lib/firmware/nvidia").join(version).join(&name),
                        ),
                    });
                }
            }
        }
        if !out.firmware.is_empty() {
            break;
        }
    }
}

/// The host path of `libnvidia-ml.so.1` in the library directories, for
/// NVML.
pub fn nvml_library(root: &Rootfs, dirs: &LibraryDirs) -> Option<PathBuf> {
    dirs.lib64.iter().find_map(|d| {
        root.find(&d.join("libnvidia-ml.so.1"), false)
            .ok()
            .filter(|f| f.meta.is_file())
            .map(|f| f.host)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::platform::{AARCH64, X86_64};
    use std::fs;

    /// An ELF header of `machine`: enough to tell a library's architecture.
    fn elf_header(machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // 64-bit
        h[5] = 1; // little-endian
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    /// A driver root holding both architectures' copies of libcuda and
    /// both Vulkan ICD files, with a linker cache naming the aarch64 one.
    fn two_arch_root(base: &Path) -> Rootfs {
        for (platform, dir) in [
            (X86_64, "usr/lib/x86_64-linux-gnu"),
            (AARCH64, "opt/nv/lib"),
        ] {
            fs::create_dir_all(base.join(dir)).unwrap();
            fs::write(
                base.join(dir).join("libcuda.so.535.261.03"),
                elf_header(platform.elf_machine),
            )
            .unwrap();
        }
        // nvidia-smi of the other machine in /usr/bin, the platform's own
        // beside the aarch64 libraries (their `bin`).
        fs::create_dir_all(base.join("usr/bin")).unwrap();
        fs::create_dir_all(base.join("opt/nv/bin")).unwrap();
        fs::write(
            base.join("usr/bin/nvidia-smi"),
            elf_header(X86_64.elf_machine),
        )
        .unwrap();
        fs::write(
            base.join("opt/nv/bin/nvidia-smi"),
            elf_header(AARCH64.elf_machine),
        )
        .unwrap();
        // The X driver of each machine, aarch64's in the first directory
        // X searches, so x86_64 must pass it over.
        for (platform, dir) in [
            (AARCH64, "usr/lib/xorg/modules/drivers"),
            (X86_64, "usr/lib64/xorg/modules/drivers"),
        ] {
            fs::create_dir_all(base.join(dir)).unwrap();
            let module = base.join(dir).join("nvidia_drv.so");
            fs::write(module, elf_header(platform.elf_machine)).unwrap();
        }
        let icd = base.join("usr/share/vulkan/icd.d");
        fs::create_dir_all(&icd).unwrap();
        for name in ["nvidia_icd.x86_64.json", "nvidia_icd.aarch64.json"] {
            fs::write(icd.join(name), "{}").unwrap();
        }
        fs::create_dir_all(base.join("etc")).unwrap();
        let entry = ldcache::Entry {
            name: "libcuda.so.1".into(),
            path: "/opt/nv/lib/libcuda.so.1".into(),
            flags: AARCH64.cache_flags,
            hwcap: 0,
        };
        fs::write(base.join("etc/ld.so.cache"), ldcache::write(&[entry])).unwrap();
        Rootfs::open(base).unwrap()
    }

    fn found(files: &DriverFiles, cap: Capability) -> Vec<String> {
        files
            .files
            .get(&cap)
            .into_iter()
            .flatten()
            .map(|f| f.path_in_root.to_string_lossy().into_owned())
            .collect()
    }

    /// The files toolkit 1.19 and 1.20 added, each under its capability;
    /// the OpenCL ICD from /etc goes to /etc in the container.
    #[test]
    fn newer_drivers_files_land_under_their_capabilities() {
        let base = std::env::temp_dir().join(format!("newer-files-{}", std::process::id()));
        let lib = base.join("usr/lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib).unwrap();
        for name in [
            "libcuda.so.580.95.05",
            "libnvidia-tileiras.so.580.95.05",
            "libnvidia-nvvm70.so.580.95.05",
            "libnvidia-vksc-core.so.580.95.05",
        ] {
            fs::write(lib.join(name), elf_header(X86_64.elf_machine)).unwrap();
        }
        let icd = base.join("etc/OpenCL/vendors");
        fs::create_dir_all(&icd).unwrap();
        fs::write(icd.join("nvidia.icd"), "libnvidia-opencl.so.1\n").unwrap();
        let egl = base.join("usr/share/egl/egl_external_platform.d");
        fs::create_dir_all(&egl).unwrap();
        fs::write(egl.join("09_nvidia_wayland2.json"), "{}").unwrap();
        let root = Rootfs::open(&base).unwrap();
        let mut looked = Looked::default();
        let dirs = LibraryDirs {
            lib64: vec![PathBuf::from("/usr/lib/x86_64-linux-gnu")],
            lib32: Vec::new(),
        };
        let files = scan(&root, "580.95.05", &dirs, &mut looked, &X86_64);
        let mut compute = found(&files, Capability::Compute);
        compute.sort();
        assert_eq!(
            compute,
            [
                "etc/OpenCL/vendors/nvidia.icd",
                "usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
                "usr/lib/x86_64-linux-gnu/libnvidia-nvvm70.so.580.95.05",
                "usr/lib/x86_64-linux-gnu/libnvidia-tileiras.so.580.95.05",
            ]
        );
        let icd_file = files.files[&Capability::Compute]
            .iter()
            .find(|f| f.path_in_root.ends_with("nvidia.icd"))
            .unwrap();
        assert_eq!(
            icd_file.container_path.as_deref(),
            Some(Path::new("/etc/OpenCL/vendors/nvidia.icd"))
        );
        let graphics = found(&files, Capability::Graphics);
        assert!(
            graphics
                .contains(&"usr/lib/x86_64-linux-gnu/libnvidia-vksc-core.so.580.95.05".to_owned()),
            "{graphics:?}"
        );
        assert!(
            graphics.contains(
                &"usr/share/egl/egl_external_platform.d/09_nvidia_wayland2.json".to_owned()
            ),
            "{graphics:?}"
        );
        assert!(found(&files, Capability::Utility).is_empty());
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn each_platform_finds_only_its_own_libraries_and_icd() {
        let base = std::env::temp_dir().join(format!("two-arch-{}", std::process::id()));
        let root = two_arch_root(&base);
        let mut looked = Looked::default();
        let dirs = library_dirs(&root, &mut looked, &AARCH64);
        assert_eq!(
            dirs.lib64.first(),
            Some(&PathBuf::from("/opt/nv/lib")),
            "{dirs:?}"
        );
        assert!(dirs.lib32.is_empty(), "aarch64 has no compat: {dirs:?}");
        let arm = scan(&root, "535.261.03", &dirs, &mut looked, &AARCH64);
        assert_eq!(
            found(&arm, Capability::Compute),
            ["opt/nv/lib/libcuda.so.535.261.03"]
        );
        assert!(found(&arm, Capability::Graphics)
            .contains(&"usr/share/vulkan/icd.d/nvidia_icd.aarch64.json".to_owned()));
        assert!(!found(&arm, Capability::Graphics)
            .iter()
            .any(|p| p.contains("x86_64")));
        assert_eq!(found(&arm, Capability::Utility), ["opt/nv/bin/nvidia-smi"]);
        assert_eq!(
            found(&arm, Capability::Display),
            ["usr/lib/xorg/modules/drivers/nvidia_drv.so"]
        );

        // x86_64 ignores the aarch64 cache entry and the aarch64 file.
        let dirs = library_dirs(&root, &mut looked, &X86_64);
        assert!(
            !dirs.lib64.contains(&PathBuf::from("/opt/nv/lib")),
            "{dirs:?}"
        );
        let dirs = LibraryDirs {
            lib64: [dirs.lib64, vec![PathBuf::from("/opt/nv/lib")]].concat(),
            lib32: dirs.lib32,
        };
        let x86 = scan(&root, "535.261.03", &dirs, &mut looked, &X86_64);
        assert_eq!(
            found(&x86, Capability::Compute),
            ["usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03"]
        );
        assert!(found(&x86, Capability::Graphics)
            .contains(&"usr/share/vulkan/icd.d/nvidia_icd.x86_64.json".to_owned()));
        assert_eq!(found(&x86, Capability::Utility), ["usr/bin/nvidia-smi"]);
        assert_eq!(
            found(&x86, Capability::Display),
            ["usr/lib64/xorg/modules/drivers/nvidia_drv.so"]
        );
        fs::remove_dir_all(base).unwrap();
    }
}
