//! Any bytes as a CDI spec file in the spec directory: the registry loads
//! it or keeps it as invalid, every device it defines resolves or is an
//! error, and the edits applied leave a spec that serializes and parses
//! back; never a panic.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use gpurun_gpu::cdi_registry::{self, Registry};
use libfuzzer_sys::fuzz_target;
use oci_spec::runtime::Spec;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gpurun-fuzz-cdi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    std::fs::write(dir.join("spec.yaml"), data).unwrap();
    let registry = Registry::load(std::slice::from_ref(dir));
    let mut names = registry.names();
    names.push("example.com/net=eth0".to_owned());
    let Ok(resolved) = registry.resolve(&names) else {
        return;
    };
    let mut spec = Spec::default();
    if cdi_registry::inject(&mut spec, &resolved).is_ok() {
        let text = serde_json::to_vec(&spec).expect("an edited spec serializes");
        serde_json::from_slice::<Spec>(&text).expect("an edited spec parses back");
    }
});
