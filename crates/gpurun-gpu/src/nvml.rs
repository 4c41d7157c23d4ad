//! GPU facts from NVML, loaded at run time with `nvml-wrapper`, so gpurun
//! runs on hosts without a driver. Any failure means "no NVML": the caller
//! falls back to procfs.

use std::path::{Path, PathBuf};

use nvml_wrapper::enum_wrappers::device::Brand;
use nvml_wrapper::Nvml;

use crate::inventory::{Gpu, MigDevice};

pub struct NvmlFacts {
    pub driver_version: String,
    pub cuda_version: Option<String>,
    pub gpus: Vec<Gpu>,
}

/// `libnvidia-ml.so.1` in the directories where the inventory looks for
/// the driver's libraries.
pub fn library_in(driver_root: &Path) -> Option<PathBuf> {
    crate::inventory::LIB_DIRS_64
        .iter()
        .map(|d| driver_root.join(d).join("libnvidia-ml.so.1"))
        .find(|p| p.exists())
}

pub fn query(driver_root: &Path) -> Option<NvmlFacts> {
    query_library(&library_in(driver_root)?)
}

fn brand_name(brand: Brand) -> String {
    format!("{brand:?}").to_ascii_lowercase()
}

/// Loads `lib` and asks it everything the inventory needs.
pub fn query_library(lib: &Path) -> Option<NvmlFacts> {
    let nvml = match Nvml::builder().lib_path(lib.as_os_str()).init() {
        Ok(nvml) => nvml,
        Err(e) => {
            tracing::debug!("NVML from {} did not initialise: {e}", lib.display());
            return None;
        }
    };
    let facts = (|| {
        let driver_version = nvml.sys_driver_version().ok()?;
        let cuda_version = nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        let count = nvml.device_count().ok()?;
        let mut gpus = Vec::new();
        for index in 0..count {
            let device = nvml.device_by_index(index).ok()?;
            let mut migs = Vec::new();
            if let Ok(n) = device.mig_device_count() {
                for m in 0..n {
                    if let Ok(mig) = device.mig_device_by_index(m) {
                        migs.push(MigDevice {
                            index: m,
                            uuid: mig.uuid().unwrap_or_default(),
                            gpu_instance: None,
                            compute_instance: None,
                            nodes: Vec::new(),
                        });
                    }
                }
            }
            gpus.push(Gpu {
                index,
                minor: device.minor_number().ok()?,
                uuid: device.uuid().ok()?,
                pci_bus_id: device.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                model: device.name().unwrap_or_default(),
                arch: device
                    .cuda_compute_capability()
                    .ok()
                    .map(|c| format!("{}.{}", c.major, c.minor)),
                brand: device.brand().ok().map(brand_name),
                node: None,
                migs,
            });
        }
        Some(NvmlFacts {
            driver_version,
            cuda_version,
            gpus,
        })
    })();
    let _ = nvml.shutdown();
    facts
}
