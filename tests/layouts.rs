//! The whole GPU flow on every driver layout real hosts have
//! (`scripts/fixtures/fake-gpu-host.sh --layout`): Debian, Ubuntu, RHEL, the cloud
//! layout of ../shared/real-gpu-hosts (/usr/local/nvidia, soname links in
//! /lib, wrapper scripts in /usr/bin, the open kernel module), and the GPU
//! Operator's driver root, as root and rootless. Each gives the nvidia-smi
//! ladder, exactly the files of the capabilities asked for, a `gpu verify`
//! and a `doctor` that agree with what `run` does.

use gpurun_tests::*;

const LAYOUTS: &[(&str, &str)] = &[
    ("debian", "proprietary"),
    ("debian", "open"),
    ("ubuntu", "open"),
    ("rhel", "proprietary"),
    ("usr-local-nvidia", "open"),
    ("gpu-operator", "open"),
];

/// The layouts to run: all, or those GPURUN_TEST_LAYOUTS names
/// ("layout/module,..."; the host matrix runs a few in its guest, this
/// host all). A name that is no layout fails the test.
fn layouts() -> Vec<(&'static str, &'static str)> {
    let Ok(chosen) = std::env::var("GPURUN_TEST_LAYOUTS") else {
        return LAYOUTS.to_vec();
    };
    chosen
        .split(',')
        .map(|name| {
            *LAYOUTS
                .iter()
                .find(|(layout, module)| format!("{layout}/{module}") == name)
                .unwrap_or_else(|| panic!("GPURUN_TEST_LAYOUTS: no layout {name:?}"))
        })
        .collect()
}

const VERSION: &str = "535.309.01";

/// Lists what gpurun put into the image's library and program
/// directories, whether the injected nvidia-smi is an ELF program, and
/// the nvidia-smi exit code.
const LIST: &str = "ls /usr/lib/x86_64-linux-gnu /usr/bin /usr/share/glvnd/egl_vendor.d 2>/dev/null \
    | grep -E 'nvidia|cuda|nvcuvid|GL' | grep -v -e cuda_probe -e cuda_vector_add | sort -u; \
    [ \"$(head -c4 /usr/bin/nvidia-smi 2>/dev/null | tail -c3)\" = ELF ] && echo nvidia-smi-is-elf; \
    nvidia-smi >/dev/null 2>&1; echo smi=$?";

fn with_version(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.replace("VER", VERSION)).collect()
}

fn run_caps(rt: &Runtime, host: &FakeHost, rootfs: &str, caps: &str, script: &str) -> Ran {
    run_gpus_caps(rt, host, rootfs, "0", caps, script)
}

/// `run_caps` with the GPUs `gpus` (`--gpus`).
fn run_gpus_caps(
    rt: &Runtime,
    host: &FakeHost,
    rootfs: &str,
    gpus: &str,
    caps: &str,
    script: &str,
) -> Ran {
    let out = rt.run(host.args(&[
        "run",
        "--rootfs",
        rootfs,
        "--gpus",
        gpus,
        "--gpu-capabilities",
        caps,
        "--",
        "sh",
        "-c",
        script,
    ]));
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    out
}

