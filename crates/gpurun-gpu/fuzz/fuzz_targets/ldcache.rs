//! Any bytes as an image's /etc/ld.so.cache: entries or an error, never a
//! panic; and what parses round-trips through the writer.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = gpurun_gpu::ldcache::parse(data) {
        let written = gpurun_gpu::ldcache::write(&entries);
        let again = gpurun_gpu::ldcache::parse(&written).expect("our own cache parses");
        assert!(again.len() <= entries.len());
    }
});
