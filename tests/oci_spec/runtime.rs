//! runtime.md: state, lifecycle, errors and operations.

use std::fs;

use gpurun_tests::{cgroup_dirs, is_alive, require_root, unique, Bundle, Runtime, Scratch};

use super::*;

#[test]
fn state_has_every_required_property() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    bundle.edit(|c| c["annotations"] = serde_json::json!({"com.example.key": "value"}));
    let id = create(&rt, &bundle);
    let state = rt.state(&id);
    assert!(state["ociVersion"].as_str().unwrap().starts_with("1."));
    assert_eq!(state["id"], id.as_str());
    assert_eq!(state["status"], "created");
    let pid = state["pid"].as_i64().unwrap();
    assert!(
        exists(format!("/proc/{pid}")),
        "pid {pid} is not a host pid"
    );
    let bundle_path = state["bundle"].as_str().unwrap();
    assert_eq!(
        Path::new(bundle_path),
        fs::canonicalize(&bundle.dir).unwrap(),
        "the bundle is the absolute path of the user's bundle"
    );
    assert_eq!(state["annotations"]["com.example.key"], "value");
    rt.run(["delete", &id]).ok();
}

#[test]
fn query_state_of_a_missing_container_is_an_error() {
    let rt = Runtime::new();
    let out = rt.run(["state", "no-such-container"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
    let out = rt.run(["state"]);
    assert_ne!(out.code, 0, "state without an id must fail");
}

#[test]
fn lifecycle_create_does_not_run_the_process() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("touch /ran; sleep 30");
    let id = create(&rt, &bundle);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !exists(bundle.rootfs().join("ran")),
        "the process ran at create"
    );
    rt.run(["start", &id]).ok();
    wait_until("the process to run", || exists(bundle.rootfs().join("ran")));
    assert_eq!(rt.state(&id)["status"], "running");
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn lifecycle_config_changes_after_create_have_no_effect() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("touch /first; sleep 30");
    let id = create(&rt, &bundle);
    bundle.edit(|c| c["process"]["args"] = serde_json::json!(["sh", "-c", "touch /second"]));
    rt.run(["start", &id]).ok();
    wait_until("the process to run", || {
        exists(bundle.rootfs().join("first"))
    });
    assert!(!exists(bundle.rootfs().join("second")));
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn create_with_an_id_in_use_is_an_error_and_creates_nothing() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id);
    let out = rt.run(["create", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    assert_eq!(init_pid(&rt, &id), pid, "the first container was changed");
    assert_eq!(rt.leftovers(), vec![id.clone()]);
    rt.run(["delete", &id]).ok();
}

#[test]
fn start_of_a_started_container_is_an_error_with_no_effect() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("echo x >> /starts; sleep 30");
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    wait_until("the process", || exists(bundle.rootfs().join("starts")));
    let pid = init_pid(&rt, &id);
    let out = rt.run(["start", &id]);
    assert_ne!(out.code, 0, "a second start must fail");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        fs::read_to_string(bundle.rootfs().join("starts")).unwrap(),
        "x\n"
    );
    assert_eq!(init_pid(&rt, &id), pid);
    assert_eq!(rt.state(&id)["status"], "running");
    let out = rt.run(["start", "no-such-container"]);
    assert_ne!(out.code, 0);
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn kill_sends_every_signal_by_name_and_number() {
    require_root!();
    let rt = Runtime::new();
    // pid 1 ignores signals it has no handler for, so trap each one.
    let signals = [
        ("HUP", 1),
        ("INT", 2),
        ("QUIT", 3),
        ("USR1", 10),
        ("USR2", 12),
        ("PIPE", 13),
        ("ALRM", 14),
        ("TERM", 15),
        ("WINCH", 28),
        ("RTMIN", 34),
        ("RTMIN+3", 37),
        ("RTMAX", 64),
    ];
    let traps: String = signals
        .iter()
        .map(|(_, n)| format!("trap 'echo {n} >> /dev/shm/got' {n}; "))
        .collect();
    let bundle = bundle_running(&format!(
        "{traps} touch /dev/shm/ready; while :; do sleep 0.05; done"
    ));
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    let pid = init_pid(&rt, &id);
    wait_until("the traps", || {
        exists(format!("/proc/{pid}/root/dev/shm/ready"))
    });
    let mut want = Vec::new();
    for (i, (name, number)) in signals.iter().enumerate() {
        // Every spelling runc takes: NAME, SIGNAME, sigName, number.
        let spelling = match i % 4 {
            0 => name.to_string(),
            1 => format!("SIG{name}"),
            2 => format!("sig{}", name.to_lowercase()),
            _ => number.to_string(),
        };
        rt.run(["kill", &id, &spelling]).ok();
        want.push(number.to_string());
        wait_until(&format!("signal {spelling}"), || {
            read_in(pid, "/dev/shm/got").lines().count() == want.len()
        });
    }
    assert_eq!(
        read_in(pid, "/dev/shm/got").lines().collect::<Vec<_>>(),
        want
    );
    for bad in ["SIGBOGUS", "65", "RTMIN+99"] {
        let out = rt.run(["kill", &id, bad]);
        assert_ne!(out.code, 0, "{bad}");
        assert!(out.stderr.contains("signal"), "{bad}: {}", out.stderr);
    }
    rt.run(["kill", &id, "KILL"]).ok();
    wait_until("the container to stop", || {
        rt.state(&id)["status"] == "stopped"
    });
    rt.run(["delete", &id]).ok();
}

