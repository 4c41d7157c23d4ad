//! config.md: root, mounts, process, hostname, hooks, annotations,
//! extensibility.

use std::fs;

use gpurun_tests::{cgroup_dirs, receive_console, require_root, Bundle, Runtime};

use super::*;

#[test]
fn root_readonly_makes_the_rootfs_read_only() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "touch /x 2>&1; echo rc=$?"]);
    let (_, out) = run(&rt, &bundle);
    assert!(
        out.stdout.contains("Read-only file system"),
        "{}",
        out.stdout
    );
    assert!(!bundle.rootfs().join("x").exists());
    bundle.edit(|c| c["root"]["readonly"] = false.into());
    let (_, out) = run(&rt, &bundle);
    assert!(out.stdout.contains("rc=0"), "{}", out.stdout);
}

#[test]
fn mounts_are_mounted_in_the_listed_order() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("stat -c %a /data; ls /data");
    // Two tmpfs mounts on one destination: the later one must be on top.
    bundle.edit(|c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        for mode in ["700", "751"] {
            mounts.push(serde_json::json!({
                "destination": "/data", "type": "tmpfs", "source": "tmpfs",
                "options": [format!("mode={mode}")]
            }));
        }
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.stdout.trim(), "751", "{}", out.stderr);
}

#[test]
fn mounts_propagation_options_take_effect() {
    require_root!();
    // A shared source (made in a private mount namespace, so the host's
    // table is untouched), bound three times: `rprivate` must cut the
    // bind off from it (runc; Docker asks this for /etc/hosts), `rslave`
    // and the default (under the rootfs's rslave) keep receiving from it.
    let rt = Runtime::new();
    let source = gpurun_tests::Scratch::new("shared-source");
    let bundle = bundle_running(
        "for d in /private /slave /default; do \
           grep \" $d \" /proc/self/mountinfo | grep -q master: && echo \"$d slave\" || echo \"$d private\"; \
         done",
    );
    bundle.edit(|c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        for (destination, options) in [
            ("/private", vec!["rbind", "rprivate"]),
            ("/slave", vec!["rbind", "rslave"]),
            ("/default", vec!["rbind"]),
        ] {
            mounts.push(serde_json::json!({
                "destination": destination, "type": "bind",
                "source": source.path(), "options": options
            }));
        }
    });
    let id = unique("oci");
    let gpurun = rt.command(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let mut line = vec![gpurun.get_program().to_owned()];
    line.extend(gpurun.get_args().map(|a| a.to_owned()));
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs none "$0" && mount --make-shared "$0" && exec "$@""#)
        .arg(source.path())
        .args(line);
    let out = gpurun_tests::run_cmd(&mut cmd, Duration::from_secs(60));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "/private private\n/slave slave\n/default slave",
        "{}",
        out.stderr
    );
}

#[test]
fn mounts_destination_must_be_absolute_or_is_taken_from_the_root() {
    require_root!();
    // runc (and so every engine) takes a relative destination as relative
    // to the container's root; gpurun does the same rather than refuse it.
    let rt = Runtime::new();
    let bundle = bundle_running(
        "grep -c ' /rel tmpfs' /proc/self/mountinfo || grep ' /rel ' /proc/self/mountinfo",
    );
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "rel", "type": "tmpfs", "source": "tmpfs"
        }))
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("/rel"), "{}", out.stdout);
}

#[test]
fn process_is_required_at_start_only() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c.as_object_mut().unwrap().remove("process");
    });
    let id = create(&rt, &bundle);
    assert_eq!(rt.state(&id)["status"], "created");
    let out = rt.run(["start", &id]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("no process"), "{}", out.stderr);
    assert_eq!(
        rt.state(&id)["status"],
        "created",
        "start changed the container"
    );
    rt.run(["delete", &id]).ok();
    assert!(rt.leftovers().is_empty());
    // `run` is create and start: it fails and leaves nothing.
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn process_cwd_env_and_args() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["cwd"] = "/tmp".into();
        c["process"]["env"] = serde_json::json!(["PATH=/bin", "GREETING=hello world"]);
        // Not an absolute path: found through $PATH, as execvp does.
        c["process"]["args"] = serde_json::json!(["sh", "-c", "pwd; echo $GREETING; env | wc -l"]);
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "/tmp");
    assert_eq!(lines[1], "hello world");
}

