//! A CDI spec for this host (`gpurun gpu cdi`), for engines that apply CDI
//! edits themselves (podman `--device nvidia.com/gpu=0`, containerd, Docker),
//! in NVIDIA's own form, so that it runs under gpurun (hooks done natively)
//! and under runc or crun (hooks run as `gpurun cdi-hook`).

pub mod hooks;

use std::path::Path;

use serde_json::{json, Value};

use crate::inventory::caps::Capability;
use crate::inventory::{DeviceNode, FileKind, Inventory};

/// The lowest version that describes what the spec uses (device names
/// that start with a digit, `hostPath` on device nodes), so that older
/// readers accept it: Podman 4.3's CDI library stops at 0.5.0.
pub const CDI_VERSION: &str = "0.5.0";
pub const KIND: &str = "nvidia.com/gpu";
pub const IMEX_KIND: &str = "nvidia.com/imex-channel";

/// The version that has `additionalGids` in container edits (CDI 0.7.0:
/// containerd 1.7.16, Docker 26.1, Podman 5.1 and later read it).
pub const CDI_VERSION_WITH_GROUPS: &str = "0.7.0";

fn node(n: &DeviceNode) -> Value {
    let mut v = json!({
        "path": n.path,
        "hostPath": n.host_path,
        "type": "c",
        "major": n.major,
        "minor": n.minor,
        "fileMode": n.file_mode,
    });
    if n.gid != 0 {
        v["gid"] = json!(n.gid);
    }
    v
}

/// Each set of container edits whose nodes only their group may open gets
/// those groups as `additionalGids`, as `nvidia-ctk cdi generate` writes
/// them since toolkit 1.19; the spec's version is then 0.7.0. A host whose
/// nodes are open to all keeps version 0.5.0, which Podman 4 reads.
pub fn give_device_groups(spec: &mut Value) {
    let mut any = false;
    let mut edits: Vec<&mut Value> = vec![];
    let Some(obj) = spec.as_object_mut() else {
        return;
    };
    for (key, value) in obj.iter_mut() {
        match key.as_str() {
            "containerEdits" => edits.push(value),
            "devices" => edits.extend(
                value
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.get_mut("containerEdits")),
            ),
            _ => {}
        }
    }
    for edit in edits {
        let groups = groups_of_nodes(edit);
        if !groups.is_empty() {
            edit["additionalGids"] = json!(groups);
            any = true;
        }
    }
    if any {
        spec["cdiVersion"] = json!(CDI_VERSION_WITH_GROUPS);
    }
}

/// The groups `edit`'s device nodes need, as `DeviceNode::group_needed`.
fn groups_of_nodes(edit: &Value) -> Vec<u32> {
    let nodes: Vec<DeviceNode> = edit["deviceNodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| DeviceNode {
            path: String::new(),
            host_path: Default::default(),
            major: 0,
            minor: 0,
            file_mode: n["fileMode"].as_u64().unwrap_or(0o666) as u32,
            gid: n["gid"].as_u64().unwrap_or(0) as u32,
        })
        .collect();
    crate::plan::groups_needed(&nodes)
}

/// The program NVIDIA's CDI hooks name in a spec gpurun writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookProgram {
    /// This gpurun binary, as `gpurun cdi-hook SUB …`: the spec works under
    /// runc and crun with no toolkit installed, and gpurun itself does the
    /// hooks' work natively.
    Gpurun(std::path::PathBuf),
    /// `/usr/bin/nvidia-cdi-hook SUB …`, the toolkit's own form.
    NvidiaCdiHook,
}

