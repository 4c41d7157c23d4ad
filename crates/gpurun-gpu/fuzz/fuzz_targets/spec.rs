//! Any bytes as a bundle's config.json go through gpurun's whole GPU flow
//! (request with a vendor's CDI spec in its spec directory → plan → apply
//! against a fixed inventory): an error, or an
//! edited spec that serializes and parses back; never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::spec::run(data));
