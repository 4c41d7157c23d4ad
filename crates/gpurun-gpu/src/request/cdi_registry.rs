//! Any vendor's CDI devices: qualified names (`vendor.com/class=name`)
//! resolved from the CDI spec directories (`/etc/cdi`, `/var/run/cdi`) with
//! the container-device-interface crate, and their `containerEdits` applied
//! to the OCI spec as containerd and Podman apply them.
//!
//! Scanning follows the CDI library's rules: the files directly in each
//! directory ending in `.json` or `.yaml`; a later directory's spec wins a
//! name over an earlier one's; two specs of one directory defining the
//! same name are a conflict. Unlike the library, a spec that fails to load
//! is not dropped silently: when it could define a requested device, the
//! request fails with its path and the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use container_device_interface as cdi;
use oci_spec::runtime::Spec;
use serde::Serialize;

pub use crate::roots::DEFAULT_SPEC_DIRS;

/// The devices the spec directories define.
#[derive(Default)]
pub struct Registry {
    dirs: Vec<PathBuf>,
    devices: BTreeMap<String, Defined>,
    /// Names two specs of one directory define: usable from neither.
    conflicts: BTreeMap<String, (String, String, usize)>,
    invalid: Vec<Invalid>,
}

struct Defined {
    device: cdi::device::Device,
    priority: usize,
}

/// A spec file that did not load, and the kind it names where it could
/// be read that far.
struct Invalid {
    path: PathBuf,
    kind: Option<String>,
    reason: String,
}

/// The CDI kind of NVIDIA's management device, for the GPU Operator's own
/// pods.
pub const MANAGEMENT_KIND: &str = "management.nvidia.com/gpu";

/// A requested device a spec defines, with the edits it brings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    pub name: String,
    /// The spec file that defines it.
    pub spec: String,
    /// The spec's edits common to all its devices.
    #[serde(skip)]
    common: Option<cdi::container_edits::ContainerEdits>,
    #[serde(skip)]
    edits: cdi::container_edits::ContainerEdits,
}

impl Registry {
    /// Reads every spec in `dirs`. A directory that is missing holds no
    /// specs; nothing here fails, a bad file is kept for `resolve` to name.
    pub fn load(dirs: &[PathBuf]) -> Registry {
        let mut registry = Registry {
            dirs: dirs.to_vec(),
            ..Registry::default()
        };
        for (priority, dir) in dirs.iter().enumerate() {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
                .map(|e| e.path())
                .filter(|p| cdi::utils::is_cdi_spec(p))
                .collect();
            files.sort();
            for path in files {
                registry.add_file(path, priority);
            }
        }
        registry
    }

    fn add_file(&mut self, path: PathBuf, priority: usize) {
        let spec = match cdi::spec::read_spec(&path, priority as i32) {
            Ok(spec) => spec,
            Err(e) => {
                let kind = kind_of(&path);
                self.invalid.push(Invalid {
                    path,
                    kind,
                    reason: format!("{e:#}"),
                });
                return;
            }
        };
        for device in spec.devices.values() {
            let name = device.get_qualified_name();
            if self.conflicts.get(&name).is_some_and(|c| c.2 == priority) {
                continue;
            }
            self.conflicts.remove(&name);
            match self.devices.remove(&name) {
                // Directories are read in rising priority: a later one's
                // device replaces an earlier one's, one of the same
                // directory conflicts with it.
                Some(old) if old.priority == priority => {
                    self.conflicts.insert(
                        name,
                        (old.device.get_spec().get_path(), spec.get_path(), priority),
                    );
                }
                _ => {
                    self.devices.insert(
                        name,
                        Defined {
                            device: device.clone(),
                            priority,
                        },
                    );
                }
            }
        }
    }

    /// The qualified names of every device the specs define.
    pub fn names(&self) -> Vec<String> {
        self.devices.keys().cloned().collect()
    }

    /// Which of `names` (qualified CDI names) a spec defines. A name no
    /// spec defines is left to gpurun's own NVIDIA devices when its vendor
    /// is `nvidia.com` (or it is the management device), as the toolkit's
    /// just-in-time mode makes them; any
    /// other is an error naming the directories. A spec that did not load
    /// and may define one of the names' kinds is an error naming the file.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<Resolved>> {
        let kinds: BTreeSet<&str> = names
            .iter()
            .filter_map(|n| n.split_once('=').map(|(kind, _)| kind))
            .collect();
        if let Some(bad) = self.invalid.iter().find(|bad| match &bad.kind {
            Some(kind) => kinds.contains(kind.as_str()),
            None => true,
        }) {
            bail!(
                "CDI spec {} is invalid: {}; fix or remove the file",
                bad.path.display(),
                bad.reason
            );
        }
        let mut resolved = Vec::new();
        for name in names {
            if let Some((a, b, _)) = self.conflicts.get(name) {
                bail!("CDI device {name} is defined by both {a} and {b}: remove one of them");
            }
            match self.devices.get(name) {
                Some(defined) => {
                    let mut from = defined.device.get_spec();
                    resolved.push(Resolved {
                        name: name.clone(),
                        spec: from.get_path(),
                        common: from.edits(),
                        edits: defined.device.edits(),
                    })
                }
                None if name.starts_with("nvidia.com/")
                    || name.starts_with(MANAGEMENT_KIND) => {}
                None => bail!(
                    "CDI device {name}: no CDI spec in {} defines it; install the vendor's spec there, or set spec-dirs in gpurun's config",
                    self.dirs_shown()
                ),
            }
        }
        Ok(resolved)
    }

    fn dirs_shown(&self) -> String {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        dirs.join(", ")
    }
}

