//! Exec as runc does it: its flags, process files, failures, cgroup paths, CPU affinity.

use super::*;

#[test]
fn exec_flags_behave_as_in_runc() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = sleeping(&rt, &bundle);

    // --pid-file in a directory that does not exist: an error, not exit 0
    // (255, exec's own failure, as runc).
    let out = rt.run(["exec", "--pid-file", "/no/such/dir/pid", &id, "true"]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert!(out.stderr.contains("/no/such/dir"), "{}", out.stderr);

    // --cgroup of a sub-cgroup that does not exist: an error, and nothing
    // is made.
    // runc's words (bats `exec --cgroup sub-cgroups [v1]`).
    let out = rt.run(["exec", "--cgroup", "missing", &id, "true"]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    let words = contains_in_order(
        &out.stderr,
        " adding pid ",
        "/missing/cgroup.procs: no such file or directory",
    );
    assert!(words, "{}", out.stderr);
    assert!(cgroup_dirs(&format!("gpurun/{id}/missing")).is_empty());
    // One that exists (made in every hierarchy, as runc's test does): the
    // exec'd process is in it.
    let subs: Vec<_> = cgroup_dirs(&format!("gpurun/{id}"))
        .into_iter()
        .map(|d| d.join("sub"))
        .collect();
    for d in &subs {
        fs::create_dir(d).unwrap();
    }
    let out = rt.run(["exec", "--cgroup", "sub", &id, "cat", "/proc/self/cgroup"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        // With a cgroup namespace the path reads from the container's own.
        out.stdout
            .lines()
            .any(|l| l.starts_with(|c: char| c.is_ascii_digit())
                && l.contains("memory")
                && l.ends_with("/sub")),
        "{}",
        out.stdout
    );

    // --process /dev/fd/N: the caller's descriptor survives the re-exec.
    let scratch = Scratch::new("procfd");
    let process = scratch.path().join("process.json");
    fs::write(
        &process,
        json!({"args": ["echo", "from-a-descriptor"], "cwd": "/", "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}})
            .to_string(),
    )
    .unwrap();
    let file = fs::File::open(&process).unwrap();
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let mut cmd = rt.command(["exec", "--process", &format!("/dev/fd/{fd}"), &id]);
    let keep = fd;
    // SAFETY: clearing close-on-exec on an open descriptor in the child.
    unsafe {
        cmd.pre_exec(move || {
            libc::fcntl(keep, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let out = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(out.stdout.trim(), "from-a-descriptor", "{}", out.stderr);

    // A paused container: exec is refused, unless --ignore-paused, whose
    // process runs once the container is resumed.
    rt.run(["pause", &id]).ok();
    let out = rt.run(["exec", &id, "true"]);
    assert_eq!(out.code, 255);
    assert!(out.stderr.contains("paused"), "{}", out.stderr);
    let waiting = rt
        .command(["exec", "--ignore-paused", &id, "echo", "ran-after-resume"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rt.run(["resume", &id]).ok();
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ran-after-resume"
    );
    rt.run(["delete", "--force", &id]).ok();
}

/// runc's exec starts from the container's own process: its user, cwd,
/// rlimits and oomScoreAdj, with noNewPrivileges as the config has it;
/// -u UID keeps the config's group and --additional-gids adds to its
/// groups. gpurun's ran as root in "/" with every bounding capability and
/// noNewPrivileges on.
#[test]
fn exec_starts_from_the_containers_process() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["terminal"] = json!(false);
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000, "additionalGids": [5, 6]});
        c["process"]["cwd"] = json!("/tmp");
        c["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "soft": 900, "hard": 1000}]);
        c["process"]["oomScoreAdj"] = json!(100);
        c["process"]
            .as_object_mut()
            .unwrap()
            .remove("noNewPrivileges");
        // Without ambient capabilities a non-root user has none effective.
        if let Some(caps) = c["process"]["capabilities"].as_object_mut() {
            caps.remove("ambient");
        }
    });
    let id = sleeping(&rt, &bundle);
    let probe = "id; pwd; grep -E 'CapEff|NoNewPrivs' /proc/self/status; \
                 grep 'open files' /proc/self/limits | tr -s ' '; cat /proc/self/oom_score_adj";
    let out = rt.run(["exec", &id, "sh", "-c", probe]);
    assert_eq!(
        out.stdout,
        "uid=1000 gid=1000 groups=5,6\n/tmp\nCapEff:\t0000000000000000\nNoNewPrivs:\t0\n\
         Max open files 900 1000 files \n100\n",
        "{}",
        out.stderr
    );
    let out = rt.run([
        "exec",
        "-u",
        "2000",
        "--additional-gids",
        "7",
        "--cwd",
        "/",
        &id,
        "sh",
        "-c",
        "id; pwd",
    ]);
    assert_eq!(
        out.stdout, "uid=2000 gid=1000 groups=5,6,7\n/\n",
        "{}",
        out.stderr
    );
    rt.run(["delete", "--force", &id]).ok();
}

/// `exec -p /dev/stdin` with the process.json piped in: it is read once
/// (it was read twice, and the second read found the pipe empty).
#[test]
fn exec_reads_a_piped_process_file() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = sleeping(&rt, &bundle);
    let process = json!({
        "args": ["echo", "from a pipe"], "cwd": "/", "user": {"uid": 0, "gid": 0},
        "env": ["PATH=/bin"]
    });
    let mut child = rt
        .command(["exec", "-p", "/dev/stdin", &id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(process.to_string().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from a pipe\n");
    rt.run(["delete", "--force", &id]).ok();
}

/// `exec --process` as runc takes it: a process.json without `user` runs
/// as uid 0, and `-t` beside `--process` is ignored (the file says whether
/// there is a terminal); `exec` into a created container runs, and the
/// container still starts afterwards.
#[test]
fn exec_process_files_and_created_containers_as_in_runc() {
    require_root!();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    let process = Scratch::new("exec-process");
    let file = process.path().join("process.json");
    fs::write(&file, r#"{"args": ["/bin/id", "-u"], "cwd": "/"}"#).unwrap();
    let file = file.to_str().unwrap();
    for (program, root) in each_runtime() {
        let runtime = |args: &[&str]| runtime_cmd(&program, &root, args);
        let id = unique("exec-p");
        runtime(&["create", "--bundle", &dir, &id]).ok();
        let out = runtime(&["exec", &id, "/bin/sh", "-c", "echo in-created"]);
        assert_eq!(out.stdout.trim(), "in-created", "{program:?}: {out:?}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&runtime(&["state", &id]).stdout).unwrap()
                ["status"],
            "created",
            "{program:?}"
        );
        runtime(&["start", &id]).ok();
        for args in [
            vec!["exec", "-p", file, &id],
            vec!["exec", "-t", "-p", file, &id],
        ] {
            let out = runtime(&args);
            assert_eq!(
                (out.code, out.stdout.trim()),
                (0, "0"),
                "{program:?} {args:?}: {out:?}"
            );
        }
        runtime(&["delete", "--force", &id]).ok();
    }
}

/// exec's own failures exit 255 and say "exec failed" with runc's words,
/// under both runtimes: no such container, no such program, a pid file in
/// a missing directory, a paused container, a stopped one. (The exec'd
/// process's own exit codes pass through unchanged.)
#[test]
fn exec_failures_exit_255_with_runcs_words() {
    require_root!();
    for (program, root) in each_runtime() {
        let (_bundle, id) = sleeping_under(&program, &root, "execfail");
        let cases: [(&[&str], &str); 4] = [
            (&["exec", "no-such-container", "true"], "does not exist"),
            (
                &["exec", &id, "/no/such/program"],
                "no such file or directory",
            ),
            (&["exec", "--pid-file", "/no/such/dir/pid", &id, "true"], ""),
            (&["exec", &id, "sh", "-c", "exit 7"], ""),
        ];
        for (args, words) in cases {
            let out = runtime_cmd(&program, &root, args);
            let expected = if args.contains(&"exit 7") { 7 } else { 255 };
            assert_eq!(out.code, expected, "{program:?} {args:?}: {}", out.stderr);
            if expected == 255 {
                assert!(
                    out.stderr.contains("exec failed"),
                    "{program:?} {args:?}: {}",
                    out.stderr
                );
                assert!(
                    out.stderr.contains(words),
                    "{program:?} {args:?}: {}",
                    out.stderr
                );
            }
        }
        runtime_cmd(&program, &root, &["pause", &id]).ok();
        let out = runtime_cmd(&program, &root, &["exec", &id, "true"]);
        assert_eq!(out.code, 255, "{program:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot exec in a paused container"),
            "{program:?}: {}",
            out.stderr
        );
        runtime_cmd(&program, &root, &["resume", &id]).ok();
        runtime_cmd(&program, &root, &["kill", &id, "KILL"]).ok();
        wait_stopped(&program, &root, &id);
        let out = runtime_cmd(&program, &root, &["exec", &id, "true"]);
        assert_eq!(out.code, 255, "{program:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot exec in a stopped container"),
            "{program:?}: {}",
            out.stderr
        );
        runtime_cmd(&program, &root, &["delete", "--force", &id]).ok();
    }
}

/// `exec --cgroup` as runc reads it: `/` is the container's own cgroup,
/// and a path out of it is "not a sub cgroup path" (exit 255). A
/// controller-prefixed path on cgroup v1, which gpurun cannot join per
/// controller yet, is refused and makes nothing (it used to make a cgroup
/// literally named "memory:sub" in every hierarchy).
#[test]
fn exec_cgroup_paths_as_runc_reads_them() {
    require_root!();
    for (program, root) in each_runtime() {
        let (_bundle, id) = sleeping_under(&program, &root, "execcg");
        let own = runtime_cmd(&program, &root, &["exec", "--cgroup", "/", &id, "true"]);
        assert_eq!(own.code, 0, "{program:?}: {}", own.stderr);
        let out = runtime_cmd(&program, &root, &["exec", "--cgroup", "../x", &id, "true"]);
        assert_eq!(out.code, 255, "{program:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("is not a sub cgroup path"),
            "{program:?}: {}",
            out.stderr
        );
        // A repeated --cgroup names a controller in each; a second PATH
        // alone is refused.
        for (flags, words) in [(&["a", "b"][..], "(missing <controller>: prefix)")] {
            let mut args = vec!["exec"];
            for flag in flags {
                args.extend(["--cgroup", flag]);
            }
            args.extend([id.as_str(), "true"]);
            let out = runtime_cmd(&program, &root, &args);
            assert_eq!(out.code, 255, "{program:?} {flags:?}: {}", out.stderr);
            assert!(
                out.stderr.contains(words),
                "{program:?} {flags:?}: {}",
                out.stderr
            );
        }
        if Path::new("/sys/fs/cgroup/memory").is_dir() && Path::new("/sys/fs/cgroup/pids").is_dir()
        {
            // cgroup v1: CTRL:PATH joins PATH in that hierarchy only.
            let state: serde_json::Value =
                serde_json::from_str(&runtime_cmd(&program, &root, &["state", &id]).stdout)
                    .unwrap();
            let cgroup_of = |controller: &str| -> String {
                let text = fs::read_to_string(format!("/proc/{}/cgroup", state["pid"])).unwrap();
                text.lines()
                    .find_map(|l| {
                        let mut f = l.splitn(3, ':');
                        let (_, names, path) = (f.next()?, f.next()?, f.next()?);
                        names
                            .split(',')
                            .any(|n| n == controller)
                            .then(|| path.to_owned())
                    })
                    .unwrap()
            };
            let (memory, pids, cpu) = (cgroup_of("memory"), cgroup_of("pids"), cgroup_of("cpu"));
            let memory_sub = format!("/sys/fs/cgroup/memory{memory}/sub");
            let pids_sub = format!("/sys/fs/cgroup/pids{pids}/other");
            fs::create_dir(&memory_sub).unwrap();
            fs::create_dir(&pids_sub).unwrap();
            let out = runtime_cmd(
                &program,
                &root,
                &[
                    "exec",
                    "--cgroup",
                    "memory:sub",
                    "--cgroup",
                    "pids:/other",
                    &id,
                    "cat",
                    "/proc/self/cgroup",
                ],
            );
            let _ = (fs::remove_dir(&memory_sub), fs::remove_dir(&pids_sub));
            assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
            let line = |controller: &str| {
                out.stdout
                    .lines()
                    .find(|l| {
                        l.split(':')
                            .nth(1)
                            .is_some_and(|n| n.split(',').any(|n| n == controller))
                    })
                    .map(|l| l.splitn(3, ':').nth(2).unwrap_or_default().to_owned())
                    .unwrap_or_default()
            };
            // Seen from inside the container's cgroup namespace or not, the
            // sub-cgroup is the last component in the named hierarchies only.
            assert!(
                line("memory").ends_with("/sub"),
                "{program:?}: {}",
                out.stdout
            );
            assert!(
                line("pids").ends_with("/other"),
                "{program:?}: {}",
                out.stdout
            );
            assert!(
                !line("cpu").ends_with("/sub") && !line("cpu").ends_with("/other"),
                "{program:?}: {}",
                out.stdout
            );
            let _ = cpu;
            // A controller the host has no hierarchy for.
            let out = runtime_cmd(
                &program,
                &root,
                &["exec", "--cgroup", "nosuch:x", &id, "true"],
            );
            assert_eq!(out.code, 255, "{program:?}: {}", out.stderr);
        }
        runtime_cmd(&program, &root, &["delete", "--force", &id]).ok();
    }
}

/// Whether `text` has `first`, then later `then` (bats' `*"a"*"b"*`).
fn contains_in_order(text: &str, first: &str, then: &str) -> bool {
    text.find(first)
        .is_some_and(|at| text[at + first.len()..].contains(then))
}

/// The online CPUs, as /sys lists them (`0-1`).
fn online_cpus() -> String {
    fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap()
        .trim()
        .to_owned()
}

/// `Cpus_allowed_list` of the process that printed /proc/self/status.
fn cpus_allowed(status: &str) -> Option<&str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
}

/// runtime-spec 1.2.1's `process.execCPUAffinity`, as youki's contest
/// (`exec_cpu_affinity`, three tests) and runc's bats (`cpu_affinity.bats`)
/// check it: for an exec'd process, `initial` before it joins the
/// container's cgroup (the `affinity: 0x<mask>` --debug line) and `final`
/// after (`Cpus_allowed_list` inside), from config.json or --process; the
/// first process is not pinned by it, and a runtime started pinned
/// (`taskset -c 0`) does not pin the container's first process either
/// (bats `runc run [CPU affinity should reset]`).
#[test]
fn exec_cpu_affinity_and_the_first_process_reset() {
    require_root!();
    if online_cpus() == "0" {
        eprintln!("skipped: one CPU online, no affinity to tell apart");
        return;
    }
    let all = online_cpus();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["execCPUAffinity"] = json!({"initial": "0", "final": "1"});
    });
    let id = sleeping(&rt, &bundle);
    assert_eq!(rt.state(&id)["status"], "running");
    // From config.json.
    let out = rt.run([
        "--debug",
        "exec",
        &id,
        "grep",
        "Cpus_allowed_list",
        "/proc/self/status",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(cpus_allowed(&out.stdout), Some("1"), "{}", out.stdout);
    assert!(out.stderr.contains("affinity: 0x1"), "{}", out.stderr);
    // The first process was not pinned by it.
    let out = rt.run(["exec", &id, "grep", "Cpus_allowed_list", "/proc/1/status"]);
    assert_eq!(
        cpus_allowed(&out.stdout),
        Some(all.as_str()),
        "{}",
        out.stdout
    );
    // From --process: initial only, then initial and final.
    let scratch = Scratch::new("affinity");
    for (affinity, mask, inside) in [
        (json!({"initial": "0,1"}), "0x3", all.as_str()),
        (json!({"initial": "0", "final": "1"}), "0x1", "1"),
    ] {
        let process = scratch.path().join("process.json");
        fs::write(
            &process,
            json!({"terminal": false, "cwd": "/", "args": ["grep", "Cpus_allowed_list", "/proc/self/status"],
                   "env": ["PATH=/bin:/usr/bin"], "user": {"uid": 0, "gid": 0},
                   "execCPUAffinity": affinity})
            .to_string(),
        )
        .unwrap();
        let out = rt.run([
            "--debug",
            "exec",
            "--process",
            process.to_str().unwrap(),
            &id,
        ]);
        assert_eq!(out.code, 0, "{affinity}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("affinity: {mask}")),
            "{affinity}: {}",
            out.stderr
        );
        assert_eq!(
            cpus_allowed(&out.stdout),
            Some(inside),
            "{affinity}: {}",
            out.stdout
        );
    }
    // A list that is no list: one clear error, before anything starts.
    let process = scratch.path().join("bad.json");
    fs::write(
        &process,
        json!({"cwd": "/", "args": ["true"], "execCPUAffinity": {"initial": "1-0"}}).to_string(),
    )
    .unwrap();
    let out = rt.run(["exec", "--process", process.to_str().unwrap(), &id]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("gpurun: error: ")
            && out
                .stderr
                .contains("process.execCPUAffinity.initial \"1-0\""),
        "{}",
        out.stderr
    );
    rt.run(["delete", "--force", &id]).ok();

    // Started pinned to CPU 0, the first process still gets every CPU.
    let bundle = Bundle::busybox();
    bundle.set_args(&["grep", "Cpus_allowed_list", "/proc/self/status"]);
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0"])
        .arg(&rt.bin)
        .arg("--root")
        .arg(&rt.root)
        .args([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("pinned"),
        ]);
    let out = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        cpus_allowed(&out.stdout),
        Some(all.as_str()),
        "{}",
        out.stdout
    );
}
