//! Native GPU injection over the fake GPU host (NVIDIA's real 535 files,
//! fake nodes, no kernel driver), as root and rootless. The exit codes are
//! the fake host's ladders: nvidia-smi 127 (not injected), 12 (library not
//! resolved), 9 (injected and resolved); cudaGetDeviceCount 35 (no
//! libcuda), 100 (libcuda resolved).

use std::fs;
use std::process::Command;

use gpurun_tests::*;
use serde_json::json;

/// Runs `args` in a fresh glibc container with `env`; returns the output.
fn run_gpu(
    who: &As,
    env: &[&str],
    args: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> Ran {
    let bundle = Bundle::glibc(who.user());
    bundle.set_process(args, env);
    bundle.edit(edit);
    let rt = Runtime::as_who(who.clone());
    GpuFixtures::get().run_bundle(&rt, &bundle, &BundleRun::default())
}

const NODES: &str = "for n in /dev/nvidiactl /dev/nvidia0 /dev/nvidia1 /dev/nvidia-uvm; do [ -c $n ] && echo $n; done; \
                     nvidia-smi >/dev/null 2>&1; echo smi=$?";

fn lines(out: &Ran) -> Vec<&str> {
    out.stdout.lines().collect()
}

#[test]
fn unset_or_void_injects_nothing() {
    require_root!();
    for who in As::both() {
        for env in [
            &[][..],
            &["NVIDIA_VISIBLE_DEVICES=void"][..],
            &["NVIDIA_VISIBLE_DEVICES="][..],
        ] {
            let out = run_gpu(&who, env, &["sh", "-c", NODES], |_| {});
            assert_eq!(lines(&out), ["smi=127"], "{env:?}: {}", out.stderr);
        }
    }
}

#[test]
fn none_gives_the_driver_but_no_gpu() {
    require_root!();
    for who in As::both() {
        let out = run_gpu(
            &who,
            &["NVIDIA_VISIBLE_DEVICES=none"],
            &["sh", "-c", NODES],
            |_| {},
        );
        let l = lines(&out);
        assert!(l.contains(&"/dev/nvidiactl"), "{l:?} {}", out.stderr);
        assert!(
            !l.contains(&"/dev/nvidia0") && !l.contains(&"/dev/nvidia1"),
            "{l:?}"
        );
        assert_ne!(l.last(), Some(&"smi=127"), "binary not injected: {l:?}");
        assert_ne!(l.last(), Some(&"smi=12"), "library not resolved: {l:?}");
    }
}

#[test]
fn one_gpu_gets_its_node_only_and_nvidia_smi_reaches_the_driver() {
    require_root!();
    for who in As::both() {
        let out = run_gpu(
            &who,
            &["NVIDIA_VISIBLE_DEVICES=0"],
            &["sh", "-c", NODES],
            |_| {},
        );
        let l = lines(&out);
        assert!(
            l.contains(&"/dev/nvidiactl") && l.contains(&"/dev/nvidia0"),
            "{l:?} {}",
            out.stderr
        );
        assert!(!l.contains(&"/dev/nvidia1"), "{l:?}");
        assert_eq!(l.last(), Some(&"smi=9"), "{l:?}");
    }
}

/// With graphics, a GPU's DRM nodes come with the links udev makes on a
/// host, `/dev/dri/by-path/pci-<bus>-card` and `-render`, each leading to
/// that GPU's node: GPU 1 (0000:1b:00.0, card2 and renderD129) and none of
/// GPU 0's, no link to a node left out; without graphics there is no
/// /dev/dri. Root and a user.
#[test]
fn a_gpus_drm_nodes_are_found_by_their_pci_path() {
    require_root!();
    let probe = "for l in /dev/dri/by-path/*; do echo \"${l##*/} $(readlink $l) $([ -c $l ] && echo node)\"; done; \
                 [ -e /dev/dri ] || echo no-dri";
    for who in As::both() {
        let graphics = run_gpu(
            &who,
            &[
                "NVIDIA_VISIBLE_DEVICES=1",
                "NVIDIA_DRIVER_CAPABILITIES=graphics,utility",
            ],
            &["sh", "-c", probe],
            |_| {},
        );
        // The card node is 0660 root's on the fake host, as often the video
        // group's: a user, who cannot open it, gets neither it nor its link.
        let mut expected = vec!["pci-0000:1b:00.0-render ../renderD129 node"];
        if who.user().is_none() {
            expected.insert(0, "pci-0000:1b:00.0-card ../card2 node");
        }
        assert_eq!(lines(&graphics), expected, "{who:?}: {}", graphics.stderr);
        let compute = run_gpu(
            &who,
            &["NVIDIA_VISIBLE_DEVICES=1"],
            &["sh", "-c", probe],
            |_| {},
        );
        assert_eq!(
            lines(&compute).last(),
            Some(&"no-dri"),
            "{who:?}: {}",
            compute.stderr
        );
    }
}

#[test]
fn all_gets_every_node() {
    require_root!();
    for who in As::both() {
        let out = run_gpu(
            &who,
            &["NVIDIA_VISIBLE_DEVICES=all"],
            &["sh", "-c", NODES],
            |_| {},
        );
        assert_eq!(
            lines(&out),
            [
                "/dev/nvidiactl",
                "/dev/nvidia0",
                "/dev/nvidia1",
                "/dev/nvidia-uvm",
                "smi=9"
            ],
            "{}",
            out.stderr
        );
    }
}

#[test]
fn capabilities_decide_libcuda() {
    require_root!();
    for who in As::both() {
        let utility = run_gpu(
            &who,
            &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"],
            &["sh", "-c", "ls /usr/lib/x86_64-linux-gnu/ | grep -E '^lib(nvidia-ml|cuda)\\.so\\.1$'; cuda_probe"],
            |_| {},
        );
        assert_eq!(utility.code, 35, "{}", utility.stderr);
        assert!(utility.stdout.contains("libnvidia-ml.so.1"));
        assert!(
            !utility.stdout.contains("libcuda.so.1"),
            "{}",
            utility.stdout
        );

        let compute = run_gpu(
            &who,
            &[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            ],
            &["cuda_probe"],
            |_| {},
        );
        assert_eq!(compute.code, 100, "{} {}", compute.stdout, compute.stderr);
        let none = run_gpu(&who, &[], &["cuda_probe"], |_| {});
        assert_eq!(none.code, 35);
    }
}

#[test]
fn the_device_cgroup_allows_exactly_the_selected_nodes() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sleep", "300"], &["NVIDIA_VISIBLE_DEVICES=1"]);
    let rt = Runtime::new();
    let id = unique("devcg");
    let dir = bundle.dir.to_string_lossy();
    rt.run(GpuFixtures::get().args(&["run", "-d", "--bundle", &dir, &id]))
        .ok();
    let list = fs::read_to_string(format!("/sys/fs/cgroup/devices/gpurun/{id}/devices.list"));
    rt.run(["delete", "--force", &id]).ok();
    let Ok(list) = list else { return }; // cgroup v2: rules are eBPF, not listed
    let rules: Vec<&str> = list.lines().collect();
    assert!(rules.contains(&"c 195:1 rwm"), "{rules:?}");
    assert!(rules.contains(&"c 195:255 rwm"), "{rules:?}");
    assert!(
        !rules.iter().any(|r| r.starts_with("c 195:0 ")),
        "{rules:?}"
    );
    assert!(
        !rules.contains(&"a *:* rwm"),
        "everything allowed: {rules:?}"
    );
}