#[test]
fn process_cwd_must_be_absolute() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["process"]["cwd"] = "tmp".into());
    let (id, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("not an absolute path"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
}

#[test]
fn posix_process_rlimits_are_applied_exactly() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("cat /proc/self/limits");
    bundle.edit(|c| {
        c["process"]["rlimits"] = serde_json::json!([
            {"type": "RLIMIT_NOFILE", "soft": 123, "hard": 456},
            {"type": "RLIMIT_CORE", "soft": 0, "hard": 789},
            {"type": "RLIMIT_NPROC", "soft": 1000, "hard": 2000},
            {"type": "RLIMIT_MSGQUEUE", "soft": 4096, "hard": 8192}
        ])
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let limit = |name: &str| -> (String, String) {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {}", out.stdout));
        let fields: Vec<&str> = line[25..].split_whitespace().collect();
        (fields[0].to_owned(), fields[1].to_owned())
    };
    assert_eq!(limit("Max open files"), ("123".into(), "456".into()));
    assert_eq!(limit("Max core file size"), ("0".into(), "789".into()));
    assert_eq!(limit("Max processes"), ("1000".into(), "2000".into()));
    assert_eq!(limit("Max msgqueue size"), ("4096".into(), "8192".into()));
}

#[test]
fn posix_process_rlimits_duplicates_and_bad_values_are_errors() {
    require_root!();
    let rt = Runtime::new();
    for (rlimits, want) in [
        (
            serde_json::json!([
                {"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200},
                {"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200}
            ]),
            "twice",
        ),
        (
            serde_json::json!([{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 2}]),
            "RLIMIT_BOGUS",
        ),
        (
            serde_json::json!([{"type": "RLIMIT_CORE", "soft": 5, "hard": 2}]),
            "above hard limit",
        ),
    ] {
        let bundle = Bundle::busybox();
        bundle.edit(|c| c["process"]["rlimits"] = rlimits);
        let (_, out) = run(&rt, &bundle);
        assert_ne!(out.code, 0);
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
        assert!(rt.leftovers().is_empty());
    }
}

#[test]
fn linux_process_capabilities_are_the_listed_sets() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status");
    bundle.edit(|c| {
        let set = serde_json::json!(["CAP_CHOWN", "CAP_KILL"]);
        c["process"]["capabilities"] = serde_json::json!({
            "bounding": set, "permitted": set, "effective": ["CAP_KILL"],
            "inheritable": set, "ambient": ["CAP_CHOWN"]
        });
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mask = |name: &str| -> u64 {
        let line = out.stdout.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let (chown, kill) = (1u64 << 0, 1u64 << 5);
    assert_eq!(mask("CapBnd"), chown | kill);
    assert_eq!(mask("CapPrm"), chown | kill, "ambient adds to permitted");
    assert_eq!(mask("CapInh"), chown | kill);
    assert_eq!(mask("CapAmb"), chown);
    assert_eq!(mask("CapEff"), chown | kill, "ambient adds to effective");
}

#[test]
fn linux_process_unknown_capabilities_are_errors() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["capabilities"]["bounding"]
            .as_array_mut()
            .unwrap()
            .push("CAP_NOT_A_CAPABILITY".into())
    });
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("CAP_NOT_A_CAPABILITY"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty());
}

#[test]
fn linux_process_no_new_privileges_and_oom_score_adj() {
    require_root!();
    let host_adj = fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    let out = output_of("grep NoNewPrivs /proc/self/status; cat /proc/self/oom_score_adj");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert_eq!(
        out.lines().nth(1).unwrap(),
        host_adj.trim(),
        "oomScoreAdj unset must not change it"
    );

    let rt = Runtime::new();
    let bundle = bundle_running("grep NoNewPrivs /proc/self/status; cat /proc/self/oom_score_adj");
    bundle.edit(|c| {
        c["process"]["noNewPrivileges"] = false.into();
        c["process"]["oomScoreAdj"] = 123.into();
    });
    let (_, out) = run(&rt, &bundle);
    assert!(out.stdout.contains("NoNewPrivs:\t0"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().nth(1).unwrap(), "123");
}

#[test]
fn posix_user_uid_gid_and_additional_gids() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("id -u; id -g; id -G");
    bundle.edit(|c| {
        c["process"]["user"] =
            serde_json::json!({"uid": 1234, "gid": 2345, "additionalGids": [7, 3456]});
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "1234");
    assert_eq!(lines[1], "2345");
    let mut groups: Vec<&str> = lines[2].split_whitespace().collect();
    groups.sort();
    assert_eq!(groups, ["2345", "3456", "7"]);
}

#[test]
fn hostname_is_the_containers() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("hostname");
    bundle.edit(|c| c["hostname"] = "oci-test-host".into());
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.stdout.trim(), "oci-test-host");
}

#[test]
fn posix_hooks_get_the_state_with_the_status_of_their_step() {
    require_root!();
    let rt = Runtime::new();
    let hooks = HookLog::new();
    let bundle = bundle_running("true");
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({
            "prestart": [hooks.hook("prestart")],
            "createRuntime": [hooks.hook("createRuntime")],
            "createContainer": [hooks.hook("createContainer")],
            "poststart": [hooks.hook("poststart")],
            "poststop": [hooks.hook("poststop")],
        });
    });
    let id = create(&rt, &bundle);
    assert_eq!(
        hooks.labels(),
        ["prestart", "createRuntime", "createContainer"]
    );
    rt.run(["start", &id]).ok();
    assert_eq!(hooks.labels().last().unwrap(), "poststart");
    wait_until("the process to exit", || {
        rt.state(&id)["status"] == "stopped"
    });
    rt.run(["delete", &id]).ok();
    let bundle_path = fs::canonicalize(&bundle.dir).unwrap();
    let want = [
        ("prestart", "creating"),
        ("createRuntime", "creating"),
        ("createContainer", "creating"),
        ("poststart", "running"),
        ("poststop", "stopped"),
    ];
    let entries = hooks.entries();
    assert_eq!(entries.len(), want.len(), "{entries:?}");
    for ((label, state), (want_label, want_status)) in entries.iter().zip(want) {
        assert_eq!(label, want_label);
        assert_eq!(state["status"], want_status, "{label}: {state}");
        assert_eq!(state["id"], id.as_str(), "{label}");
        assert_eq!(
            Path::new(state["bundle"].as_str().unwrap()),
            bundle_path,
            "{label}"
        );
        assert!(state["ociVersion"].as_str().is_some(), "{label}");
    }
    for (label, state) in &entries {
        if ["prestart", "createRuntime", "poststart"].contains(&label.as_str()) {
            assert!(
                state["pid"].as_i64().unwrap_or(0) > 0,
                "{label} has no pid: {state}"
            );
        }
    }
}

