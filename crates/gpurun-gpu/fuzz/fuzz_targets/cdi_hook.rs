//! Any NUL-separated arguments as an NVIDIA CDI hook's command line: an
//! op or an error, never a panic; a parsed link never climbs above `/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::cdi_hook::run(data));
