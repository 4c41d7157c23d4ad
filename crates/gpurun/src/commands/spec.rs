use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::{LinuxDeviceCgroupBuilder, Spec};

/// Writes a starter config.json, as `runc spec` does; `--rootless` gives one
/// with a user namespace that maps the caller to root.
pub fn spec(args: liboci_cli::Spec) -> Result<()> {
    let bundle = args.bundle.unwrap_or_else(|| PathBuf::from("."));
    let path = bundle.join("config.json");
    if path.exists() {
        bail!("{} already exists: remove it first", path.display());
    }
    let mut spec = if args.rootless {
        Spec::rootless(
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    } else {
        Spec::default()
    };
    if !args.rootless {
        // Deny every device by default, as runc's spec does: a new v1
        // devices cgroup inherits its parent's "a *:* rwm" otherwise.
        let deny_all = LinuxDeviceCgroupBuilder::default()
            .allow(false)
            .access("rwm")
            .build()?;
        if let Some(linux) = spec.linux_mut() {
            let mut resources = linux.resources().clone().unwrap_or_default();
            resources.set_devices(Some(vec![deny_all]));
            linux.set_resources(Some(resources));
        }
    }
    // A shell on a terminal, as `runc spec` writes it.
    if let Some(process) = spec.process_mut() {
        process.set_terminal(Some(true));
    }
    let text = serde_json::to_string_pretty(&spec)?;
    fs::write(&path, text + "\n").with_context(|| format!("write {}", path.display()))
}
