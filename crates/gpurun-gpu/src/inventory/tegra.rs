//! Jetson and other Tegra systems (CSV mode): the integrated GPU has no
//! `/dev/nvidia<N>`, NVML or `/proc/driver/nvidia`; JetPack lists what a
//! GPU container needs in `/etc/nvidia-container-runtime/
//! host-files-for-container.d/*.csv`, one `KIND, PATH` per line (`dev`,
//! `dir`, `lib`, `sym`), and the NVIDIA toolkit mounts exactly that
//! (`internal/platform-support/tegra`): nodes as devices, directories,
//! libraries and non-library links at their own paths (a `sym` named like
//! a library, `*.so` or `*.so.N`, is left to the linker cache), plus
//! `/etc/nv_tegra_release` and `/sys/devices/soc0/family`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::formats::elf;
use crate::formats::platform::Platform;
use crate::inventory::driver_files::{names_in, relative, DriverFile, FileKind, Looked};
use safe_fs::Rootfs;

/// Where JetPack puts its CSV files, in the driver root.
pub const CSV_DIR: &str = "/etc/nvidia-container-runtime/host-files-for-container.d";
/// The L4T release file that marks a Tegra root.
pub const TEGRA_RELEASE: &str = "/etc/nv_tegra_release";
/// The SoC family, "Tegra" on Jetson (in the dev root's sysfs).
pub const SOC_FAMILY: &str = "sys/devices/soc0/family";

/// One line of a CSV file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Dev,
    Dir,
    Lib,
    Sym,
}

/// What the CSV files list, in order, and the lines they could not read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvList {
    pub entries: Vec<(Kind, String)>,
    pub skipped: Vec<String>,
}

/// A CSV file's text: `KIND, PATH` per line, blank lines and `#` comments
/// passed over; a line of no known kind, or whose path climbs with `..`,
/// is kept in `skipped`.
pub fn parse_csv(text: &str) -> CsvList {
    let mut list = CsvList::default();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(',').and_then(|(kind, path)| {
            let kind = match kind.trim().to_ascii_lowercase().as_str() {
                "dev" => Kind::Dev,
                "dir" => Kind::Dir,
                "lib" => Kind::Lib,
                "sym" => Kind::Sym,
                _ => return None,
            };
            let path = path.trim();
            // A `..` would lead out of the dev root or the driver root.
            let climbs = path.split('/').any(|c| c == "..");
            (!path.is_empty() && !climbs).then(|| (kind, path.to_owned()))
        });
        match parsed {
            Some(entry) if !list.entries.contains(&entry) => list.entries.push(entry),
            Some(_) => {}
            None => list.skipped.push(line.to_owned()),
        }
    }
    list
}

/// A `dev` entry's path: a bare name is under `/dev`, as in JetPack's
/// older files (`dev, nvmap`).
pub fn device_path(entry: &str) -> String {
    if entry.starts_with('/') {
        entry.to_owned()
    } else {
        format!("/dev/{entry}")
    }
}

/// A `sym` entry that names a library (`*.so`, `*.so.N`): the linker cache
/// makes it, and it is not mounted.
pub fn is_library_link(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so")
        || name
            .rsplit_once(".so.")
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The L4T release in `/etc/nv_tegra_release`'s first line
/// (`# R36 (release), REVISION: 4.3, ...`): "R36.4.3".
pub fn l4t_release(line: &str) -> Option<String> {
    let major = line.trim_start_matches('#').split_whitespace().next()?;
    let revision = line.split("REVISION:").nth(1)?.split(',').next()?.trim();
    (major.starts_with('R') && !revision.is_empty()).then(|| format!("{major}.{revision}"))
}

/// A Tegra host: its CSV files (names in `CSV_DIR`) and what they list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TegraHost {
    pub csv_files: Vec<String>,
    pub list: CsvList,
    /// `/etc/nv_tegra_release`'s first line, where the root has it.
    pub release: Option<String>,
    /// NVML names an Orin GPU (`Orin (nvgpu)`): an image's CUDA forward
    /// compatibility is in Orin's own folder, as the toolkit has it.
    #[serde(default)]
    pub orin: bool,
}

/// What NVML's name of an Orin integrated GPU contains.
const ORIN_NAME: &str = "Orin (nvgpu)";

/// Whether NVML's GPU names show an Orin.
pub fn is_orin(names: &[&str]) -> bool {
    names.iter().any(|n| n.contains(ORIN_NAME))
}

