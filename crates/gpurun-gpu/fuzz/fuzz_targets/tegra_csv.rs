//! Any bytes as a JetPack host-files-for-container.d CSV file: parsed into
//! entries and skipped lines, never a panic, no path that climbs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::tegra_csv::run(data));
