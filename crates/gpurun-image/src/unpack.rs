//! Applying layer tars to a directory, as an untrusted input: no entry may
//! write outside the directory, whether by `..`, an absolute path, or a
//! symlink that an earlier entry planted. Every parent is resolved with
//! openat2(2) `RESOLVE_BENEATH` from the directory itself, and every leaf is
//! created without following what is already there.

use std::collections::{BTreeMap, HashSet};
use std::ffi::CString;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

fn openat2_beneath(dir: &OwnedFd, path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    safe_fs::openat2(dir.as_fd(), Path::new(path), flags, safe_fs::BENEATH)
}

/// The path through which std's path-based calls reach `name` in the
/// directory `dir`, without resolving anything but `name` itself.
fn at(dir: &OwnedFd, name: &str) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()))
}

/// An entry's path as clean components; `..`, a root, or nothing at all
/// is refused.
pub fn entry_components(raw: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for c in raw.components() {
        match c {
            Component::Normal(s) => out.push(
                s.to_str()
                    .with_context(|| format!("entry {raw:?} is not UTF-8"))?
                    .to_owned(),
            ),
            Component::CurDir => {}
            Component::ParentDir => {
                bail!("entry {raw:?} has \"..\": it would escape the target directory")
            }
            Component::RootDir | Component::Prefix(_) => {
                bail!("entry {raw:?} is absolute: it would escape the target directory")
            }
        }
    }
    Ok(out)
}

#[derive(Debug, Default, Clone, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    pub whiteouts: u64,
    /// Device nodes an unprivileged import cannot make.
    pub skipped_devices: u64,
    /// Owners the user namespace cannot represent; those files keep ours.
    pub unmapped_owners: u64,
}

pub struct Unpacker {
    root: OwnedFd,
    chown: bool,
    /// Final directory modes, applied at the end so that a read-only
    /// directory does not stop later entries.
    dir_modes: BTreeMap<String, u32>,
    pub stats: Stats,
}

impl Unpacker {
    /// `chown`: set owners from the tar headers (root, or a user namespace).
    pub fn new(dir: &Path, chown: bool) -> Result<Unpacker> {
        let root = fs::File::open(dir)
            .with_context(|| format!("open {}", dir.display()))?
            .into();
        Ok(Unpacker {
            root,
            chown,
            dir_modes: BTreeMap::new(),
            stats: Stats::default(),
        })
    }

