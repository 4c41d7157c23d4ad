//! What a GPU container's checkpoint records about its GPUs, and what
//! restore decides from it: the same driver, the same GPU models, and
//! which old GPU becomes which new one.

use std::path::Path;

use anyhow::{bail, Result};
use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};

use crate::inventory::Inventory;

/// The file in a checkpoint's image directory.
pub const RECORD: &str = "gpurun-gpu.json";

/// The NVIDIA character devices' major (GPUs, nvidiactl, nvidia-modeset).
const NVIDIA_MAJOR: i64 = 195;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub driver_version: String,
    pub gpus: Vec<RecordedGpu>,
    /// How many CUDA processes were checkpointed.
    pub cuda_processes: usize,
    /// The size of the images directory after the dump, in bytes.
    #[serde(default)]
    pub image_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedGpu {
    pub uuid: String,
    pub model: String,
    pub minor: u32,
}

/// The minors of the GPUs a container's spec gives it (its device nodes,
/// or the host nodes bound in), as the CDI hooks read them.
pub use crate::cdi::hooks::gpu_minors;

/// Whether a spec gives its container any NVIDIA device (a GPU or only
/// the control nodes): such a container may hold driver state.
pub fn has_nvidia_devices(spec: &Spec) -> bool {
    let nodes = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .is_some_and(|d| d.iter().any(|d| d.major() == NVIDIA_MAJOR));
    nodes || binds_nvidia_nodes(spec)
}

/// Whether the spec binds NVIDIA nodes from the host (`/dev/nvidia*`
/// mounts: a container in a user namespace) rather than making them.
pub fn binds_nvidia_nodes(spec: &Spec) -> bool {
    spec.mounts().iter().flatten().any(|m| {
        m.destination()
            .strip_prefix("/dev")
            .is_ok_and(|p| p.to_string_lossy().starts_with("nvidia"))
    })
}

/// Why a GPU container cannot be checkpointed, where gpurun can tell
/// from its spec: MIG devices (the driver's GPU pairs name whole GPUs, and
/// a MIG instance is not made again on restore) and MPS clients (their
/// CUDA state lives in the MPS server, outside the container).
pub fn refusal(spec: &Spec) -> Option<String> {
    let mig = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .into_iter()
        .flatten()
        .map(|d| d.path().to_path_buf())
        .chain(
            spec.mounts()
                .iter()
                .flatten()
                .map(|m| m.destination().clone()),
        )
        .find(|p| {
            p.starts_with("/dev/nvidia-caps") && !p.starts_with("/dev/nvidia-caps-imex-channels")
        });
    if let Some(node) = mig {
        return Some(format!(
            "it has MIG devices ({}): a MIG instance is not made again on restore",
            node.display()
        ));
    }
    let env = spec.process().as_ref().and_then(|p| p.env().as_ref());
    if env
        .into_iter()
        .flatten()
        .any(|e| e.starts_with("CUDA_MPS_PIPE_DIRECTORY="))
    {
        return Some(
            "it is an MPS client (CUDA_MPS_PIPE_DIRECTORY): its CUDA state lives in the MPS server, outside the container".into(),
        );
    }
    None
}

/// The container's GPUs as the inventory knows them, by minor.
pub fn recorded_gpus(minors: &[u32], inventory: &Inventory) -> Vec<RecordedGpu> {
    minors
        .iter()
        .map(|&minor| {
            let gpu = inventory.gpus.iter().find(|g| g.minor == minor);
            RecordedGpu {
                uuid: gpu.map(|g| g.uuid.clone()).unwrap_or_default(),
                model: gpu.map(|g| g.model.clone()).unwrap_or_default(),
                minor,
            }
        })
        .collect()
}

/// A checkpoint restores only onto the driver version it was taken on:
/// the CUDA state in its images is that driver's.
pub fn check_driver(record: &Record, inventory: &Inventory, images: &Path) -> Result<()> {
    if record.driver_version != inventory.driver_version {
        bail!(
            "the checkpoint in {} was taken on NVIDIA driver {} and this host has {}: restore it on a host with driver {}",
            images.display(),
            record.driver_version,
            inventory.driver_version,
            record.driver_version
        );
    }
    Ok(())
}

