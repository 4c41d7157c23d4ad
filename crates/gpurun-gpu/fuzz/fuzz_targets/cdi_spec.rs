//! Any bytes as a CDI spec file in the spec directory: the registry loads
//! it or keeps it as invalid, every device it defines resolves or is an
//! error, and the edits applied leave a spec that serializes and parses
//! back; never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::cdi_spec::run(data));
