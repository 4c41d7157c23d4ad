//! The fuzz targets' bodies (`fuzz/fuzz_targets/*.rs` call them), here so
//! that `tests/fuzz_corpus.rs` replays every kept corpus input through the
//! same code on the stable toolchain in `cargo test`; libFuzzer explores
//! from them by hand (`scripts/ci/fuzz.sh`). Not an API.

pub mod cdi_hook {
    //! Any NUL-separated arguments as an NVIDIA CDI hook's command line: an
    //! op or an error, never a panic; a parsed link never climbs above `/`.
    pub fn run(data: &[u8]) {
        let args: Vec<String> = data
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if let Ok(crate::cdi::hooks::Op::CreateSymlinks { links }) = crate::cdi::hooks::parse(&args)
        {
            for l in links {
                let clean = crate::cdi::hooks::in_container(&l.link);
                assert!(clean.is_absolute());
                assert!(!clean
                    .components()
                    .any(|c| c == std::path::Component::ParentDir));
            }
        }
    }
}

pub mod cdi_spec {
    //! Any bytes as a CDI spec file in the spec directory: the registry loads
    //! it or keeps it as invalid, every device it defines resolves or is an
    //! error, and the edits applied leave a spec that serializes and parses
    //! back; never a panic.
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use crate::request::cdi_registry::{self, Registry};
    use oci_spec::runtime::Spec;

    fn dir() -> &'static PathBuf {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("gpurun-fuzz-cdi-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        })
    }

    pub fn run(data: &[u8]) {
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
    }
}

pub mod compat_note {
    //! Any bytes as a CUDA compat library's note section, at any alignment:
    //! a note or nothing, never a panic; and an image's ELF file read for it.
    pub fn run(data: &[u8]) {
        let Some((&align, section)) = data.split_first() else {
            return;
        };
        let _ = crate::plan::cuda_compat::parse_note(section, u64::from(align));
        let path = std::env::temp_dir().join(format!("compat-note-fuzz-{}", std::process::id()));
        if std::fs::write(&path, section).is_ok() {
            if let Ok(mut file) = std::fs::File::open(&path) {
                let _ = crate::formats::elf::note_section(
                    &mut file,
                    crate::plan::cuda_compat::NOTE_SECTION,
                    crate::formats::platform::Platform::native(),
                );
            }
        }
    }
}

pub mod devlist {
    //! Any NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES value gives a
    //! selection or an error, never a panic.
    pub fn run(data: &[u8]) {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = crate::formats::devlist::parse(Some(text));
            let _ = crate::inventory::caps::parse(Some(text));
        }
    }
}

pub mod ldcache {
    //! Any bytes as an image's /etc/ld.so.cache: entries or an error, never a
    //! panic; and what parses round-trips through the writer.
    pub fn run(data: &[u8]) {
        if let Ok(entries) = crate::formats::ldcache::parse(data) {
            let written = crate::formats::ldcache::write(&entries);
            let again = crate::formats::ldcache::parse(&written).expect("our own cache parses");
            assert!(again.len() <= entries.len());
        }
    }
}

pub mod require {
    //! Any NVIDIA_REQUIRE_* value parses to a requirement or an error, and
    //! checking a parsed one never panics.
    use crate::formats::require::{parse, Facts};

    pub fn run(data: &[u8]) {
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
    }
}

pub mod slurm {
    //! Any Slurm job environment (SLURM_*_GPUS, CUDA_VISIBLE_DEVICES) gives an
    //! allocation or an error, and mapping it onto GPUs never panics.
    use crate::inventory::Gpu;

    pub fn run(data: &[u8]) {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        // The input is "NAME=value" lines; the job id is always set.
        let get = |key: &str| {
            if key == "SLURM_JOB_ID" {
                return Some("42".to_owned());
            }
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
        };
        let Ok(Some(allocation)) = crate::request::slurm::from_env(get) else {
            return;
        };
        let gpus: Vec<Gpu> = (0..4)
            .map(|index| Gpu {
                index,
                minor: index * 2,
                uuid: format!("GPU-0000000{index}-0000-0000-0000-000000000000"),
                pci_bus_id: String::new(),
                model: String::new(),
                arch: None,
                brand: None,
                node: None,
                drm_nodes: Vec::new(),
                migs: Vec::new(),
            })
            .collect();
        let _ = allocation.gpu_indexes(&gpus, |gpu| gpu.index != 3);
    }
}

pub mod spec {
    //! Any bytes as a bundle's config.json go through gpurun's whole GPU flow
    //! (request with a vendor's CDI spec in its spec directory → plan → apply
    //! against a fixed inventory): an error, or an
    //! edited spec that serializes and parses back; never a panic.
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    use crate::inventory::caps::Capability;
    use crate::inventory::Inventory;
    use crate::inventory::{DeviceNode, DriverFile, FileKind, Gpu};
    use crate::roots::Roots;
    use crate::{apply, plan, request};
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
            gid: 0,
        }
    }

    /// Two H100s and libcuda (an empty file in `base`), driver 535.309.01:
    /// the fixed inventory of this target, and of `apply`'s unit tests.
    pub fn inventory(base: &Path) -> Inventory {
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
            platform: crate::formats::platform::Platform::native(),
            wsl: None,
            tegra: None,
        }
    }

    pub fn run(data: &[u8]) {
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
        if crate::request::cdi_registry::inject(&mut spec, &req.cdi_devices).is_err() {
            return;
        }
        let Ok(plan) = plan::make(&inv, &req, Some(rootfs)) else {
            return;
        };
        if apply::apply(
            &mut spec,
            &plan,
            rootfs,
            &work.join("shared"),
            &mut |_, _| {},
        )
        .is_ok()
        {
            let text = serde_json::to_vec(&spec).expect("an edited spec serializes");
            serde_json::from_slice::<Spec>(&text).expect("an edited spec parses back");
        }
    }
}

pub mod tegra_csv {
    //! Any bytes as a JetPack CSV file: entries and skipped lines, never a
    //! panic; no entry's path climbs with `..`, and a `dev` entry's path is
    //! under `/dev` or absolute as written.
    pub fn run(data: &[u8]) {
        let list = crate::inventory::tegra::parse_csv(&String::from_utf8_lossy(data));
        for (kind, path) in &list.entries {
            assert!(!path.split('/').any(|c| c == ".."), "{path}");
            assert!(!path.is_empty());
            if *kind == crate::inventory::tegra::Kind::Dev {
                assert!(crate::inventory::tegra::device_path(path).starts_with('/'));
            }
            let _ = crate::inventory::tegra::is_library_link(path);
        }
    }
}
