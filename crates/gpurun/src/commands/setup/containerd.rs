//! containerd's config.toml.

use anyhow::{bail, Context, Result};
use toml_edit::{value, DocumentMut, Item, Table};

const CRI: &str = "io.containerd.grpc.v1.cri";

pub(super) fn table<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut Table> {
    let item = parent.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    item.as_table_mut()
        .with_context(|| format!("{key:?} in the config is not a table"))
}

/// containerd's config.toml (version 2): a CRI runtime `name` of type
/// runc.v2 whose `BinaryName` is gpurun.
pub fn edit_containerd(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .context("the containerd config is not valid TOML")?;
    match doc.get("version").and_then(|v| v.as_integer()) {
        None => {
            doc["version"] = value(2);
        }
        Some(2) => {}
        Some(v) => bail!("containerd config version {v}: gpurun setup writes version 2 configs (containerd 1.5 to 1.7)"),
    }
    let plugins = table(doc.as_table_mut(), "plugins")?;
    let cri = table(plugins, CRI)?;
    let containerd = table(cri, "containerd")?;
    if default {
        containerd["default_runtime_name"] = value(name);
    }
    let default_name = containerd
        .get("default_runtime_name")
        .and_then(|v| v.as_str())
        .unwrap_or("runc")
        .to_owned();
    let runtimes = table(containerd, "runtimes")?;
    // A runtimes table in the file replaces containerd's built-in one, and
    // the CRI plugin refuses to load when the default runtime is not in
    // it: keep the built-in runc there, as `containerd config default` has.
    if default_name == "runc" && !runtimes.contains_key("runc") {
        let runc = table(runtimes, "runc")?;
        runc.set_implicit(false);
        runc["runtime_type"] = value("io.containerd.runc.v2");
    }
    let runtime = table(runtimes, name)?;
    runtime.set_implicit(false);
    runtime["runtime_type"] = value("io.containerd.runc.v2");
    let options = table(runtime, "options")?;
    options.set_implicit(false);
    options["BinaryName"] = value(binary);
    Ok(doc.to_string())
}

/// The keys that make a shared node take only the scheduler's allocation.
pub const MULTI_TENANT: [(&str, bool); 2] = [
    (
        "accept-nvidia-visible-devices-envvar-when-unprivileged",
        false,
    ),
    ("accept-nvidia-visible-devices-as-volume-mounts", true),
];

/// gpurun's own config file with the multi-tenant settings; every other
/// key (the driver roots) kept.
pub fn edit_gpurun_config(text: &str) -> Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .context("the gpurun config is not valid TOML")?;
    for (key, setting) in MULTI_TENANT {
        doc[key] = value(setting);
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/usr/local/bin/gpurun";

    #[test]
    fn containerd_keeps_other_settings_and_is_idempotent() {
        let old = "# my settings\nversion = 2\nroot = \"/var/lib/containerd\"\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.6\"\n";
        let new = edit_containerd(old, "gpurun", BIN, false).unwrap();
        assert!(
            new.contains("# my settings") && new.contains("sandbox_image = \"pause:3.6\""),
            "{new}"
        );
        let doc: toml::Table = toml::from_str(&new).unwrap();
        let rt = &doc["plugins"][CRI]["containerd"]["runtimes"]["gpurun"];
        assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(rt["options"]["BinaryName"].as_str(), Some(BIN));
        assert!(doc["plugins"][CRI]["containerd"]
            .get("default_runtime_name")
            .is_none());
        // The default runtime stays configured, or CRI would not load.
        assert_eq!(
            doc["plugins"][CRI]["containerd"]["runtimes"]["runc"]["runtime_type"].as_str(),
            Some("io.containerd.runc.v2")
        );
        assert_eq!(edit_containerd(&new, "gpurun", BIN, false).unwrap(), new);
        let with_default = edit_containerd(&new, "gpurun", BIN, true).unwrap();
        assert!(with_default.contains("default_runtime_name = \"gpurun\""));
        assert!(edit_containerd("version = 1\n", "gpurun", BIN, false).is_err());
        assert!(edit_containerd("plugins = 3\n", "gpurun", BIN, false).is_err());
        // gpurun's own config: the strict keys, the rest kept, idempotent.
        let mine = "driver-root = \"/usr/local/nvidia\"\naccept-nvidia-visible-devices-as-volume-mounts = false\n";
        let strict = edit_gpurun_config(mine).unwrap();
        let parsed: toml::Table = toml::from_str(&strict).unwrap();
        assert_eq!(parsed["driver-root"].as_str(), Some("/usr/local/nvidia"));
        assert_eq!(
            parsed["accept-nvidia-visible-devices-as-volume-mounts"].as_bool(),
            Some(true)
        );
        assert_eq!(
            parsed["accept-nvidia-visible-devices-envvar-when-unprivileged"].as_bool(),
            Some(false)
        );
        assert_eq!(edit_gpurun_config(&strict).unwrap(), strict);
        // An empty file gets a version.
        assert!(edit_containerd("", "gpurun", BIN, false)
            .unwrap()
            .starts_with("version = 2"));
    }
}
