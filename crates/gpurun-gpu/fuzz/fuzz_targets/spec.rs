//! Any bytes as a bundle's config.json go through gpurun's whole GPU flow
//! (request with a vendor's CDI spec in its spec directory → plan → apply
//! against a fixed inventory): an error, or an
//! edited spec that serializes and parses back; never a panic.
#![no_main]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpurun_gpu::inventory::{DeviceNode, DriverFile, FileKind, Gpu};
use gpurun_gpu::{apply, plan, request, Capability, Inventory, Roots};
use libfuzzer_sys::fuzz_target;
use oci_spec::runtime::Spec;

/// A scratch rootfs and work directory, one per fuzzing process.
fn dirs() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("gpurun-fuzz-spec-{}", std::process::id()));
        let rootfs = base.join("rootfs");
        let work = base.join("work");
        std::fs::create_dir_all(rootfs.join("etc")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(base.join("libcuda.so.535.309.01"), b"").unwrap();
        // One vendor's CDI spec, so CDI names in the input may resolve.
        std::fs::create_dir_all(base.join("cdi")).unwrap();
        std::fs::write(
            base.join("cdi/example.yaml"),
            "cdiVersion: \"0.6.0\"\nkind: example.com/net\ncontainerEdits:\n  env: [\"EXAMPLE=1\"]\ndevices:\n  - name: eth0\n    containerEdits:\n      env: [\"EXAMPLE_NET=eth0\"]\n",
        )
        .unwrap();
        (rootfs, work)
    })
}

fn node(path: &str, minor: u32) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        host_path: PathBuf::from(path),
        major: 195,
        minor,
        file_mode: 0o666,
    }
}

fn inventory(base: &Path) -> Inventory {
    let gpu = |index: u32| Gpu {
        index,
        minor: index,
        uuid: format!("GPU-11111111-2222-3333-4444-55555555555{index}"),
        pci_bus_id: format!("0000:3{index}:00.0"),
        model: "NVIDIA H100".into(),
        arch: Some("9.0".into()),
        brand: Some("nvidia".into()),
        node: Some(node(&format!("/dev/nvidia{index}"), index)),
        drm_nodes: Vec::new(),
        migs: Vec::new(),
    };
    let libcuda = DriverFile {
        kind: FileKind::Library,
        host_path: base.join("libcuda.so.535.309.01"),
        path_in_root: PathBuf::from("usr/lib/x86_64-linux-gnu/libcuda.so.535.309.01"),
        soname: Some("libcuda.so.1".into()),
        compat32: false,
        container_path: None,
    };
    Inventory {
        roots: Roots {
            proc_root: base.join("no-proc"),
            ..Roots::default()
        },
        source: "fuzz".into(),
        driver_version: "535.309.01".into(),
        kernel_module: None,
        cuda_version: Some("12.2".into()),
        gpus: vec![gpu(0), gpu(1)],
        control_nodes: vec![node("/dev/nvidiactl", 255)],
        other_nodes: Vec::new(),
        imex_major: None,
        gated_nodes: BTreeMap::new(),
        cufile: None,
        files: BTreeMap::from([(Capability::Compute, vec![libcuda])]),
        firmware: Vec::new(),
        notes: Vec::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut spec) = serde_json::from_slice::<Spec>(data) else {
        return;
    };
    let (rootfs, work) = dirs();
    let inv = inventory(rootfs.parent().unwrap());
    let policy = request::RequestPolicy {
        spec_dirs: vec![rootfs.parent().unwrap().join("cdi")],
        ..Default::default()
    };
    let Ok(req) = request::from_spec(&spec, || Ok(policy)) else {
        return;
    };
    if gpurun_gpu::cdi_registry::inject(&mut spec, &req.cdi_devices).is_err() {
        return;
    }
    let Ok(plan) = plan::make(&inv, &req, Some(rootfs)) else {
        return;
    };
    if apply::apply(&mut spec, &plan, rootfs, &work.join("shared"), &mut |_, _| {}).is_ok() {
        let text = serde_json::to_vec(&spec).expect("an edited spec serializes");
        serde_json::from_slice::<Spec>(&text).expect("an edited spec parses back");
    }
});
