//! The GPUs and device nodes a host has, as discovery (procfs or NVML)
//! reports them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    pub index: u32,
    pub minor: u32,
    pub uuid: String,
    pub pci_bus_id: String,
    pub model: String,
    /// Compute capability, e.g. "9.0".
    pub arch: Option<String>,
    pub brand: Option<String>,
    pub node: Option<DeviceNode>,
    /// Its DRM nodes (`/dev/dri/card1`, `/dev/dri/renderD128`), for the
    /// graphics and display capabilities.
    #[serde(default)]
    pub drm_nodes: Vec<DeviceNode>,
    pub migs: Vec<MigDevice>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigDevice {
    pub index: u32,
    pub uuid: String,
    pub gpu_instance: Option<u32>,
    pub compute_instance: Option<u32>,
    pub nodes: Vec<DeviceNode>,
    /// Its profile as NVML names it (`1g.10gb`, `1g.24gb+gfx`): `+gfx`
    /// ones have a graphics engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    /// Where the node is inside the container, e.g. `/dev/nvidia0`.
    pub path: String,
    /// Where it is on the host (under the dev root).
    pub host_path: PathBuf,
    pub major: u32,
    pub minor: u32,
    pub file_mode: u32,
    /// The host node's group (`NVreg_DeviceFileGID`, `video`, `render`):
    /// kept on the node, and given to the container's process where the
    /// mode needs it (`DeviceNode::group_needed`).
    #[serde(default)]
    pub gid: u32,
}

impl DeviceNode {
    /// The group a process must hold to open this node: its gid, unless
    /// the node is open to everyone for reading and writing, or is root's
    /// group (as the NVIDIA toolkit judges it since 1.19).
    pub fn group_needed(&self) -> Option<u32> {
        (self.file_mode & 0o006 != 0o006 && self.gid != 0).then_some(self.gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(file_mode: u32, gid: u32) -> DeviceNode {
        DeviceNode {
            path: "/dev/nvidia0".into(),
            host_path: PathBuf::from("/dev/nvidia0"),
            major: 195,
            minor: 0,
            file_mode,
            gid,
        }
    }

    #[test]
    fn a_group_is_needed_only_where_others_cannot_read_and_write() {
        assert_eq!(node(0o660, 44).group_needed(), Some(44));
        assert_eq!(node(0o440, 44).group_needed(), Some(44));
        assert_eq!(node(0o664, 44).group_needed(), Some(44));
        assert_eq!(node(0o666, 44).group_needed(), None);
        assert_eq!(node(0o660, 0).group_needed(), None);
    }
}
