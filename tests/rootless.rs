//! Rootless containers: an unprivileged user with subuid/subgid ranges and
//! a spec from `gpurun spec --rootless`, on a host without cgroup delegation.

use gpurun_tests::*;
use serde_json::json;

#[test]
fn rootless_run_maps_the_user_to_root_and_returns_exit_codes() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.set_args(&["sh", "-c", "id -u; cat /proc/self/uid_map; exit 5"]);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("rl"),
    ]);
    assert_eq!(out.code, 5, "stderr: {}", out.stderr);
    let mut lines = out.stdout.lines();
    assert_eq!(lines.next(), Some("0"));
    let map: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(map, ["0", &user.uid.to_string(), "1"]);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn rootless_multi_range_maps_go_through_newuidmap() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    let sub = user.subuid_start();
    bundle.edit(|c| {
        c["linux"]["uidMappings"] = json!([
            {"containerID": 0, "hostID": user.uid, "size": 1},
            {"containerID": 1, "hostID": sub, "size": 1000}
        ]);
        c["linux"]["gidMappings"] = json!([
            {"containerID": 0, "hostID": user.gid, "size": 1},
            {"containerID": 1, "hostID": sub, "size": 1000}
        ]);
        c["process"]["args"] = json!(["sh", "-c", "cat /proc/self/uid_map"]);
    });
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("rlmulti"),
    ]);
    out.ok();
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    assert_eq!(rows[1], ["1", &sub.to_string(), "1000"]);
}

#[test]
fn rootless_resources_are_skipped_with_a_warning() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.edit(|c| {
        c["linux"]["resources"] = json!({"memory": {"limit": 100000000}, "pids": {"limit": 10}});
        c["process"]["args"] = json!(["true"]);
    });
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("rlres"),
    ]);
    out.ok();
    let is_v1 = std::path::Path::new("/sys/fs/cgroup/memory").is_dir();
    if is_v1 {
        assert!(out.stderr.contains("warning"), "{}", out.stderr);
        assert!(out.stderr.contains("memory, pids"), "{}", out.stderr);
    }
}

#[test]
fn rootless_lifecycle_with_delete_force() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.set_args(&["sleep", "300"]);
    let id = unique("rllife");
    let b = bundle.dir.to_str().unwrap();
    rt.run(["create", "--bundle", b, &id]).ok();
    assert_eq!(rt.state(&id)["status"], "created");
    rt.run(["start", &id]).ok();
    assert_eq!(rt.state(&id)["status"], "running");
    let pid = rt.state(&id)["pid"].as_i64().unwrap();
    let out = rt.run(["exec", &id, "sh", "-c", "exit 6"]);
    assert_eq!(out.code, 6, "{}", out.stderr);
    rt.run(["delete", "--force", &id]).ok();
    assert!(!is_alive(pid as i32), "init {pid} survived delete --force");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn a_rootless_spec_without_user_namespace_is_a_clear_error() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.edit(|c| {
        let ns = c["linux"]["namespaces"].as_array_mut().unwrap();
        ns.retain(|n| n["type"] != "user");
    });
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("rlnons"),
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("gpurun spec --rootless"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty());
}

#[test]
fn exec_into_a_userns_container_as_root_joins_its_user_namespace() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.map_root_to(300000);
    bundle.set_args(&["sleep", "300"]);
    let id = unique("usernsexec");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    let out = rt.run(["exec", &id, "cat", "/proc/self/uid_map"]);
    out.ok();
    let map: Vec<&str> = out.stdout.split_whitespace().collect();
    assert_eq!(
        map,
        ["0", "300000", "65536"],
        "exec ran outside the user namespace"
    );
    rt.run(["delete", "--force", &id]).ok();
}

/// A uid mapping the user may not write (host root) fails the create, and
/// leaves no process behind: the intermediate process waited forever on
/// a datagram channel that never sees end of file.
#[test]
fn a_refused_id_mapping_leaves_no_process_behind() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.edit(|c| {
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 0, "size": 1}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 0, "size": 1}]);
    });
    let id = unique("rlmapfail");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("id mapping"), "{}", out.stderr);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let root = rt.root.to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&root) && c.contains(&id))
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}
