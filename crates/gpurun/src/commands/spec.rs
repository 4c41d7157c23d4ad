use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// `runc spec`'s template (runc 1.1), as runc writes it: no inheritable
/// capabilities (CVE-2022-29162), no cgroup namespace, devices denied.
const TEMPLATE: &str = include_str!("spec-template.json");
/// `runc spec --rootless`'s: a user namespace mapping the caller
/// (`HOST_UID`, `HOST_GID`) to root, the host's network and /sys, no
/// resources.
const ROOTLESS_TEMPLATE: &str = include_str!("spec-template-rootless.json");

/// Writes a starter config.json, the one `runc spec` writes, so that a
/// bundle made for either runtime is the same.
pub fn spec(args: liboci_cli::Spec) -> Result<()> {
    let bundle = args.bundle.unwrap_or_else(|| PathBuf::from("."));
    let path = bundle.join("config.json");
    if path.exists() {
        bail!("{} already exists: remove it first", path.display());
    }
    if !bundle.is_dir() {
        bail!(
            "the bundle directory {} does not exist: make it (mkdir -p {}), then run gpurun spec again",
            bundle.display(),
            bundle.display()
        );
    }
    let text = if args.rootless {
        ROOTLESS_TEMPLATE
            .replace("HOST_UID", &nix::unistd::getuid().to_string())
            .replace("HOST_GID", &nix::unistd::getgid().to_string())
    } else {
        TEMPLATE.to_owned()
    };
    fs::write(&path, text).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_templates_are_specs_libcontainer_reads() {
        let rootless = ROOTLESS_TEMPLATE
            .replace("HOST_UID", "1000")
            .replace("HOST_GID", "1000");
        for text in [TEMPLATE, rootless.as_str()] {
            let spec: libcontainer::oci_spec::runtime::Spec = serde_json::from_str(text).unwrap();
            assert_eq!(spec.hostname().as_deref(), Some("runc"));
            let caps = spec
                .process()
                .as_ref()
                .unwrap()
                .capabilities()
                .as_ref()
                .unwrap();
            assert!(caps.inheritable().as_ref().is_none_or(|c| c.is_empty()));
        }
    }
}
