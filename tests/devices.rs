//! Device nodes and device rules as engines send them: the rules land in
//! `devices.list` in the spec's order (runtime-tools reads it back), a
//! node mknod may not make is bound in from the host as runc does, and
//! Docker 28's default rules run a plain container.

use std::fs;

use gpurun_tests::*;
use serde_json::{json, Value};

/// A device rule as config.json writes it.
fn rule(allow: bool, typ: &str, major: i64, minor: i64, access: &str) -> serde_json::Value {
    json!({"allow": allow, "type": typ, "major": major, "minor": minor, "access": access})
}

/// `out` holds each of `stdout` in its stdout and each of `stderr` in its
/// stderr.
fn assert_printed(out: &Ran, stdout: &[&str], stderr: &[&str]) {
    for want in stdout {
        assert!(out.stdout.contains(want), "{want}: {}", out.stdout);
    }
    for want in stderr {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
}

/// Runs `sh -c script` in a busybox container `id` whose config `edit`
/// changed, in the foreground, and returns what it printed.
fn run_script(id: &str, script: &str, edit: impl FnOnce(&mut Value)) -> Ran {
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", script]);
    bundle.edit(edit);
    rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), id])
}

/// Runs `bundle` detached as `id`, reads its cgroup v1 `devices.list`, and
/// deletes it. None where there is no v1 devices hierarchy.
fn devices_list(rt: &Runtime, bundle: &Bundle, id: &str) -> Option<Vec<String>> {
    let dir = bundle.dir.to_string_lossy();
    rt.run(["run", "-d", "--bundle", &dir, id]).ok();
    let list = fs::read_to_string(format!("/sys/fs/cgroup/devices/gpurun/{id}/devices.list"));
    rt.run(["delete", "--force", id]).ok();
    Some(list.ok()?.lines().map(str::to_owned).collect())
}

/// runtime-tools' `linux_cgroups_devices` (its rules): after a leading deny-all, the
/// spec's allow rules are the first entries of `devices.list`, in its
/// order (`lnd[i-1]` against rule i). The defaults come after them.
#[test]
fn device_rules_land_in_the_listed_order() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "30"]);
    let rules = [
        rule(true, "c", 10, 229, "rwm"),
        rule(true, "b", 8, 20, "rw"),
        rule(true, "b", 10, 200, "r"),
    ];
    bundle.edit(|c| {
        let mut all = vec![json!({"allow": false, "access": "rwm"})];
        all.extend(rules.iter().cloned());
        c["linux"]["resources"]["devices"] = json!(all);
    });
    let Some(list) = devices_list(&rt, &bundle, &unique("order")) else {
        return; // cgroup v2: the rules are an eBPF program, not a list
    };
    assert_eq!(
        list[..3],
        ["c 10:229 rwm", "b 8:20 rw", "b 10:200 r"],
        "{list:?}"
    );
    // The defaults are still there, after the spec's own.
    for default in ["c 1:5 rwm", "c *:* m", "c 136:* rwm"] {
        assert!(
            list[3..].iter().any(|l| l == default),
            "{default}: {list:?}"
        );
    }
}

