//! Any bytes as a CUDA compat library's note section, at any alignment:
//! a note or nothing, never a panic; and an image's ELF file read for it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&align, section)) = data.split_first() else {
        return;
    };
    let _ = gpurun_gpu::cuda_compat::parse_note(section, u64::from(align));
    let path = std::env::temp_dir().join(format!("compat-note-fuzz-{}", std::process::id()));
    if std::fs::write(&path, section).is_ok() {
        if let Ok(mut file) = std::fs::File::open(&path) {
            let _ = gpurun_gpu::elf::note_section(&mut file, gpurun_gpu::cuda_compat::NOTE_SECTION);
        }
    }
});
