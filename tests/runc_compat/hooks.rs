//! OCI hooks: where they run, and runc's words when they fail.

use super::*;

/// Hooks run where runc runs them: createContainer hooks in the rootfs,
/// every host-side hook (prestart, createRuntime, poststart, poststop) in
/// the bundle; each writes its working directory to a file.
#[test]
fn hooks_run_in_the_directories_runc_runs_them_in() {
    require_root!();
    let kinds = [
        "prestart",
        "createRuntime",
        "createContainer",
        "poststart",
        "poststop",
    ];
    for (program, root) in each_runtime() {
        let out = Scratch::new("hook-cwd");
        let bundle = Bundle::busybox();
        bundle.set_args(&["true"]);
        bundle.edit(|c| {
            for kind in kinds {
                let file = out.path().join(kind);
                c["hooks"][kind] = json!([{
                    "path": "/bin/sh",
                    "args": ["sh", "-c", format!("pwd > {}", file.display())],
                }]);
            }
        });
        let dir = bundle.dir.to_str().unwrap().to_owned();
        let id = unique("hook-cwd");
        runtime_cmd(&program, &root, &["run", "--bundle", &dir, &id]).ok();
        runtime_cmd(&program, &root, &["delete", "--force", &id]);
        let dirs: Vec<String> = kinds
            .iter()
            .map(|k| {
                fs::read_to_string(out.path().join(k))
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            })
            .collect();
        let rootfs = bundle.rootfs();
        let expected: Vec<&str> = kinds
            .iter()
            .map(|k| {
                if *k == "createContainer" {
                    rootfs.to_str().unwrap()
                } else {
                    &dir
                }
            })
            .collect();
        assert_eq!(dirs, expected, "{program:?}");
    }
}

/// A failing startContainer hook is reported in runc's words, not lost.
#[test]
fn a_failing_start_container_hook_is_reported() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| c["hooks"]["startContainer"] = json!([{"path": "/bin/false"}]));
    let id = unique("start-hook");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("error running startContainer hook"),
        "{}",
        out.stderr
    );
    rt.run(["delete", "--force", &id]);
}

/// Every hook kind, under `run`: a hook starts with no signal blocked (the
/// runtime blocks signals while it forwards them; a hook that inherited
/// that mask ignored SIGTERM and survived its own SIGSYS, and gpurun ran
/// the container as if it had succeeded), and a hook killed by a signal
/// is named by it with its stderr, as runc names it (bats `runc run
/// [seccomp] (startContainer hook)`). A failed hook leaves nothing; a
/// poststop hook's failure is a warning, as the runtime spec asks.
#[test]
fn a_hook_of_any_kind_killed_by_a_signal_is_named_by_it() {
    require_root!();
    let kinds = [
        ("prestart", true),
        ("createRuntime", true),
        ("createContainer", true),
        ("startContainer", true),
        ("poststart", true),
        ("poststop", false),
    ];
    for (program, root) in each_runtime() {
        let is_gpurun = program == gpurun_bin();
        for (kind, fails) in kinds {
            let out = Scratch::new("hook-signal");
            let mask = out.path().join("mask");
            let bundle = Bundle::busybox();
            bundle.set_args(&["true"]);
            // A host-side hook (and createContainer, before pivot_root) is
            // python3, which reads its own mask as it starts: a shell's
            // child would see the shell's own while it forks. startContainer
            // runs in the image, with its busybox shell: no mask read.
            let hook = if kind == "startContainer" {
                json!({"path": "/bin/sh", "args": ["sh", "-c", "echo about to die >&2; kill -SYS $$"]})
            } else {
                let script = format!(
                    "import os, signal, sys\n\
                     mask = open('/proc/self/status').read().split('SigBlk:')[1].split()[0]\n\
                     open('{}', 'w').write(mask)\n\
                     sys.stderr.write('about to die\\n')\n\
                     sys.stderr.flush()\n\
                     os.kill(os.getpid(), signal.SIGSYS)\n",
                    mask.display()
                );
                json!({"path": "/usr/bin/python3", "args": ["python3", "-c", script]})
            };
            bundle.edit(|c| c["hooks"][kind] = json!([hook]));
            let dir = bundle.dir.to_str().unwrap().to_owned();
            let id = unique("hook-signal");
            let ran = runtime_cmd(&program, &root, &["run", "--bundle", &dir, &id]);
            let what = format!("{program:?} {kind}");
            assert_eq!(ran.code != 0, fails, "{what}: {}", ran.stderr);
            if kind != "startContainer" {
                let blocked = fs::read_to_string(&mask).unwrap_or_default();
                assert_eq!(
                    blocked, "0000000000000000",
                    "{what}: the hook's blocked signals"
                );
            }
            assert!(
                ran.stderr.contains("signal: bad system call"),
                "{what}: {}",
                ran.stderr
            );
            if is_gpurun {
                assert!(
                    ran.stderr.contains(
                        "error running hook #0: signal: bad system call, stderr: about to die"
                    ),
                    "{what}: {}",
                    ran.stderr
                );
                let left = runtime_cmd(&program, &root, &["list", "-q"]);
                assert_eq!(left.stdout.trim(), "", "{what}: left behind");
            }
            runtime_cmd(&program, &root, &["delete", "--force", &id]);
        }
    }
}

