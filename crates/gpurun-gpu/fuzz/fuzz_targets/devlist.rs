//! Any NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES value gives a
//! selection or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = gpurun_gpu::devlist::parse(Some(text));
        let _ = gpurun_gpu::caps::parse(Some(text));
    }
});
