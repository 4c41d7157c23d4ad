//! The driver's files, found once per driver instead of on every start.
//!
//! Finding them reads the driver root's linker cache, resolves each NVIDIA
//! entry, lists the library directories (thousands of entries on some
//! hosts) and reads every library's SONAME: milliseconds that every GPU
//! container would pay again for the same answer. The answer is kept under
//! the state root, keyed by the driver root, the kernel module's version
//! and the boot, and it holds the state of every path the search looked at
//! (directories and the linker cache: device, inode, size, mtime; or that
//! it was absent). Any change to any of them, a new boot or another driver
//! version, and the search runs again.
//!
//! The cache decides what is mounted into containers, so it is trusted only
//! if it is a regular file owned by the caller and writable by no one else,
//! in a directory of the caller's that no one else can write to.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::inventory::driver_files::{DriverFiles, LibraryDirs};

/// Bump when the cached shape or the search changes.
const FORMAT: u32 = 1;
const MAX_CACHE: u64 = 8 << 20;

/// What a path looked like when the search read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathState {
    pub path: PathBuf,
    /// (device, inode, size, mtime in ns); `None` if it did not exist.
    pub state: Option<(u64, u64, u64, i128)>,
}

impl PathState {
    pub fn of(path: &Path) -> PathState {
        let state = fs::metadata(path).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            )
        });
        PathState {
            path: path.to_path_buf(),
            state,
        }
    }

    fn unchanged(&self) -> bool {
        PathState::of(&self.path) == *self
    }
}

/// One driver's search result and what it depended on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cached {
    format: u32,
    driver_root: PathBuf,
    kernel_version: String,
    boot_id: String,
    pub version: String,
    pub dirs: LibraryDirs,
    pub files: DriverFiles,
    watched: Vec<PathState>,
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn cache_file(dir: &Path, driver_root: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    driver_root.hash(&mut h);
    dir.join(format!("driver-{:016x}.json", h.finish()))
}

/// Whether `meta` is ours and writable by us alone.
fn trusted(meta: &fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    meta.uid() == me && meta.mode() & 0o022 == 0
}

/// The cached search for `driver_root` with kernel module `kernel_version`,
/// if it is there, trusted and still true.
pub fn load(dir: &Path, driver_root: &Path, kernel_version: &str) -> Option<Cached> {
    use std::io::Read;
    let dir_meta = fs::symlink_metadata(dir).ok()?;
    if !dir_meta.is_dir() || !trusted(&dir_meta) {
        return None;
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(cache_file(dir, driver_root))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || !trusted(&meta) {
        tracing::debug!("driver cache {} is not trusted: ignored", dir.display());
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_CACHE).read_to_end(&mut bytes).ok()?;
    let cached: Cached = serde_json::from_slice(&bytes).ok()?;
    let valid = cached.format == FORMAT
        && cached.driver_root == driver_root
        && cached.kernel_version == kernel_version
        && cached.boot_id == boot_id()
        && cached.watched.iter().all(PathState::unchanged);
    valid.then_some(cached)
}

/// Keeps a search result. Best effort: a cache that cannot be written
/// only costs the next start the search.
#[allow(clippy::too_many_arguments)]
pub fn store(
    dir: &Path,
    driver_root: &Path,
    kernel_version: &str,
    version: &str,
    dirs: &LibraryDirs,
    files: &DriverFiles,
    watched: Vec<PathState>,
) {
    let cached = Cached {
        format: FORMAT,
        driver_root: driver_root.to_path_buf(),
        kernel_version: kernel_version.to_owned(),
        boot_id: boot_id(),
        version: version.to_owned(),
        dirs: dirs.clone(),
        files: files.clone(),
        watched,
    };
    let result = (|| -> std::io::Result<()> {
        match fs::create_dir(dir) {
            // Readable by a container's init in a user namespace, which
            // reads the mount-point layers kept here; writable by us alone.
            Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        if !trusted(&fs::symlink_metadata(dir)?) {
            return Err(std::io::Error::other("cache directory not ours alone"));
        }
        let target = cache_file(dir, driver_root);
        let tmp = target.with_extension(format!("tmp{}", std::process::id()));
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let written = serde_json::to_vec(&cached)
            .map_err(std::io::Error::other)
            .and_then(|bytes| file.write_all(&bytes))
            .and_then(|()| fs::rename(&tmp, &target));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    })();
    if let Err(e) = result {
        tracing::debug!("driver cache not written in {}: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_holds_until_a_watched_path_changes_and_must_be_ours() {
        let base = std::env::temp_dir().join(format!("inv-cache-{}", std::process::id()));
        let watched_dir = base.join("lib");
        fs::create_dir_all(&watched_dir).unwrap();
        let cache = base.join("cache");
        let dirs = LibraryDirs::default();
        let files = DriverFiles {
            notes: vec!["found".into()],
            ..DriverFiles::default()
        };
        let root = Path::new("/driver");
        store(
            &cache,
            root,
            "535.1",
            "535.1",
            &dirs,
            &files,
            vec![PathState::of(&watched_dir)],
        );
        let hit = load(&cache, root, "535.1").expect("cached");
        assert_eq!(hit.files.notes, ["found"]);
        // Another kernel module version or driver root: not this cache.
        assert!(load(&cache, root, "535.2").is_none());
        assert!(load(&cache, Path::new("/other"), "535.1").is_none());
        // A change in a watched directory.
        std::thread::sleep(std::time::Duration::from_millis(5));
        fs::write(watched_dir.join("libcuda.so.535.1"), "").unwrap();
        assert!(load(&cache, root, "535.1").is_none());
        // Written by someone else (writable by others): not trusted.
        store(
            &cache,
            root,
            "535.1",
            "535.1",
            &dirs,
            &files,
            vec![PathState::of(&watched_dir)],
        );
        assert!(load(&cache, root, "535.1").is_some());
        let file = cache_file(&cache, root);
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(load(&cache, root, "535.1").is_none());
        let _ = fs::remove_dir_all(base);
    }
}
