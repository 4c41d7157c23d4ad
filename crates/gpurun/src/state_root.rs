//! Where container state lives: `--root`, else `/run/gpurun` for root and
//! `$XDG_RUNTIME_DIR/gpurun` for everyone else.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub fn resolve(flag: Option<&Path>) -> Result<PathBuf> {
    let root = match flag {
        Some(path) => path.to_path_buf(),
        None if nix::unistd::geteuid().is_root() => PathBuf::from("/run/gpurun"),
        None => match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("gpurun"),
            _ => bail!("no state directory: XDG_RUNTIME_DIR is not set; set it or pass --root DIR"),
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
