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
}
