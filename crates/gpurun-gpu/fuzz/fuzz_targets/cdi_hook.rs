//! Any NUL-separated arguments as an NVIDIA CDI hook's command line: an
//! op or an error, never a panic; a parsed link never climbs above `/`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let args: Vec<String> = data
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if let Ok(gpurun_gpu::cdi_hooks::Op::CreateSymlinks { links }) =
        gpurun_gpu::cdi_hooks::parse(&args)
    {
        for l in links {
            let clean = gpurun_gpu::cdi_hooks::in_container(&l.link);
            assert!(clean.is_absolute());
            assert!(!clean.components().any(|c| c == std::path::Component::ParentDir));
        }
    }
});
