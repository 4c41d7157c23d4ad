//! A CDI spec for this host (`gpurun gpu cdi`), for engines that apply CDI
//! edits themselves (podman `--device nvidia.com/gpu=0`, containerd, Docker).

use std::path::Path;

use serde_json::{json, Value};

use crate::caps::Capability;
use crate::inventory::{DeviceNode, FileKind, Inventory};

/// The lowest version that describes what the spec uses (device names
/// that start with a digit, `hostPath` on device nodes), so that older
/// readers accept it: Podman 4.3's CDI library stops at 0.5.0.
pub const CDI_VERSION: &str = "0.5.0";
pub const KIND: &str = "nvidia.com/gpu";
pub const IMEX_KIND: &str = "nvidia.com/imex-channel";

fn node(n: &DeviceNode) -> Value {
    json!({
        "path": n.path,
        "hostPath": n.host_path,
        "type": "c",
        "major": n.major,
        "minor": n.minor,
        "fileMode": n.file_mode,
    })
}

/// The spec: one device per GPU index and UUID plus "all"; the driver's
/// utility and compute files and control nodes as common edits. Libraries
/// land in the standard x86-64 directory under their file name and SONAME,
/// so an image finds them without running a hook.
pub fn spec(inv: &Inventory) -> Value {
    let mut devices = Vec::new();
    for gpu in &inv.gpus {
        let nodes: Vec<Value> = gpu.node.iter().map(node).collect();
        for name in [gpu.index.to_string(), gpu.uuid.clone()] {
            devices.push(json!({ "name": name, "containerEdits": { "deviceNodes": nodes } }));
        }
    }
    let all: Vec<Value> = inv
        .gpus
        .iter()
        .filter_map(|g| g.node.as_ref())
        .map(node)
        .collect();
    devices.push(json!({ "name": "all", "containerEdits": { "deviceNodes": all } }));

    let mut mounts = Vec::new();
    for cap in [Capability::Utility, Capability::Compute] {
        for f in inv.files.get(&cap).into_iter().flatten() {
            let name = f
                .host_path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let mut targets = Vec::new();
            match f.kind {
                FileKind::Library => {
                    targets.push(format!("/usr/lib/x86_64-linux-gnu/{name}"));
                    if let Some(so) = &f.soname {
                        targets.push(format!("/usr/lib/x86_64-linux-gnu/{so}"));
                    }
                }
                FileKind::Binary => targets.push(format!("/usr/bin/{name}")),
                _ => targets.push(
                    Path::new("/")
                        .join(&f.path_in_root)
                        .to_string_lossy()
                        .into_owned(),
                ),
            }
            for target in targets {
                mounts.push(json!({
                    "hostPath": f.host_path,
                    "containerPath": target,
                    "options": ["ro", "nosuid", "nodev", "bind"],
                }));
            }
        }
    }
    json!({
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": inv.control_nodes.iter().filter(|n| n.path != "/dev/nvidia-modeset").map(node).collect::<Vec<_>>(),
            "mounts": mounts,
        }
    })
}

/// The host's IMEX channels as their own kind, as the toolkit names them:
/// one device per channel id, plus "all".
pub fn imex_spec(inv: &Inventory) -> anyhow::Result<Value> {
    if inv.imex_major.is_none() {
        anyhow::bail!(
            "this host's driver has no IMEX channels ({}/devices has no {} line)",
            inv.roots.proc_root.display(),
            crate::gated::IMEX_PROC_DEVICES_NAME
        );
    }
    let channels: Vec<&DeviceNode> = inv.imex_channels().collect();
    let mut devices: Vec<Value> = channels
        .iter()
        .map(|n| json!({ "name": n.minor.to_string(), "containerEdits": { "deviceNodes": [node(n)] } }))
        .collect();
    devices.push(json!({
        "name": "all",
        "containerEdits": { "deviceNodes": channels.iter().map(|n| node(n)).collect::<Vec<_>>() }
    }));
    Ok(json!({ "cdiVersion": CDI_VERSION, "kind": IMEX_KIND, "devices": devices }))
}
