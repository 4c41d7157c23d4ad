//! Podman's containers.conf.

use anyhow::{Context, Result};
use toml_edit::{value, DocumentMut};

use super::containerd::table;

/// Podman's containers.conf: `[engine.runtimes] <name> = [binary]`.
pub fn edit_podman(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut doc: DocumentMut = text.parse().context("containers.conf is not valid TOML")?;
    let engine = table(doc.as_table_mut(), "engine")?;
    engine.set_implicit(false);
    if default {
        engine["runtime"] = value(name);
    }
    let runtimes = table(engine, "runtimes")?;
    runtimes.set_implicit(false);
    let mut paths = toml_edit::Array::new();
    paths.push(binary);
    runtimes[name] = value(paths);
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/usr/local/bin/gpurun";

    #[test]
    fn podman_keeps_other_settings_and_is_idempotent() {
        let old = "[containers]\nlog_size_max = 100\n\n[engine]\ncgroup_manager = \"cgroupfs\"\n";
        let new = edit_podman(old, "gpurun", BIN, false).unwrap();
        let doc: toml::Table = toml::from_str(&new).unwrap();
        assert_eq!(doc["containers"]["log_size_max"].as_integer(), Some(100));
        assert_eq!(doc["engine"]["cgroup_manager"].as_str(), Some("cgroupfs"));
        assert_eq!(doc["engine"]["runtimes"]["gpurun"][0].as_str(), Some(BIN));
        assert!(doc["engine"].get("runtime").is_none());
        assert_eq!(edit_podman(&new, "gpurun", BIN, false).unwrap(), new);
        let with_default = edit_podman(&new, "gpurun", BIN, true).unwrap();
        assert!(with_default.contains("runtime = \"gpurun\""));
    }
}
