//! Request: what a container asks for, read from its OCI spec with the
//! NVIDIA Container Toolkit's semantics.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use oci_spec::runtime::Spec;
use serde::Serialize;

use crate::caps::{self, Capability};
use crate::devlist::{self, DeviceRef, DeviceSelection};
use crate::require::{self, Requirement};

/// Docker's `--gpus` adds a prestart hook with this name; gpurun drops it
/// and does the work itself.
pub const DOCKER_HOOK: &str = "nvidia-container-runtime-hook";
/// Volume-mount requests: `/dev/null` bound at `<this>/<device>`.
pub const VOLUME_REQUEST_DIR: &str = "/var/run/nvidia-container-devices";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub devices: DeviceSelection,
    pub capabilities: BTreeSet<Capability>,
    pub requirements: Vec<Requirement>,
    pub require_disabled: bool,
    pub mig_config: Option<DeviceSelection>,
    pub mig_monitor: Option<DeviceSelection>,
    /// Indexes into `hooks.prestart` of Docker's toolkit hook.
    pub docker_hooks: Vec<usize>,
    /// Where the device request came from: env, volume-mounts, annotations.
    pub sources: Vec<String>,
}

impl Request {
    /// Whether the container gets anything from gpurun at all.
    pub fn wants_gpu(&self) -> bool {
        self.devices != DeviceSelection::Void
    }
}

