//! containerd's config.toml.

use anyhow::{bail, Context, Result};
use toml_edit::{value, DocumentMut, Item, Table};

/// Where the CRI runtimes live in each config schema: version 2
/// (containerd 1.5 to 1.7, still read by 2.x) and version 3 (2.x).
const CRI_V2: &str = "io.containerd.grpc.v1.cri";
const CRI_V3: &str = "io.containerd.cri.v1.runtime";

pub(super) fn table<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut Table> {
    let item = parent.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    item.as_table_mut()
        .with_context(|| format!("{key:?} in the config is not a table"))
}

/// The schema to write: the file's own `version`, or for a file without
/// one, 3 where the installed containerd is 2.x and 2 otherwise (which
/// every containerd from 1.5 on reads).
fn schema(doc: &DocumentMut, installed_major: Option<u64>) -> Result<i64> {
    match doc.get("version").map(|v| v.as_integer()) {
        None => Ok(if installed_major.is_some_and(|m| m >= 2) { 3 } else { 2 }),
        Some(Some(v @ (2 | 3))) => Ok(v),
        Some(Some(v)) => bail!(
            "containerd config version {v}: gpurun setup writes version 2 (containerd 1.5 and later) \
             and version 3 (containerd 2.x); migrate it with `containerd config migrate`"
        ),
        Some(None) => bail!("containerd config: \"version\" is not an integer"),
    }
}

/// containerd's config.toml: a CRI runtime `name` of type runc.v2 whose
/// `BinaryName` is gpurun, in the file's schema (see `schema`).
pub fn edit_containerd(
    text: &str,
    name: &str,
    binary: &str,
    default: bool,
    installed_major: Option<u64>,
) -> Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .context("the containerd config is not valid TOML")?;
    let version = schema(&doc, installed_major)?;
    if doc.get("version").is_none() {
        doc["version"] = value(version);
    }
    let cri_plugin = if version == 3 { CRI_V3 } else { CRI_V2 };
    let plugins = table(doc.as_table_mut(), "plugins")?;
    let cri = table(plugins, cri_plugin)?;
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
    // runc's cgroup driver carries over, as nvidia-ctk copies it: a
    // systemd node's pods must not land in a cgroupfs hierarchy.
    let systemd_cgroup = runtimes
        .get("runc")
        .and_then(|r| r.get("options"))
        .and_then(|o| o.get("SystemdCgroup"))
        .and_then(|v| v.as_bool());
    let runtime = table(runtimes, name)?;
    runtime.set_implicit(false);
    runtime["runtime_type"] = value("io.containerd.runc.v2");
    let options = table(runtime, "options")?;
    options.set_implicit(false);
    options["BinaryName"] = value(binary);
    if let Some(systemd) = systemd_cgroup {
        options["SystemdCgroup"] = value(systemd);
    }
    Ok(doc.to_string())
}

/// The major version `containerd --version` reports ("containerd
/// github.com/containerd/containerd/v2 v2.1.9 ...", Debian's "2.1.9~ds1-1"),
/// or None where no containerd runs.
pub fn installed_containerd_major() -> Option<u64> {
    let out = std::process::Command::new("containerd")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_containerd_major(&String::from_utf8_lossy(&out.stdout))
}

fn parse_containerd_major(version_line: &str) -> Option<u64> {
    version_line.split_whitespace().skip(1).find_map(|word| {
        let word = word.strip_prefix('v').unwrap_or(word);
        let (major, rest) = word.split_once('.')?;
        rest.starts_with(|c: char| c.is_ascii_digit())
            .then(|| major.parse().ok())
            .flatten()
    })
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
        let new = edit_containerd(old, "gpurun", BIN, false, None).unwrap();
        assert!(
            new.contains("# my settings") && new.contains("sandbox_image = \"pause:3.6\""),
            "{new}"
        );
        let doc: toml::Table = toml::from_str(&new).unwrap();
        let rt = &doc["plugins"][CRI_V2]["containerd"]["runtimes"]["gpurun"];
        assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(rt["options"]["BinaryName"].as_str(), Some(BIN));
        assert!(doc["plugins"][CRI_V2]["containerd"]
            .get("default_runtime_name")
            .is_none());
        // The default runtime stays configured, or CRI would not load.
        assert_eq!(
            doc["plugins"][CRI_V2]["containerd"]["runtimes"]["runc"]["runtime_type"].as_str(),
            Some("io.containerd.runc.v2")
        );
        assert_eq!(
            edit_containerd(&new, "gpurun", BIN, false, None).unwrap(),
            new
        );
        let with_default = edit_containerd(&new, "gpurun", BIN, true, None).unwrap();
        assert!(with_default.contains("default_runtime_name = \"gpurun\""));
        assert!(edit_containerd("version = 1\n", "gpurun", BIN, false, None).is_err());
        assert!(edit_containerd("plugins = 3\n", "gpurun", BIN, false, None).is_err());
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
        assert!(edit_containerd("", "gpurun", BIN, false, None)
            .unwrap()
            .starts_with("version = 2"));
    }

    /// What `containerd config default` of containerd 2.1 writes, cut to
    /// the CRI runtime part and the keys around it.
    const V3_DEFAULT: &str = r#"version = 3
root = '/var/lib/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            SystemdCgroup = true
"#;

    #[test]
    fn containerd_2_gets_a_version_3_runtime() {
        let new = edit_containerd(V3_DEFAULT, "gpurun", BIN, false, Some(1)).unwrap();
        let doc: toml::Table = toml::from_str(&new).unwrap();
        assert_eq!(doc["version"].as_integer(), Some(3));
        let runtimes = &doc["plugins"][CRI_V3]["containerd"]["runtimes"];
        let rt = &runtimes["gpurun"];
        assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(rt["options"]["BinaryName"].as_str(), Some(BIN));
        assert_eq!(rt["options"]["SystemdCgroup"].as_bool(), Some(true));
        assert!(doc["plugins"].get(CRI_V2).is_none(), "{new}");
        assert!(new.contains("enable_selinux = false"), "{new}");
        assert_eq!(
            edit_containerd(&new, "gpurun", BIN, false, None).unwrap(),
            new
        );
        // No file: the schema follows the installed containerd.
        let fresh = edit_containerd("", "gpurun", BIN, false, Some(2)).unwrap();
        assert!(fresh.starts_with("version = 3"), "{fresh}");
        assert!(fresh.contains(CRI_V3), "{fresh}");
        let old = edit_containerd("", "gpurun", BIN, false, Some(1)).unwrap();
        assert!(
            old.starts_with("version = 2") && old.contains(CRI_V2),
            "{old}"
        );
        let err = edit_containerd("version = 4\n", "gpurun", BIN, false, Some(2)).unwrap_err();
        assert!(err.to_string().contains("version 4"), "{err}");
    }

    #[test]
    fn containerd_versions_are_read_from_its_version_line() {
        let cases = [
            (
                "containerd github.com/containerd/containerd/v2 v2.1.9 abcdef",
                Some(2),
            ),
            (
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1",
                Some(1),
            ),
            ("containerd containerd.io 1.7.24 88bf19b2", Some(1)),
            (
                "containerd github.com/containerd/containerd/v2 2.1.9~ds1-1 ",
                Some(2),
            ),
            ("", None),
        ];
        for (line, major) in cases {
            assert_eq!(parse_containerd_major(line), major, "{line}");
        }
    }
}
