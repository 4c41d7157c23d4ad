//! The runtime-spec 1.2 and 1.3 fields today's engines send (containerd
//! 2.x, Podman 5), each read back from the host on the container's
//! process: `process.ioPriority`, `process.scheduler` and
//! `linux.memoryPolicy` take effect; `linux.intelRdt` is refused in one
//! line, as `features` says (`intelRdt: false`). `linux.netDevices` is in
//! tests/runc_compat.rs, idmapped mounts in tests/idmap.rs.

use gpurun_tests::*;
use serde_json::{json, Value};

/// Runs a `sleep` container with `edit` applied, returns what `probe`
/// (a host command given the container's pid) printed, and deletes it.
fn on_the_running_process(edit: impl FnOnce(&mut Value), probe: &[&str]) -> String {
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "60"]);
    bundle.edit(edit);
    let id = unique("specfield");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    let pid = rt.state(&id)["pid"].as_i64().unwrap().to_string();
    let mut args: Vec<&str> = probe.to_vec();
    args.push(&pid);
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap();
    rt.run(["delete", "--force", &id]).ok();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn io_priority_takes_effect() {
    require_root!();
    let out = on_the_running_process(
        |c| c["process"]["ioPriority"] = json!({"class": "IOPRIO_CLASS_BE", "priority": 6}),
        &["ionice", "-p"],
    );
    assert_eq!(out.trim(), "best-effort: prio 6");
}

#[test]
fn the_scheduler_takes_effect() {
    require_root!();
    let out = on_the_running_process(
        |c| c["process"]["scheduler"] = json!({"policy": "SCHED_BATCH"}),
        &["chrt", "-p"],
    );
    assert!(out.contains("SCHED_BATCH"), "{out}");
}

#[test]
fn the_memory_policy_takes_effect() {
    require_root!();
    let out = on_the_running_process(
        |c| c["linux"]["memoryPolicy"] = json!({"mode": "MPOL_BIND", "nodes": "0"}),
        &["sh", "-c", "grep -c ' bind:0 ' /proc/$0/numa_maps"],
    );
    let bound: u32 = out.trim().parse().unwrap_or(0);
    assert!(bound > 0, "no mapping bound to node 0: {out:?}");
}

/// No tested host has resctrl: `features` says `intelRdt: false`, and a
/// config asking for it fails in one line with nothing left behind.
#[test]
fn intel_rdt_is_refused_in_one_line() {
    require_root!();
    if std::path::Path::new("/sys/fs/resctrl/schemata").exists() {
        return; // a host with resctrl mounted would run it
    }
    let rt = Runtime::new();
    let features: Value = serde_json::from_str(&rt.run(["features"]).stdout).unwrap();
    assert_eq!(features["linux"]["intelRdt"]["enabled"], json!(false));
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| c["linux"]["intelRdt"] = json!({"closID": "gpurun", "schemata": ["L3:0=ff"]}));
    let id = unique("rdt");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "resctrl",
    );
}