/// The container's environment as a map; a later entry wins.
pub fn environment(spec: &Spec) -> BTreeMap<String, String> {
    spec.process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .map(|env| {
            env.iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn merge(into: DeviceSelection, more: DeviceSelection) -> DeviceSelection {
    use DeviceSelection::*;
    match (into, more) {
        (All, _) | (_, All) => All,
        (List(mut a), List(b)) => {
            for d in b {
                if !a.contains(&d) {
                    a.push(d);
                }
            }
            List(a)
        }
        (List(a), _) | (_, List(a)) => List(a),
        (None, _) | (_, None) => None,
        (Void, Void) => Void,
    }
}

/// The request of a container whose environment is `env` (`KEY=VALUE`).
pub fn from_env(env: &[&str]) -> Result<Request> {
    let mut spec = Spec::default();
    if let Some(process) = spec.process_mut() {
        process.set_env(Some(env.iter().map(|e| e.to_string()).collect()));
    }
    from_spec(&spec)
}

pub fn from_spec(spec: &Spec) -> Result<Request> {
    let env = environment(spec);
    let mut sources = Vec::new();

    let visible = env.get("NVIDIA_VISIBLE_DEVICES").map(String::as_str);
    // Legacy CUDA images: CUDA_VERSION without NVIDIA_REQUIRE_CUDA means all.
    let legacy = visible.is_none()
        && env.contains_key("CUDA_VERSION")
        && !env.contains_key("NVIDIA_REQUIRE_CUDA");
    let mut devices = if legacy {
        DeviceSelection::All
    } else {
        devlist::parse(visible)?
    };
    if devices != DeviceSelection::Void {
        sources.push("env".to_owned());
    }

    // Volume mounts under /var/run/nvidia-container-devices/<device>.
    let volume: Vec<String> = spec
        .mounts()
        .iter()
        .flatten()
        .filter_map(|m| {
            m.destination()
                .strip_prefix(VOLUME_REQUEST_DIR)
                .ok()
                .map(|rest| rest.to_string_lossy().into_owned())
        })
        .filter(|d| !d.is_empty())
        .collect();
    if !volume.is_empty() {
        devices = merge(devices, devlist::parse(Some(&volume.join(",")))?);
        sources.push("volume-mounts".to_owned());
    }

    // CDI names in annotations: cdi.k8s.io/<anything> = "nvidia.com/gpu=0,...".
    let mut annotated = Vec::new();
    for (key, value) in spec.annotations().iter().flatten() {
        if key.starts_with("cdi.k8s.io/") {
            annotated.extend(value.split(',').map(|s| s.trim().to_owned()));
        }
    }
    if !annotated.is_empty() {
        let parsed = devlist::parse(Some(&annotated.join(",")))?;
        if let DeviceSelection::List(list) = &parsed {
            if let Some(bad) = list.iter().find(|d| !matches!(d, DeviceRef::Cdi { .. })) {
                anyhow::bail!("annotation cdi.k8s.io/*: {bad} is not a CDI device name (vendor.com/class=name)");
            }
        }
        devices = merge(devices, parsed);
        sources.push("annotations".to_owned());
    }

    let docker_hooks: Vec<usize> = spec
        .hooks()
        .as_ref()
        .and_then(|h| h.prestart().as_ref())
        .map(|hooks| {
            hooks
                .iter()
                .enumerate()
                .filter(|(_, h)| {
                    h.path().file_name().is_some_and(|n| n == DOCKER_HOOK)
                        || h.args()
                            .as_ref()
                            .and_then(|a| a.first())
                            .is_some_and(|a| a.rsplit('/').next() == Some(DOCKER_HOOK))
                })
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default();

    let capabilities = caps::parse(env.get("NVIDIA_DRIVER_CAPABILITIES").map(String::as_str))?;
    let require_disabled = env
        .get("NVIDIA_DISABLE_REQUIRE")
        .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    let mut requirements = Vec::new();
    if !require_disabled {
        for (key, value) in &env {
            if key.starts_with("NVIDIA_REQUIRE_") {
                requirements.push(require::parse(key, value)?);
            }
        }
    }
    let mig = |var: &str| -> Result<Option<DeviceSelection>> {
        env.get(var).map(|v| devlist::parse(Some(v))).transpose()
    };
    Ok(Request {
        devices,
        capabilities,
        requirements,
        require_disabled,
        mig_config: mig("NVIDIA_MIG_CONFIG_DEVICES")?,
        mig_monitor: mig("NVIDIA_MIG_MONITOR_DEVICES")?,
        docker_hooks,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Spec {
        let mut base = serde_json::to_value(Spec::default()).unwrap();
        for (k, v) in json.as_object().unwrap() {
            if k == "env" {
                base["process"]["env"] = v.clone();
            } else {
                base[k] = v.clone();
            }
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn unset_is_void_and_legacy_cuda_is_all() {
        let r = from_spec(&spec(serde_json::json!({"env": ["PATH=/bin"]}))).unwrap();
        assert!(!r.wants_gpu());
        let r = from_spec(&spec(serde_json::json!({"env": ["CUDA_VERSION=11.0"]}))).unwrap();
        assert_eq!(r.devices, DeviceSelection::All);
        let r = from_spec(&spec(
            serde_json::json!({"env": ["CUDA_VERSION=11.0", "NVIDIA_REQUIRE_CUDA=cuda>=11.0"]}),
        ))
        .unwrap();
        assert!(!r.wants_gpu());
    }

    #[test]
    fn env_caps_requirements() {
        let r = from_spec(&spec(serde_json::json!({"env": [
            "NVIDIA_VISIBLE_DEVICES=0,1",
            "NVIDIA_DRIVER_CAPABILITIES=utility",
            "NVIDIA_REQUIRE_CUDA=cuda>=12.0",
            "NVIDIA_REQUIRE_ARCH=arch>=8.0"
        ]})))
        .unwrap();
        assert_eq!(r.capabilities, [Capability::Utility].into());
        assert_eq!(r.requirements.len(), 2);
        let r = from_spec(&spec(serde_json::json!({"env": [
            "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=1"
        ]})))
        .unwrap();
        assert!(r.requirements.is_empty());
    }

    #[test]
    fn volume_mounts_annotations_and_the_docker_hook() {
        let r = from_spec(&spec(serde_json::json!({
            "env": ["NVIDIA_VISIBLE_DEVICES=0"],
            "mounts": [{"destination": "/var/run/nvidia-container-devices/1", "type": "bind", "source": "/dev/null"}],
            "annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=2"},
            "hooks": {"prestart": [
                {"path": "/usr/bin/true"},
                {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}
            ]}
        })))
        .unwrap();
        let DeviceSelection::List(list) = &r.devices else {
            panic!()
        };
        assert_eq!(list.len(), 3);
        assert_eq!(r.docker_hooks, vec![1]);
        assert_eq!(r.sources, ["env", "volume-mounts", "annotations"]);
    }

    #[test]
    fn hostile_values_are_errors() {
        for env in [
            "NVIDIA_VISIBLE_DEVICES=GPU-/../../etc",
            "NVIDIA_DRIVER_CAPABILITIES=everything",
            "NVIDIA_REQUIRE_CUDA=cuda>>1",
        ] {
            assert!(
                from_spec(&spec(serde_json::json!({"env": [env]}))).is_err(),
                "{env}"
            );
        }
    }
}
