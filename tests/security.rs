//! Defects found by independent suites and hostile images, each with the
//! behaviour that must hold now: mount options take effect (a container
//! cannot raise its own limits), relative sources are the bundle's, files
//! read from an image are looked at before they are opened, environment
//! setup is linear, no freezer cgroup outlives its container, and a device
//! a rootless user cannot open is named before anything starts.

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use gpurun_tests::*;
use serde_json::json;

fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// runc mounts the cgroup hierarchy read-only when the spec says `ro`
/// (`gpurun spec` writes it): on cgroup v1 every subsystem was mounted
/// read-write, and a container raised its own pids.max. A read-only /dev
/// tmpfs was left writable too.
#[test]
fn read_only_cgroup_and_dev_mounts_are_read_only() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["resources"]["pids"] = json!({"limit": 50});
        for m in c["mounts"].as_array_mut().unwrap() {
            if m["destination"] == "/dev" {
                m["options"].as_array_mut().unwrap().push(json!("ro"));
            }
        }
    });
    // A cgroup namespace, as Docker gives containers on cgroup v2: there
    // /sys/fs/cgroup is then the container's own cgroup (without one, a
    // cgroup2 mount shows the host's root, as under runc).
    bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "cgroup"}))
    });
    assert!(bundle.config()["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["destination"] == "/sys/fs/cgroup"
            && m["options"].as_array().unwrap().contains(&json!("ro"))));
    bundle.set_args(&[
        "sh",
        "-c",
        "for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do \
           [ -e $f ] && { (echo 77 > $f) 2>&1 && echo raised; cat $f; }; done; \
         touch /sys/fs/cgroup/newfile 2>&1 && echo cgroup-tmpfs-writable; \
         touch /dev/newfile 2>&1 && echo dev-writable; \
         [ -c /dev/null ] && echo has-null",
    ]);
    let id = unique("ro");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(!lines.contains(&"raised"), "{lines:?}");
    assert!(lines.contains(&"50"), "{lines:?}");
    assert!(!lines.contains(&"cgroup-tmpfs-writable"), "{lines:?}");
    assert!(!lines.contains(&"dev-writable"), "{lines:?}");
    assert!(lines.contains(&"has-null"), "{lines:?}");
    // Refused by the read-only mounts and nothing else (root in the
    // container owns these files): EROFS for the pids.max write, the
    // cgroup tmpfs and /dev.
    let read_only = lines
        .iter()
        .filter(|l| l.ends_with("Read-only file system"))
        .count();
    assert_eq!(read_only, 3, "{lines:?}");
}

/// The runtime spec: a relative mount source is relative to the bundle.
/// It resolved against the caller's working directory, where a `data`
/// symlink to /dev gave the container the host's /dev.
#[test]
fn relative_bind_sources_are_the_bundles_not_the_callers() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    fs::create_dir(bundle.dir.join("data")).unwrap();
    fs::write(bundle.dir.join("data/from-the-bundle"), "").unwrap();
    let elsewhere = Scratch::new("cwd");
    std::os::unix::fs::symlink("/dev", elsewhere.path().join("data")).unwrap();
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["rbind", "ro"]
        }))
    });
    bundle.set_args(&["ls", "/data"]);
    let id = unique("relsrc");
    let mut cmd = rt.command(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    cmd.current_dir(elsewhere.path());
    let out = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "from-the-bundle");
}

/// Files gpurun reads from an image are looked at before they are opened:
/// a FIFO as /etc/ld.so.cache hung a GPU create forever with the id
/// locked; as /etc/passwd it hung the container's init.
#[test]
fn fifos_in_the_image_hang_nothing() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let rt = Runtime::new();
    let bundle = Bundle::glibc(None);
    let etc = bundle.rootfs().join("etc");
    fs::remove_file(etc.join("ld.so.cache")).unwrap();
    mkfifo(&etc.join("ld.so.cache"));
    fs::remove_file(etc.join("passwd")).unwrap();
    mkfifo(&etc.join("passwd"));
    bundle.set_process(
        &["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?"],
        &["NVIDIA_VISIBLE_DEVICES=0"],
    );
    // A hang fails in run's own timeout.
    let out = rt.run(fixtures.args(&[
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("fifo"),
    ]));
    assert_eq!(out.stdout.trim(), "smi=9", "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// A spec with 100,000 environment variables starts as fast as the rest:
/// setting them one by one into the init's environment was quadratic
/// (1e6 variables: no answer in 120 s).
#[test]
fn a_huge_environment_is_set_up_in_linear_time() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    // env, not sh: busybox sh itself takes seconds to import them.
    bundle.set_args(&["env"]);
    // The same container with n and 4n variables, in one run: linear set-up
    // takes at most about 4 times as long (less, with the fixed cost of a
    // start), the quadratic one took 16 times. A ratio, not a time: it
    // holds on a slow machine too.
    let mut took = Vec::new();
    for n in [25_000, 100_000] {
        let mut env = vec!["PATH=/bin".to_owned()];
        env.extend((0..n).map(|i| format!("V{i}=x")));
        env.push("LAST=here".into());
        bundle.edit(|c| c["process"]["env"] = json!(env));
        let start = Instant::now();
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("env"),
        ]);
        took.push(start.elapsed());
        assert!(
            out.stdout.lines().any(|l| l == "LAST=here"),
            "{}",
            out.stderr
        );
        assert_eq!(out.stdout.lines().count(), n + 3, "PATH, {n}, LAST, HOME");
    }
    assert!(
        took[1] < took[0] * 8,
        "4 times the variables took {:?} against {:?}: not linear",
        took[1],
        took[0]
    );
}

