//! Where container state lives: `--root`, else `/run/gpurun` for root and
//! `$XDG_RUNTIME_DIR/gpurun` for everyone else.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Root's state root with no `--root`.
pub const ROOT_STATE_ROOT: &str = "/run/gpurun";

/// The root with no `--root`, where it is a fixed path (not a batch job's
/// private one); nothing is made.
pub fn default_root() -> Option<PathBuf> {
    if crate::runtime::protect::privilege::is_host_root() {
        return Some(PathBuf::from(ROOT_STATE_ROOT));
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|dir| !dir.is_empty())
        .map(|dir| PathBuf::from(dir).join("gpurun"))
}

/// The `list` command that shows `root`'s containers: `--root` named
/// where it is not the default.
pub fn list_command(root: &Path) -> String {
    if default_root().as_deref() == Some(root) {
        "gpurun list".to_owned()
    } else {
        format!("gpurun --root {} list", root.display())
    }
}

/// `makes_containers`: the command may make the root where it is missing.
pub fn resolve(flag: Option<&Path>, makes_containers: bool) -> Result<PathBuf> {
    let root = match flag.map(Path::to_path_buf).or_else(default_root) {
        Some(root) => root,
        // Batch jobs (Slurm, cron) often have no XDG_RUNTIME_DIR.
        None => return private_tmp_root(),
    };
    if in_shared_directory(&root) {
        // Such as `gpurun setup slurm`'s /run/gpurun-slurm/USER: anyone may
        // make an entry there, so a user's must be their own. Root (which
        // slurmstepd runs RunTimeQuery as) reads a user's as it is, and
        // makes one only to make containers in it: a `state` that made it
        // would lock its user out.
        if crate::runtime::protect::privilege::is_host_root()
            && (root.is_dir() || !makes_containers)
        {
            return Ok(root);
        }
        return owned_dir(
            root,
            0o022,
            "it is in a directory anyone can write: remove it, or pass another --root",
        );
    }
    if !root.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("create state directory {}", root.display()))?;
    }
    fs::canonicalize(&root).with_context(|| format!("state directory {}", root.display()))
}

/// Whether a directory's parent is sticky and writable by anyone.
fn in_shared_directory(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.parent()
        .and_then(|p| fs::metadata(p).ok())
        .is_some_and(|m| m.mode() & 0o1002 == 0o1002)
}

/// `/tmp/gpurun-<uid>`, made 0700; an existing one must be a real directory
/// of ours that nobody else can write, or another user could plant state.
fn private_tmp_root() -> Result<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    owned_dir(
        PathBuf::from(format!("/tmp/gpurun-{uid}")),
        0o077,
        "set XDG_RUNTIME_DIR or pass --root DIR",
    )
}

/// `root` made 0700, or an existing one that is a real directory of the
/// caller's with none of the `denied` mode bits.
fn owned_dir(root: PathBuf, denied: u32, fix: &str) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    match fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| format!("create state directory {}", root.display()))
        }
    }
    let meta = fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & denied != 0 {
        bail!(
            "state directory {} is not a private directory of uid {uid}: {fix}",
            root.display()
        );
    }
    Ok(root)
}
