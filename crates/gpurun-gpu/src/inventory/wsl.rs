//! WSL2 hosts (Docker Desktop, Podman on Windows): the GPU is `/dev/dxg`,
//! one node for every GPU of the Windows host, and the driver's files are
//! Windows' own: `libdxcore.so` in `/usr/lib/wsl/lib`, and the NVIDIA
//! driver store folders under `/usr/lib/wsl/drivers/`. As the NVIDIA
//! toolkit does (`pkg/nvcdi/driver-wsl.go`, 1.20), every `*.so*`, `*.bin`
//! and `*.dll` of a store goes to the container at its own path (libcuda
//! finds `nvcubins.bin` beside itself), both folders go in the linker
//! cache, and the store's `nvidia-smi` goes to `/usr/bin`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::formats::elf;
use crate::formats::platform::Platform;
use crate::inventory::caps::Capability;
use crate::inventory::driver_files::{
    names_in, relative, DriverFile, DriverFiles, FileKind, Looked,
};
use safe_fs::Rootfs;

/// WSL2's GPU node: every GPU of the Windows host.
pub const DXG: &str = "/dev/dxg";
/// Where WSL2 puts the Windows host's `libdxcore.so`.
pub const WSL_LIB_DIR: &str = "/usr/lib/wsl/lib";
/// The Windows driver store, one folder per installed driver package.
pub const DRIVER_STORE_DIR: &str = "/usr/lib/wsl/drivers";

/// What makes a WSL2 host: its `/dev/dxg` and the NVIDIA driver store
/// folders found in the driver root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WslHost {
    /// The NVIDIA store folders, as paths in the driver root.
    pub driver_stores: Vec<PathBuf>,
    /// `libdxcore.so`, where the root has it.
    pub dxcore: Option<PathBuf>,
}

impl WslHost {
    /// The store folders, comma-separated, as `gpu info` and `doctor` name
    /// them.
    pub fn stores_shown(&self) -> String {
        let shown: Vec<String> = self
            .driver_stores
            .iter()
            .map(|s| s.display().to_string())
            .collect();
        shown.join(", ")
    }
}

/// A WSL2 host, when the dev root has `/dev/dxg`. Its NVIDIA store folders
/// are those that hold `libcuda.so.1.1` or `libnvidia-ml.so.1` (found by
/// listing, where the toolkit asks dxcore, which only Windows answers).
pub fn detect(root: &Rootfs, dev_root: &Path, looked: &mut Looked) -> Option<WslHost> {
    use std::os::unix::fs::FileTypeExt;
    let dxg = dev_root.join(DXG.trim_start_matches('/'));
    if !std::fs::metadata(dxg).is_ok_and(|m| m.file_type().is_char_device()) {
        return None;
    }
    let stores = Path::new(DRIVER_STORE_DIR);
    let driver_stores = names_in(root, stores, looked)
        .into_iter()
        .map(|name| stores.join(name))
        .filter(|dir| {
            ["libcuda.so.1.1", "libnvidia-ml.so.1"]
                .iter()
                .any(|lib| root.find(&dir.join(lib), false).is_ok())
        })
        .filter_map(|dir| root.real_dir(&dir))
        .collect();
    let dxcore = Path::new(WSL_LIB_DIR).join("libdxcore.so");
    let dxcore = root.find(&dxcore, false).is_ok().then_some(dxcore);
    Some(WslHost {
        driver_stores,
        dxcore,
    })
}

/// What a store file is for: its kind and the capabilities that get it;
/// None for what the toolkit leaves out.
fn store_file(name: &str) -> Option<(FileKind, &'static [Capability])> {
    const UTILITY: &[Capability] = &[Capability::Utility];
    const COMPUTE: &[Capability] = &[Capability::Compute];
    const BOTH: &[Capability] = &[Capability::Utility, Capability::Compute];
    let lower = name.to_ascii_lowercase();
    if name == "nvidia-smi" {
        Some((FileKind::Binary, UTILITY))
    } else if lower.contains(".so") {
        let caps = if name.starts_with("libnvidia-ml") {
            UTILITY
        } else if name.starts_with("libnvdxgdmal") {
            BOTH
        } else {
            COMPUTE
        };
        Some((FileKind::Library, caps))
    } else if lower.ends_with(".bin") || lower.ends_with(".dll") {
        Some((FileKind::Data, COMPUTE))
    } else {
        None
    }
}

