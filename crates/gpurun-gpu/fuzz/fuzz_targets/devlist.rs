//! Any NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES value gives a
//! selection or an error, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::devlist::run(data));
