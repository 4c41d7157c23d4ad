//! `run --image FILE --save OUT`: once the container has ended, its root
//! as it ended (the image with what the container wrote over it) packed
//! into OUT with mksquashfs, as pyxis's `--container-save` does through
//! `enroot export`. Written beside OUT and renamed over it, so a failed
//! save leaves OUT as it was.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::runtime::import::{program_on_path, run_mksquashfs};

/// Where `--save` writes: checked before the container runs, so a bad
/// path fails with nothing run.
pub struct SaveTo {
    file: PathBuf,
    mksquashfs: PathBuf,
}

impl SaveTo {
    pub fn check(file: &Path) -> Result<SaveTo> {
        let mksquashfs = program_on_path("mksquashfs").with_context(|| {
            format!(
                "--save {}: writing a squashfs image needs mksquashfs: install squashfs-tools",
                file.display()
            )
        })?;
        let file = std::path::absolute(file)?;
        let dir = file
            .parent()
            .filter(|d| d.is_dir())
            .with_context(|| format!("--save {}: its directory does not exist", file.display()))?;
        if file.is_dir() {
            bail!("--save {}: a directory; name a file", file.display());
        }
        if nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_err() {
            bail!(
                "--save {}: {} is not writable here",
                file.display(),
                dir.display()
            );
        }
        Ok(SaveTo { file, mksquashfs })
    }

    /// Packs `rootfs` (the mounted root, which the container no longer
    /// uses); `all_root`: every file root's, as the container saw them in
    /// a user's FUSE mount (without --keep-uid).
    pub fn save(&self, rootfs: &Path, all_root: bool) -> Result<()> {
        let name = self.file.file_name().unwrap_or_default().to_string_lossy();
        let partial = self
            .file
            .with_file_name(format!(".{name}.save-{}", std::process::id()));
        let extra: &[&str] = if all_root { &["-all-root"] } else { &[] };
        let packed = run_mksquashfs(&self.mksquashfs, rootfs, &partial, extra).and_then(|()| {
            fs::rename(&partial, &self.file)
                .with_context(|| format!("--save {}", self.file.display()))
        });
        if packed.is_err() {
            let _ = fs::remove_file(&partial);
        }
        packed.with_context(|| format!("save the container to {}", self.file.display()))
    }
}