/// The files a WSL2 host's GPU containers get, by capability.
pub fn files(
    root: &Rootfs,
    host: &WslHost,
    looked: &mut Looked,
    platform: &Platform,
) -> DriverFiles {
    let mut out = DriverFiles::default();
    let mut found: Vec<(PathBuf, FileKind, &[Capability])> = Vec::new();
    if let Some(dxcore) = &host.dxcore {
        const BOTH: &[Capability] = &[Capability::Utility, Capability::Compute];
        found.push((dxcore.clone(), FileKind::Library, BOTH));
    }
    for store in &host.driver_stores {
        for name in names_in(root, store, looked) {
            if let Some((kind, caps)) = store_file(&name) {
                found.push((store.join(name), kind, caps));
            }
        }
    }
    for (path, kind, caps) in found {
        let Some(file) = driver_file(root, &path, kind, platform, &mut out.notes) else {
            continue;
        };
        for cap in caps {
            out.files.entry(*cap).or_default().push(file.clone());
        }
    }
    for list in out.files.values_mut() {
        list.sort();
    }
    out
}

/// One store file, checked: a regular file; a library an ELF file of the
/// host's machine (its SONAME read), a program an ELF program.
fn driver_file(
    root: &Rootfs,
    path: &Path,
    kind: FileKind,
    platform: &Platform,
    notes: &mut Vec<String>,
) -> Option<DriverFile> {
    let found = root.find(path, false).ok()?;
    let mut file = found.reopen_regular().ok()?;
    let elf_of_host = elf::is_machine(&mut file, platform);
    if matches!(kind, FileKind::Library | FileKind::Binary) && !elf_of_host {
        notes.push(format!(
            "{} is not an ELF file of this machine: not injected",
            found.in_root.display()
        ));
        return None;
    }
    Some(DriverFile {
        kind,
        soname: (kind == FileKind::Library)
            .then(|| elf::soname_of(&mut file, platform))
            .flatten(),
        host_path: found.host,
        path_in_root: relative(&found.in_root),
        compat32: false,
        // At its own path, beside the files it reads; nvidia-smi goes to
        // /usr/bin as every program does.
        container_path: (kind != FileKind::Binary).then(|| found.in_root.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_files_go_to_the_capabilities_the_toolkit_gives_them() {
        use Capability::*;
        let kind_caps = |name| store_file(name).map(|(k, c)| (k, c.to_vec()));
        assert_eq!(
            kind_caps("nvidia-smi"),
            Some((FileKind::Binary, vec![Utility]))
        );
        assert_eq!(
            kind_caps("libnvidia-ml.so.1"),
            Some((FileKind::Library, vec![Utility]))
        );
        assert_eq!(
            kind_caps("libnvidia-ml_loader.so"),
            Some((FileKind::Library, vec![Utility]))
        );
        assert_eq!(
            kind_caps("libcuda.so.1.1"),
            Some((FileKind::Library, vec![Compute]))
        );
        assert_eq!(
            kind_caps("libcuda_loader.so"),
            Some((FileKind::Library, vec![Compute]))
        );
        assert_eq!(
            kind_caps("libnvdxgdmal.so.1"),
            Some((FileKind::Library, vec![Utility, Compute]))
        );
        assert_eq!(
            kind_caps("nvcubins.bin"),
            Some((FileKind::Data, vec![Compute]))
        );
        assert_eq!(
            kind_caps("nvcuda64.DLL"),
            Some((FileKind::Data, vec![Compute]))
        );
        assert_eq!(kind_caps("nv_dispi.inf"), None);
        assert_eq!(kind_caps("nvidia-smi.exe"), None);
    }
}
