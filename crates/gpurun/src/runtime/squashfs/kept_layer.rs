//! `run --image FILE --layer DIR`: the writable layer kept in a directory
//! of the caller's instead of a tmpfs, so that the next run with the same
//! DIR starts where the last one ended (pyxis's `--container-name`).
//!
//! One container at a time: the run holds a lock on DIR while its
//! container lives, since two overlays on one upper directory are
//! undefined. DIR records the image it lies over; another image over it
//! is refused for the same reason, and a run with DIR alone takes the
//! recorded one.

use std::fs::{self, File};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The file in DIR that names the image the layer lies over.
const IMAGE_RECORD: &str = "image";

/// A layer directory, locked for one container.
pub struct KeptLayer {
    pub dir: PathBuf,
    _lock: File,
}

impl KeptLayer {
    /// Opens (or makes, 0700) the layer directory `dir` and locks it;
    /// returns it with the image to run: `image`, which must be the one
    /// DIR records if it records one, or the recorded one.
    pub fn open(dir: &Path, image: Option<&Path>) -> Result<(KeptLayer, PathBuf)> {
        let dir = std::path::absolute(dir).with_context(|| format!("--layer {}", dir.display()))?;
        let text = dir.to_string_lossy();
        if text.contains([',', ':', '\\']) {
            bail!("--layer {text}: the path may not hold ',', ':' or '\\' (overlayfs's separators): pick another directory");
        }
        make_private_dir(&dir).with_context(|| format!("--layer {text}: create it"))?;
        let lock = open_own_dir(&dir)?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            bail!("--layer {text} is in use by another container: wait for it to end, or give another directory");
        }
        let given = image
            .map(|given| {
                fs::canonicalize(given).with_context(|| format!("--image {}", given.display()))
            })
            .transpose()?;
        let image = match (recorded_image(&dir)?, given) {
            (Some(recorded), Some(given)) if given != recorded => bail!(
                "--layer {text} lies over {}, not {}: give that image, or another --layer",
                recorded.display(),
                given.display()
            ),
            (Some(recorded), _) => recorded,
            (None, Some(given)) => {
                record_image(&dir, &given)?;
                given
            }
            (None, None) => {
                bail!("--layer {text} holds no layer yet: give --image FILE the first time")
            }
        };
        for part in ["upper", "work"] {
            make_private_dir(&dir.join(part))
                .with_context(|| format!("--layer {text}: make {part}"))?;
        }
        Ok((KeptLayer { dir, _lock: lock }, image))
    }
}

/// Makes `dir` 0700, or leaves the one there.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// `dir`, opened without following a link, if it is a directory of the
/// caller's that nobody else may write.
fn open_own_dir(dir: &Path) -> Result<File> {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .with_context(|| format!("--layer {}: not a directory", dir.display()))?;
    let meta = opened.metadata()?;
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid || meta.mode() & 0o022 != 0 {
        bail!(
            "--layer {}: not a private directory of uid {uid} (owner {}, mode {:o}): pick a directory of your own",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    Ok(opened)
}

fn recorded_image(dir: &Path) -> Result<Option<PathBuf>> {
    let path = dir.join(IMAGE_RECORD);
    let mut text = String::new();
    match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
    {
        Ok(file) => {
            file.take(4096)
                .read_to_string(&mut text)
                .with_context(|| format!("read {}", path.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    }
    let recorded = text.trim_end_matches('\n');
    if !recorded.starts_with('/') {
        bail!("{} names no image: remove the directory", path.display());
    }
    Ok(Some(PathBuf::from(recorded)))
}

fn record_image(dir: &Path, image: &Path) -> Result<()> {
    let path = dir.join(IMAGE_RECORD);
    fs::write(&path, format!("{}\n", image.display()))
        .with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kept-layer-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_layer_takes_its_first_image_one_container_at_a_time() {
        let root = scratch("first");
        let (a, b) = (root.join("a.sqsh"), root.join("b.sqsh"));
        fs::write(&a, "").unwrap();
        fs::write(&b, "").unwrap();
        let dir = root.join("layer");
        let none = KeptLayer::open(&dir, None).err().unwrap().to_string();
        assert!(none.contains("holds no layer yet"), "{none}");
        let (held, image) = KeptLayer::open(&dir, Some(&a)).unwrap();
        assert_eq!(image, fs::canonicalize(&a).unwrap());
        assert!(dir.join("upper").is_dir() && dir.join("work").is_dir());
        let busy = KeptLayer::open(&dir, Some(&a)).err().unwrap().to_string();
        assert!(busy.contains("in use by another container"), "{busy}");
        drop(held);
        let (_held, image) = KeptLayer::open(&dir, None).unwrap();
        assert_eq!(image, fs::canonicalize(&a).unwrap(), "the recorded image");
        drop(_held);
        let other = KeptLayer::open(&dir, Some(&b)).err().unwrap().to_string();
        assert!(other.contains("lies over"), "{other}");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_layer_path_that_overlayfs_would_split_or_others_may_write_is_refused() {
        let root = scratch("refused");
        let image = root.join("a.sqsh");
        fs::write(&image, "").unwrap();
        let odd = KeptLayer::open(&root.join("a:b"), Some(&image))
            .err()
            .unwrap()
            .to_string();
        assert!(odd.contains("separators"), "{odd}");
        let open = root.join("open");
        fs::create_dir(&open).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let shared = KeptLayer::open(&open, Some(&image))
            .err()
            .unwrap()
            .to_string();
        assert!(shared.contains("not a private directory"), "{shared}");
        std::os::unix::fs::symlink(&open, root.join("link")).unwrap();
        let link = KeptLayer::open(&root.join("link"), Some(&image))
            .err()
            .unwrap()
            .to_string();
        assert!(link.contains("not a directory"), "{link}");
        fs::remove_dir_all(root).unwrap();
    }
}