#[test]
fn every_layout_gives_the_ladder_and_exactly_the_files_asked_for() {
    require_root!();
    let fixtures = GpuFixtures::get();
    for who in As::both() {
        let bundle = Bundle::glibc(who.user());
        let rootfs = bundle.rootfs().to_string_lossy().into_owned();
        let rt = Runtime::as_who(who.clone());
        for (layout, module) in layouts() {
            let host = fixtures.layout(layout, module);
            let what = format!("{layout}/{module} as {who:?}");

            let utility = run_caps(&rt, &host, &rootfs, "utility", LIST);
            assert_eq!(
                utility.stdout.lines().collect::<Vec<_>>(),
                with_version(&[
                    "libnvidia-cfg.so.1",
                    "libnvidia-cfg.so.VER",
                    "libnvidia-ml.so.1",
                    "libnvidia-ml.so.VER",
                    "nvidia-smi",
                    "nvidia-smi-is-elf",
                    "smi=9",
                ]),
                "{what}: {}",
                utility.stderr
            );

            let compute = run_caps(
                &rt,
                &host,
                &rootfs,
                "compute",
                &format!(
                    "{LIST}; cuda_probe >/dev/null; echo cuda=$?; cuda_vector_add; echo vadd=$?"
                ),
            );
            assert_eq!(
                compute.stdout.lines().collect::<Vec<_>>(),
                with_version(&[
                    "libcuda.so.1",
                    "libcuda.so.VER",
                    "libcudadebugger.so.1",
                    "libcudadebugger.so.VER",
                    "libnvidia-allocator.so.1",
                    "libnvidia-allocator.so.VER",
                    "libnvidia-nvvm.so.4",
                    "libnvidia-nvvm.so.VER",
                    "libnvidia-ptxjitcompiler.so.1",
                    "libnvidia-ptxjitcompiler.so.VER",
                    "nvidia-cuda-mps-control",
                    "nvidia-cuda-mps-server",
                    "smi=127",
                    "cuda=100",
                    "cuInit=100",
                    "vadd=100",
                ]),
                "{what}: {}",
                compute.stderr
            );

            let graphics = run_caps(&rt, &host, &rootfs, "graphics", LIST);
            let lines: Vec<&str> = graphics.stdout.lines().collect();
            for want in [
                "10_nvidia.json",
                "libEGL_nvidia.so.0",
                "libGLX_nvidia.so.0",
                "smi=127",
            ] {
                assert!(lines.contains(&want), "{what}: no {want} in {lines:?}");
            }
            assert!(
                !lines.iter().any(|l| l.starts_with("libcuda")),
                "{what}: {lines:?}"
            );

            // The plan names the ELF program, not a wrapper.
            bundle.set_process(&["true"], &["NVIDIA_VISIBLE_DEVICES=0"]);
            let plan = rt.run(host.args(&["gpu", "plan", "--json", bundle.dir.to_str().unwrap()]));
            let plan: serde_json::Value = serde_json::from_str(&plan.stdout)
                .unwrap_or_else(|e| panic!("{what}: {e}: {}", plan.stderr));
            let smi = plan["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["destination"] == "/usr/bin/nvidia-smi")
                .unwrap_or_else(|| panic!("{what}: no nvidia-smi in {plan}"));
            let program = std::fs::read(smi["source"].as_str().unwrap()).unwrap();
            assert_eq!(&program[..4], b"\x7fELF", "{what}: {smi}");

            let verify = rt.run(host.args(&["gpu", "verify", "--gpus", "0"]));
            assert!(
                verify.stdout.contains("nvidia-smi exit code 9")
                    && verify.stdout.contains("verdict:    no kernel driver"),
                "{what}: {}{}",
                verify.stdout,
                verify.stderr
            );

            let doctor = rt.run(host.args(&["doctor", "--gpu"]));
            assert_eq!(doctor.code, 0, "{what}: {}", doctor.stdout);
            assert!(
                doctor
                    .stdout
                    .contains("GPU container: would run with the driver files injected"),
                "{what}: {}",
                doctor.stdout
            );
            let kernel = if module == "open" {
                "(open kernel module)"
            } else {
                "(proprietary kernel module)"
            };
            assert!(doctor.stdout.contains(kernel), "{what}: {}", doctor.stdout);
        }
    }
}

/// The cloud layout's wrapper scripts are never injected: doctor says so,
/// and the plan takes the ELF program beside the library directory.
#[test]
fn wrapper_scripts_are_skipped_for_the_program_beside_the_libraries() {
    require_root!();
    let host = GpuFixtures::get().layout("usr-local-nvidia", "open");
    let rt = Runtime::new();
    let list = rt.run(host.args(&["gpu", "list", "--json"]));
    list.ok();
    let list: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let smi = list["files"]["utility"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["hostPath"].as_str().unwrap().ends_with("/nvidia-smi"))
        .expect("nvidia-smi found");
    assert!(
        smi["pathInRoot"] == "usr/local/nvidia/bin/nvidia-smi",
        "{smi}"
    );
    let bytes = std::fs::read(smi["hostPath"].as_str().unwrap()).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // The script on the PATH is what a naive search would have found.
    let script = host.dir.join("driver/usr/bin/nvidia-smi");
    assert!(std::fs::read_to_string(script)
        .unwrap()
        .starts_with("#!/bin/sh"));
}

/// With the graphics capability, glvnd in the container loads NVIDIA's
/// EGL vendor library (its vendor file is injected); without it, nothing.
#[test]
fn graphics_makes_glvnd_load_the_nvidia_egl_vendor_library() {
    require_root!();
    let fixtures = GpuFixtures::get();
    for who in As::both() {
        let bundle = Bundle::glibc(who.user());
        let rootfs = bundle.rootfs();
        let copy = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cp -a {fx}/glvnd/usr {root}/ && cp {fx}/egl_probe {root}/usr/bin/ && ldconfig -r {root}{owner}",
                fx = fixtures.dir.display(),
                root = rootfs.display(),
                owner = match who.user() {
                    Some(u) => format!(" && chown -R {}:{} {}", u.uid, u.gid, rootfs.display()),
                    None => String::new(),
                }
            ))
            .status()
            .unwrap();
        assert!(copy.success());
        let rt = Runtime::as_who(who.clone());
        let probe = "LD_DEBUG=libs egl_probe 2>&1 | grep -E 'calling init: .*EGL|display='";
        for (layout, module) in [("usr-local-nvidia", "open"), ("debian", "proprietary")] {
            let host = fixtures.layout(layout, module);
            let root = rootfs.to_string_lossy();
            let graphics = run_caps(&rt, &host, &root, "graphics", probe);
            assert!(
                graphics
                    .stdout
                    .contains("calling init: /usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.0"),
                "{layout} as {who:?}: {}{}",
                graphics.stdout,
                graphics.stderr
            );
            let compute = run_caps(&rt, &host, &root, "compute", probe);
            assert!(
                compute
                    .stdout
                    .contains("calling init: /usr/lib/x86_64-linux-gnu/libEGL.so.1")
                    && !compute.stdout.contains("EGL_nvidia"),
                "{layout} as {who:?}: {}",
                compute.stdout
            );
        }
    }
}

