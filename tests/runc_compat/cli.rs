//! The command line as engines read it: error lines, events, version, ps, list, state, spec, global flags.

use super::*;

#[test]
fn error_lines_carry_their_level_and_reason() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let scratch = Scratch::new("logs");
    // A program that is not there, logged as containerd asks.
    bundle.set_args(&["/no/such/program"]);
    let log = scratch.path().join("log.json");
    let out = rt.run([
        "--log",
        log.to_str().unwrap(),
        "--log-format",
        "json",
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("err"),
    ]);
    assert_eq!(out.code, 1);
    let line = fs::read_to_string(&log).unwrap();
    let entry: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    assert_eq!(entry["level"], "error");
    let msg = entry["msg"].as_str().unwrap();
    assert!(
        msg.contains(
            "exec: \"/no/such/program\": stat /no/such/program: no such file or directory"
        ),
        "{msg}"
    );
    assert!(!msg.contains("error error"), "{msg}");
    // The same as text: logrus' level=error.
    let text_log = scratch.path().join("log.txt");
    rt.run([
        "--log",
        text_log.to_str().unwrap(),
        "state",
        "no-such-container",
    ]);
    let text = fs::read_to_string(&text_log).unwrap();
    assert!(text.lines().all(|l| l.contains("level=error")), "{text}");
    // A program that exists but cannot be started: exit 255 and the
    // reason, in the log too.
    fs::write(bundle.rootfs().join("bin/needs-bash"), "#!/bin/bash-gone\n").unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bundle.rootfs().join("bin/needs-bash"))
        .status()
        .unwrap();
    bundle.set_args(&["/bin/needs-bash"]);
    let log2 = scratch.path().join("log2.json");
    let out = rt.run([
        "--log",
        log2.to_str().unwrap(),
        "--log-format",
        "json",
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("err"),
    ]);
    assert_eq!(out.code, 255);
    let logged = fs::read_to_string(&log2).unwrap();
    assert!(
        logged.contains("\"level\":\"error\"")
            && logged.contains("exec /bin/needs-bash: no such file or directory"),
        "{logged}"
    );
}