/// Applies the edits of `devices` (what `Registry::resolve` returned) to
/// `spec`: each spec file's common edits once, then each device's, as the
/// CDI library injects them.
pub fn inject(spec: &mut Spec, devices: &[Resolved]) -> Result<()> {
    let mut edits = cdi::container_edits::ContainerEdits::new();
    let mut specs_done: BTreeSet<&str> = BTreeSet::new();
    for device in devices {
        if specs_done.insert(&device.spec) {
            if let Some(common) = &device.common {
                edits
                    .append(common.clone())
                    .map_err(|e| anyhow::anyhow!("CDI spec {}: {e:#}", device.spec))?;
            }
        }
        edits
            .append(device.edits.clone())
            .map_err(|e| anyhow::anyhow!("CDI device {}: {e:#}", device.name))?;
    }
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    edits.apply(spec).map_err(|e| {
        anyhow::anyhow!(
            "CDI devices {}: the edits could not be applied: {e:#}",
            names.join(", ")
        )
    })
}

/// The `kind` of a spec file that failed to load, where it parses that far.
fn kind_of(path: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct KindOnly {
        kind: String,
    }
    let text = std::fs::read(path).ok()?;
    serde_yaml::from_slice::<KindOnly>(&text)
        .ok()
        .map(|k| k.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    }

    const VENDOR: &str = r#"cdiVersion: "0.6.0"
kind: example.com/net
containerEdits:
  env: ["EXAMPLE_COMMON=1"]
devices:
  - name: a
    containerEdits:
      env: ["EXAMPLE_DEVICE=a"]
  - name: b
    containerEdits:
      env: ["EXAMPLE_DEVICE=b"]
"#;

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "gpurun-cdi-registry-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_vendors_device_gets_its_common_and_own_edits() {
        let dir = temp();
        write(&dir, "example.yaml", VENDOR);
        let registry = Registry::load(std::slice::from_ref(&dir));
        let names = vec![
            "example.com/net=b".to_owned(),
            "nvidia.com/gpu=0".to_owned(),
        ];
        let resolved = registry.resolve(&names).unwrap();
        assert_eq!(resolved.len(), 1, "nvidia.com/gpu=0 is left to gpurun");
        assert_eq!(resolved[0].name, "example.com/net=b");
        let mut spec = Spec::default();
        inject(&mut spec, &resolved).unwrap();
        let env = spec.process().as_ref().unwrap().env().clone().unwrap();
        assert!(env.contains(&"EXAMPLE_COMMON=1".to_owned()), "{env:?}");
        assert!(env.contains(&"EXAMPLE_DEVICE=b".to_owned()), "{env:?}");
        assert!(!env.contains(&"EXAMPLE_DEVICE=a".to_owned()), "{env:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unknown_vendor_device_is_an_error_naming_the_dirs() {
        let dir = temp();
        let registry = Registry::load(std::slice::from_ref(&dir));
        let err = registry
            .resolve(&["example.com/net=a".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no CDI spec in"), "{err}");
        assert!(err.contains(&dir.display().to_string()), "{err}");
    }

    #[test]
    fn an_invalid_spec_of_the_requested_kind_is_named() {
        let dir = temp();
        write(&dir, "good.yaml", VENDOR);
        write(
            &dir,
            "broken.yaml",
            "cdiVersion: \"0.6.0\"\nkind: example.com/net\ndevices: []\n",
        );
        write(
            &dir,
            "other.json",
            r#"{"cdiVersion": "9.9.9", "kind": "other.com/x", "devices": [{"name": "x", "containerEdits": {}}]}"#,
        );
        let registry = Registry::load(std::slice::from_ref(&dir));
        let err = registry
            .resolve(&["example.com/net=a".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.yaml is invalid"), "{err}");
        // Another kind's broken spec does not stand in the way.
        write(
            &dir,
            "broken.yaml",
            VENDOR.replace("example.com", "third.com").as_str(),
        );
        let registry = Registry::load(std::slice::from_ref(&dir));
        assert_eq!(
            registry
                .resolve(&["example.com/net=a".to_owned()])
                .unwrap()
                .len(),
            1
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_later_dir_wins_and_one_dir_twice_is_a_conflict() {
        let base = temp();
        let (low, high) = (base.join("low"), base.join("high"));
        write(&low, "a.yaml", VENDOR);
        write(
            &high,
            "a.yaml",
            &VENDOR.replace("EXAMPLE_COMMON=1", "EXAMPLE_COMMON=2"),
        );
        let registry = Registry::load(&[low.clone(), high.clone()]);
        let resolved = registry.resolve(&["example.com/net=a".to_owned()]).unwrap();
        assert!(resolved[0].spec.starts_with(&high.display().to_string()));
        write(&high, "b.yaml", VENDOR);
        let registry = Registry::load(&[low, high]);
        let err = registry
            .resolve(&["example.com/net=a".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("defined by both"), "{err}");
        std::fs::remove_dir_all(base).unwrap();
    }
}