/// A Tegra host: the driver root has `/etc/nv_tegra_release` or the SoC
/// family is Tegra, and CSV files are there.
pub fn detect(root: &Rootfs, dev_root: &Path, looked: &mut Looked) -> Option<TegraHost> {
    let release = root.read(Path::new(TEGRA_RELEASE), 4096).ok().map(|bytes| {
        String::from_utf8_lossy(&bytes)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    });
    let family = std::fs::read_to_string(dev_root.join(SOC_FAMILY)).unwrap_or_default();
    if release.is_none() && !family.trim().eq_ignore_ascii_case("tegra") {
        return None;
    }
    let csv_files: Vec<String> = names_in(root, Path::new(CSV_DIR), looked)
        .into_iter()
        .filter(|n| n.ends_with(".csv"))
        .collect();
    if csv_files.is_empty() {
        return None;
    }
    let mut list = CsvList::default();
    for name in &csv_files {
        let path = Path::new(CSV_DIR).join(name);
        let Ok(bytes) = root.read(&path, 1 << 20) else {
            list.skipped.push(format!("{}: unreadable", path.display()));
            continue;
        };
        let parsed = parse_csv(&String::from_utf8_lossy(&bytes));
        for entry in parsed.entries {
            if !list.entries.contains(&entry) {
                list.entries.push(entry);
            }
        }
        list.skipped.extend(parsed.skipped);
    }
    Some(TegraHost {
        csv_files,
        list,
        release,
        // NVML says (`add_tegra_nvml`).
        orin: false,
    })
}

/// The files the CSV lists, as they exist in the driver root, each at its
/// own path in the container; what is missing is named in `notes`.
pub fn files(
    root: &Rootfs,
    host: &TegraHost,
    platform: &Platform,
    notes: &mut Vec<String>,
) -> Vec<DriverFile> {
    let mut out = Vec::new();
    let release = (Kind::Lib, TEGRA_RELEASE.to_owned());
    for (kind, path) in host.list.entries.iter().chain([&release]) {
        let kind = match kind {
            Kind::Dev => continue,
            Kind::Sym if is_library_link(path) => continue,
            Kind::Dir => FileKind::Directory,
            Kind::Lib | Kind::Sym => FileKind::Library,
        };
        match file_at(root, Path::new(path), kind, platform) {
            Some(file) => out.push(file),
            None => notes.push(format!(
                "{path} (listed in {CSV_DIR}) is not in the driver root: not injected"
            )),
        }
    }
    out
}

/// One listed path, resolved in the driver root (a link to its file): a
/// directory, or a file that is a library where it is an ELF file with a
/// SONAME and data otherwise (JetPack lists JSON files and programs as
/// `lib`).
fn file_at(root: &Rootfs, path: &Path, kind: FileKind, platform: &Platform) -> Option<DriverFile> {
    let found = root.find(path, false).ok()?;
    let kind = match kind {
        FileKind::Directory if found.meta.is_dir() => FileKind::Directory,
        FileKind::Directory => return None,
        _ if !found.meta.is_file() => return None,
        _ => FileKind::Library,
    };
    let soname = match kind {
        FileKind::Library => found
            .reopen_regular()
            .ok()
            .and_then(|mut f| elf::soname_of(&mut f, platform)),
        _ => None,
    };
    let kind = match (kind, &soname) {
        (FileKind::Library, None) => FileKind::Data,
        (kind, _) => kind,
    };
    Some(DriverFile {
        kind,
        soname,
        host_path: found.host,
        path_in_root: relative(&found.in_root),
        compat32: false,
        container_path: Some(PathBuf::from(path)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_as_jetpack_writes_them() {
        let list = parse_csv(
            "# JetPack\n\ndev, /dev/nvmap\ndev, nvhost-ctrl\n DIR ,/usr/local/cuda\nlib, /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1\n\
             sym, /usr/lib/aarch64-linux-gnu/tegra/libcuda.so\nlib, /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1\n\
             bogus, /x\nlib,\nno comma\ndev, ../../etc/x\n",
        );
        assert_eq!(
            list.entries,
            [
                (Kind::Dev, "/dev/nvmap".to_owned()),
                (Kind::Dev, "nvhost-ctrl".into()),
                (Kind::Dir, "/usr/local/cuda".into()),
                (
                    Kind::Lib,
                    "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1".into()
                ),
                (
                    Kind::Sym,
                    "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so".into()
                ),
            ]
        );
        assert_eq!(
            list.skipped,
            ["bogus, /x", "lib,", "no comma", "dev, ../../etc/x"]
        );
        assert_eq!(device_path("nvhost-ctrl"), "/dev/nvhost-ctrl");
        assert_eq!(
            device_path("/dev/nvgpu/igpu0/ctrl"),
            "/dev/nvgpu/igpu0/ctrl"
        );
    }

    #[test]
    fn the_l4t_release_from_its_file() {
        let line = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64";
        assert_eq!(l4t_release(line).as_deref(), Some("R36.4.3"));
        assert_eq!(l4t_release("garbage"), None);
    }

    #[test]
    fn library_links_are_left_to_the_cache() {
        for path in ["/a/libcuda.so", "/a/libcuda.so.1", "/a/libnvrm_gpu.so.12"] {
            assert!(is_library_link(path), "{path}");
        }
        for path in [
            "/a/libcuda.so.1.1",
            "/usr/bin/nvidia-smi",
            "/a/nvidia_icd.json",
            "/a/x.so.1a",
        ] {
            assert!(!is_library_link(path), "{path}");
        }
    }
}
