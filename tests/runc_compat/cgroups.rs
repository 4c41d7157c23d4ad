//! Cgroup files and limits as runc writes them: OOM killer, freezer, update, a limited parent, v1 devices, blkio.

use super::*;

fn v1(controller: &str, cgroup: &str, file: &str) -> String {
    fs::read_to_string(
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(cgroup)
            .join(file),
    )
    .unwrap_or_default()
}

#[test]
fn disable_oom_killer_reaches_the_cgroup() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/memory").is_dir() {
        eprintln!("skipped: no cgroup v1 memory controller");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["resources"]["memory"] = json!({"limit": 67108864, "disableOOMKiller": true})
    });
    let id = sleeping(&rt, &bundle);
    let control = v1("memory", &format!("gpurun/{id}"), "memory.oom_control");
    // An update of the memory limit keeps it.
    rt.run(["update", "--memory", "128M", &id]).ok();
    let after_update = v1("memory", &format!("gpurun/{id}"), "memory.oom_control");
    rt.run(["delete", "--force", &id]).ok();
    assert!(control.contains("oom_kill_disable 1"), "{control}");
    assert!(
        after_update.contains("oom_kill_disable 1"),
        "{after_update}"
    );
}

#[test]
fn a_frozen_cgroup_is_refused_not_waited_on() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/freezer").is_dir() {
        eprintln!("skipped: no cgroup v1 freezer");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = unique("frozen");
    let dir = Path::new("/sys/fs/cgroup/freezer/gpurun").join(&id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("freezer.state"), "FROZEN").unwrap();
    bundle.set_args(&["true"]);
    let start = Instant::now();
    let out = rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let _ = fs::write(dir.join("freezer.state"), "THAWED");
    let _ = fs::remove_dir(&dir);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("container's cgroup unexpectedly frozen"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn update_changes_what_its_flags_name() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = sleeping(&rt, &bundle);
    let cg = format!("gpurun/{id}");
    rt.run(["update", "--cpuset-cpus", "0", &id]).ok();
    assert_eq!(v1("cpuset", &cg, "cpuset.cpus").trim(), "0");
    rt.run([
        "update",
        "--cpu-quota",
        "20000",
        "--cpu-period",
        "100000",
        &id,
    ])
    .ok();
    assert_eq!(v1("cpu", &cg, "cpu.cfs_quota_us").trim(), "20000");
    rt.run(["update", "--cpu-quota", "-1", &id]).ok();
    assert_eq!(v1("cpu", &cg, "cpu.cfs_quota_us").trim(), "-1");
    rt.run(["update", "--memory", "100M", "--pids-limit", "42", &id])
        .ok();
    assert_eq!(
        v1("memory", &cg, "memory.limit_in_bytes").trim(),
        "104857600"
    );
    assert_eq!(v1("pids", &cg, "pids.max").trim(), "42");
    rt.run(["delete", "--force", &id]).ok();
}

/// Under a parent limited to half a CPU, a shorter period is refused while
/// the old quota stands; the quota must go first.
#[test]
fn cpu_quota_under_a_limited_parent() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/cpu").is_dir() {
        eprintln!("skipped: no cgroup v1 cpu controller");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let parent = unique("gpurun-parent");
    let parent_dir = Path::new("/sys/fs/cgroup/cpu").join(&parent);
    fs::create_dir(&parent_dir).unwrap();
    fs::write(parent_dir.join("cpu.cfs_period_us"), "100000").unwrap();
    fs::write(parent_dir.join("cpu.cfs_quota_us"), "50000").unwrap();
    let id = unique("child");
    bundle.edit(|c| {
        c["linux"]["cgroupsPath"] = json!(format!("/{parent}/{id}"));
        c["linux"]["resources"]["cpu"] = json!({"quota": 40000, "period": 100000});
    });
    bundle.set_args(&["sleep", "300"]);
    let run = rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let update = rt.run([
        "update",
        "--cpu-period",
        "50000",
        "--cpu-quota",
        "20000",
        &id,
    ]);
    let child = parent_dir.join(&id);
    let quota = fs::read_to_string(child.join("cpu.cfs_quota_us")).unwrap_or_default();
    let period = fs::read_to_string(child.join("cpu.cfs_period_us")).unwrap_or_default();
    rt.run(["delete", "--force", &id]);
    let _ = fs::remove_dir(&parent_dir);
    for controller in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let _ = fs::remove_dir(controller.path().join(&parent));
    }
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(update.code, 0, "{}", update.stderr);
    assert_eq!((quota.trim(), period.trim()), ("20000", "50000"));
}

