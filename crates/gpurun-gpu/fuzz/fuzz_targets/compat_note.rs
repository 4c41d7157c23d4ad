//! Any bytes as a CUDA compat library's note section, at any alignment:
//! a note or nothing, never a panic; and an image's ELF file read for it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::compat_note::run(data));
