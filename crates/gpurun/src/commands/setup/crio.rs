//! CRI-O's drop-in (`/etc/crio/crio.conf.d/`): gpurun as a runtime of
//! CRI-O's own kind ("oci", monitored by conmon), with CDI's spec dirs.

use anyhow::{Context, Result};
use toml_edit::{value, Array, DocumentMut};

use super::containerd::table;

/// gpurun's own drop-in: late in the directory's order, so its keys win.
pub const DROP_IN: &str = "/etc/crio/crio.conf.d/99-gpurun.conf";

/// Where CRI-O finds conmon when a runtime names none: its package's path,
/// then the PATH's.
fn find_conmon() -> Option<String> {
    let packaged = [
        "/usr/libexec/crio/conmon",
        "/usr/bin/conmon",
        "/usr/local/bin/conmon",
    ];
    packaged
        .iter()
        .find(|p| std::path::Path::new(p).is_file())
        .map(|p| p.to_string())
}

/// What the runtime table holds: `runtime_path`, `runtime_type = "oci"`,
/// `runtime_root` (gpurun's own state root, as `--root`), and
/// `monitor_path` where conmon is installed.
pub struct CrioRuntime<'a> {
    pub name: &'a str,
    pub binary: &'a str,
    pub root: &'a str,
    pub monitor: Option<String>,
    pub spec_dirs: Vec<String>,
    pub default: bool,
}

impl<'a> CrioRuntime<'a> {
    pub fn here(name: &'a str, binary: &'a str, spec_dirs: Vec<String>, default: bool) -> Self {
        CrioRuntime {
            name,
            binary,
            root: crate::runtime::state::state_dir::ROOT_STATE_ROOT,
            monitor: find_conmon(),
            spec_dirs,
            default,
        }
    }
}

/// The drop-in's text with `rt` registered; the file's other keys kept.
pub fn edit_crio(text: &str, rt: &CrioRuntime) -> Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .context("the CRI-O drop-in is not valid TOML")?;
    let crio = table(doc.as_table_mut(), "crio")?;
    let runtime = table(crio, "runtime")?;
    runtime.set_implicit(false);
    if rt.default {
        runtime["default_runtime"] = value(rt.name);
    }
    let mut dirs = Array::new();
    for d in &rt.spec_dirs {
        dirs.push(d.as_str());
    }
    runtime["cdi_spec_dirs"] = value(dirs);
    let runtimes = table(runtime, "runtimes")?;
    let ours = table(runtimes, rt.name)?;
    ours.set_implicit(false);
    ours["runtime_path"] = value(rt.binary);
    ours["runtime_type"] = value("oci");
    ours["runtime_root"] = value(rt.root);
    if let Some(monitor) = &rt.monitor {
        ours["monitor_path"] = value(monitor.as_str());
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(default: bool) -> CrioRuntime<'static> {
        CrioRuntime {
            name: "gpurun",
            binary: "/usr/bin/gpurun",
            root: "/run/gpurun",
            monitor: Some("/usr/bin/conmon".into()),
            spec_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
            default,
        }
    }

    /// The keys and types crio.conf(5) gives them, read back by a TOML
    /// reader; a second run changes nothing; other keys stay.
    #[test]
    fn the_drop_in_has_crio_s_shape_and_is_idempotent() {
        let old = "[crio.runtime]\nlog_level = \"info\"\n\n[crio.image]\npause_image = \"registry.k8s.io/pause:3.9\"\n";
        let new = edit_crio(old, &ours(false)).unwrap();
        let doc: toml::Table = toml::from_str(&new).unwrap();
        let runtime = &doc["crio"]["runtime"];
        assert_eq!(runtime["log_level"].as_str(), Some("info"));
        assert_eq!(
            doc["crio"]["image"]["pause_image"].as_str(),
            Some("registry.k8s.io/pause:3.9")
        );
        assert!(runtime.get("default_runtime").is_none());
        let dirs: Vec<&str> = runtime["cdi_spec_dirs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(dirs, ["/etc/cdi", "/var/run/cdi"]);
        let gpurun = &runtime["runtimes"]["gpurun"];
        assert_eq!(gpurun["runtime_path"].as_str(), Some("/usr/bin/gpurun"));
        assert_eq!(gpurun["runtime_type"].as_str(), Some("oci"));
        assert_eq!(gpurun["runtime_root"].as_str(), Some("/run/gpurun"));
        assert_eq!(gpurun["monitor_path"].as_str(), Some("/usr/bin/conmon"));
        assert_eq!(edit_crio(&new, &ours(false)).unwrap(), new);
        let with_default = edit_crio(&new, &ours(true)).unwrap();
        let doc: toml::Table = toml::from_str(&with_default).unwrap();
        assert_eq!(
            doc["crio"]["runtime"]["default_runtime"].as_str(),
            Some("gpurun")
        );
    }
}
