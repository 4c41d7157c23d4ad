//! Any bytes as an image's /etc/ld.so.cache: entries or an error, never a
//! panic; and what parses round-trips through the writer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::ldcache::run(data));