#[test]
fn posix_hooks_start_container_runs_in_the_container_at_start() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("true");
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({"startContainer": [
            {"path": "/bin/sh", "args": ["sh", "-c", "cat > /start-state"]}
        ]});
    });
    let id = create(&rt, &bundle);
    // Its path is resolved in the container: /bin/sh is the image's.
    assert!(
        !bundle.rootfs().join("start-state").exists(),
        "ran at create"
    );
    rt.run(["start", &id]).ok();
    // The hook's shell creates the file before cat has written to it.
    let read_state = || {
        fs::read(bundle.rootfs().join("start-state"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    };
    wait_until("the hook's state", || read_state().is_some());
    let state = read_state().unwrap();
    assert_eq!(state["status"], "created");
    assert_eq!(state["id"], id.as_str());
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn posix_hooks_are_called_in_the_listed_order_in_the_runtime_namespace() {
    require_root!();
    let rt = Runtime::new();
    let hooks = HookLog::new();
    let bundle = bundle_running("true");
    let ns_log = hooks.dir.path().join("ns");
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({
            "createRuntime": [
                hooks.hook("first"), hooks.hook("second"),
                {"path": "/bin/sh", "args": ["sh", "-c", format!("readlink /proc/self/ns/mnt /proc/self/ns/pid > {}", ns_log.display())]},
                hooks.hook("third"),
            ],
        });
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(hooks.labels(), ["first", "second", "third"]);
    let host = format!(
        "{}\n{}\n",
        fs::read_link("/proc/self/ns/mnt").unwrap().display(),
        fs::read_link("/proc/self/ns/pid").unwrap().display()
    );
    assert_eq!(fs::read_to_string(ns_log).unwrap(), host);
}

#[test]
fn posix_hooks_env_is_the_hooks_own() {
    require_root!();
    let rt = Runtime::new();
    let scratch = gpurun_tests::Scratch::new("hookenv");
    let env_log = scratch.path().join("env");
    let bundle = bundle_running("true");
    bundle.edit(|c| {
        c["process"]["env"] = serde_json::json!(["PATH=/bin", "FROM_CONTAINER=1"]);
        c["hooks"] = serde_json::json!({"prestart": [{
            "path": "/bin/sh",
            "args": ["sh", "-c", format!("env > {}", env_log.display())],
            "env": ["HOOK_VAR=yes"]
        }]});
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let env = fs::read_to_string(env_log).unwrap();
    assert!(env.contains("HOOK_VAR=yes"), "{env}");
    assert!(
        !env.contains("FROM_CONTAINER"),
        "the container's env reached a hook: {env}"
    );
}

#[test]
fn posix_hooks_timeout_aborts_the_hook_and_the_create() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({"prestart": [
            {"path": "/bin/sleep", "args": ["sleep", "20"], "timeout": 1}
        ]});
    });
    let started = Instant::now();
    let (id, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("timeout"), "{}", out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the hook was not aborted"
    );
    assert!(rt.leftovers().is_empty());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());

    bundle.edit(|c| c["hooks"]["prestart"][0]["timeout"] = 0.into());
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("greater than zero"), "{}", out.stderr);
}