#[test]
fn kill_of_a_stopped_container_is_an_error() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    wait_until("the container to stop", || {
        rt.state(&id)["status"] == "stopped"
    });
    let out = rt.run(["kill", &id, "TERM"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("not running"), "{}", out.stderr);
    assert_eq!(rt.state(&id)["status"], "stopped");
    assert_ne!(rt.run(["kill", "no-such-container"]).code, 0);
    rt.run(["delete", &id]).ok();
}

#[test]
fn kill_status_is_stopped_once_the_process_is_gone() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    let pid = init_pid(&rt, &id);
    rt.run(["kill", &id, "9"]).ok();
    wait_until("the container to stop", || {
        rt.state(&id)["status"] == "stopped"
    });
    assert!(!is_alive(pid), "the process is still alive");
    rt.run(["delete", &id]).ok();
    assert!(rt.leftovers().is_empty());
}

#[test]
fn delete_of_a_created_container_that_never_started() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("touch /ran; sleep 30");
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id);
    assert!(!cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    rt.run(["delete", &id]).ok();
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    wait_until("init to be gone", || !is_alive(pid));
    assert!(!exists(bundle.rootfs().join("ran")), "the process ran");
}

#[test]
fn delete_of_a_running_container_is_an_error() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    let out = rt.run(["delete", &id]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("is running"), "{}", out.stderr);
    assert_eq!(rt.state(&id)["status"], "running");
    let out = rt.run(["delete", "no-such-container"]);
    assert_ne!(out.code, 0);
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn delete_removes_what_create_made_and_nothing_else() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    // A host directory bind-mounted into the container: used by it, not
    // made by it, so it must survive the delete.
    let shared = Scratch::new("shared");
    fs::write(shared.path().join("keep"), "x").unwrap();
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/shared", "type": "bind",
            "source": shared.path(), "options": ["rbind", "ro"]
        }))
    });
    fs::create_dir_all(bundle.rootfs().join("shared")).unwrap();
    let (id, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(rt.leftovers().is_empty());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    assert!(shared.path().join("keep").exists());
    assert!(
        bundle.rootfs().join("bin/sh").exists(),
        "the rootfs was touched"
    );
    assert!(bundle.dir.join("config.json").exists());
}

#[test]
fn pid_file_holds_the_init_pid() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let scratch = Scratch::new("pidfile");
    let pid_file = scratch.path().join("pid");
    let id = unique("oci");
    rt.run([
        "create",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        "--pid-file",
        pid_file.to_str().unwrap(),
        &id,
    ])
    .ok();
    let written: i64 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(written, rt.state(&id)["pid"].as_i64().unwrap());
    rt.run(["delete", &id]).ok();
}

#[test]
fn errors_leave_the_environment_as_if_never_attempted() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    // Fails after namespaces, cgroup and mounts were made.
    bundle.edit(|c| c["hooks"] = serde_json::json!({"createRuntime": [{"path": "/bin/false"}]}));
    let id = unique("oci");
    let out = rt.run(["create", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_ne!(out.code, 0);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    assert!(gpurun_tests::processes_mentioning(&id).is_empty());
}
