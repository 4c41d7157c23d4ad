//! musl images (Alpine): their loader reads no `ld.so.cache`, only the
//! folders in `/etc/ld-musl-<arch>.path` (else `/lib:/usr/local/lib:/usr/lib`).
//! Where the driver's libraries land in a folder musl does not search (an
//! image with gcompat's `/lib64`), the container gets that file with the
//! image's own folders and the injected ones, as toolkit 1.18.2 writes it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::formats::ldcache::Entry;
use crate::formats::platform::{CacheWidth, Platform};
use safe_fs::Rootfs;

/// musl's own folders when an image has no path file.
pub const DEFAULT_FOLDERS: [&str; 3] = ["/lib", "/usr/local/lib", "/usr/lib"];

/// Largest image path file read; real ones are a few lines.
const MAX_PATH_FILE: u64 = 64 << 10;

/// The path file a musl image's container gets.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MuslPath {
    /// `/etc/ld-musl-<arch>.path`, as the container sees it.
    pub file: PathBuf,
    /// Its folders in order: the image's own (or musl's defaults), then
    /// the injected libraries' folders it lacked.
    pub folders: Vec<String>,
}

impl MuslPath {
    /// The file's text: a folder per line.
    pub fn text(&self) -> String {
        self.folders.iter().map(|f| format!("{f}\n")).collect()
    }
}

/// musl's loader in an image, whose presence makes it a musl image.
pub fn loader(platform: &Platform) -> String {
    format!("/lib/ld-musl-{}.so.1", platform.arch)
}

/// The file musl's loader reads its folders from.
pub fn path_file(platform: &Platform) -> String {
    format!("/etc/ld-musl-{}.path", platform.arch)
}

/// The folders of a path file: separated by colons or newlines, as musl
/// reads them; empty pieces dropped.
pub fn parse_folders(text: &str) -> Vec<String> {
    text.split([':', '\n'])
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `image` folders with the native entries' folders appended where
/// missing; `None` when nothing is missing (musl finds them already).
pub fn with_injected(
    image: Vec<String>,
    entries: &[Entry],
    platform: &Platform,
) -> Option<Vec<String>> {
    let mut folders = image.clone();
    for entry in entries {
        if platform.cache_width(entry.flags) != CacheWidth::Native {
            continue;
        }
        let Some(dir) = Path::new(&entry.path).parent().and_then(Path::to_str) else {
            continue;
        };
        if !folders.iter().any(|f| f == dir) {
            folders.push(dir.to_owned());
        }
    }
    (folders != image).then_some(folders)
}

/// The path file for `root`'s container, if it is a musl image whose
/// search misses a folder of `entries`. The image's own path file is read
/// only as a regular file (never a FIFO or a device).
pub fn plan(root: &Rootfs, entries: &[Entry], platform: &Platform) -> Option<MuslPath> {
    root.file_type(Path::new(&loader(platform))).ok()?;
    let file = path_file(platform);
    let image = match root.read(Path::new(&file), MAX_PATH_FILE) {
        Ok(bytes) => parse_folders(&String::from_utf8_lossy(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            DEFAULT_FOLDERS.map(str::to_owned).to_vec()
        }
        Err(e) => {
            tracing::debug!(
                "the image's {file} was not read ({e}): musl's defaults kept under ours"
            );
            DEFAULT_FOLDERS.map(str::to_owned).to_vec()
        }
    };
    let folders = with_injected(image, entries, platform)?;
    Some(MuslPath {
        file: PathBuf::from(file),
        folders,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::platform::X86_64;

    fn entry(path: &str, flags: i32) -> Entry {
        Entry {
            name: "libcuda.so.1".into(),
            path: path.into(),
            flags,
            hwcap: 0,
        }
    }

    #[test]
    fn folders_split_on_colons_and_lines() {
        assert_eq!(
            parse_folders("/lib:/usr/lib\n\n /opt/x \n"),
            ["/lib", "/usr/lib", "/opt/x"]
        );
    }

    #[test]
    fn only_missing_native_folders_are_added() {
        let defaults = DEFAULT_FOLDERS.map(str::to_owned).to_vec();
        let native = X86_64.cache_flags;
        let compat32 = X86_64.compat32_cache_flags().unwrap();
        // In /usr/lib: musl finds it already.
        assert_eq!(
            with_injected(
                defaults.clone(),
                &[entry("/usr/lib/libcuda.so.1", native)],
                &X86_64
            ),
            None
        );
        // In gcompat's /lib64: added after the image's own; i386 never.
        let got = with_injected(
            defaults,
            &[
                entry("/lib64/libcuda.so.1", native),
                entry("/lib64/libnvidia-ml.so.1", native),
                entry("/usr/lib32/libcuda.so.1", compat32),
            ],
            &X86_64,
        )
        .unwrap();
        assert_eq!(got, ["/lib", "/usr/local/lib", "/usr/lib", "/lib64"]);
    }
}
