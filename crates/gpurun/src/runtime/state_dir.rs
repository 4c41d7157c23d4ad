//! Where container state lives: `--root`, else `/run/gpurun` for root and
//! `$XDG_RUNTIME_DIR/gpurun` for everyone else.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub fn resolve(flag: Option<&Path>) -> Result<PathBuf> {
    let root = match flag {
        Some(path) => path.to_path_buf(),
        None if crate::runtime::privilege::is_host_root() => PathBuf::from("/run/gpurun"),
        None => match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("gpurun"),
            // Batch jobs (Slurm, cron) often have no XDG_RUNTIME_DIR.
            _ => return private_tmp_root(),
        },
    };
    if !root.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("create state directory {}", root.display()))?;
    }
    fs::canonicalize(&root).with_context(|| format!("state directory {}", root.display()))
}

/// `/tmp/gpurun-<uid>`, made 0700; an existing one must be a real directory
/// of ours that nobody else can write, or another user could plant state.
fn private_tmp_root() -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    let root = PathBuf::from(format!("/tmp/gpurun-{uid}"));
    match fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| format!("create state directory {}", root.display()))
        }
    }
    let meta = fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        bail!(
            "state directory {} is not a private directory of uid {uid}: set XDG_RUNTIME_DIR or pass --root DIR",
            root.display()
        );
    }
    Ok(root)
}