#[test]
fn posix_hooks_prestart_failure_fails_the_create_then_poststop_hooks_run() {
    require_root!();
    let rt = Runtime::new();
    let hooks = HookLog::new();
    let bundle = bundle_running("touch /ran");
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({
            "prestart": [{"path": "/bin/false"}, hooks.hook("after")],
            "poststop": [hooks.hook("poststop")],
        });
    });
    let (id, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(!bundle.rootfs().join("ran").exists());
    // "continue the lifecycle at step 12": destroyed, then poststop hooks.
    assert_eq!(
        hooks.labels(),
        ["poststop"],
        "a prestart hook ran after the failure"
    );
    assert_eq!(hooks.entries()[0].1["status"], "stopped");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
}

/// runtime-spec (since runc 1.3's reading of it, opencontainers/runc#5186):
/// "If any poststart hook fails, the runtime MUST generate an error, stop
/// the container, and continue the lifecycle at step 12."
#[test]
fn posix_hooks_poststart_failure_fails_start_and_stops_the_container() {
    require_root!();
    let rt = Runtime::new();
    let hooks = HookLog::new();
    let bundle = bundle_running("sleep 30");
    bundle.edit(|c| {
        c["hooks"] =
            serde_json::json!({"poststart": [{"path": "/bin/false"}, hooks.hook("after")]});
    });
    let id = create(&rt, &bundle);
    let out = rt.run(["start", &id]);
    assert_ne!(out.code, 0, "a failed poststart hook did not fail start");
    assert!(
        out.stderr.contains("hook"),
        "the error does not name the hook: {}",
        out.stderr
    );
    assert!(
        hooks.labels().is_empty(),
        "a hook after the failed one ran: {:?}",
        hooks.labels()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while rt.state(&id)["status"] != "stopped" {
        assert!(
            std::time::Instant::now() < deadline,
            "the container was not stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    rt.run(["delete", &id]).ok();
}

#[test]
fn posix_hooks_poststop_failure_is_a_warning() {
    require_root!();
    let rt = Runtime::new();
    let hooks = HookLog::new();
    let bundle = bundle_running("true");
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({"poststop": [{"path": "/bin/false"}, hooks.hook("after")]});
    });
    let id = create(&rt, &bundle);
    rt.run(["start", &id]).ok();
    wait_until("the process to exit", || {
        rt.state(&id)["status"] == "stopped"
    });
    let out = rt.run(["delete", &id]);
    assert_eq!(
        out.code, 0,
        "a failed poststop hook failed delete: {}",
        out.stderr
    );
    assert!(
        out.stderr.to_lowercase().contains("warn"),
        "no warning: {}",
        out.stderr
    );
    assert_eq!(hooks.labels(), ["after"]);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn annotations_and_unknown_properties() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    bundle.edit(|c| {
        c["annotations"] = serde_json::json!({"org.example.unknown-key": "", "com.example.k": "v"});
        // Unknown properties, top level and nested, MUST be ignored.
        c["com.example.extension"] = serde_json::json!({"anything": [1, 2]});
        c["process"]["com.example.extra"] = true.into();
        c["linux"]["com.example.extra"] = "x".into();
    });
    let id = create(&rt, &bundle);
    let state = rt.state(&id);
    assert_eq!(state["annotations"]["com.example.k"], "v");
    assert_eq!(state["annotations"]["org.example.unknown-key"], "");
    rt.run(["delete", &id]).ok();
}

#[test]
fn oci_version_must_be_1_x() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["ociVersion"] = "2.0.0".into());
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("2.0.0"), "{}", out.stderr);
    assert!(rt.leftovers().is_empty());
}