impl HookProgram {
    fn hook(&self, args: &[String]) -> Value {
        let (path, mut all) = match self {
            HookProgram::Gpurun(path) => (
                path.to_string_lossy().into_owned(),
                vec![
                    "gpurun".to_owned(),
                    crate::cdi::hooks::GPURUN_SUBCOMMAND.to_owned(),
                ],
            ),
            HookProgram::NvidiaCdiHook => (
                "/usr/bin/nvidia-cdi-hook".to_owned(),
                vec![crate::cdi::hooks::NVIDIA_CDI_HOOK.to_owned()],
            ),
        };
        all.extend_from_slice(args);
        json!({
            "hookName": "createContainer",
            "path": path,
            "args": all,
            "env": ["NVIDIA_CTK_DEBUG=false"],
        })
    }
}

/// enable-cuda-compat's arguments, as the toolkit writes them: the host's
/// driver version; on a Tegra host the CUDA version NVML gives, with
/// Orin's compat folder (toolkit 1.19's CSV mode). None on WSL2, whose
/// libcuda is Windows' own, or on a Tegra host without NVML.
fn compat_hook_args(inv: &Inventory) -> Option<Vec<String>> {
    if inv.wsl.is_some() {
        return None;
    }
    let mut args = vec!["enable-cuda-compat".to_owned()];
    match &inv.tegra {
        None => args.push(format!("--host-driver-version={}", inv.driver_version)),
        Some(tegra) => {
            args.push(format!(
                "--host-cuda-version={}",
                inv.cuda_version.as_ref()?
            ));
            if tegra.orin {
                args.push(format!(
                    "--cuda-compat-container-root={}",
                    crate::plan::cuda_compat::ORIN_COMPAT_DIR
                ));
            }
        }
    }
    Some(args)
}

/// The spec, in the form `nvidia-ctk cdi generate` writes: one device per
/// GPU index and UUID plus "all"; the driver's utility and compute files
/// bind-mounted at their driver-root paths (programs in /usr/bin), and the
/// hooks that make them usable there (the `.so` link, CUDA compat, the
/// linker cache over the library folders, `params`). Images that search
/// neither `/usr/lib/x86_64-linux-gnu` nor the driver's folder (RHEL's
/// `/usr/lib64`) find the libraries through the linker cache.
pub fn spec(inv: &Inventory, hooks: &HookProgram) -> Value {
    let driver = driver_mounts(inv);
    let mut env = Vec::new();
    let mut spec_hooks = Vec::new();
    if let Some(dir) = &driver.libcuda_dir {
        env.push(format!("{}={dir}", crate::cdi::hooks::LIBCUDA_DIR_ENV));
        spec_hooks.push(hooks.hook(&[
            "create-symlinks".into(),
            "--link".into(),
            format!("libcuda.so.1::{dir}/libcuda.so"),
        ]));
        if let Some(args) = compat_hook_args(inv) {
            spec_hooks.push(hooks.hook(&args));
        }
    }
    if !driver.folders.is_empty() {
        let mut args = vec!["update-ldcache".to_owned()];
        for f in &driver.folders {
            args.push("--folder".into());
            args.push(f.clone());
        }
        spec_hooks.push(hooks.hook(&args));
    }
    spec_hooks.push(hooks.hook(&["disable-device-node-modification".into()]));
    env.push("NVIDIA_VISIBLE_DEVICES=void".into());
    json!({
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": gpu_devices(inv),
        "containerEdits": {
            "env": env,
            "deviceNodes": inv.control_nodes.iter().filter(|n| n.path != "/dev/nvidia-modeset").map(node).collect::<Vec<_>>(),
            "hooks": spec_hooks,
            "mounts": driver.mounts,
        }
    })
}

/// The management spec (`--kind management.nvidia.com/gpu`), as the
/// toolkit writes it for the GPU Operator's own pods: one device, "all",
/// with every node `plan::management_nodes` names, and the driver's files
/// and hooks of the GPU spec as its common edits.
pub fn management_spec(inv: &Inventory, hooks: &HookProgram) -> Value {
    let mut spec = spec(inv, hooks);
    spec["kind"] = json!(crate::request::MANAGEMENT_KIND);
    if let Some(edits) = spec["containerEdits"].as_object_mut() {
        edits.remove("deviceNodes");
    }
    let nodes: Vec<Value> = crate::plan::management_nodes(inv)
        .iter()
        .map(node)
        .collect();
    spec["devices"] = json!([{ "name": "all", "containerEdits": { "deviceNodes": nodes } }]);
    spec
}