/// Which old GPU becomes which new one: none where the container gets
/// the same GPUs again, else the GPUs in order, each of the same model.
pub fn gpu_pairs(old: &[RecordedGpu], new: &[RecordedGpu]) -> Result<Vec<(String, String)>> {
    if old.len() != new.len() {
        bail!(
            "the checkpoint had {} GPU(s) and the restored container gets {}: give it as many GPUs as it had",
            old.len(),
            new.len()
        );
    }
    if old.iter().map(|g| &g.uuid).eq(new.iter().map(|g| &g.uuid)) {
        return Ok(Vec::new());
    }
    for (o, n) in old.iter().zip(new) {
        if o.model != n.model {
            bail!(
                "the checkpoint's GPU {} is an {} and its replacement {} an {}: restore onto GPUs of the same model",
                o.uuid,
                o.model,
                n.uuid,
                n.model
            );
        }
    }
    Ok(old
        .iter()
        .zip(new)
        .filter(|(o, n)| o.uuid != n.uuid)
        .map(|(o, n)| (o.uuid.clone(), n.uuid.clone()))
        .collect())
}

/// A GPU UUID's 16 bytes, as the driver's CUuuid holds them
/// (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`).
pub fn uuid_bytes(uuid: &str) -> Option<[u8; 16]> {
    let hex: String = uuid
        .strip_prefix("GPU-")?
        .chars()
        .filter(|c| *c != '-')
        .collect();
    if hex.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, model: &str, minor: u32) -> RecordedGpu {
        RecordedGpu {
            uuid: uuid.into(),
            model: model.into(),
            minor,
        }
    }

    #[test]
    fn the_same_gpus_need_no_pairs_and_others_pair_in_order() {
        let old = [gpu("GPU-a", "H100", 0), gpu("GPU-b", "H100", 1)];
        assert!(gpu_pairs(&old, &old).unwrap().is_empty());
        let new = [gpu("GPU-a", "H100", 0), gpu("GPU-c", "H100", 2)];
        assert_eq!(
            gpu_pairs(&old, &new).unwrap(),
            vec![("GPU-b".to_owned(), "GPU-c".to_owned())]
        );
    }

    #[test]
    fn another_model_or_count_is_refused() {
        let old = [gpu("GPU-a", "H100", 0)];
        let err = gpu_pairs(&old, &[gpu("GPU-c", "A100", 2)]).unwrap_err();
        assert!(err.to_string().contains("same model"), "{err}");
        let err = gpu_pairs(&old, &[]).unwrap_err();
        assert!(err.to_string().contains("had 1 GPU(s)"), "{err}");
    }

    #[test]
    fn uuids_become_the_drivers_bytes() {
        let bytes = uuid_bytes("GPU-5a1e0001-0000-4000-8000-00000000fa4f").unwrap();
        assert_eq!(bytes[0], 0x5a);
        assert_eq!(bytes[15], 0x4f);
        assert_eq!(uuid_bytes("MIG-5a1e0001-0000-4000-8000-00000000fa4f"), None);
        assert_eq!(uuid_bytes("GPU-5a1e"), None);
    }

    #[test]
    fn minors_come_from_nodes_and_from_bound_nodes() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            // The bound node's minor is the source's own: /dev/null is 1:3.
            "mounts": [{"destination": "/dev/nvidia3", "source": "/dev/null", "type": "bind"},
                       {"destination": "/dev/nvidiactl", "source": "/dev/nvidiactl", "type": "bind"}],
            "linux": {"devices": [
                {"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1},
                {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255},
                {"path": "/dev/nvidia-uvm", "type": "c", "major": 511, "minor": 0}]}
        }))
        .unwrap();
        assert_eq!(gpu_minors(&spec), vec![1, 3]);
        assert!(has_nvidia_devices(&spec));
        assert_eq!(refusal(&spec), None);
    }

    #[test]
    fn mig_devices_and_mps_clients_are_refused() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"cwd": "/", "args": ["sh"], "user": {"uid": 0, "gid": 0},
                        "env": ["CUDA_MPS_PIPE_DIRECTORY=/tmp/mps"]},
            "linux": {"devices": [
                {"path": "/dev/nvidia-caps-imex-channels/channel0", "type": "c", "major": 234, "minor": 0}]}
        }))
        .unwrap();
        assert!(refusal(&spec).unwrap().contains("MPS"));
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "linux": {"devices": [
                {"path": "/dev/nvidia-caps/nvidia-cap21", "type": "c", "major": 237, "minor": 21}]}
        }))
        .unwrap();
        assert!(refusal(&spec).unwrap().contains("MIG"));
    }
}
