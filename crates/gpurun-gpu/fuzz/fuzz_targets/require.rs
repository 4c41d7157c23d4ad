//! Any NVIDIA_REQUIRE_* value parses to a requirement or an error, and
//! checking a parsed one never panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::require::run(data));
