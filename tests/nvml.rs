//! The NVML path of the inventory, through a fake libnvidia-ml.so.1
//! (crates/fake-nvml) that nvml-wrapper loads at run time from the driver
//! root, and its fallback to procfs when NVML does not initialise.

use std::fs;

use gpurun_tests::*;
use serde_json::json;

fn fake_nvml_lib() -> std::path::PathBuf {
    let lib = gpurun_bin().with_file_name("libfake_nvml.so");
    assert!(
        lib.exists(),
        "{} missing: cargo build -p fake-nvml",
        lib.display()
    );
    lib
}

#[test]
fn gpu_info_reads_nvml_when_it_initialises() {
    let scratch = Scratch::new("nvml");
    let driver = scratch.path().join("driver");
    let lib_dir = driver.join("usr/lib/x86_64-linux-gnu");
    fs::create_dir_all(&lib_dir).unwrap();
    fs::copy(fake_nvml_lib(), lib_dir.join("libnvidia-ml.so.1")).unwrap();
    let config = scratch.path().join("nvml.json");
    fs::write(
        &config,
        json!({
            "driverVersion": "550.54.15",
            "cudaVersion": 12040,
            "gpus": [
                {"uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA A100-SXM4-40GB",
                 "minor": 3, "busId": "00000000:3B:00.0", "cc": [8, 0], "brand": 2,
                 "migs": ["MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                          {"uuid": "MIG-ffffffff-0000-0000-0000-000000000001", "profile": "1g.24gb+gfx"}]},
                {"uuid": "GPU-66666666-7777-8888-9999-000000000000", "name": "NVIDIA H100 80GB HBM3",
                 "minor": 7, "busId": "00000000:5E:00.0", "cc": [9, 0], "brand": 14}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let rt = Runtime::new();
    let mut cmd = rt.command([
        "--driver-root",
        driver.to_str().unwrap(),
        "--proc-root",
        "/nonexistent",
        "--dev-root",
        scratch.path().to_str().unwrap(),
        "gpu",
        "info",
        "--json",
    ]);
    cmd.env("FAKE_NVML_JSON", &config);
    let out = run_cmd(&mut cmd, TIMEOUT);
    out.ok();
    let info: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(info["source"], "nvml");
    assert_eq!(info["driverVersion"], "550.54.15");
    assert_eq!(info["cudaVersion"], "12.4");
    let gpus = info["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(gpus[0]["minor"], 3);
    assert_eq!(gpus[0]["pciBusId"], "00000000:3B:00.0");
    assert_eq!(gpus[0]["arch"], "8.0");
    assert_eq!(gpus[0]["brand"], "tesla");
    assert_eq!(
        gpus[0]["migs"][0]["uuid"],
        "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    );
    // A MIG device's profile, from the end of its NVML name.
    assert_eq!(gpus[0]["migs"][0].get("profile"), None);
    assert_eq!(gpus[0]["migs"][1]["profile"], "1g.24gb+gfx");
    assert_eq!(gpus[1]["model"], "NVIDIA H100 80GB HBM3");
    assert_eq!(gpus[1]["arch"], "9.0");

    // Without a working NVML (no config: nvmlInit fails as on a host
    // without the kernel driver) and without procfs, there is no driver.
    let mut cmd = rt.command([
        "--driver-root",
        driver.to_str().unwrap(),
        "--proc-root",
        "/nonexistent",
        "gpu",
        "info",
    ]);
    cmd.env_remove("FAKE_NVML_JSON");
    let out = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no NVIDIA driver found"),
        "{}",
        out.stderr
    );
}