/// runc's words where its bats and youki's contest match them: procfs or
/// sysfs on a symlink in the image (contest `prohibit_symlink_proc_test`,
/// `prohibit_symlink_sys_test`; bats `mask paths [prohibit symlink /proc]`)
/// and a failing hook (bats `runc run [seccomp] (startContainer hook)`).
#[test]
fn runc_s_words_for_symlinked_proc_and_failing_hooks() {
    require_root!();
    let rt = Runtime::new();
    for dir in ["proc", "sys"] {
        let bundle = Bundle::busybox();
        let at = bundle.rootfs().join(dir);
        let _ = fs::remove_dir_all(&at);
        // A symlink to itself, as the contest makes it, and one elsewhere.
        for target in [at.clone(), bundle.rootfs().join("tmp")] {
            let _ = fs::remove_file(&at);
            std::os::unix::fs::symlink(&target, &at).unwrap();
            let id = unique("symlink");
            assert_clean_failure(
                &rt,
                &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
                &id,
                "must be mounted on ordinary directory",
            );
        }
    }
    // The second createRuntime hook fails: runc names it by its index.
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| {
        c["hooks"] = json!({"createRuntime": [
            {"path": "/bin/true", "args": ["true"]},
            {"path": "/bin/sh", "args": ["sh", "-c", "exit 3"]}
        ]})
    });
    let id = unique("hook");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "error running hook #1: exit status 3",
    );
    // A hook killed by a signal is named by it, in Go's words as runc
    // prints them (bats: "bad system call"), with the hook's stderr.
    bundle.edit(|c| {
        c["hooks"] = json!({"createRuntime": [
            {"path": "/bin/sh", "args": ["sh", "-c", "echo about to die >&2; kill -SYS $$"]}
        ]})
    });
    let id = unique("hook");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "error running hook #0: signal: bad system call, stderr: about to die",
    );
}

/// A signal that comes while `run` is still setting up (a createRuntime
/// hook holds it) is kept and passed to the container once it runs, as
/// runc's `run` does: the container's process (not a namespace's init, so
/// SIGTERM's default action applies) dies of it as soon as it starts, and
/// nothing is left. Under both runtimes.
#[test]
fn a_signal_during_setup_reaches_the_container_once_it_runs() {
    require_root!();
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["sleep", "300"]);
        bundle.edit(|c| {
            c["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .retain(|n| n["type"] != "pid");
            c["hooks"] = json!({"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", "2"]}]});
        });
        let id = unique("early");
        let mut child = Command::new(&program)
            .arg("--root")
            .arg(root.path())
            .args(["run", "--bundle", bundle.dir.to_str().unwrap(), &id])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!(
                    "{}: the signal was lost: run still going",
                    program.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(143), "{}", program.display());
        let left = runtime_cmd(&program, &root, &["list", "-q"]);
        assert_eq!(left.stdout.trim(), "", "{}: left", program.display());
        // runc's default cgroup is /<id>, gpurun's /gpurun/<id>.
        for cgroup in [id.clone(), format!("gpurun/{id}")] {
            assert!(
                cgroup_dirs(&cgroup).is_empty(),
                "{}: {cgroup} left",
                program.display()
            );
        }
    }
}
