//! cgroup v2, also on a v1 (hybrid) host such as this one: there, every
//! gpurun command runs in a private mount namespace where /sys/fs/cgroup is
//! the unified hierarchy mounted again as cgroup2, so libcgroups takes its
//! v2 path; the test sees the same hierarchy at /sys/fs/cgroup/unified. A
//! hybrid host binds every controller to v1, so limits are not checked
//! here; membership, device rules (a BPF program) and cleanup are.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpurun_tests::*;
use serde_json::json;

/// How this host offers a v2 hierarchy: the path the test reads it at, and
/// whether gpurun must be run with it mounted over /sys/fs/cgroup. `None`,
/// with a note that the test is skipped, on a host without one.
fn v2_hierarchy() -> Option<(PathBuf, bool)> {
    let is_cgroup2 = |p: &str| {
        nix::sys::statfs::statfs(p)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
    };
    if is_cgroup2("/sys/fs/cgroup") {
        Some(("/sys/fs/cgroup".into(), false))
    } else if is_cgroup2("/sys/fs/cgroup/unified") {
        Some(("/sys/fs/cgroup/unified".into(), true))
    } else {
        eprintln!("skipped: no cgroup v2 hierarchy on this host");
        None
    }
}

/// gpurun ARGS, seeing cgroup v2 at /sys/fs/cgroup.
fn gpurun_v2(rt: &Runtime, remount: bool, args: &[&str]) -> Ran {
    gpurun_v2_via(rt, remount, &[], args)
}

/// The same, with `wrapper` (a command and its arguments) in front of gpurun.
fn gpurun_v2_via(rt: &Runtime, remount: bool, wrapper: &[&str], args: &[&str]) -> Ran {
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"]);
    if remount {
        cmd.arg("umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec \"$@\"");
    } else {
        cmd.arg("exec \"$@\"");
    }
    cmd.arg("sh")
        .args(wrapper)
        .arg(gpurun_bin())
        .arg("--root")
        .arg(&rt.root)
        .args(args);
    run_cmd(&mut cmd, TIMEOUT)
}

/// `gpurun run` of the bundle at `dir` under `strace -f -e trace=SYSCALLS`,
/// seeing cgroup v2 at /sys/fs/cgroup: its result and the trace.
fn run_v2_traced(rt: &Runtime, remount: bool, syscalls: &str, dir: &Path) -> (Ran, String) {
    let scratch = Scratch::new("v2strace");
    let trace = scratch.path().join("trace");
    let trace_arg = trace.to_string_lossy().into_owned();
    let filter = format!("trace={syscalls}");
    let strace = ["strace", "-f", "-qq", "-e", &filter, "-o", &trace_arg];
    let dir = dir.to_string_lossy().into_owned();
    let out = gpurun_v2_via(
        rt,
        remount,
        &strace,
        &["run", "--bundle", &dir, &unique("v2trace")],
    );
    let trace = fs::read_to_string(&trace).unwrap_or_default();
    (out, trace)
}

#[test]
fn v2_container_processes_share_its_cgroup_and_its_device_rules() {
    require_root!();
    let Some((hierarchy, remount)) = v2_hierarchy() else {
        return;
    };
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    // Rules apply in order: this one comes after the default allow of
    // /dev/null and takes writing to it away again.
    bundle.edit(|c| {
        c["linux"]["resources"]["devices"] = json!([
            {"allow": false, "access": "rwm"},
            {"allow": false, "type": "c", "major": 1, "minor": 3, "access": "w"}
        ]);
    });
    let id = unique("v2");
    let dir = bundle.dir.to_string_lossy().into_owned();
    gpurun_v2(&rt, remount, &["run", "-d", "--bundle", &dir, &id]).ok();
    let state: serde_json::Value =
        serde_json::from_str(&gpurun_v2(&rt, remount, &["state", &id]).stdout).unwrap();
    let init = state["pid"].as_i64().unwrap();

    let ours = format!("/gpurun/{id}");
    let table = fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap();
    assert!(
        table.lines().any(|l| l == format!("0::{ours}")),
        "init's cgroups: {table}"
    );

    // An exec'd process joins the same cgroup and meets the same rules.
    let out = gpurun_v2(
        &rt,
        remount,
        &[
            "exec",
            &id,
            "sh",
            "-c",
            "(: > /dev/null) 2>&1; echo exit=$?",
        ],
    );
    assert!(out.stdout.contains("exit=1"), "{out:?}");
    assert!(out.stdout.contains("Operation not permitted"), "{out:?}");
    let out = gpurun_v2(&rt, remount, &["exec", "-d", &id, "sleep", "302"]);
    out.ok();
    let procs = || {
        fs::read_to_string(hierarchy.join(&ours[1..]).join("cgroup.procs"))
            .unwrap()
            .lines()
            .count()
    };
    for _ in 0..100 {
        if procs() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(procs(), 2, "init and the exec'd process");

    gpurun_v2(&rt, remount, &["delete", "--force", &id]).ok();
    assert!(!hierarchy.join(&ours[1..]).exists(), "cgroup left behind");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// The control for the test above: without the deny rule, /dev/null
/// opens, so the failure there comes from the device program.
#[test]
fn v2_default_device_rules_allow_dev_null() {
    require_root!();
    let Some((_, remount)) = v2_hierarchy() else {
        return;
    };
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "(: > /dev/null) 2>&1; echo exit=$?"]);
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = gpurun_v2(&rt, remount, &["run", "--bundle", &dir, &unique("v2null")]);
    out.ok();
    assert_eq!(out.stdout.trim(), "exit=0");
    assert!(rt.leftovers().is_empty());
}