#[test]
fn ldconfig_lists_the_injected_libraries_on_writable_and_read_only_roots() {
    require_root!();
    for who in As::both() {
        for readonly in [false, true] {
            let out = run_gpu(
                &who,
                &["NVIDIA_VISIBLE_DEVICES=0"],
                &[
                    "sh",
                    "-c",
                    "ldconfig -p; touch /probe 2>/dev/null && echo writable; exit 0",
                ],
                |c| c["root"]["readonly"] = readonly.into(),
            );
            assert_eq!(out.code, 0, "{}", out.stderr);
            for lib in ["libnvidia-ml.so.1", "libcuda.so.1", "libc.so.6"] {
                assert!(
                    out.stdout.contains(&format!(
                        "\t{lib} (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/{lib}"
                    )),
                    "readonly={readonly}: {lib} missing: {}",
                    out.stdout
                );
            }
            assert_eq!(out.stdout.contains("writable"), !readonly);
        }
    }
}

#[test]
fn the_images_own_cache_is_left_untouched() {
    require_root!();
    let bundle = Bundle::glibc(None);
    let cache = bundle.rootfs().join("etc/ld.so.cache");
    let before = fs::read(&cache).unwrap();
    bundle.set_process(&["true"], &["NVIDIA_VISIBLE_DEVICES=0"]);
    let rt = Runtime::new();
    let dir = bundle.dir.to_string_lossy();
    rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("cache")]))
        .ok();
    assert_eq!(fs::read(&cache).unwrap(), before);
}

#[test]
fn no_helper_process_runs() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["/usr/bin/true"], &["NVIDIA_VISIBLE_DEVICES=0"]);
    let rt = Runtime::new();
    let scratch = Scratch::new("strace");
    let trace = scratch.path().join("trace");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=execve,execveat", "-o"])
        .arg(&trace)
        .arg(gpurun_bin())
        .arg("--root")
        .arg(&rt.root)
        .args(GpuFixtures::get().flags())
        .args(["run", "--bundle"])
        .arg(&bundle.dir)
        .arg(unique("strace"));
    run_cmd(&mut cmd, TIMEOUT).ok();
    let text = fs::read_to_string(&trace).unwrap();
    let execs: Vec<&str> = text
        .lines()
        .filter(|l| (l.contains("execve(") || l.contains("execveat(")) && !l.contains("= -1"))
        .collect();
    let bin = gpurun_bin().to_string_lossy().into_owned();
    // Ours: the first exec of the binary and its sealed re-exec. Theirs: the
    // container's /usr/bin/true. Nothing else: no hook, no ldconfig.
    assert_eq!(execs.len(), 3, "{execs:#?}");
    assert!(
        execs[0].contains(&format!("execve(\"{bin}\"")),
        "{execs:#?}"
    );
    assert!(execs[1].contains("execveat("), "{execs:#?}");
    assert!(execs[2].contains("execve(\"/usr/bin/true\""), "{execs:#?}");
}

#[test]
fn docker_hook_is_dropped_and_injection_is_native() {
    require_root!();
    let out = run_gpu(
        &As::Root,
        &[
            "NVIDIA_VISIBLE_DEVICES=0",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        ],
        &["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?"],
        |c| {
            c["hooks"] = json!({"prestart": [{
                "path": "/usr/bin/nvidia-container-runtime-hook",
                "args": ["nvidia-container-runtime-hook", "prestart"]
            }]})
        },
    );
    assert_eq!(out.stdout.trim(), "smi=9", "{}", out.stderr);
}

#[test]
fn bad_gpu_requests_fail_cleanly_with_the_reason() {
    require_root!();
    for (env, want) in [
        (
            "NVIDIA_VISIBLE_DEVICES=7",
            "NVIDIA_VISIBLE_DEVICES: no GPU \"7\" (this host has 0-1)",
        ),
        (
            "NVIDIA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000",
            "no GPU \"GPU-00000000",
        ),
        ("NVIDIA_VISIBLE_DEVICES=GPU-../../etc", "is not a GPU UUID"),
        (
            "NVIDIA_REQUIRE_CUDA=cuda>=13.0",
            "NVIDIA_REQUIRE_CUDA \"cuda>=13.0\": driver supports CUDA 12.2",
        ),
        (
            "NVIDIA_DRIVER_CAPABILITIES=compute,teleport",
            "unknown capability \"teleport\"",
        ),
    ] {
        let mut e = vec![env];
        if !env.starts_with("NVIDIA_VISIBLE") {
            e.push("NVIDIA_VISIBLE_DEVICES=all");
        }
        let out = run_gpu(&As::Root, &e, &["true"], |_| {});
        assert_eq!(out.code, 1, "{env}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(want), "{env}: {}", out.stderr);
    }
}

/// Turns a good rootfs into a hostile one.
type ImageBreaker = Box<dyn Fn(&std::path::Path)>;

#[test]
fn hostile_images_get_safe_placement_and_nothing_on_the_host() {
    require_root!();
    let host_cache = fs::read("/etc/ld.so.cache").unwrap();
    let cases: Vec<(&str, ImageBreaker)> = vec![
        (
            "libdir -> /",
            Box::new(|r| {
                fs::remove_dir_all(r.join("usr/lib/x86_64-linux-gnu")).ok();
                std::os::unix::fs::symlink("/", r.join("usr/lib/x86_64-linux-gnu")).unwrap();
            }),
        ),
        (
            "libdir -> ../../..",
            Box::new(|r| {
                fs::remove_dir_all(r.join("usr/lib/x86_64-linux-gnu")).ok();
                std::os::unix::fs::symlink("../../../../../..", r.join("usr/lib/x86_64-linux-gnu"))
                    .unwrap();
            }),
        ),
        (
            "etc -> /",
            Box::new(|r| {
                fs::remove_dir_all(r.join("etc")).unwrap();
                std::os::unix::fs::symlink("/", r.join("etc")).unwrap();
            }),
        ),
        (
            "ld.so.cache -> host file",
            Box::new(|r| {
                fs::remove_file(r.join("etc/ld.so.cache")).unwrap();
                std::os::unix::fs::symlink("/etc/shadow", r.join("etc/ld.so.cache")).unwrap();
            }),
        ),
        (
            "ld.so.cache garbage",
            Box::new(|r| {
                fs::write(
                    r.join("etc/ld.so.cache"),
                    b"glibc-ld.so.cache1.1\xff\xff\xff\xff garbage",
                )
                .unwrap();
            }),
        ),
    ];
    for (name, break_image) in cases {
        let bundle = Bundle::glibc(None);
        let probe =
            "ls /etc/shadow 2>/dev/null; cat /etc/ld.so.cache >/dev/null && echo cache-readable";
        bundle.set_process(
            &["/usr/bin/busybox", "sh", "-c", probe],
            &["NVIDIA_VISIBLE_DEVICES=0", "LD_PRELOAD=/evil.so"],
        );
        break_image(&bundle.rootfs());
        let rt = Runtime::new();
        let dir = bundle.dir.to_string_lossy();
        let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("hostile")]));
        assert!(
            out.code == 0 || (out.code == 1 && out.stderr.lines().count() == 1),
            "{name}: {} {}",
            out.code,
            out.stderr
        );
        // Nothing landed on the host.
        assert_eq!(
            fs::read("/etc/ld.so.cache").unwrap(),
            host_cache,
            "{name}: host cache changed"
        );
        for leaked in [
            "/libnvidia-ml.so.1",
            "/ld.so.cache",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        ] {
            assert!(
                !std::path::Path::new(leaked).exists(),
                "{name}: {leaked} created on the host"
            );
        }
        assert!(
            mounts_mentioning("libnvidia-ml").is_empty(),
            "{name}: mount left on the host"
        );
        assert!(rt.leftovers().is_empty(), "{name}: {:?}", rt.leftovers());
    }
}