#[test]
fn process_terminal_gets_a_pty_through_the_console_socket() {
    require_root!();
    let rt = Runtime::new();
    let scratch = gpurun_tests::Scratch::new("console");
    let socket = scratch.path().join("console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let bundle = bundle_running("tty; stty size; echo done");
    bundle.edit(|c| {
        c["process"]["terminal"] = true.into();
        c["process"]["consoleSize"] = serde_json::json!({"height": 33, "width": 111});
    });
    let id = unique("oci");
    let dir = bundle.dir.clone();
    let root = rt.root.clone();
    let creator = std::thread::spawn(move || {
        gpurun_tests::run_cmd(
            std::process::Command::new(gpurun_tests::gpurun_bin())
                .arg("--root")
                .arg(root)
                .args([
                    "create",
                    "--bundle",
                    dir.to_str().unwrap(),
                    "--console-socket",
                ])
                .arg(&socket)
                .arg(&id),
            Duration::from_secs(30),
        );
        id
    });
    let mut master = receive_console(&listener);
    let id = creator.join().unwrap();
    rt.run(["start", &id]).ok();
    let mut output = Vec::new();
    let mut buf = [0u8; 1024];
    let start = Instant::now();
    while !String::from_utf8_lossy(&output).contains("done") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            String::from_utf8_lossy(&output)
        );
        use std::io::Read;
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => output.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&output);
    assert!(
        text.contains("/dev/pts/") || text.contains("/dev/console"),
        "not a tty: {text}"
    );
    assert!(
        text.contains("33 111"),
        "consoleSize was not applied: {text}"
    );
    wait_until("the process to exit", || {
        rt.state(&id)["status"] == "stopped"
    });
    rt.run(["delete", &id]).ok();
}