/// cgroup v1 leftovers of runc's reading of a config: a device rule's
/// access keeps only r, w and m (the kernel refuses "rwa"; runc ignores the
/// `a`), and `linux.resources.unified` on a v1 or hybrid host is refused in
/// runc's words rather than dropped.
#[test]
fn v1_device_access_and_unified_as_runc_reads_them() {
    require_root!();
    let unified_host = fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup ") && l.contains(" - cgroup2 "));
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["sh", "-c", "head -c 0 /dev/null && echo read"]);
        bundle.edit(|c| {
            c["linux"]["resources"]["devices"]
                .as_array_mut()
                .unwrap()
                .push(json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwa"}))
        });
        let out = run_bundle(&program, &root, &bundle, "rwa");
        assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
        assert_eq!(out.stdout.trim(), "read", "{program:?}");

        if unified_host {
            continue;
        }
        let bundle = Bundle::busybox();
        bundle.set_args(&["true"]);
        bundle.edit(|c| c["linux"]["resources"]["unified"] = json!({"memory.max": "100000000"}));
        let out = run_bundle(&program, &root, &bundle, "unified");
        assert_eq!(out.code, 1, "{program:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot use unified on cgroup v1"),
            "{program:?}: {}",
            out.stderr
        );
        assert!(fs::read_dir(root.path()).map_or(true, |d| d.count() == 0));
    }
}

/// cgroup v1: `blockIO.weightDevice` (Docker's `--blkio-weight-device`)
/// reaches the container's cgroup as runc writes it: BFQ's
/// `blkio.bfq.weight_device` on kernels without CFQ. The device is a loop
/// device of the test's own, switched to BFQ.
#[test]
fn blkio_weight_devices_reach_the_cgroup() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/blkio").is_dir() {
        return; // cgroup v2: tests/cgroup_v2.rs
    }
    struct Loop(String);
    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let scratch = Scratch::new("blkio");
    let image = scratch.path().join("disk");
    fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let attached = run_cmd(
        Command::new("losetup").args(["-f", "--show"]).arg(&image),
        TIMEOUT,
    );
    attached.ok();
    let device = Loop(attached.stdout.trim().to_owned());
    let name = Path::new(&device.0)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    // BFQ may be a module; a kernel built without it has no weight devices
    // on v1 at all (runc's and gpurun's writes both have nowhere to go).
    let _ = Command::new("modprobe").arg("bfq").status();
    let scheduler = format!("/sys/block/{name}/queue/scheduler");
    if !fs::read_to_string(&scheduler).is_ok_and(|s| s.contains("bfq")) {
        eprintln!("skipped: this kernel has no BFQ scheduler, so no v1 weight devices");
        return;
    }
    fs::write(&scheduler, "bfq").unwrap();
    let rdev = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&device.0).unwrap().rdev()
    };
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.edit(|c| {
            c["linux"]["resources"]["blockIO"] = json!({
                "weightDevice": [{"major": major, "minor": minor, "weight": 321}]
            });
        });
        bundle.set_args(&["sleep", "300"]);
        let id = unique("blkio");
        let dir = bundle.dir.to_str().unwrap();
        runtime_cmd(&program, &root, &["run", "-d", "--bundle", dir, &id]).ok();
        let state: serde_json::Value =
            serde_json::from_str(&runtime_cmd(&program, &root, &["state", &id]).stdout).unwrap();
        let cgroups = fs::read_to_string(format!("/proc/{}/cgroup", state["pid"])).unwrap();
        let blkio = cgroups
            .lines()
            .find_map(|l| l.split_once(":blkio:").map(|(_, p)| p.to_owned()))
            .unwrap();
        let weights = fs::read_to_string(format!(
            "/sys/fs/cgroup/blkio{blkio}/blkio.bfq.weight_device"
        ))
        .unwrap_or_default();
        runtime_cmd(&program, &root, &["delete", "--force", &id]).ok();
        assert!(
            weights.lines().any(|l| l == format!("{major}:{minor} 321")),
            "{program:?}: {weights}"
        );
    }
}
