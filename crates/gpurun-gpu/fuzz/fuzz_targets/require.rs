//! Any NVIDIA_REQUIRE_* value parses to a requirement or an error, and
//! checking a parsed one never panics.
#![no_main]
use gpurun_gpu::require::{parse, Facts};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(req) = parse("NVIDIA_REQUIRE_FUZZ", text) {
            let _ = req.check(&Facts {
                cuda: Some("12.2"),
                driver: Some("535.309.01"),
                arch: Some("9.0"),
                brand: Some("nvidia"),
                gpu: Some("GPU 0"),
            });
            let _ = req.check(&Facts::default());
        }
    }
});