/// A spec rule still narrows a default device: denying writes to
/// /dev/null leaves it readable, and writing fails with the device
/// cgroup's EPERM.
#[test]
fn a_spec_rule_narrows_a_default_device() {
    require_root!();
    let script = "cat /dev/null && echo read-ok; echo x > /dev/null || echo write-refused";
    let out = run_script(&unique("narrow"), script, |c| {
        c["linux"]["resources"]["devices"] = json!([
            {"allow": false, "access": "rwm"},
            rule(false, "c", 1, 3, "w"),
        ]);
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    if !std::path::Path::new("/sys/fs/cgroup/devices").is_dir() {
        return; // the rules' effect is checked where v1 lists them
    }
    assert_printed(
        &out,
        &["read-ok", "write-refused"],
        &["Operation not permitted"],
    );
}

/// The rules Docker 28 sends for a plain container (read from its
/// config.json under dockerd 28.5.2): a second deny-all in the middle and
/// no `c *:* m`. runc 1.3 runs it; gpurun failed every such container
/// with "failed syscall to create device: EPERM" (mknod of /dev/full).
#[test]
fn docker_28_default_rules_run_a_plain_container() {
    require_root!();
    let half = [
        rule(true, "c", 1, 5, "rwm"),
        rule(true, "c", 1, 3, "rwm"),
        rule(true, "c", 1, 9, "rwm"),
        rule(true, "c", 1, 8, "rwm"),
        rule(true, "c", 5, 0, "rwm"),
        rule(true, "c", 5, 1, "rwm"),
        rule(false, "c", 10, 229, "rwm"),
    ];
    // /dev/full's write error is ENOSPC: the node is there and allowed.
    let script = "echo x > /dev/full; cat /dev/null && echo null-ok";
    let out = run_script(&unique("docker28"), script, |c| {
        let mut all = Vec::new();
        for _ in 0..2 {
            all.push(json!({"allow": false, "access": "rwm"}));
            all.extend(half.iter().cloned());
        }
        c["linux"]["resources"]["devices"] = json!(all);
        c["linux"]["devices"] = json!([]);
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_printed(&out, &["null-ok"], &["No space left on device"]);
}

/// Where the device cgroup refuses the mknod, the host's own node is
/// bound in instead, as runc's createDeviceNode does. Here a parent cgroup
/// allows /dev/full's reads and writes but not its mknod (as a Slurm step
/// or a node agent may restrict its children): /dev/full is then a mount
/// point in the container, and still writes as /dev/full. The container
/// has CAP_MKNOD: only the device cgroup refuses the mknod (EPERM).
#[test]
fn a_device_mknod_may_not_make_is_bound_from_the_host() {
    require_root!();
    let parent_name = unique("no-mknod");
    let parent = std::path::PathBuf::from("/sys/fs/cgroup/devices").join(&parent_name);
    if fs::create_dir(&parent).is_err() {
        return; // no cgroup v1 devices hierarchy: v2 is checked in the guests
    }
    let write_rules = |file: &str, rules: &[&str]| {
        for r in rules {
            fs::write(parent.join(file), r).unwrap_or_else(|e| panic!("{file} {r}: {e}"));
        }
    };
    write_rules("devices.deny", &["a"]);
    write_rules(
        "devices.allow",
        &[
            "c 1:3 rwm",
            "c 1:5 rwm",
            "c 1:8 rwm",
            "c 1:9 rwm",
            "c 5:0 rwm",
            "c 5:1 rwm",
            "c 5:2 rwm",
            "c 136:* rwm",
            "c 10:200 rwm",
            "c 1:7 rw",
        ],
    );
    let id = unique("bindfull");
    let script = "grep -c ' /dev/full ' /proc/self/mountinfo; echo x > /dev/full; \
                  mknod /dev/full2 c 1 7 || echo mknod-refused";
    let out = run_script(&id, script, |c| {
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set] = json!(["CAP_MKNOD", "CAP_DAC_OVERRIDE"]);
        }
        c["linux"]["cgroupsPath"] = json!(format!("/{parent_name}/{id}"));
        // What the parent allows of /dev/full (the default rule asks for
        // "rwm", which the parent refuses and gpurun then skips).
        c["linux"]["resources"]["devices"] = json!([
            {"allow": false, "access": "rwm"},
            rule(true, "c", 1, 7, "rw"),
        ]);
    });
    for hierarchy in cgroup_dirs(&format!("{parent_name}/{id}")) {
        let _ = fs::remove_dir(hierarchy);
    }
    for hierarchy in cgroup_dirs(&parent_name) {
        let _ = fs::remove_dir(hierarchy);
    }
    assert_eq!(out.code, 0, "{}", out.stderr);
    // One mount at /dev/full: the host's node, bound; it writes as
    // /dev/full (ENOSPC). The mechanism: with CAP_MKNOD, the device cgroup
    // alone refuses the mknod (EPERM).
    assert!(out.stdout.starts_with("1\n"), "{}", out.stdout);
    assert_printed(
        &out,
        &["mknod-refused"],
        &["No space left on device", "Operation not permitted"],
    );
}
