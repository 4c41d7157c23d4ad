//! `gpurun cdi-hook SUBCOMMAND …`: NVIDIA's CDI hooks for runtimes that run
//! hooks as processes (runc, crun), so a CDI spec naming gpurun works with
//! no NVIDIA toolkit on the host. Under gpurun itself these hooks never run:
//! the runtime does their work natively (`gpurun_gpu::cdi::hooks`).
//!
//! It runs on the host as root, started by another runtime with whatever
//! environment and working directory the spec gave the hook: it reads only
//! the state on stdin and the bundle's config, looks at no variable, and
//! resolves every path inside the container's rootfs.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gpurun_gpu::cdi::hooks::{self as cdi_hooks, HostFacts, Op};
use libcontainer::oci_spec::runtime::Spec;
use safe_fs::Rootfs;

/// The state a runtime writes on a hook's stdin is small; more is not one.
const MAX_STATE: u64 = 1 << 20;

pub fn cdi_hook(args: &[String]) -> Result<()> {
    // Nothing below is relative, and the spec's directory is not ours.
    std::env::set_current_dir("/").context("chdir /")?;
    let op = cdi_hooks::parse(args)?;
    if let Op::Unknown { name } = &op {
        tracing::warn!("cdi-hook {name}: a hook gpurun does not know, skipped");
        return Ok(());
    }
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_STATE)
        .read_to_string(&mut text)
        .context("read the container state on stdin")?;
    let state: serde_json::Value = serde_json::from_str(&text)
        .context("the container state on stdin is not JSON: run this as an OCI hook")?;
    let Some(bundle) = state["bundle"].as_str().map(PathBuf::from) else {
        bail!("the container state on stdin has no \"bundle\": run this as an OCI hook");
    };
    if !bundle.is_absolute() {
        bail!(
            "the container state's bundle {} is not absolute",
            bundle.display()
        );
    }
    let config = bundle.join("config.json");
    let spec = Spec::load(&config).with_context(|| format!("read {}", config.display()))?;
    let Some(root) = spec.root().as_ref().map(|r| r.path().clone()) else {
        bail!("{} has no root.path", config.display());
    };
    let rootfs = if root.is_absolute() {
        root
    } else {
        bundle.join(root)
    };
    if rootfs == std::path::Path::new("/") {
        bail!("the container's root is the host's /: refusing to change it");
    }
    let root =
        Rootfs::open(&rootfs).with_context(|| format!("open rootfs {}", rootfs.display()))?;
    for line in cdi_hooks::run_in_place(&op, &spec, &root, &HostFacts::read())? {
        tracing::debug!("cdi-hook: {line}");
    }
    Ok(())
}