/// The fake WSL2 host's driver store, as the container sees it.
const STORE: &str = "/usr/lib/wsl/drivers/nv_dispi.inf_amd64_7f5b3e0a6d3c4f21";

/// WSL2 (Docker Desktop, Podman on Windows): `/dev/dxg` is the GPU, the
/// driver store goes in at its own path (libcuda beside its nvcubins.bin),
/// `libdxcore.so` at WSL's, nvidia-smi in /usr/bin, and the linker cache
/// lists both folders: the ladder holds (nvidia-smi 9, cudaGetDeviceCount
/// 100) with exactly the capabilities' files, root and rootless; the
/// store's .inf never goes in.
#[test]
fn a_wsl2_host_gives_dxg_and_its_driver_store() {
    require_root!();
    let host = GpuFixtures::get().wsl();
    let probe = format!(
        "[ -c /dev/dxg ] && echo dxg; ls {STORE} /usr/lib/wsl/lib 2>/dev/null | grep -v -e : -e '^$' | sort; \
         ldconfig -p | grep -o '=> /usr/lib/wsl/.*' | sort; \
         [ -e /usr/bin/nvidia-smi ] && echo smi-in-bin; nvidia-smi >/dev/null 2>&1; echo smi=$?; \
         cuda_probe >/dev/null 2>&1; echo cuda=$?"
    );
    for who in As::both() {
        let bundle = Bundle::glibc(who.user());
        let rootfs = bundle.rootfs().to_string_lossy().into_owned();
        let rt = Runtime::as_who(who.clone());
        let run = |caps: &str| {
            let out = run_gpus_caps(&rt, &host, &rootfs, "all", caps, &probe);
            assert_eq!(out.code, 0, "{who:?} {caps}: {}", out.stderr);
            out.stdout
        };
        let mut want: Vec<String> = [
            "dxg",
            "libdxcore.so",
            "libnvdxgdmal.so.1",
            "libnvidia-ml.so.1",
            "libnvidia-ml_loader.so",
        ]
        .map(String::from)
        .to_vec();
        for name in [
            "libnvdxgdmal.so.1",
            "libnvidia-ml.so.1",
            "libnvidia-ml_loader.so",
        ] {
            want.push(format!("=> {STORE}/{name}"));
        }
        want.push("=> /usr/lib/wsl/lib/libdxcore.so".into());
        want.extend(["smi-in-bin", "smi=9", "cuda=35"].map(String::from));
        assert_eq!(
            run("utility").lines().collect::<Vec<_>>(),
            want,
            "{who:?} utility"
        );

        let compute = run("compute");
        let lines: Vec<&str> = compute.lines().collect();
        for name in [
            "libcuda.so.1",
            "libcuda.so.1.1",
            "libcuda_loader.so",
            "libnvidia-ptxjitcompiler.so.1",
            "nvcubins.bin",
            "nvcuda64.dll",
            "libdxcore.so",
        ] {
            assert!(
                lines.contains(&name),
                "{who:?} compute: no {name}: {compute}"
            );
        }
        let cuda_entry = format!("=> {STORE}/libcuda.so.1");
        assert!(lines.contains(&cuda_entry.as_str()), "{who:?}: {compute}");
        assert!(!lines.contains(&"libnvidia-ml.so.1"), "{who:?}: {compute}");
        assert!(!compute.contains("nv_dispi.inf\n"), "{who:?}: {compute}");
        assert_eq!(
            lines[lines.len() - 2..],
            ["smi=127", "cuda=100"],
            "{who:?}: {compute}"
        );
    }
}

