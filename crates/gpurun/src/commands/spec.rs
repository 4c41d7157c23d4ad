use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::Spec;

/// Writes a starter config.json, as `runc spec` does; `--rootless` gives one
/// with a user namespace that maps the caller to root.
pub fn spec(args: liboci_cli::Spec) -> Result<()> {
    let bundle = args.bundle.unwrap_or_else(|| PathBuf::from("."));
    let path = bundle.join("config.json");
    if path.exists() {
        bail!("{} already exists: remove it first", path.display());
    }
    let spec = if args.rootless {
        Spec::rootless(
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    } else {
        Spec::default()
    };
    let text = serde_json::to_string_pretty(&spec)?;
    fs::write(&path, text + "\n").with_context(|| format!("write {}", path.display()))
}
