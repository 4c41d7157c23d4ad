//! A fake `libnvidia-ml.so.1` for tests. It exports the NVML calls gpurun's
//! inventory makes and answers them from the JSON file named by
//! `$FAKE_NVML_JSON`:
//!
//! ```json
//! {"driverVersion": "535.309.01", "cudaVersion": 12020,
//!  "gpus": [{"uuid": "GPU-…", "name": "NVIDIA H100", "minor": 0,
//!            "busId": "00000000:1A:00.0", "cc": [9, 0], "brand": 14,
//!            "migs": ["MIG-…", {"uuid": "MIG-…", "profile": "1g.24gb+gfx"}]}]}
//! ```
//!
//! Without the variable or with a bad file, `nvmlInit_v2` fails with
//! NVML_ERROR_DRIVER_NOT_LOADED (9), as the real library does on a host
//! without the kernel driver.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use serde::Deserialize;

const SUCCESS: c_int = 0;
const ERROR_INVALID_ARGUMENT: c_int = 2;
const ERROR_NOT_SUPPORTED: c_int = 3;
const ERROR_INSUFFICIENT_SIZE: c_int = 7;
const ERROR_DRIVER_NOT_LOADED: c_int = 9;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    driver_version: String,
    cuda_version: c_int,
    gpus: Vec<GpuConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GpuConfig {
    uuid: String,
    name: String,
    minor: c_uint,
    bus_id: String,
    cc: (c_int, c_int),
    brand: c_int,
    #[serde(default)]
    migs: Vec<MigConfig>,
}

/// A MIG device: its UUID, or its UUID and profile (which NVML puts at
/// the end of the device's name).
#[derive(Deserialize)]
#[serde(untagged)]
enum MigConfig {
    Uuid(String),
    Profiled { uuid: String, profile: String },
}

impl MigConfig {
    fn uuid(&self) -> &str {
        match self {
            MigConfig::Uuid(uuid) | MigConfig::Profiled { uuid, .. } => uuid,
        }
    }
}

fn config() -> Option<&'static Config> {
    static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let path = std::env::var_os("FAKE_NVML_JSON")?;
            serde_json::from_slice(&std::fs::read(path).ok()?).ok()
        })
        .as_ref()
}

/// Handles: GPU i is (i+1)<<8; MIG j of GPU i is ((i+1)<<8) | (j+1).
fn handle(gpu: usize, mig: Option<usize>) -> *mut c_void {
    (((gpu + 1) << 8) | mig.map_or(0, |m| m + 1)) as *mut c_void
}

fn resolve(device: *mut c_void) -> Option<(&'static GpuConfig, Option<&'static MigConfig>)> {
    let raw = device as usize;
    let gpu = config()?.gpus.get((raw >> 8).checked_sub(1)?)?;
    match raw & 0xff {
        0 => Some((gpu, None)),
        m => Some((gpu, Some(gpu.migs.get(m - 1)?))),
    }
}

unsafe fn write_str(out: *mut c_char, len: c_uint, s: &str) -> c_int {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    if s.len() + 1 > len as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, out, s.len());
    *out.add(s.len()) = 0;
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> c_int {
    if config().is_some() {
        SUCCESS
    } else {
        ERROR_DRIVER_NOT_LOADED
    }
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> c_int {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(out: *mut c_char, len: c_uint) -> c_int {
    match config() {
        Some(c) => write_str(out, len, &c.driver_version),
        None => ERROR_DRIVER_NOT_LOADED,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(out: *mut c_int) -> c_int {
    match config() {
        Some(c) if !out.is_null() => {
            *out = c.cuda_version;
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(out: *mut c_uint) -> c_int {
    match config() {
        Some(c) if !out.is_null() => {
            *out = c.gpus.len() as c_uint;
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    out: *mut *mut c_void,
) -> c_int {
    match config() {
        Some(c) if (index as usize) < c.gpus.len() && !out.is_null() => {
            *out = handle(index as usize, None);
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(device: *mut c_void, out: *mut c_uint) -> c_int {
    match resolve(device) {
        Some((gpu, None)) if !out.is_null() => {
            *out = gpu.minor;
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: *mut c_void,
    out: *mut c_char,
    len: c_uint,
) -> c_int {
    match resolve(device) {
        Some((_, Some(mig))) => write_str(out, len, mig.uuid()),
        Some((gpu, None)) => write_str(out, len, &gpu.uuid),
        None => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: *mut c_void,
    out: *mut c_char,
    len: c_uint,
) -> c_int {
    match resolve(device) {
        Some((gpu, Some(MigConfig::Profiled { profile, .. }))) => {
            write_str(out, len, &format!("{} MIG {profile}", gpu.name))
        }
        Some((gpu, _)) => write_str(out, len, &gpu.name),
        None => ERROR_INVALID_ARGUMENT,
    }
}

/// nvmlPciInfo_t as nvml-wrapper-sys lays it out.
#[repr(C)]
pub struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: *mut c_void, out: *mut PciInfo) -> c_int {
    match resolve(device) {
        Some((gpu, None)) if !out.is_null() => {
            std::ptr::write_bytes(out, 0, 1);
            let info = &mut *out;
            write_str(info.bus_id.as_mut_ptr(), 32, &gpu.bus_id);
            let legacy: String = gpu.bus_id.chars().skip(4).collect();
            write_str(info.bus_id_legacy.as_mut_ptr(), 16, &legacy);
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: *mut c_void,
    major: *mut c_int,
    minor: *mut c_int,
) -> c_int {
    match resolve(device) {
        Some((gpu, _)) if !major.is_null() && !minor.is_null() => {
            *major = gpu.cc.0;
            *minor = gpu.cc.1;
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetBrand(device: *mut c_void, out: *mut c_int) -> c_int {
    match resolve(device) {
        Some((gpu, _)) if !out.is_null() => {
            *out = gpu.brand;
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: *mut c_void,
    out: *mut c_uint,
) -> c_int {
    match resolve(device) {
        Some((gpu, None)) if !out.is_null() => {
            *out = gpu.migs.len() as c_uint;
            if gpu.migs.is_empty() {
                ERROR_NOT_SUPPORTED
            } else {
                SUCCESS
            }
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: *mut c_void,
    index: c_uint,
    out: *mut *mut c_void,
) -> c_int {
    let raw = device as usize;
    match resolve(device) {
        Some((gpu, None)) if (index as usize) < gpu.migs.len() && !out.is_null() => {
            *out = handle((raw >> 8) - 1, Some(index as usize));
            SUCCESS
        }
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(_result: c_int) -> *const c_char {
    c"fake NVML error".as_ptr()
}