/// kill --all freezes and thaws the container's cgroup; racing with a
/// delete, the thaw made the freezer cgroup again, and it stayed, empty.
#[test]
fn no_freezer_cgroup_outlives_a_racing_delete() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    for round in 0..15 {
        let id = unique("freeze");
        rt.run(["run", "-d", "--bundle", &dir, &id]).ok();
        let killers: Vec<_> = (0..3)
            .map(|_| {
                rt.command(["kill", "--all", &id, "KILL"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let deleted = rt.run(["delete", "--force", &id]);
        for mut k in killers {
            let _ = k.wait();
        }
        // A kill still running after the delete: wait it out.
        std::thread::sleep(Duration::from_millis(20));
        let left = cgroup_dirs(&format!("gpurun/{id}"));
        let inside: Vec<String> = left
            .iter()
            .flat_map(|d| {
                [
                    "cgroup.procs",
                    "cgroup.events",
                    "cgroup.freeze",
                    "freezer.state",
                ]
                .map(|f| d.join(f))
            })
            .filter_map(|f| {
                Some(format!(
                    "{}: {}",
                    f.display(),
                    std::fs::read_to_string(&f).ok()?.trim()
                ))
            })
            .collect();
        assert!(
            left.is_empty(),
            "round {round}: left {left:?} ({inside:?}); delete exited {:?}: {}",
            deleted.code,
            deleted.stderr
        );
    }
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// A rootless container gets the host's device nodes bound in; one its
/// user cannot open is named before anything is made.
#[test]
fn a_device_a_rootless_user_cannot_open_is_named() {
    require_root!();
    let user = TestUser::get();
    let rt = Runtime::as_who(As::User(user.clone()));
    let bundle = Bundle::busybox_rootless(&user);
    bundle.edit(|c| {
        c["linux"]["devices"] = json!([{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11}])
    });
    bundle.set_args(&["true"]);
    let id = unique("nodev");
    assert_clean_failure(
        &rt,
        &["run", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "device /dev/kmsg: uid",
    );
}

/// The container's seccomp profile binds exec'd processes too (runc puts
/// every process it starts in a container under the filter); they ran
/// without any, whether the command came from flags or --process.
#[test]
fn exec_d_processes_get_the_containers_seccomp_filter() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["root"]["readonly"] = serde_json::json!(false);
        c["process"]["terminal"] = serde_json::json!(false);
        c["linux"]["seccomp"] = serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": [native_scmp_arch()],
            // An errno nothing else gives mkdir (ENOMSG), so only the
            // filter can have refused it.
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 42}]
        });
    });
    bundle.set_args(&["sleep", "300"]);
    let id = unique("seccomp-exec");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    let probe = "grep Seccomp: /proc/self/status; mkdir /tmp/made 2>&1 | grep -q 'No message of desired type' && echo refused";
    let out = rt.run(["exec", &id, "sh", "-c", probe]);
    assert_eq!(out.stdout, "Seccomp:\t2\nrefused\n", "{}", out.stderr);
    let scratch = Scratch::new("process");
    let process = scratch.path().join("process.json");
    fs::write(
        &process,
        serde_json::json!({
            "args": ["sh", "-c", probe], "cwd": "/", "user": {"uid": 0, "gid": 0},
            "env": ["PATH=/bin:/usr/bin"]
        })
        .to_string(),
    )
    .unwrap();
    let out = rt.run(["exec", "--process", process.to_str().unwrap(), &id]);
    assert_eq!(out.stdout, "Seccomp:\t2\nrefused\n", "{}", out.stderr);
    rt.run(["delete", "--force", &id]).ok();
}

/// A container whose init has exited keeps its pid in the state file; the
/// kernel may give that pid to any process. runc records the init's start
/// time and treats a pid with another start time as gone; gpurun signalled
/// whatever held the pid. The state here names a host process that is not
/// the container's (as a reused pid would): kill and delete leave it alive.
#[test]
fn a_reused_pid_is_not_signalled() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique("reuse");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    // Start times count clock ticks (10 ms): a reused pid is never as
    // young as the init that had it, and the outsider must not be either.
    std::thread::sleep(Duration::from_millis(30));
    let mut outsider = Command::new("sleep").arg("300").spawn().unwrap();
    let state_file = rt.root.join(&id).join("state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&state_file).unwrap()).unwrap();
    assert!(
        state["initProcessStart"].is_u64(),
        "the init's start time is recorded: {state}"
    );
    let init = state["pid"].as_i64().unwrap() as i32;
    state["pid"] = json!(outsider.id());
    fs::write(&state_file, state.to_string()).unwrap();

    assert_eq!(rt.state(&id)["status"], "stopped");
    let kill = rt.run(["kill", &id, "KILL"]);
    assert_ne!(kill.code, 0);
    assert!(
        kill.stderr.contains("container not running"),
        "{}",
        kill.stderr
    );
    rt.run(["delete", "--force", &id]).ok();
    assert!(
        outsider.try_wait().unwrap().is_none(),
        "the process holding the recorded pid was signalled"
    );
    outsider.kill().unwrap();
    let _ = outsider.wait();
    // The real init went with the container's cgroup.
    assert!(!is_alive(init), "the container's own init outlived delete");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}