/// JetPack's library folder on the fake Jetson.
const TEGRA: &str = "/usr/lib/aarch64-linux-gnu/tegra";

/// A Jetson in CSV mode: the container gets exactly what the CSV files list
/// and the host has (the listed nodes, the directory, the libraries with
/// their linker-cache entries, the non-library link's file, the release
/// file), nothing they do not (the host's /dev/nvidia0, the listed library
/// link, what the host lacks), for `all`, GPU 0 and the CDI name `igpu0`;
/// `void` gets nothing. cudaGetDeviceCount finds libcuda (100).
#[test]
fn a_tegra_host_gets_exactly_what_its_csv_lists() {
    require_root!();
    let host = GpuFixtures::get().tegra();
    let probe = format!(
        "find /dev -name 'nv*' -o -path '/dev/nvgpu/*' | sort; ls {TEGRA} 2>/dev/null; \
         ls /usr/src/jetson_multimedia_api 2>/dev/null; [ -f /etc/vulkan/icd.d/nvidia_icd.json ] && echo icd; \
         [ -f /etc/nv_tegra_release ] && echo release; ldconfig -p | grep -o '=> {TEGRA}/.*' | sort; \
         LD_LIBRARY_PATH=/opt/cudart cuda_probe >/dev/null 2>&1; echo cuda=$?"
    );
    let want: Vec<String> = [
        "/dev/nvgpu",
        "/dev/nvgpu/igpu0",
        "/dev/nvgpu/igpu0/as",
        "/dev/nvgpu/igpu0/ctrl",
        "/dev/nvhost-ctrl-gpu",
        "/dev/nvhost-prof-gpu",
        "/dev/nvmap",
        "libcuda.so.1",
        "libcuda.so.1.1",
        "libnvrm_gpu.so",
        "nvidia_icd.json",
        "README",
        "icd",
        "release",
    ]
    .map(String::from)
    .into_iter()
    .chain(["libcuda.so.1", "libnvrm_gpu.so"].map(|n| format!("=> {TEGRA}/{n}")))
    .chain(["cuda=100".to_owned()])
    .collect();
    let rt = Runtime::new();
    for request in ["all", "0", "nvidia.com/gpu=igpu0", "void"] {
        let bundle = Bundle::glibc(None);
        let visible = format!("NVIDIA_VISIBLE_DEVICES={request}");
        bundle.set_process(&["sh", "-c", &probe], &[visible.as_str()]);
        let dir = bundle.dir.to_string_lossy();
        let out = rt.run(host.args(&["run", "--bundle", &dir, &unique("tegra")]));
        assert_eq!(out.code, 0, "{request}: {}", out.stderr);
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
        let got: Vec<&str> = out.stdout.lines().collect();
        if request == "void" {
            assert_eq!(got, ["cuda=35"], "{request}");
        } else {
            assert_eq!(got, want, "{request}");
        }
    }
    // What the CSV lists and the host lacks is named, not silently dropped.
    let info = rt.run(host.args(&["gpu", "info"]));
    assert!(
        info.stdout.contains("/dev/nvhost-vic (listed in"),
        "{}",
        info.stdout
    );
    assert!(
        info.stdout.contains("libnvos.so (listed in"),
        "{}",
        info.stdout
    );
    assert!(info.stdout.contains("L4T R36.4.3"), "{}", info.stdout);
    // The CDI spec names the integrated GPU as the toolkit does, each file
    // mounted once, no compat hook.
    let cdi = rt.run(host.args(&["gpu", "cdi"]));
    let spec: serde_json::Value = serde_json::from_str(&cdi.stdout).unwrap();
    let names = cdi_device_names(&spec);
    assert_eq!(names, ["0", "igpu0", "all"]);
    let mut targets: Vec<&str> = spec["containerEdits"]["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["containerPath"].as_str().unwrap())
        .collect();
    targets.sort();
    let count = targets.len();
    targets.dedup();
    assert_eq!(targets.len(), count, "{targets:?}");
    assert!(!cdi.stdout.contains("enable-cuda-compat"));
}

/// An Orin (NVML names its GPU `Orin (nvgpu)`, as JetPack 6's NVML does)
/// takes an image's CUDA forward compatibility from
/// `/usr/local/cuda/compat_orin`, as the toolkit's CSV mode does, when the
/// library's note says a newer CUDA than the host's (NVML's, the only
/// version a Tegra host has): the linker cache then leads libcuda.so.1
/// there. Not with the host's CUDA as new, nor on a Tegra host whose NVML
/// does not answer, nor from `/usr/local/cuda/compat`. `gpu cdi` writes
/// the toolkit 1.19 hook for it.
#[test]
fn an_orin_takes_the_images_compat_orin_when_its_cuda_is_newer() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let scratch = Scratch::new("orin");
    let made = run_cmd(
        std::process::Command::new("sh")
            .arg(repo().join("scripts/fixtures/fake-tegra-host.sh"))
            .arg(fixtures.dir.join("host"))
            .arg(scratch.path().join("tegra")),
        TIMEOUT,
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let flags = std::fs::read_to_string(scratch.path().join("tegra/flags")).unwrap();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let nvml_dir = scratch.path().join("tegra/driver/usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&nvml_dir).unwrap();
    let fake_nvml = gpurun_bin().with_file_name("libfake_nvml.so");
    std::fs::copy(&fake_nvml, nvml_dir.join("libnvidia-ml.so.1")).unwrap();
    let nvml_config = |name: &str, cuda: u32| {
        let file = scratch.path().join(format!("nvml-{cuda}.json"));
        let gpu = serde_json::json!({"uuid": "GPU-0f0f0f0f-1111-2222-3333-444444444444", "name": name,
            "minor": 0, "busId": "00000000:00:00.0", "cc": [8, 7], "brand": 0});
        let config =
            serde_json::json!({"driverVersion": "540.4.0", "cudaVersion": cuda, "gpus": [gpu]});
        std::fs::write(&file, config.to_string()).unwrap();
        file
    };
    let rt = Runtime::new();
    for (compat_dir, nvml, want) in [
        (
            "compat_orin",
            Some(nvml_config("Orin (nvgpu)", 12020)),
            "=> /usr/local/cuda/compat_orin/libcuda.so.1",
        ),
        (
            "compat_orin",
            Some(nvml_config("Orin (nvgpu)", 12090)),
            "=> /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
        ),
        (
            "compat_orin",
            None,
            "=> /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
        ),
        (
            "compat",
            Some(nvml_config("Orin (nvgpu)", 12020)),
            "=> /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
        ),
    ] {
        let bundle = Bundle::glibc(None);
        fixtures.copy_compat("note-listed", &bundle, compat_dir);
        bundle.set_process(
            &["sh", "-c", "ldconfig -p | grep 'libcuda.so.1 '"],
            &["NVIDIA_VISIBLE_DEVICES=all"],
        );
        let dir = bundle.dir.to_string_lossy().into_owned();
        let mut args: Vec<&str> = flags.clone();
        args.extend(["run", "--bundle", &dir]);
        let id = unique("orin");
        args.push(&id);
        let mut cmd = rt.command(&args);
        match &nvml {
            Some(config) => cmd.env("FAKE_NVML_JSON", config),
            None => cmd.env_remove("FAKE_NVML_JSON"),
        };
        let out = run_cmd(&mut cmd, TIMEOUT);
        assert_eq!(out.code, 0, "{compat_dir} {nvml:?}: {}", out.stderr);
        assert!(
            out.stdout.contains(want),
            "{compat_dir} {nvml:?}: {}",
            out.stdout
        );
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    }
    let mut args: Vec<&str> = flags.clone();
    args.extend(["gpu", "cdi"]);
    let mut cdi = rt.command(&args);
    cdi.env("FAKE_NVML_JSON", nvml_config("Orin (nvgpu)", 12020));
    let cdi = run_cmd(&mut cdi, TIMEOUT);
    let spec: serde_json::Value = serde_json::from_str(&cdi.stdout).unwrap();
    // gpurun's hook program: ["gpurun", "cdi-hook", SUBCOMMAND, ...].
    let compat: Vec<&[serde_json::Value]> = spec["containerEdits"]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["args"].as_array())
        .filter(|args| args.get(2).is_some_and(|a| a == "enable-cuda-compat"))
        .map(|args| &args[3..])
        .collect();
    assert_eq!(
        compat,
        [[
            "--host-cuda-version=12.2",
            "--cuda-compat-container-root=/usr/local/cuda/compat_orin"
        ]],
        "{}",
        cdi.stdout
    );
}

/// The X server's NVIDIA driver, GLX module and xorg.conf.d snippet, as
/// each distribution places them, go where the X server looks for them,
/// with display (and graphics), never with compute alone.
#[test]
fn the_x_servers_files_go_where_x_looks_for_them() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let bundle = Bundle::glibc(None);
    let rootfs = bundle.rootfs().to_string_lossy().into_owned();
    let rt = Runtime::new();
    for (layout, want) in [
        (
            "debian",
            &[
                "/usr/lib/xorg/modules/drivers/nvidia_drv.so",
                "/usr/lib/xorg/modules/extensions/libglxserver_nvidia.so",
                "/usr/share/X11/xorg.conf.d/nvidia-drm-outputclass.conf",
            ][..],
        ),
        (
            "ubuntu",
            &[
                "/usr/lib/x86_64-linux-gnu/nvidia/xorg/nvidia_drv.so",
                "/usr/lib/x86_64-linux-gnu/nvidia/xorg/libglxserver_nvidia.so",
                "/usr/lib/x86_64-linux-gnu/nvidia/xorg/libglxserver_nvidia.so.535.309.01",
                "/usr/share/X11/xorg.conf.d/10-nvidia.conf",
            ],
        ),
        (
            "rhel",
            &[
                "/usr/lib64/xorg/modules/drivers/nvidia_drv.so",
                "/usr/lib64/xorg/modules/extensions/libglxserver_nvidia.so",
                "/usr/lib64/xorg/modules/extensions/libglxserver_nvidia.so.535.309.01",
                "/usr/share/X11/xorg.conf.d/10-nvidia.conf",
            ],
        ),
    ] {
        let host = fixtures.layout(layout, "proprietary");
        // Each file there, and whether it is an ELF file (the modules) or
        // text (the snippet).
        let probe = "find /usr \\( -name 'nvidia_drv.so' -o -name 'libglxserver_nvidia.so*' \
                     -o -path '*/xorg.conf.d/*nvidia*' \\) 2>/dev/null | sort | while read -r f; do \
                     [ \"$(head -c4 \"$f\" | tail -c3)\" = ELF ] && echo \"$f elf\" || echo \"$f\"; done";
        for caps in ["display", "graphics", "compute"] {
            let out = run_caps(&rt, &host, &rootfs, caps, probe);
            let got: Vec<&str> = out.stdout.lines().collect();
            let mut expected: Vec<String> = if caps == "compute" {
                Vec::new()
            } else {
                want.iter()
                    .map(|p| {
                        if p.ends_with(".conf") {
                            p.to_string()
                        } else {
                            format!("{p} elf")
                        }
                    })
                    .collect()
            };
            expected.sort();
            assert_eq!(got, expected, "{layout} {caps}: {}", out.stderr);
        }
    }
}
