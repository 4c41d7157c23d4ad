//! User namespaces started by root, as Kubernetes `hostUsers: false`,
//! Docker's `userns-remap` and Podman's `--userns=auto` give them: the spec
//! has a `user` namespace and maps the container's root to host uid
//! 100000 with 65536 ids. GPUs must work there as rootless and as plain
//! root: device nodes bind-mounted (mknod is not allowed), the driver
//! files, the mount-point layer and the linker cache reached by the
//! container's own root, and the device rules still exactly the nodes
//! given.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use gpurun_tests::*;

/// What the container sees: its GPU nodes (and whether they are char
/// devices), nvidia-smi's exit code, cudaGetDeviceCount's, and how many
/// libcuda.so.1 entries its linker cache has.
const PROBE: &str = "for n in /dev/nvidia0 /dev/nvidia1; do [ -c $n ] && echo $n; done; \
     nvidia-smi >/dev/null 2>&1; echo smi=$?; \
     LD_LIBRARY_PATH=/opt/cudart cuda_probe >/dev/null 2>&1; echo cuda=$?; \
     echo libcuda=$(ldconfig -p | grep -c 'libcuda.so.1 '); id -u";

const HOST_ROOT: u32 = 100000;

fn userns_bundle(env: &[&str], args: &[&str]) -> Bundle {
    let bundle = Bundle::glibc(None);
    bundle.set_process(args, env);
    bundle.map_root_to(HOST_ROOT);
    // The image as an engine unpacks it for that mapping.
    let out = run_cmd(
        std::process::Command::new("chown")
            .arg("-R")
            .arg(format!("{HOST_ROOT}:{HOST_ROOT}"))
            .arg(bundle.rootfs()),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    bundle
}

#[test]
fn a_gpu_container_in_a_user_namespace_started_by_root() {
    require_root!();
    let bundle = userns_bundle(&["NVIDIA_VISIBLE_DEVICES=0"], &["sh", "-c", PROBE]);
    let before = tree_fingerprint(&bundle.rootfs());
    let rt = Runtime::new();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("userns")]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout, "/dev/nvidia0\nsmi=9\ncuda=100\nlibcuda=1\n0\n",
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    assert_eq!(
        tree_changes(&before, &tree_fingerprint(&bundle.rootfs())),
        Vec::<String>::new(),
        "the image was changed"
    );
    // The state root lets the container's root through, and no further:
    // a container's own directory (its config holds the environment)
    // stays its owner's.
    let root_mode = fs::metadata(&rt.root).unwrap().permissions().mode() & 0o777;
    assert_eq!(root_mode, 0o711, "state root mode {root_mode:o}");
    let bundle = userns_bundle(&["NVIDIA_VISIBLE_DEVICES=0", "SECRET=x"], &["sleep", "300"]);
    let id = unique("userns-dir");
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = rt.run(GpuFixtures::get().args(&["create", "--bundle", &dir, &id]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let own = fs::metadata(rt.root.join(&id)).unwrap();
    assert_eq!(
        own.mode() & 0o777,
        0o700,
        "container dir mode {:o}",
        own.mode()
    );
    // The device rules hold exactly the nodes given (cgroup v1 lists them;
    // on v2 they are an eBPF program).
    if let Ok(list) = fs::read_to_string(format!("/sys/fs/cgroup/devices/gpurun/{id}/devices.list"))
    {
        let rules: Vec<&str> = list.lines().collect();
        assert!(rules.contains(&"c 195:0 rwm"), "{rules:?}");
        assert!(
            !rules.iter().any(|r| r.starts_with("c 195:1 ")),
            "{rules:?}"
        );
        assert!(
            !rules.contains(&"a *:* rwm"),
            "everything allowed: {rules:?}"
        );
    }
    rt.run(["delete", "--force", &id]).ok();
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}

/// The state root stays 0700 for a container without a user namespace,
/// and for one in a user namespace that gets no GPU files: only the GPU
/// files of a root-started user namespace open it, and only to traverse.
#[test]
fn the_state_root_stays_closed_without_a_user_namespace() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["true"], &["NVIDIA_VISIBLE_DEVICES=0"]);
    let rt = Runtime::new();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("plain")]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mode = fs::metadata(&rt.root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "state root mode {mode:o}");
    // Nor does a user namespace that gets no GPU files.
    let bundle = userns_bundle(&[], &["true"]);
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = rt.run(["run", "--bundle", &dir, &unique("userns-plain")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mode = fs::metadata(&rt.root).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o700,
        "state root mode {mode:o} after a plain userns run"
    );
    assert!(Path::new(&rt.root).is_dir());
}

/// The gated devices (GPUDirect Storage, MOFED, GDRCopy, NVSwitch) and an
/// IMEX channel, asked for beside a GPU, reach a container in a user
/// namespace started by root as bind-mounted character devices (mknod is
/// not allowed there), each one opened through to its (absent) driver.
#[test]
fn gated_devices_and_imex_channels_in_a_user_namespace_started_by_root() {
    require_root!();
    let nodes = [
        "/dev/nvidia-fs0",
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/uverbs0",
        "/dev/gdrdrv",
        "/dev/nvidia-nvswitch0",
        "/dev/nvidia-nvswitchctl",
        "/dev/nvidia-caps-imex-channels/channel1",
    ];
    // Each node: a char device, and an open that gets past the device
    // rules (ENXIO/ENODEV from the missing driver), not EPERM.
    let probe = format!(
        "for n in {}; do [ -c $n ] || {{ echo $n=missing; continue; }}; \
         if err=$(head -c1 $n 2>&1 >/dev/null); then echo $n=open; \
         else case \"$err\" in *'not permitted'*) echo $n=denied ;; *) echo $n=through ;; esac; fi; done",
        nodes.join(" ")
    );
    let bundle = userns_bundle(
        &[
            "NVIDIA_VISIBLE_DEVICES=0",
            "NVIDIA_GDS=enabled",
            "NVIDIA_MOFED=enabled",
            "NVIDIA_GDRCOPY=enabled",
            "NVIDIA_NVSWITCH=enabled",
            "NVIDIA_IMEX_CHANNELS=1",
        ],
        &["sh", "-c", &probe],
    );
    let rt = Runtime::new();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("userns-gated")]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let want: Vec<String> = nodes.iter().map(|n| format!("{n}=through")).collect();
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        want,
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}