/// One device per GPU index and UUID, plus "all".
fn gpu_devices(inv: &Inventory) -> Vec<Value> {
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
    devices
}

/// The utility and compute files' mounts, the library folders in the
/// order first met, and libcuda's folder.
struct DriverMounts {
    mounts: Vec<Value>,
    folders: Vec<String>,
    libcuda_dir: Option<String>,
}

fn driver_mounts(inv: &Inventory) -> DriverMounts {
    let mut out = DriverMounts {
        mounts: Vec::new(),
        folders: Vec::new(),
        libcuda_dir: None,
    };
    let files = [Capability::Utility, Capability::Compute]
        .into_iter()
        .flat_map(|cap| inv.files.get(&cap).into_iter().flatten())
        .filter(|f| !f.compat32);
    for f in files {
        let name = f
            .host_path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let in_root = Path::new("/").join(&f.path_in_root);
        let target = match f.kind {
            FileKind::Library => {
                let dir = in_root.parent().unwrap_or(Path::new("/"));
                let dir = dir.to_string_lossy().into_owned();
                if name.starts_with("libcuda.so.") {
                    out.libcuda_dir = Some(dir.clone());
                }
                if !out.folders.contains(&dir) {
                    out.folders.push(dir);
                }
                in_root
            }
            FileKind::Binary => Path::new("/usr/bin").join(&name),
            _ => f.container_path.clone().unwrap_or(in_root),
        };
        // A Tegra's files serve every capability: each is mounted once.
        if out
            .mounts
            .iter()
            .any(|m| m["containerPath"] == json!(target))
        {
            continue;
        }
        out.mounts.push(json!({
            "hostPath": f.host_path,
            "containerPath": target,
            "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"],
        }));
    }
    out
}

/// The host's IMEX channels as their own kind, as the toolkit names them:
/// one device per channel id, plus "all".
pub fn imex_spec(inv: &Inventory) -> anyhow::Result<Value> {
    if inv.imex_major.is_none() {
        anyhow::bail!(
            "this host's driver has no IMEX channels ({}/devices has no {} line)",
            inv.roots.proc_root.display(),
            crate::inventory::gated::IMEX_PROC_DEVICES_NAME
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node_json(mode: u32, gid: u32) -> Value {
        let mut n = json!({"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": mode});
        if gid != 0 {
            n["gid"] = json!(gid);
        }
        n
    }

    #[test]
    fn groups_are_written_only_where_a_node_needs_one() {
        let mut open = json!({
            "cdiVersion": CDI_VERSION,
            "containerEdits": {"deviceNodes": [node_json(0o666, 0)]},
            "devices": [{"name": "0", "containerEdits": {"deviceNodes": [node_json(0o666, 44)]}}]
        });
        let before = open.clone();
        give_device_groups(&mut open);
        assert_eq!(open, before, "a host open to all keeps CDI 0.5.0 as it was");

        let mut grouped = json!({
            "cdiVersion": CDI_VERSION,
            "containerEdits": {"deviceNodes": [node_json(0o666, 0)]},
            "devices": [
                {"name": "0", "containerEdits": {"deviceNodes": [node_json(0o660, 44), node_json(0o660, 44)]}},
                {"name": "1", "containerEdits": {"deviceNodes": [node_json(0o666, 0)]}}
            ]
        });
        give_device_groups(&mut grouped);
        assert_eq!(grouped["cdiVersion"], CDI_VERSION_WITH_GROUPS);
        assert_eq!(
            grouped["devices"][0]["containerEdits"]["additionalGids"],
            json!([44])
        );
        assert!(grouped["devices"][1]["containerEdits"]
            .get("additionalGids")
            .is_none());
        assert!(grouped["containerEdits"].get("additionalGids").is_none());
    }
}