#[test]
fn events_are_runcs_envelopes_with_oom() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle
        .edit(|c| c["linux"]["resources"]["memory"] = json!({"limit": 33554432, "swap": 33554432}));
    let id = sleeping(&rt, &bundle);
    let out = rt.run(["events", "--stats", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let event: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(event["type"], "stats");
    assert_eq!(event["id"], id.as_str());
    assert!(
        event["data"]["pids"]["current"].as_u64().unwrap() >= 1,
        "{event}"
    );
    assert_eq!(event["data"]["memory"]["usage"]["limit"], 33554432);

    // --interval 100ms streams several; an OOM kill is an "oom" event, and
    // the stream ends with the container.
    let mut events = rt
        .command(["events", "--interval", "100ms", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    rt.run([
        "exec",
        "-d",
        &id,
        "sh",
        "-c",
        "x=a; while true; do x=$x$x; done",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && events.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(100));
        // The OOM kill took the exec'd shell; end the stream by stopping
        // the container once it has had time to report.
        if Instant::now() + Duration::from_secs(15) < deadline {
            continue;
        }
        rt.run(["kill", &id, "KILL"]);
    }
    let _ = events.kill();
    let out = events.wait_with_output().unwrap();
    // The stream was cut short: its last line may be half written.
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let stats = lines.iter().filter(|e| e["type"] == "stats").count();
    assert!(stats >= 3, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|e| e["type"] == "oom" && e["id"] == id.as_str()),
        "{lines:?}"
    );
    rt.run(["delete", "--force", &id]);
}

#[test]
fn version_names_commit_spec_and_libseccomp() {
    let out = run_cmd(Command::new(gpurun_bin()).arg("--version"), TIMEOUT);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("gpurun version "), "{lines:?}");
    assert!(lines[1].starts_with("commit: ") && lines[1].len() > "commit: ".len());
    assert!(lines[2].starts_with("spec: 1."), "{lines:?}");
    assert!(lines[3].starts_with("libseccomp: 2."), "{lines:?}");
}

/// `ps ID [ps options]` prints the host's `ps` with only the container's
/// rows, as runc does (options were ignored); `list -f json` as runc.
#[test]
fn ps_options_and_list_format_as_in_runc() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = sleeping(&rt, &bundle);
    let pid = rt.state(&id)["pid"].as_i64().unwrap();
    let out = rt.run(["ps", &id, "-o", "pid,comm"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["PID", "COMMAND"]
    );
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [pid.to_string().as_str(), "sleep"]
    );
    // Without options: `ps -ef`'s columns, the container's row only.
    let out = rt.run(["ps", &id]);
    assert!(out.stdout.starts_with("UID"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    let out = rt.run(["ps", &id, "-o", "comm"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no PID column"), "{}", out.stderr);
    let out = rt.run(["list", "-f", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(
        list[0]["rootfs"],
        bundle.rootfs().to_str().unwrap(),
        "{}",
        out.stdout
    );
    rt.run(["delete", "--force", &id]).ok();
}

/// The global flags engines pass as runc's: go-runc's `--rootless=BOOL`,
/// and Go-style single-dash long flags (`-root DIR`).
#[test]
fn runc_global_flags_are_taken() {
    require_root!();
    let rt = Runtime::new();
    let root = rt.root.to_str().unwrap().to_owned();
    let out = run_cmd(
        Command::new(gpurun_bin()).args(["-root", &root, "--rootless=false", "list", "-q"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run_cmd(
        Command::new(gpurun_bin()).args(["--rootless", "maybe", "list"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 1, "runc's usage status: {}", out.stderr);
    assert!(out.stderr.contains("possible values"), "{}", out.stderr);
}

/// `spec` writes runc 1.1's own template, root and rootless: the same
/// hostname, namespaces (no cgroup namespace) and capabilities (none
/// inheritable, CVE-2022-29162), so a bundle made for either runtime is
/// the same.
#[test]
fn spec_writes_what_runc_spec_writes() {
    for rootless in [false, true] {
        let written = |program: &Path| {
            let scratch = Scratch::new("spec-compare");
            let mut cmd = Command::new(program);
            cmd.arg("spec").current_dir(scratch.path());
            if rootless {
                cmd.arg("--rootless");
            }
            run_cmd(&mut cmd, TIMEOUT).ok();
            let text = fs::read(scratch.path().join("config.json")).unwrap();
            serde_json::from_slice::<serde_json::Value>(&text).unwrap()
        };
        let ours = written(&gpurun_bin());
        let runc = written(Path::new("runc"));
        assert_eq!(ours, runc, "rootless: {rootless}");
        assert_eq!(ours["hostname"], "runc");
    }
}

/// Killing a stopped container fails with runc's words, "container not
/// running", on stderr and as an error in the `--log` file: containerd's
/// shim kills stopped containers and treats exactly those words as done.
#[test]
fn kill_of_a_stopped_container_says_container_not_running() {
    require_root!();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    for (program, root) in each_runtime() {
        let log = root.path().join("log.json");
        let runtime = |args: &[&str]| {
            let mut all = vec!["--log", log.to_str().unwrap(), "--log-format", "json"];
            all.extend_from_slice(args);
            runtime_cmd(&program, &root, &all)
        };
        let id = unique("stopped");
        runtime(&["create", "--bundle", &dir, &id]).ok();
        runtime(&["start", &id]).ok();
        let deadline = Instant::now() + TIMEOUT;
        while !runtime(&["state", &id]).stdout.contains("\"stopped\"") {
            assert!(Instant::now() < deadline, "{program:?}: never stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = runtime(&["kill", &id, "KILL"]);
        assert_eq!(out.code, 1, "{program:?}: {out:?}");
        let logged = fs::read_to_string(&log).unwrap();
        let error = logged
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["level"] == "error")
            .unwrap_or_else(|| panic!("{program:?}: no error in the log: {logged}"));
        assert!(
            error["msg"]
                .as_str()
                .unwrap()
                .contains("container not running"),
            "{program:?}: {error}"
        );
        runtime(&["delete", &id]).ok();
    }
}

/// `state` and `list -f json` print the fields runc prints, with the same
/// values where they do not depend on the runtime: `rootfs` (absolute),
/// `bundle`, `status`, and `state`'s empty `owner`.
#[test]
fn state_and_list_carry_runcs_fields() {
    require_root!();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    let mut seen = Vec::new();
    for (program, root) in each_runtime() {
        let runtime = |args: &[&str]| runtime_cmd(&program, &root, args);
        let id = unique("fields");
        runtime(&["create", "--bundle", &dir, &id]).ok();
        let state: serde_json::Value =
            serde_json::from_str(&runtime(&["state", &id]).ok().stdout).unwrap();
        let list: serde_json::Value =
            serde_json::from_str(&runtime(&["list", "-f", "json"]).ok().stdout).unwrap();
        runtime(&["delete", "--force", &id]).ok();
        seen.push((program, state, list[0].clone()));
    }
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let (_, ours_state, ours_list) = &seen[0];
    let (_, runc_state, runc_list) = &seen[1];
    assert_eq!(
        keys(ours_state),
        keys(runc_state),
        "{ours_state} vs {runc_state}"
    );
    assert_eq!(
        keys(ours_list),
        keys(runc_list),
        "{ours_list} vs {runc_list}"
    );
    for field in ["rootfs", "bundle", "status", "owner"] {
        assert_eq!(ours_state[field], runc_state[field], "state {field}");
    }
    for field in ["rootfs", "bundle", "status", "owner"] {
        assert_eq!(ours_list[field], runc_list[field], "list {field}");
    }
    assert_eq!(ours_state["rootfs"], bundle.rootfs().to_str().unwrap());
}

/// `list` prints runc's table (its columns, OWNER included, laid out as
/// runc's tabwriter does) and lists a stopped container with pid 0, in the
/// table and in JSON.
#[test]
fn list_matches_runcs_table_and_pids() {
    require_root!();
    let mut tables = Vec::new();
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["true"]);
        let id = "list-compat";
        let dir = bundle.dir.to_str().unwrap().to_owned();
        runtime_cmd(&program, &root, &["create", "--bundle", &dir, id]).ok();
        runtime_cmd(&program, &root, &["start", id]).ok();
        wait_stopped(&program, &root, id);
        let table = runtime_cmd(&program, &root, &["list"]);
        let json = runtime_cmd(&program, &root, &["list", "-f", "json"]);
        runtime_cmd(&program, &root, &["delete", id]).ok();
        let listed: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(listed[0]["pid"], 0, "{program:?}: {}", json.stdout);
        // The bundle paths and times differ; the layout and the rest must not.
        let masked: Vec<Vec<String>> = table
            .stdout
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .enumerate()
                    .map(|(i, f)| {
                        if i == 3 || i == 4 {
                            "*".into()
                        } else {
                            f.to_owned()
                        }
                    })
                    .collect()
            })
            .collect();
        // Where the columns before the bundle start (after it, they move
        // with the bundle path's length).
        let header = table.stdout.lines().next().unwrap().to_owned();
        let header_end: Vec<Option<usize>> = ["PID", "STATUS", "BUNDLE"]
            .iter()
            .map(|c| header.find(c))
            .collect();
        tables.push((masked, header_end, table.stdout.clone()));
    }
    assert_eq!(tables[0].0, tables[1].0, "{}\n{}", tables[0].2, tables[1].2);
    assert_eq!(tables[0].1, tables[1].1, "{}\n{}", tables[0].2, tables[1].2);
}

/// Errors say "error" where tools that read only stderr look for it
/// (youki's contest decides by it: `delete_non_existed_container`,
/// `delete_running_container_test`, `kill_non_existed_container`,
/// `kill_stopped_container_test`, `kill_with_empty_id_test`,
/// `kill_no_effect`), with the reason after it; warnings say "warning".
#[test]
fn errors_and_warnings_name_their_level() {
    require_root!();
    let rt = Runtime::new();
    let error_line = |args: &[&str], reason: &str| {
        let out = rt.run(args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
        assert!(
            lines[0].starts_with("gpurun: error: "),
            "{args:?}: {}",
            lines[0]
        );
        assert!(
            lines[0].contains(reason),
            "{args:?}: {} lacks {reason:?}",
            lines[0]
        );
    };
    error_line(&["delete", "no-such-ctr"], "does not exist");
    error_line(&["kill", "no-such-ctr", "KILL"], "does not exist");
    error_line(&["kill", "", "KILL"], "container id");
    let bundle = Bundle::busybox();
    let running = sleeping(&rt, &bundle);
    error_line(&["delete", &running], "running");
    rt.run(["kill", &running, "KILL"]).ok();
    let stopped_by = Instant::now();
    while rt.state(&running)["status"] != "stopped" && stopped_by.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(20));
    }
    error_line(&["kill", &running, "KILL"], "not running");
    rt.run(["delete", &running]).ok();
    // A failing poststop hook: the spec says warn and go on.
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| c["hooks"] = json!({"poststop": [{"path": "/bin/false", "args": ["false"]}]}));
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("warn"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with("gpurun: warning: ") && l.contains("poststop")),
        "{}",
        out.stderr
    );
}

/// `list` of a state root with no container, and of one not made yet: the
/// same output and status as runc's (`null` in JSON, the header alone).
#[test]
fn list_of_nothing_is_as_in_runc() {
    let mut seen = Vec::new();
    for (program, root) in each_runtime() {
        let missing = Scratch::new("no-root");
        let missing_root = missing.path().join("never-made");
        let mut outputs = Vec::new();
        for dir in [root.path(), missing_root.as_path()] {
            for args in [&["list"][..], &["list", "-f", "json"], &["list", "-q"]] {
                let out = run_cmd(
                    Command::new(&program).arg("--root").arg(dir).args(args),
                    TIMEOUT,
                );
                outputs.push((out.code, out.stdout.trim_end().to_owned()));
            }
        }
        seen.push(outputs);
    }
    assert_eq!(seen[0], seen[1], "gpurun's, then runc's");
    assert_eq!(seen[0][1], (0, "null".to_owned()));
}

/// A command line that does not parse exits as runc's does: 1 for a
/// missing argument, an unknown flag or a bad value, 3 for an unknown
/// command. Engines read only the status; each is compared with runc's.
#[test]
fn usage_errors_exit_with_runcs_status() {
    for args in [
        &["kill"][..],
        &["state"],
        &["run", "--nope", "x"],
        &["update", "--memory", "1X", "c"],
        &["frob"],
    ] {
        let codes: Vec<i32> = each_runtime()
            .iter()
            .map(|(program, root)| runtime_cmd(program, root, args).code)
            .collect();
        assert_eq!(codes[0], codes[1], "{args:?}: gpurun, runc");
        assert_ne!(codes[0], 0, "{args:?}");
    }
}