    /// Opens directory `comps` below the root, creating what is missing.
    fn open_dir(&self, comps: &[String], create: bool, entry: &str) -> Result<OwnedFd> {
        let explain = |e: io::Error, upto: &str| -> anyhow::Error {
            match e.raw_os_error() {
                Some(libc::EXDEV) => anyhow::anyhow!(
                    "entry {entry:?} would be written through symlink {upto:?}, which leaves the target directory"
                ),
                Some(libc::ELOOP) => anyhow::anyhow!("entry {entry:?}: symlink loop at {upto:?}"),
                Some(libc::ENOTDIR) => anyhow::anyhow!("entry {entry:?}: {upto:?} is not a directory"),
                _ => anyhow::Error::new(e).context(format!("entry {entry:?}: open {upto:?}")),
            }
        };
        let full = comps.join("/");
        match openat2_beneath(&self.root, &full, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(fd) => return Ok(fd),
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {}
            Err(e) => return Err(explain(e, &full)),
        }
        let mut parent = openat2_beneath(&self.root, "", libc::O_PATH | libc::O_DIRECTORY)?;
        for i in 0..comps.len() {
            let upto = comps[..=i].join("/");
            parent = match openat2_beneath(&self.root, &upto, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // A dangling symlink here must not be followed by mkdir.
                    match fs::DirBuilder::new()
                        .mode(0o755)
                        .create(at(&parent, &comps[i]))
                    {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                            bail!("entry {entry:?}: {upto:?} exists and is not a directory inside the target")
                        }
                        Err(e) => return Err(explain(e, &upto)),
                    }
                    openat2_beneath(&self.root, &upto, libc::O_PATH | libc::O_DIRECTORY)
                        .map_err(|e| explain(e, &upto))?
                }
                Err(e) => return Err(explain(e, &upto)),
            };
        }
        Ok(parent)
    }

    fn chown(&mut self, path: &Path, uid: u64, gid: u64) {
        if !self.chown {
            return;
        }
        let (Ok(uid), Ok(gid)) = (u32::try_from(uid), u32::try_from(gid)) else {
            self.stats.unmapped_owners += 1;
            return;
        };
        if std::os::unix::fs::lchown(path, Some(uid), Some(gid)).is_err() {
            self.stats.unmapped_owners += 1;
        }
    }

    /// Applies one layer. `blob` is the layer as stored (gzip, zstd or a
    /// plain tar); it is read to its end.
    pub fn apply_layer<R: Read>(&mut self, blob: R) -> Result<R> {
        let mut buffered = BufReader::with_capacity(1 << 16, blob);
        let head = buffered.fill_buf()?.to_vec();
        let stream: Box<dyn Read + '_> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::bufread::MultiGzDecoder::new(&mut buffered))
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Box::new(zstd::stream::read::Decoder::with_buffer(&mut buffered)?)
        } else {
            Box::new(&mut buffered)
        };
        self.apply_tar(stream)?;
        // Whatever follows the tar's end still counts for the digest.
        io::copy(&mut buffered, &mut io::sink())?;
        Ok(buffered.into_inner())
    }

    /// Applies an uncompressed layer tar.
    pub fn apply_tar<R: Read>(&mut self, stream: R) -> Result<()> {
        let mut archive = tar::Archive::new(stream);
        let mut this_layer: HashSet<String> = HashSet::new();
        for entry in archive.entries().context("read layer")? {
            let mut entry = entry.context("read layer entry")?;
            let raw = entry.path().context("entry path")?.into_owned();
            let comps = entry_components(&raw)?;
            let Some((name, parents)) = comps.split_last() else {
                continue; // "./" itself
            };
            let shown = comps.join("/");
            if name == ".wh..wh..opq" {
                self.apply_opaque(parents, &shown, &this_layer)?;
                continue;
            }
            if let Some(hidden) = name.strip_prefix(".wh.") {
                match self.open_dir(parents, false, &shown) {
                    Ok(dir) => remove_any(&at(&dir, hidden))?,
                    Err(_) if !self.exists(parents) => {}
                    Err(e) => return Err(e),
                }
                self.stats.whiteouts += 1;
                continue;
            }
            let dir = self.open_dir(parents, true, &shown)?;
            let leaf = at(&dir, name);
            if self.write_entry(&mut entry, &leaf, &shown)? {
                this_layer.insert(shown);
            }
        }
        Ok(())
    }

    /// An opaque whiteout: the lower layers' children of this directory
    /// go (what this layer already put there stays).
    fn apply_opaque(
        &mut self,
        parents: &[String],
        shown: &str,
        this_layer: &HashSet<String>,
    ) -> Result<()> {
        let dir = self.open_dir(parents, true, shown)?;
        let prefix = parents.join("/");
        for child in fs::read_dir(at(&dir, ""))? {
            let child = child?.file_name();
            let child = child.to_string_lossy();
            let rel = if prefix.is_empty() {
                child.to_string()
            } else {
                format!("{prefix}/{child}")
            };
            if !this_layer.contains(&rel) {
                remove_any(&at(&dir, &child))?;
            }
        }
        self.stats.whiteouts += 1;
        Ok(())
    }

    /// One entry at `leaf` (in a directory opened beneath the root),
    /// replacing what a lower layer had there. False for entries that
    /// carry no file (pax headers and the like).
    fn write_entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        leaf: &Path,
        shown: &str,
    ) -> Result<bool> {
        let header = entry.header().clone();
        let mode = header.mode().unwrap_or(0o644) & 0o7777;
        let (uid, gid) = (header.uid().unwrap_or(0), header.gid().unwrap_or(0));
        let kind = header.entry_type();
        let existing = fs::symlink_metadata(leaf).ok();
        if kind.is_dir() {
            if !existing.as_ref().is_some_and(|m| m.is_dir()) {
                if existing.is_some() {
                    remove_any(leaf)?;
                }
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(leaf)
                    .with_context(|| format!("entry {shown:?}: mkdir"))?;
                self.stats.dirs += 1;
            }
            self.chown(leaf, uid, gid);
            self.dir_modes.insert(shown.to_owned(), mode);
            return Ok(true);
        }
        if existing.is_some() {
            remove_any(leaf)?;
        }
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                self.write_file(entry, &header, leaf, shown, (uid, gid, mode))?
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()?
                    .with_context(|| format!("symlink {shown:?} has no target"))?;
                // The target is data: it is only ever resolved inside
                // the container, or beneath the root here.
                std::os::unix::fs::symlink(&target, leaf)
                    .with_context(|| format!("entry {shown:?}: symlink"))?;
                self.chown(leaf, uid, gid);
                self.stats.symlinks += 1;
            }
            tar::EntryType::Link => self.write_hard_link(entry, leaf, shown)?,
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                self.write_node(&header, leaf, (uid, gid, mode))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        header: &tar::Header,
        leaf: &Path,
        shown: &str,
        (uid, gid, mode): (u64, u64, u32),
    ) -> Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(leaf)
            .with_context(|| format!("entry {shown:?}: create"))?;
        io::copy(entry, &mut file).with_context(|| format!("entry {shown:?}: write"))?;
        if let Ok(mtime) = header.mtime() {
            let _ =
                file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime));
        }
        self.chown(leaf, uid, gid);
        // After chown, which clears set-id bits.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        self.stats.files += 1;
        Ok(())
    }

    /// A hard link, to an earlier entry resolved beneath the root.
    fn write_hard_link<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        leaf: &Path,
        shown: &str,
    ) -> Result<()> {
        let target = entry
            .link_name()?
            .with_context(|| format!("hard link {shown:?} has no target"))?;
        let tcomps = entry_components(&target)?;
        let Some((tname, tparents)) = tcomps.split_last() else {
            bail!("hard link {shown:?} has an empty target");
        };
        let tdir = self.open_dir(tparents, false, &tcomps.join("/"))?;
        fs::hard_link(at(&tdir, tname), leaf).with_context(|| {
            format!(
                "hard link {shown:?} to {:?}: the target must be an earlier entry",
                tcomps.join("/")
            )
        })?;
        self.stats.hardlinks += 1;
        Ok(())
    }

    /// A device node or FIFO; one mknod refuses (no CAP_MKNOD, a user
    /// namespace) is counted and skipped.
    fn write_node(
        &mut self,
        header: &tar::Header,
        leaf: &Path,
        (uid, gid, mode): (u64, u64, u32),
    ) -> Result<()> {
        let kind_bits = match header.entry_type() {
            tar::EntryType::Char => libc::S_IFCHR,
            tar::EntryType::Block => libc::S_IFBLK,
            _ => libc::S_IFIFO,
        };
        let dev = libc::makedev(
            header.device_major()?.unwrap_or(0),
            header.device_minor()?.unwrap_or(0),
        );
        let c = CString::new(leaf.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; mknod creates the leaf only.
        if unsafe { libc::mknod(c.as_ptr(), kind_bits | mode, dev) } == 0 {
            self.chown(leaf, uid, gid);
        } else {
            self.stats.skipped_devices += 1;
        }
        Ok(())
    }

    fn exists(&self, comps: &[String]) -> bool {
        openat2_beneath(&self.root, &comps.join("/"), libc::O_PATH).is_ok()
    }

    /// Sets the directories' final modes.
    pub fn finish(self) -> Result<Stats> {
        // Deepest first, so a read-only parent is set after its children.
        for (path, mode) in self.dir_modes.iter().rev() {
            if let Ok(fd) = openat2_beneath(
                &self.root,
                path,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            ) {
                let file = fs::File::from(fd);
                let _ = file.set_permissions(fs::Permissions::from_mode(*mode));
            }
        }
        Ok(self.stats)
    }
}

/// Removes a file, symlink or directory tree without following symlinks.
fn remove_any(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
        Ok(m) if m.is_dir() => {
            // Read-only directories inside must not stop the removal.
            make_writable(path);
            fs::remove_dir_all(path).with_context(|| format!("remove {}", path.display()))
        }
        Ok(_) => fs::remove_file(path).with_context(|| format!("remove {}", path.display())),
    }
}

fn make_writable(dir: &Path) {
    if let Ok(m) = fs::symlink_metadata(dir) {
        if m.is_dir() {
            let _ = fs::set_permissions(
                dir,
                fs::Permissions::from_mode(m.permissions().mode() | 0o700),
            );
            if let Ok(entries) = fs::read_dir(dir) {
                for e in entries.flatten() {
                    make_writable(&e.path());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths_must_stay_inside() {
        assert_eq!(
            entry_components(Path::new("./usr/bin/x")).unwrap(),
            ["usr", "bin", "x"]
        );
        assert!(entry_components(Path::new("../x")).is_err());
        assert!(entry_components(Path::new("a/../../x")).is_err());
        assert!(entry_components(Path::new("/etc/passwd")).is_err());
        assert!(entry_components(Path::new("./")).unwrap().is_empty());
    }
}
