//! `gpurun gpu cdi` writes a spec that the container-device-interface crate
//! (the Rust port of the library podman and containerd use) reads and
//! validates against the CDI schema.

use std::fs;

use gpurun_tests::*;

#[test]
fn the_cdi_spec_validates_and_names_every_gpu() {
    require_root!();
    let rt = Runtime::new();
    let scratch = Scratch::new("cdi");
    let path = scratch.path().join("nvidia.json");
    let out_path = path.to_string_lossy();
    rt.run(GpuFixtures::get().args(&["gpu", "cdi", "-o", &out_path]))
        .ok();
    container_device_interface::spec::read_spec(&path, 0).expect("a valid CDI spec");

    let spec: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(spec["kind"], "nvidia.com/gpu");
    let names: Vec<&str> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "0",
            "GPU-5a1e0000-0000-4000-8000-00000000fa4e",
            "1",
            "GPU-5a1e0001-0000-4000-8000-00000000fa4f",
            "all"
        ]
    );
    let mounts = spec["containerEdits"]["mounts"].as_array().unwrap();
    assert!(mounts
        .iter()
        .any(|m| m["containerPath"] == "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"));

    // The validation is real: a broken spec is refused.
    let mut broken = spec.clone();
    broken["kind"] = "not a kind".into();
    fs::write(&path, broken.to_string()).unwrap();
    assert!(container_device_interface::spec::read_spec(&path, 0).is_err());
}