#[test]
fn gpu_list_over_the_fake_host_is_exactly_the_real_files() {
    require_root!();
    let rt = Runtime::new();
    let out = rt.run(GpuFixtures::get().args(&["gpu", "list", "--json"]));
    out.ok();
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let names = |cap: &str| -> Vec<String> {
        let mut v: Vec<String> = list["files"][cap]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        f["hostPath"]
                            .as_str()
                            .unwrap()
                            .rsplit('/')
                            .next()
                            .unwrap()
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let v = "535.309.01";
    let want = |names: &[&str]| -> Vec<String> {
        let mut w: Vec<String> = names.iter().map(|n| n.replace("VER", v)).collect();
        w.sort();
        w
    };
    // What Debian's 535 packages ship, by package: libnvidia-ml1, libnvidia-cfg1,
    // nvidia-smi (utility); libcuda1, libcudadebugger1, libnvidia-allocator1,
    // libnvidia-nvvm4, libnvidia-ptxjitcompiler1, nvidia-cuda-mps (compute);
    // libnvidia-encode1, libnvcuvid1, libnvidia-opticalflow1 (video);
    // libegl-nvidia0, libnvidia-eglcore, libglx-nvidia0, libnvidia-glcore,
    // libgles-nvidia2, the glvnd and Vulkan vendor files and
    // xserver-xorg-video-nvidia's X module, GLX module and snippet (graphics).
    assert_eq!(
        names("utility"),
        want(&[
            "libnvidia-cfg.so.VER",
            "libnvidia-ml.so.VER",
            "nvidia-smi",
            "socket",
            "socket"
        ])
    );
    assert_eq!(
        names("compute"),
        want(&[
            "libcuda.so.VER",
            "libcudadebugger.so.VER",
            "libnvidia-allocator.so.VER",
            "libnvidia-nvvm.so.VER",
            "libnvidia-ptxjitcompiler.so.VER",
            "nvidia-cuda-mps-control",
            "nvidia-cuda-mps-server",
        ])
    );
    assert_eq!(
        names("video"),
        want(&[
            "libnvcuvid.so.VER",
            "libnvidia-encode.so.VER",
            "libnvidia-opticalflow.so.VER"
        ])
    );
    assert_eq!(
        names("graphics"),
        want(&[
            "10_nvidia.json",
            "libEGL_nvidia.so.VER",
            "libGLESv2_nvidia.so.VER",
            "libGLX_nvidia.so.VER",
            "libglxserver_nvidia.so.VER",
            "libnvidia-eglcore.so.VER",
            "libnvidia-glcore.so.VER",
            "libnvidia-glsi.so.VER",
            "libnvidia-tls.so.VER",
            "libnvidia-vulkan-producer.so.VER",
            "nvidia-drm-outputclass.conf",
            "nvidia_drv.so",
            "nvidia_icd.json",
            "nvidia_layers.json",
        ])
    );
    let nodes: Vec<&str> = list["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    let mut nodes = nodes;
    nodes.sort();
    assert_eq!(
        nodes,
        [
            "/dev/dri/card1",
            "/dev/dri/card2",
            "/dev/dri/renderD128",
            "/dev/dri/renderD129",
            "/dev/gdrdrv",
            "/dev/infiniband/rdma_cm",
            "/dev/infiniband/uverbs0",
            "/dev/nvidia-caps-imex-channels/channel0",
            "/dev/nvidia-caps-imex-channels/channel1",
            "/dev/nvidia-fs0",
            "/dev/nvidia-modeset",
            "/dev/nvidia-nvswitch0",
            "/dev/nvidia-nvswitchctl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidia0",
            "/dev/nvidia1",
            "/dev/nvidiactl"
        ]
    );
    // SONAMEs come from the ELF files themselves.
    let ml = list["files"]["utility"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["hostPath"].as_str().unwrap().contains("libnvidia-ml"))
        .unwrap();
    assert_eq!(ml["soname"], "libnvidia-ml.so.1");
}

#[test]
fn gpu_info_and_plan_describe_the_host_and_the_bundle() {
    require_root!();
    let rt = Runtime::new();
    let flags = GpuFixtures::get().flags();
    let mut args = flags.clone();
    args.extend(["gpu".into(), "info".into(), "--json".into()]);
    let info: serde_json::Value = serde_json::from_str(&rt.run(&args).stdout).unwrap();
    assert_eq!(info["driverVersion"], "535.309.01");
    assert_eq!(info["cudaVersion"], "12.2");
    assert_eq!(info["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(info["gpus"][1]["minor"], 1);

    let bundle = Bundle::glibc(None);
    bundle.set_process(
        &["true"],
        &[
            "NVIDIA_VISIBLE_DEVICES=1",
            "NVIDIA_DRIVER_CAPABILITIES=utility",
        ],
    );
    let mut args = flags.clone();
    args.extend([
        "gpu".into(),
        "plan".into(),
        bundle.dir.to_string_lossy().into_owned(),
        "--json".into(),
    ]);
    let first = rt.run(&args);
    first.ok();
    let second = rt.run(&args);
    assert_eq!(first.stdout, second.stdout, "plan is not deterministic");
    let plan: serde_json::Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!(plan["gpus"][0]["uuid"], info["gpus"][1]["uuid"]);
    let dests: Vec<&str> = plan["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["destination"].as_str().unwrap())
        .collect();
    assert!(
        dests.contains(&"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
        "{dests:?}"
    );
    assert!(!dests.iter().any(|d| d.contains("libcuda")), "{dests:?}");
    for m in plan["mounts"].as_array().unwrap() {
        let opts: Vec<&str> = m["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap())
            .collect();
        assert!(
            opts.contains(&"ro") && opts.contains(&"nosuid") && opts.contains(&"nodev"),
            "{m}"
        );
    }
}

#[test]
fn gpu_verify_reports_what_the_container_saw() {
    require_root!();
    for who in As::both() {
        let rt = Runtime::as_who(who.clone());
        let out = rt.run(GpuFixtures::get().args(&["gpu", "verify", "--gpus", "1"]));
        // The fake host has no kernel driver: verify says exactly that, and
        // fails, since the container cannot see the GPU.
        assert_eq!(out.code, 1, "{} {}", out.stdout, out.stderr);
        assert!(
            out.stdout
                .contains("requested:  1 -> 1 GPU(s): GPU-5a1e0001"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("nvidia-smi exit code 9"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("verdict:    no kernel driver"),
            "{}",
            out.stdout
        );
        assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    }
    // An image without a dynamic loader (busybox-static): nvidia-smi is
    // injected but cannot start, and verify says so instead of blaming
    // the device cgroup.
    let bundle = Bundle::busybox();
    let rt = Runtime::new();
    let rootfs = bundle.rootfs().to_string_lossy().into_owned();
    let out =
        rt.run(GpuFixtures::get().args(&["gpu", "verify", "--gpus", "0", "--rootfs", &rootfs]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("FAILED: nvidia-smi could not be started in the container (exec nvidia-smi: no such file or directory)"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("device cgroup"), "{}", out.stdout);
}

/// Read-only commands load NVML only in a child whose /dev is read-only:
/// against a driver without its kernel module, NVML as root would create
/// /dev/nvidiactl on the host.
#[test]
fn read_only_commands_change_nothing_in_the_hosts_dev() {
    require_root!();
    let listing = || -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir("/dev")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("skipped: this host has a real /dev/nvidiactl");
        return;
    }
    let before = listing();
    let rt = Runtime::new();
    for args in [
        &["gpu", "info"][..],
        &["gpu", "list"],
        &["gpu", "cdi"],
        &["doctor", "--gpu"],
    ] {
        let out = rt.run(GpuFixtures::get().args(args));
        assert_eq!(out.code, 0, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            !std::path::Path::new("/dev/nvidiactl").exists(),
            "{args:?} created /dev/nvidiactl on the host"
        );
    }
    assert_eq!(listing(), before);
}

/// A privileged container: CAP_SYS_ADMIN in its bounding set, as the
/// toolkit judges privilege.
fn privileged(c: &mut serde_json::Value) {
    c["process"]["capabilities"]["bounding"]
        .as_array_mut()
        .unwrap()
        .push(json!("CAP_SYS_ADMIN"));
}

/// The fake host's `flags` with `flag`'s value replaced by `path`.
fn flags_with(flags: &[String], flag: &str, path: &std::path::Path) -> Vec<String> {
    let mut flags = flags.to_vec();
    let at = flags.iter().position(|f| f == flag).unwrap();
    flags[at + 1] = path.to_string_lossy().into_owned();
    flags
}

/// Runs `args` in a glibc container under the gpurun config `config`
/// (GPURUN_CONFIG), logging to a JSON log as containerd's shim has it;
/// returns the output and the log.
fn run_with_config(
    who: &As,
    config: &str,
    env: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> (Ran, String) {
    run_with_config_flags(who, config, env, &[], edit)
}

/// `run_with_config` with `flags` after `run`.
fn run_with_config_flags(
    who: &As,
    config: &str,
    env: &[&str],
    flags: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> (Ran, String) {
    let bundle = Bundle::glibc(who.user());
    bundle.set_process(&["sh", "-c", NODES], env);
    bundle.edit(edit);
    let config_file = bundle.dir.join("gpurun.toml");
    let log = bundle.dir.join("log.json");
    fs::write(&config_file, config).unwrap();
    let rt = Runtime::as_who(who.clone());
    let how = BundleRun {
        flags,
        config: Some(&config_file),
        log: Some(&log),
        ..BundleRun::default()
    };
    let out = GpuFixtures::get().run_bundle(&rt, &bundle, &how);
    (out, fs::read_to_string(&log).unwrap_or_default())
}

const STRICT: &str = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n\
                      accept-nvidia-visible-devices-as-volume-mounts = true\n";

/// The device plugin's volume-mounts strategy: /dev/null bound at
/// /var/run/nvidia-container-devices/<device>.
fn allocate(device: &str) -> impl FnOnce(&mut serde_json::Value) + '_ {
    move |c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "destination": format!("/var/run/nvidia-container-devices/{device}"),
            "type": "bind",
            "source": "/dev/null",
            "options": ["bind", "ro"]
        }))
    }
}

fn warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["level"] == "warning")
        .map(|v| v["msg"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn on_a_shared_node_only_the_schedulers_allocation_counts() {
    require_root!();
    for who in As::both() {
        // An unprivileged tenant's own `all` gets nothing, with one warning.
        let (out, log) = run_with_config(&who, STRICT, &["NVIDIA_VISIBLE_DEVICES=all"], |_| {});
        assert_eq!(lines(&out), ["smi=127"], "{who:?}: {}", out.stderr);
        let warned = warnings(&log);
        assert_eq!(warned.len(), 1, "{log}");
        assert!(
            warned[0].contains("NVIDIA_VISIBLE_DEVICES=all") && warned[0].contains("unprivileged"),
            "{warned:?}"
        );
        // The allocation by volume mount is what it gets, env or not.
        let (out, log) =
            run_with_config(&who, STRICT, &["NVIDIA_VISIBLE_DEVICES=all"], allocate("1"));
        assert_eq!(
            lines(&out),
            ["/dev/nvidiactl", "/dev/nvidia1", "/dev/nvidia-uvm", "smi=9"],
            "{who:?}: {}",
            out.stderr
        );
        assert_eq!(warnings(&log).len(), 1, "{log}");
        // The CDI annotation wins over both.
        let (out, _) = run_with_config(&who, STRICT, &["NVIDIA_VISIBLE_DEVICES=all"], |c| {
            allocate("1")(c);
            c["annotations"] = json!({"cdi.k8s.io/gpurun": "nvidia.com/gpu=0"});
        });
        assert_eq!(
            lines(&out),
            ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "smi=9"],
            "{who:?}: {}",
            out.stderr
        );
        // A privileged container's env is honoured.
        let (out, _) = run_with_config(&who, STRICT, &["NVIDIA_VISIBLE_DEVICES=all"], privileged);
        assert_eq!(
            lines(&out),
            [
                "/dev/nvidiactl",
                "/dev/nvidia0",
                "/dev/nvidia1",
                "/dev/nvidia-uvm",
                "smi=9"
            ],
            "{who:?}: {}",
            out.stderr
        );
        // `gpurun run --gpus` is the invoker's own request.
        let (out, _) = run_with_config_flags(&who, STRICT, &[], &["--gpus", "0"], |_| {});
        assert_eq!(
            lines(&out),
            ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "smi=9"],
            "{who:?}: {}",
            out.stderr
        );
        // The toolkit's defaults: the env counts, volume mounts do not.
        let (out, log) = run_with_config(&who, "", &["NVIDIA_VISIBLE_DEVICES=0"], allocate("1"));
        assert_eq!(
            lines(&out),
            ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "smi=9"],
            "{who:?}: {}",
            out.stderr
        );
        assert!(
            warnings(&log)
                .iter()
                .any(|w| w.contains("as-volume-mounts is false")),
            "{log}"
        );
    }
}

#[test]
fn mig_config_and_monitor_are_refused_to_an_unprivileged_container() {
    require_root!();
    for who in As::both() {
        for var in [
            "NVIDIA_MIG_CONFIG_DEVICES=all",
            "NVIDIA_MIG_MONITOR_DEVICES=all",
        ] {
            let (out, _) = run_with_config(&who, "", &["NVIDIA_VISIBLE_DEVICES=0", var], |_| {});
            assert_eq!(out.code, 1, "{who:?} {var}: {}", out.stdout);
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            assert!(
                out.stderr.contains("refused in an unprivileged container"),
                "{var}: {}",
                out.stderr
            );
        }
    }
}

/// Lists the IMEX and gated nodes the container has, each with what an
/// open gives: `ok` (the fake host's numbers have no driver: ENXIO, so
/// the device cgroup let it through) or `EPERM`.
const EXTRA_NODES: &str = "for n in /dev/nvidia-caps-imex-channels/* /dev/nvidia-fs* /dev/infiniband/* /dev/gdrdrv /dev/nvidia-nvswitch*; do \
                           [ -c \"$n\" ] || continue; \
                           if head -c0 \"$n\" 2>&1 | grep -q 'not permitted'; then echo \"$n=EPERM\"; else echo \"$n=ok\"; fi; done; \
                           [ -f /etc/cufile.json ] && echo cufile; echo end";

fn extra_nodes(
    who: &As,
    config: &str,
    env: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<String> {
    let (out, _) = run_with_config(who, config, env, |c| {
        c["process"]["args"] = json!(["sh", "-c", EXTRA_NODES]);
        edit(c);
    });
    assert_eq!(out.code, 0, "{who:?} {env:?}: {}", out.stderr);
    out.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn imex_channels_by_each_request_form() {
    require_root!();
    let one = ["/dev/nvidia-caps-imex-channels/channel1=ok", "end"];
    for who in As::both() {
        // The env, with a GPU.
        let got = extra_nodes(
            &who,
            "",
            &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=1"],
            |_| {},
        );
        assert_eq!(got, one, "{who:?} env");
        // A bare `all` is no request.
        let got = extra_nodes(
            &who,
            "",
            &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=all"],
            |_| {},
        );
        assert_eq!(got, ["end"], "{who:?} all");
        // The device plugin's volume mount, where accepted.
        let got = extra_nodes(&who, STRICT, &[], |c| {
            allocate("0")(c);
            allocate("imex/1")(c);
        });
        assert_eq!(got, one, "{who:?} volume");
        // CDI names in an annotation: one channel, or all, with no GPU.
        let got = extra_nodes(&who, "", &[], |c| {
            c["annotations"] = json!({"cdi.k8s.io/imex": "nvidia.com/imex-channel=channel1"});
        });
        assert_eq!(got, one, "{who:?} CDI");
        let got = extra_nodes(&who, "", &[], |c| {
            c["annotations"] = json!({"cdi.k8s.io/imex": "nvidia.com/imex-channel=all"});
        });
        assert_eq!(
            got,
            [
                "/dev/nvidia-caps-imex-channels/channel0=ok",
                "/dev/nvidia-caps-imex-channels/channel1=ok",
                "end"
            ],
            "{who:?} CDI all"
        );
        // A channel the host lacks: one line, nothing made.
        let (out, _) = run_with_config(
            &who,
            "",
            &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=7"],
            |_| {},
        );
        assert_eq!(out.code, 1, "{who:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("IMEX channel 7: this host has no"),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn gated_devices_come_with_a_gpu_when_enabled() {
    require_root!();
    for who in As::both() {
        let got = extra_nodes(
            &who,
            "",
            &[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_GDS=enabled",
                "NVIDIA_MOFED=enabled",
                "NVIDIA_GDRCOPY=enabled",
                "NVIDIA_NVSWITCH=enabled",
            ],
            |_| {},
        );
        assert_eq!(
            got,
            [
                "/dev/nvidia-fs0=ok",
                "/dev/infiniband/rdma_cm=ok",
                "/dev/infiniband/uverbs0=ok",
                "/dev/gdrdrv=ok",
                "/dev/nvidia-nvswitch0=ok",
                "/dev/nvidia-nvswitchctl=ok",
                "cufile",
                "end"
            ],
            "{who:?}"
        );
        // The fabric manager's socket (NVSwitch systems) comes with utility.
        let (out, _) = run_with_config(&who, "", &["NVIDIA_VISIBLE_DEVICES=0"], |c| {
            c["process"]["args"] = json!(["sh", "-c", "[ -S /run/nvidia-fabricmanager/socket ] && echo fm; [ -S /run/nvidia-persistenced/socket ] && echo pd; echo end"]);
        });
        assert_eq!(lines(&out), ["fm", "pd", "end"], "{who:?}: {}", out.stderr);
        // By CDI name, one family.
        let got = extra_nodes(
            &who,
            "",
            &["NVIDIA_VISIBLE_DEVICES=0,nvidia.com/gdrcopy=all"],
            |_| {},
        );
        assert_eq!(got, ["/dev/gdrdrv=ok", "end"], "{who:?} CDI");
        // Only exactly "enabled", and only with a GPU.
        let got = extra_nodes(
            &who,
            "",
            &[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_GDS=true",
                "NVIDIA_MOFED=Enabled",
            ],
            |_| {},
        );
        assert_eq!(got, ["end"], "{who:?} not enabled");
        let (out, log) = run_with_config(
            &who,
            "",
            &["NVIDIA_GDS=enabled", "NVIDIA_GDRCOPY=enabled"],
            |c| {
                c["process"]["args"] = json!(["sh", "-c", EXTRA_NODES]);
            },
        );
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["end"],
            "{who:?} no GPU: {}",
            out.stderr
        );
        assert_eq!(
            warnings(&log)
                .iter()
                .filter(|w| w.contains("with a GPU request only"))
                .count(),
            2,
            "{log}"
        );
    }
}

#[test]
fn an_images_newer_cuda_compat_library_goes_first_in_the_linker_cache() {
    require_root!();
    let fixtures = GpuFixtures::get();
    // The host's libcuda is 535.309.01 (CUDA 12.2).
    for who in As::both() {
        for (case, config, used) in [
            ("note-listed", "", true),
            ("note-unlisted", "", false),
            ("plain-newer", "", true),
            ("plain-older", "", false),
            ("note-listed", "cuda-compat-mode = \"disabled\"\n", false),
        ] {
            let bundle = Bundle::glibc(who.user());
            fixtures.copy_compat(case, &bundle, "compat");
            bundle.set_process(
                &["sh", "-c", "ldconfig -p | grep 'libcuda.so.1 '"],
                &["NVIDIA_VISIBLE_DEVICES=0"],
            );
            let config_file = bundle.dir.join("gpurun.toml");
            fs::write(&config_file, config).unwrap();
            let rt = Runtime::as_who(who.clone());
            let dir = bundle.dir.to_string_lossy();
            let mut cmd = rt.command(fixtures.args(&["run", "--bundle", &dir, &unique("compat")]));
            cmd.env("GPURUN_CONFIG", &config_file);
            let out = run_cmd(&mut cmd, std::time::Duration::from_secs(120));
            assert_eq!(out.code, 0, "{who:?} {case}: {}", out.stderr);
            let want = if used {
                "=> /usr/local/cuda/compat/libcuda.so.1"
            } else {
                "=> /usr/lib/x86_64-linux-gnu/libcuda.so.1"
            };
            assert!(
                out.stdout.contains(want),
                "{who:?} {case} {config:?}: {}",
                out.stdout
            );
            // gpu plan says so, and why.
            let mut plan = rt.command(fixtures.args(&["gpu", "plan", &dir]));
            plan.env("GPURUN_CONFIG", &config_file);
            let plan = run_cmd(&mut plan, std::time::Duration::from_secs(60));
            if config.is_empty() {
                let line = plan
                    .stdout
                    .lines()
                    .find(|l| l.starts_with("CUDA compat"))
                    .unwrap_or_default();
                assert!(
                    line.contains(if used { " used: " } else { " not used: " }),
                    "{case}: {line:?} {}",
                    plan.stderr
                );
            } else {
                assert!(!plan.stdout.contains("CUDA compat"), "{}", plan.stdout);
            }
            assert!(rt.leftovers().is_empty());
        }
    }
}

/// Each node's access from inside (EACCES: the node's mode refused it;
/// EPERM: the device cgroup did; reached: both let it through, and with no
/// kernel driver the open then fails ENXIO), after the process's groups.
const GROUPS_AND_OPENS: &str = "grep '^Groups:' /proc/self/status; \
    for n in /dev/nvidiactl /dev/nvidia0 /dev/nvidia-uvm; do e=$(head -c0 $n 2>&1); \
    case \"$e\" in *'Permission denied'*) r=EACCES;; *'not permitted'*) r=EPERM;; *) r=reached;; esac; \
    echo $n=$r; done";

/// A copy of the fake host's dev root whose NVIDIA nodes are mode 0660,
/// group 44 (`NVreg_DeviceFileGID`, the video group), as some hosts set
/// them; with gpurun's flags pointing at it.
fn group_only_host(scratch: &Scratch) -> Vec<String> {
    let fixtures = GpuFixtures::get();
    let dev_root = scratch.path().join("devroot");
    fs::create_dir(&dev_root).unwrap();
    let script = format!(
        "set -e; cp -a {host}/dev {root}/dev; \
         for n in {root}/dev/nvidia*; do [ -c \"$n\" ] || continue; chgrp 44 \"$n\"; chmod 0660 \"$n\"; done",
        host = fixtures.dir.join("host").display(),
        root = dev_root.display()
    );
    let out = run_cmd(Command::new("sh").arg("-c").arg(script), TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    flags_with(&fixtures.flags(), "--dev-root", &dev_root)
}

/// `GROUPS_AND_OPENS` in `bundle`, run with `flags` then `run`, by root
/// (a user from `user_cmd` instead, when given) under the gpurun config
/// `config`.
fn run_groups_and_opens(
    rt: &Runtime,
    bundle: &Bundle,
    flags: &[String],
    config: &str,
    user_cmd: Option<Command>,
) -> Ran {
    bundle.edit(|c| {
        c["process"]["args"] = json!(["sh", "-c", GROUPS_AND_OPENS]);
        c["process"]["env"] = json!([
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "NVIDIA_VISIBLE_DEVICES=0"
        ]);
    });
    let config_file = bundle.dir.join("gpurun.toml");
    fs::write(&config_file, config).unwrap();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = vec!["--root".into(), rt.root.to_string_lossy().into_owned()];
    args.extend_from_slice(flags);
    args.extend(["run", "--bundle", &dir, &unique("groups")].map(String::from));
    let mut cmd = match user_cmd {
        Some(mut cmd) => {
            cmd.arg(&rt.bin).args(&args);
            cmd
        }
        None => {
            let mut cmd = Command::new(&rt.bin);
            cmd.args(&args);
            cmd
        }
    };
    cmd.env("GPURUN_CONFIG", &config_file);
    let out = run_cmd(&mut cmd, std::time::Duration::from_secs(120));
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    out
}

/// The process's supplementary groups and each node's access.
fn groups_and_opens(
    rt: &Runtime,
    bundle: &Bundle,
    flags: &[String],
    config: &str,
    user_cmd: Option<Command>,
) -> (String, Vec<String>) {
    let out = run_groups_and_opens(rt, bundle, flags, config, user_cmd);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let mut lines = out.stdout.lines();
    let groups = lines.next().unwrap_or_default().to_owned();
    (groups, lines.map(str::to_owned).collect())
}

fn has_group(groups_line: &str, gid: &str) -> bool {
    groups_line.split_whitespace().skip(1).any(|g| g == gid)
}

const ALL_REACHED: [&str; 3] = [
    "/dev/nvidiactl=reached",
    "/dev/nvidia0=reached",
    "/dev/nvidia-uvm=reached",
];
const ALL_REFUSED: [&str; 3] = [
    "/dev/nvidiactl=EACCES",
    "/dev/nvidia0=EACCES",
    "/dev/nvidia-uvm=EACCES",
];

/// A host whose nodes are 0660 and group 44: a container user (uid 1000,
/// no capability) gets group 44 and opens them; with the feature turned
/// off (`device-node-groups = false`) the same run gets EACCES from the
/// node's mode, which is what the group alone overcomes (the device cgroup
/// allows the nodes either way: EPERM would be its refusal).
#[test]
fn a_nodes_group_is_given_to_the_container_user() {
    require_root!();
    let scratch = Scratch::new("node-groups");
    let flags = group_only_host(&scratch);
    let as_user_1000 = |c: &mut serde_json::Value| {
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    };
    let rt = Runtime::new();
    // gpurun itself in group 27: the process gets the spec's groups and
    // the nodes', never the runtime's own (as runc), unless crun's
    // keep_original_groups annotation asks for exactly the runtime's.
    let in_group_27 = || {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--groups=27", "--"]);
        Some(cmd)
    };
    let keep_groups = |c: &mut serde_json::Value| {
        c["annotations"] = json!({"run.oci.keep_original_groups": "1"});
    };
    for (config, keep, want_groups, want) in [
        ("", false, "44", ALL_REACHED),
        ("device-node-groups = false\n", false, "", ALL_REFUSED),
        ("", true, "27", ALL_REFUSED),
    ] {
        let bundle = Bundle::glibc(None);
        bundle.edit(as_user_1000);
        if keep {
            bundle.edit(keep_groups);
        }
        let (groups, opens) = groups_and_opens(&rt, &bundle, &flags, config, in_group_27());
        let held: Vec<&str> = groups.split_whitespace().skip(1).collect();
        assert_eq!(
            held.join(" "),
            want_groups,
            "{config:?} keep {keep}: {groups}"
        );
        assert_eq!(opens, want, "{config:?} keep {keep}: {groups}");
    }
    // A root-started user namespace (hostUsers: false, userns-remap)
    // whose gid mappings hold host 44: the process holds it as 44 inside.
    // One that does not map 44 cannot give it (the nodes stay closed).
    for (maps_44, want) in [(true, ALL_REACHED), (false, ALL_REFUSED)] {
        let bundle = Bundle::glibc(None);
        bundle.edit(as_user_1000);
        bundle.map_root_to(100000);
        if maps_44 {
            bundle.edit(|c| {
                c["linux"]["gidMappings"] = json!([
                    {"containerID": 0, "hostID": 100000, "size": 44},
                    {"containerID": 44, "hostID": 44, "size": 1},
                    {"containerID": 45, "hostID": 100045, "size": 65491}
                ]);
            });
        }
        let chowned = Command::new("chown")
            .args(["-R", "100000:100000"])
            .arg(bundle.rootfs())
            .status()
            .unwrap();
        assert!(chowned.success());
        let (groups, opens) = groups_and_opens(&rt, &bundle, &flags, "", None);
        assert_eq!(has_group(&groups, "44"), maps_44, "userns: {groups}");
        assert_eq!(opens, want, "userns maps 44: {maps_44}: {groups}");
    }
}

/// Rootless, setgroups is denied in the container's user namespace: the
/// process keeps the invoking user's own groups (unmapped inside, so
/// /proc shows them as the overflow gid 65534), and a user in group 44
/// opens the nodes. The same user without it is refused before anything
/// is made, in one line that names the node and the fix.
#[test]
fn rootless_the_users_own_group_opens_the_nodes() {
    require_root!();
    let user = TestUser::get();
    let scratch = Scratch::new("node-groups-rootless");
    let flags = group_only_host(&scratch);
    for in_group_44 in [true, false] {
        let rt = Runtime::as_who(As::User(user.clone()));
        let bundle = Bundle::glibc(Some(&user));
        let mut setpriv = Command::new("setpriv");
        setpriv
            .arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .arg(if in_group_44 {
                "--groups=44"
            } else {
                "--clear-groups"
            })
            .arg("--");
        user.apply_env(&mut setpriv);
        if in_group_44 {
            let (groups, opens) = groups_and_opens(&rt, &bundle, &flags, "", Some(setpriv));
            assert!(has_group(&groups, "65534"), "{groups}");
            assert_eq!(opens, ALL_REACHED, "{groups}");
        } else {
            let out = run_groups_and_opens(&rt, &bundle, &flags, "", Some(setpriv));
            assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            assert!(
                out.stderr.contains("cannot open it (EACCES")
                    && out.stderr.contains("a group of yours"),
                "{}",
                out.stderr
            );
        }
    }
}

/// A musl image (Alpine's layout, with gcompat's /lib64, where gpurun puts
/// the driver's libraries): musl's loader reads no ld.so.cache, so the
/// container gets /etc/ld-musl-<arch>.path with the image's folders (its
/// own file's, else musl's defaults) and the injected one, and a musl
/// program's dlopen finds libcuda.so.1 and libnvidia-ml.so.1 there (it
/// loads them, or fails later on a glibc symbol musl lacks: not "No such
/// file"). Root and rootless.
#[test]
fn a_musl_image_finds_the_driver_libraries() {
    require_root!();
    let arch = std::env::consts::ARCH;
    let path_file = format!("/etc/ld-musl-{arch}.path");
    let probe = format!(
        "cat {path_file} | tr '\\n' ' '; echo; /usr/bin/musl_dlopen libcuda.so.1 libnvidia-ml.so.1"
    );
    for who in As::both() {
        for own in [None, Some("/lib:/usr/lib\n/opt/own\n")] {
            let bundle = Bundle::musl(who.user());
            if let Some(text) = own {
                fs::write(bundle.rootfs().join(&path_file[1..]), text).unwrap();
            }
            bundle.edit(|c| {
                c["process"]["args"] = json!(["/bin/sh", "-c", probe]);
                c["process"]["env"] = json!(["PATH=/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES=0"]);
            });
            let rt = Runtime::as_who(who.clone());
            let dir = bundle.dir.to_string_lossy();
            let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("musl")]));
            assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
            assert_eq!(out.code, 0, "{who:?} {own:?}: {}{}", out.stdout, out.stderr);
            let want_folders = match own {
                None => "/lib /usr/local/lib /usr/lib /lib64 ",
                Some(_) => "/lib /usr/lib /opt/own /lib64 ",
            };
            assert_eq!(
                lines(&out),
                [
                    want_folders,
                    "libcuda.so.1 found",
                    "libnvidia-ml.so.1 found"
                ],
                "{who:?} {own:?}: {}",
                out.stderr
            );
            // The image's own file is left as it was.
            let image_file = fs::read_to_string(bundle.rootfs().join(&path_file[1..])).ok();
            assert_eq!(image_file.as_deref(), own, "{who:?}");
        }
    }
}

/// Every NVIDIA node the container holds (top-level, MIG caps, IMEX
/// channels), then nvidia-smi's exit.
const ALL_NVIDIA_NODES: &str = "for n in /dev/nvidia* /dev/nvidia-caps/* /dev/nvidia-caps-imex-channels/*; do \
                                [ -c \"$n\" ] && echo \"$n\"; done; nvidia-smi >/dev/null 2>&1; echo smi=$?";

/// `management.nvidia.com/gpu=all`, as the GPU Operator's own pods ask
/// for it in CDI mode with its toolkit off: every GPU, the control nodes
/// (modeset and uvm-tools too), the IMEX channels, not GDS's or NVSwitch's
/// nodes (gated devices of their own), and the utility libraries
/// (nvidia-smi's 9). On a shared node an unprivileged container is refused
/// in one line and nothing is made; a privileged one gets it. A name other
/// than `all` is refused.
#[test]
fn the_management_device_gets_every_node_and_a_tenant_is_refused_it() {
    require_root!();
    let management = |c: &mut serde_json::Value| {
        c["process"]["args"] = json!(["sh", "-c", ALL_NVIDIA_NODES]);
        c["annotations"] = json!({"cdi.k8s.io/mgmt": "management.nvidia.com/gpu=all"});
    };
    let want = [
        "/dev/nvidia-modeset",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-caps-imex-channels/channel0",
        "/dev/nvidia-caps-imex-channels/channel1",
        "smi=9",
    ];
    for who in As::both() {
        let (out, _) = run_with_config(&who, "", &[], management);
        assert_eq!(lines(&out), want, "{who:?}: {}", out.stderr);
        // A tenant on a shared node.
        let (out, _) = run_with_config(&who, STRICT, &[], management);
        assert_eq!(out.code, 1, "{who:?}: {}", out.stdout);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr
                .contains("management.nvidia.com/gpu=all: refused in an unprivileged container"),
            "{}",
            out.stderr
        );
        // The operator's privileged pod on the same node.
        let (out, _) = run_with_config(&who, STRICT, &[], |c| {
            management(c);
            privileged(c);
        });
        assert_eq!(lines(&out), want, "{who:?} privileged: {}", out.stderr);
    }
    // `gpu cdi` writes the same node set as the management spec's one device.
    let out = Runtime::new().run(GpuFixtures::get().args(&[
        "gpu",
        "cdi",
        "--kind",
        "management.nvidia.com/gpu",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let spec: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(spec["kind"], "management.nvidia.com/gpu");
    assert_eq!(spec["devices"].as_array().unwrap().len(), 1);
    assert_eq!(spec["devices"][0]["name"], "all");
    let mut paths: Vec<&str> = spec["devices"][0]["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    paths.sort();
    let mut nodes: Vec<&str> = want[..want.len() - 1].to_vec();
    nodes.sort();
    assert_eq!(paths, nodes);
    let (out, _) = run_with_config(&As::Root, "", &[], |c| {
        management(c);
        c["annotations"] = json!({"cdi.k8s.io/mgmt": "management.nvidia.com/gpu=0"});
    });
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("has one device, \"all\""),
        "{}",
        out.stderr
    );
}

/// The fake host's flags with its driver root replaced by a copy (hard
/// links) in `scratch`, changed by the shell snippet `then` (run with the
/// copy as `$D`).
fn linked_driver_root(scratch: &Scratch, then: &str) -> Vec<String> {
    let fixtures = GpuFixtures::get();
    let driver = scratch.path().join("driver");
    let out = run_cmd(
        Command::new("sh")
            .arg("-c")
            .arg(format!("set -e; cp -al \"$S\" \"$D\"; {then}"))
            .env("S", fixtures.dir.join("host/driver"))
            .env("D", &driver),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    flags_with(&fixtures.flags(), "--driver-root", &driver)
}

/// MPS as the Kubernetes plugins hand it over: the DRA driver binds its
/// claim's pipe directory at `/tmp/nvidia-mps` and its shm at `/dev/shm`;
/// the device plugin binds its own pipe directory elsewhere, named by
/// `CUDA_MPS_PIPE_DIRECTORY`, and its shm at `/dev/shm`. On a host with a
/// default MPS pipe directory of its own, each container reaches its
/// allocation's pipe and shm, never the host's default, with the default
/// settings and a shared node's. (Before, gpurun's own bind of the host's
/// `/tmp/nvidia-mps` came after the DRA driver's and covered it.)
#[test]
fn both_mps_forms_reach_their_allocations_pipe_and_shm() {
    require_root!();
    let scratch = Scratch::new("mps-forms");
    let flags = linked_driver_root(
        &scratch,
        "mkdir -p \"$D/tmp/nvidia-mps\"; echo host > \"$D/tmp/nvidia-mps/whose\"",
    );
    for (form, pipe_at) in [("dra", "/tmp/nvidia-mps"), ("plugin", "/mps/pipe")] {
        let claim = scratch.path().join(form);
        for (dir, whose) in [("pipe", form), ("shm", "shm")] {
            fs::create_dir_all(claim.join(dir)).unwrap();
            fs::write(claim.join(dir).join("whose"), whose).unwrap();
        }
        for config in ["", STRICT] {
            let bundle = Bundle::glibc(None);
            let probe = format!("cat {pipe_at}/whose; echo; cat /dev/shm/whose");
            let pipe_env = format!("CUDA_MPS_PIPE_DIRECTORY={pipe_at}");
            bundle.set_process(
                &["sh", "-c", &probe],
                &["NVIDIA_VISIBLE_DEVICES=0", &pipe_env],
            );
            bundle.edit(allocate("0"));
            bundle.edit(|c| {
                let mounts = c["mounts"].as_array_mut().unwrap();
                mounts.retain(|m| m["destination"] != "/dev/shm");
                for (dir, at) in [("pipe", pipe_at), ("shm", "/dev/shm")] {
                    mounts.push(json!({"destination": at, "type": "bind",
                        "source": claim.join(dir), "options": ["rbind", "rw"]}));
                }
            });
            let out = run_on_host(&flags, &bundle, Some(config));
            assert_eq!(
                lines(&out),
                [form, "shm"],
                "{form}, config {config:?}: {}",
                out.stderr
            );
        }
    }
}

/// `run` of `bundle` as root over the host `flags` name (a driver root of
/// the test's own), with `config` as gpurun's config file where given;
/// asserts nothing was left.
fn run_on_host(flags: &[String], bundle: &Bundle, config: Option<&str>) -> Ran {
    let config_file = bundle.dir.join("gpurun.toml");
    if let Some(config) = config {
        fs::write(&config_file, config).unwrap();
    }
    let how = BundleRun {
        host: Some(flags),
        config: config.map(|_| config_file.as_path()),
        ..BundleRun::default()
    };
    GpuFixtures::get().run_bundle(&Runtime::new(), bundle, &how)
}

/// The OpenCL ICD loader's vendor file, which toolkit 1.19 mounts: on a
/// host that has `/etc/OpenCL/vendors/nvidia.icd` (Debian's
/// nvidia-opencl-common; the fake host's driver root copied by hard links,
/// with the file added), a compute container gets it at the same path,
/// read-only; a utility-only one does not.
#[test]
fn the_opencl_icd_comes_with_compute() {
    require_root!();
    let scratch = Scratch::new("opencl");
    let flags = linked_driver_root(
        &scratch,
        "mkdir -p \"$D/etc/OpenCL/vendors\"; echo libnvidia-opencl.so.1 > \"$D/etc/OpenCL/vendors/nvidia.icd\"",
    );
    let probe = "cat /etc/OpenCL/vendors/nvidia.icd 2>/dev/null || echo none; \
                 grep ' /etc/OpenCL/vendors/nvidia.icd ' /proc/self/mountinfo | grep -c ' ro,'";
    for (caps, want) in [
        ("compute,utility", ["libnvidia-opencl.so.1", "1"]),
        ("utility", ["none", "0"]),
    ] {
        let bundle = Bundle::glibc(None);
        bundle.set_process(
            &["sh", "-c", probe],
            &[
                "NVIDIA_VISIBLE_DEVICES=0",
                &format!("NVIDIA_DRIVER_CAPABILITIES={caps}"),
            ],
        );
        let out = run_on_host(&flags, &bundle, None);
        assert_eq!(lines(&out), want, "{caps}: {}", out.stderr);
    }
}

/// The host's default MPS pipe directory (/tmp/nvidia-mps, writable, the
/// way to the host's default MPS server) comes with compute, as the toolkit
/// mounts it; on a shared node an unprivileged container (its GPU given by
/// the device plugin's volume mount) does not get it, and a privileged one
/// does.
#[test]
fn a_tenant_on_a_shared_node_gets_no_host_mps_directory() {
    require_root!();
    let scratch = Scratch::new("mps");
    let flags = linked_driver_root(&scratch, "mkdir -p \"$D/tmp/nvidia-mps\"");
    let probe = "grep -c ' /tmp/nvidia-mps ' /proc/self/mountinfo";
    for (config, privileged_pod, want) in
        [("", false, "1"), (STRICT, false, "0"), (STRICT, true, "1")]
    {
        let bundle = Bundle::glibc(None);
        bundle.set_process(&["sh", "-c", probe], &["NVIDIA_VISIBLE_DEVICES=0"]);
        bundle.edit(allocate("0"));
        if privileged_pod {
            bundle.edit(privileged);
        }
        let out = run_on_host(&flags, &bundle, Some(config));
        assert_eq!(
            out.stdout.trim(),
            want,
            "{config:?} privileged {privileged_pod}: {}",
            out.stderr
        );
    }
}