/// On v2 the container's first process is cloned straight into its cgroup
/// (CLONE_INTO_CGROUP): nothing is moved through `cgroup.procs`, which would
/// cost an RCU grace period on every start. Seen from outside with strace.
#[test]
fn v2_start_clones_into_the_cgroup_and_moves_nothing() {
    require_root!();
    let Some((_, remount)) = v2_hierarchy() else {
        return;
    };
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let (out, trace) = run_v2_traced(&rt, remount, "openat,clone3", &bundle.dir);
    out.ok();
    assert!(
        trace.contains("CLONE_INTO_CGROUP"),
        "no clone into the cgroup:\n{trace}"
    );
    let moves: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("cgroup.procs") && l.contains("O_WRONLY"))
        .collect();
    assert!(moves.is_empty(), "moved through cgroup.procs: {moves:?}");
    assert!(rt.leftovers().is_empty());
}

/// On v2 a container's cgroup path names one cgroup, below the root: a
/// cgroup of the same relative path below another top-level cgroup (here
/// holding a process) is someone else's. It neither stops the container
/// (on v1 each controller's directory is the container's) nor is touched.
#[test]
fn v2_a_cgroup_of_the_same_path_below_another_is_not_the_containers() {
    require_root!();
    let Some((v2, remount)) = v2_hierarchy() else {
        return;
    };
    let id = unique("v2same");
    let other = v2.join(unique("v2other"));
    let decoy = other.join("gpurun-same").join(&id);
    fs::create_dir_all(&decoy).unwrap();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    fs::write(decoy.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| c["linux"]["cgroupsPath"] = json!(format!("/gpurun-same/{id}")));
    let dir = bundle.dir.to_string_lossy().into_owned();
    let out = gpurun_v2(&rt, remount, &["run", "--bundle", &dir, &id]);
    let alive = sleeper.try_wait().unwrap().is_none();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    for d in [&decoy, &decoy.parent().unwrap().to_path_buf(), &other] {
        let _ = fs::remove_dir(d);
    }
    let _ = fs::remove_dir(v2.join("gpurun-same"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(alive, "the other cgroup's process was killed");
    assert!(rt.leftovers().is_empty());
}

/// A container with no cgroup namespace of its own gets the host's cgroup2
/// mount bound (read-only, as the spec asks), not a new cgroup2 mount: in
/// the host's cgroup namespace a new mount applies its options to the whole
/// hierarchy (clearing systemd's `nsdelegate`), and kernel 6.18 makes every
/// start wait for an RCU grace period there. It sees the whole hierarchy,
/// as runc's new mount shows it. With a cgroup namespace, the container's
/// own cgroup2 mount is made as before. Seen from outside with strace.
#[test]
fn v2_without_a_cgroup_namespace_the_host_mount_is_bound() {
    require_root!();
    let Some((_, remount)) = v2_hierarchy() else {
        return;
    };
    let rt = Runtime::new();
    let probe =
        "ls /sys/fs/cgroup | grep -qx gpurun && echo whole; (: > /sys/fs/cgroup/x) 2>&1; true";
    for cgroupns in [false, true] {
        let bundle = Bundle::busybox();
        bundle.set_args(&["sh", "-c", probe]);
        bundle.edit(|c| {
            let namespaces = c["linux"]["namespaces"].as_array_mut().unwrap();
            namespaces.retain(|n| n["type"] != "cgroup");
            if cgroupns {
                namespaces.push(json!({"type": "cgroup"}));
            }
        });
        let (out, trace) = run_v2_traced(&rt, remount, "fsopen,open_tree", &bundle.dir);
        out.ok();
        let bound = trace.contains("open_tree(AT_FDCWD, \"/sys/fs/cgroup\"");
        let mounted = trace.contains("fsopen(\"cgroup2\"");
        assert_eq!(
            (bound, mounted),
            (!cgroupns, cgroupns),
            "cgroupns {cgroupns}:\n{trace}"
        );
        assert!(
            out.stdout.contains("Read-only file system"),
            "{}",
            out.stdout
        );
        assert_eq!(out.stdout.contains("whole"), !cgroupns, "{}", out.stdout);
    }
    assert!(rt.leftovers().is_empty());
}

/// On a pure cgroup v2 host (the host matrix's guests; skipped where v2 is
/// only the hybrid's unified tree, whose controllers v1 holds): the spec's
/// limits land in the container's own cgroup, and a GPU container's device
/// program lets its GPU through and nothing else, checked by opening from
/// an exec'd process holding CAP_MKNOD: the asked-for GPU node gets past
/// the cgroup (a fake node with no driver behind it answers ENXIO), an
/// unrequested GPU node and `c 42 0`, a number no driver has (ENXIO
/// without the program), made with mknod, get the program's EPERM.
#[test]
fn v2_limits_land_and_only_the_asked_for_gpu_passes_the_device_program() {
    require_root!();
    let Some((hierarchy, false)) = v2_hierarchy() else {
        eprintln!("skipped: /sys/fs/cgroup is not a pure cgroup v2 hierarchy");
        return;
    };
    let rt = Runtime::new();
    let bundle = Bundle::glibc(None);
    bundle.set_process(
        &["sleep", "300"],
        &[
            "NVIDIA_VISIBLE_DEVICES=0",
            "NVIDIA_DRIVER_CAPABILITIES=utility",
        ],
    );
    bundle.edit(|c| {
        c["linux"]["resources"]["memory"] = json!({"limit": 67108864});
        c["linux"]["resources"]["pids"] = json!({"limit": 40});
        c["linux"]["resources"]["cpu"] = json!({"shares": 512});
        // mknod needs the capability; the device program then decides
        // whether the node opens.
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(json!("CAP_MKNOD"));
        }
    });
    let id = unique("v2gpu");
    let dir = bundle.dir.to_string_lossy().into_owned();
    rt.run(GpuFixtures::get().args(&["run", "-d", "--bundle", &dir, &id]))
        .ok();
    let cgroup = hierarchy.join(format!("gpurun/{id}"));
    let read = |file: &str| fs::read_to_string(cgroup.join(file)).unwrap_or_default();
    assert_eq!(read("memory.max").trim(), "67108864");
    assert_eq!(read("pids.max").trim(), "40");
    // cpu shares 512 as weight 59: the conversion runc 1.3 and crun use
    // (1024 shares, the default, map to weight 100, systemd's default);
    // runc 1.1's linear one gave 20.
    assert_eq!(read("cpu.weight").trim(), "59");

    let probe = "open() { if (: < $1) 2>/dev/null; then echo \"$1=opened\"; \
                 elif (: < $1) 2>&1 | grep -q 'not permitted'; then echo \"$1=EPERM\"; \
                 elif (: < $1) 2>&1 | grep -q 'No such device or address'; then echo \"$1=ENXIO\"; \
                 else echo \"$1=other\"; fi; }; \
                 mknod /dev/gpu1 c 195 1 && mknod /dev/nodriver c 42 0 && echo mknod-ok; \
                 open /dev/nvidia0; open /dev/gpu1; open /dev/nodriver";
    let out = rt.run(["exec", &id, "sh", "-c", probe]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // CAP_MKNOD is held, so only the device program can refuse an open.
    assert!(lines.contains(&"mknod-ok"), "{out:?}");
    // A real GPU opens; a fake node with no driver behind it fails with
    // ENXIO: either way not the cgroup's EPERM.
    assert!(
        lines.contains(&"/dev/nvidia0=opened") || lines.contains(&"/dev/nvidia0=ENXIO"),
        "{out:?}"
    );
    assert!(lines.contains(&"/dev/gpu1=EPERM"), "{out:?}");
    assert!(lines.contains(&"/dev/nodriver=EPERM"), "{out:?}");

    // An update carries the container's device rules into the program it
    // rebuilds: the GPU stays reachable and the rest stays refused (the
    // program used to be rebuilt from the defaults alone, without the GPU).
    rt.run(["update", "--memory", "134217728", &id]).ok();
    assert_eq!(read("memory.max").trim(), "134217728");
    let out = rt.run(["exec", &id, "sh", "-c", probe]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.contains(&"/dev/nvidia0=opened") || lines.contains(&"/dev/nvidia0=ENXIO"),
        "after update: {out:?}"
    );
    assert!(lines.contains(&"/dev/gpu1=EPERM"), "after update: {out:?}");
    assert!(
        lines.contains(&"/dev/nodriver=EPERM"),
        "after update: {out:?}"
    );
    rt.run(["delete", "--force", &id]).ok();
    assert!(!cgroup.exists(), "cgroup left behind");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}
