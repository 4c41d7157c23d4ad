//! The runc lifecycle as root: create, start, state, exec, ps, pause,
//! resume, kill, delete, exit codes and cgroup limits.

use std::fs;
use std::time::Duration;

use gpurun_tests::*;
use serde_json::json;

#[test]
fn create_start_kill_delete_walks_through_every_state() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique("life");
    let b = bundle.dir.to_str().unwrap();

    rt.run(["create", "--bundle", b, &id]).ok();
    let state = rt.state(&id);
    assert_eq!(state["status"], "created");
    assert_eq!(state["id"], id.as_str());
    assert_eq!(state["bundle"], b, "state reports the user's bundle");
    let pid = state["pid"].as_i64().unwrap();
    assert!(pid > 0);
    // The init waits for start: it is not yet the workload.
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("sleep"));

    rt.run(["start", &id]).ok();
    assert_eq!(rt.state(&id)["status"], "running");
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).starts_with("sleep"));

    rt.run(["kill", &id, "KILL"]).ok();
    let mut stopped = false;
    for _ in 0..200 {
        if rt.state(&id)["status"] == "stopped" {
            stopped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(stopped, "container did not stop after SIGKILL");

    rt.run(["delete", &id]).ok();
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    let gone = rt.run(["state", &id]);
    assert_eq!(gone.code, 1);
}

#[test]
fn run_returns_the_container_exit_code() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let b = bundle.dir.to_str().unwrap();
    for (args, want) in [
        (vec!["true"], 0),
        (vec!["sh", "-c", "exit 7"], 7),
        (vec!["sh", "-c", "kill -TERM $$"], 128 + 15),
        (vec!["sh", "-c", "kill -KILL $$"], 128 + 9),
    ] {
        bundle.set_args(&args);
        // Without its own pid namespace the shell is not a pid 1, which
        // would ignore signals it has no handler for.
        bundle.edit(|c| {
            c["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .retain(|n| n["type"] != "pid")
        });
        let out = rt.run(["run", "--bundle", b, &unique("code")]);
        assert_eq!(out.code, want, "{args:?}: stderr {}", out.stderr);
    }
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}

#[test]
fn run_forwards_signals_and_reports_signal_deaths() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let b = bundle.dir.to_str().unwrap().to_owned();
    let scratch = Scratch::new("sig");

    // SIGTERM to gpurun reaches the container's init, whose trap exits 42.
    bundle.edit(|c| c["root"]["readonly"] = false.into());
    bundle.set_args(&[
        "sh",
        "-c",
        "trap 'exit 42' TERM; touch /tmp/ready; while true; do sleep 0.05; done",
    ]);
    let id = unique("fwd");
    let mut child = rt
        .command(["run", "--bundle", &b, &id])
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(scratch.path().join("o1")).unwrap())
        .stderr(fs::File::create(scratch.path().join("e1")).unwrap())
        .spawn()
        .unwrap();
    wait_until(|| bundle.rootfs().join("tmp/ready").exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(42));
    fs::remove_file(bundle.rootfs().join("tmp/ready")).unwrap();

    // An init killed from outside gives 128+9.
    bundle.set_args(&["sleep", "300"]);
    let id = unique("killed");
    let mut child = rt
        .command(["run", "--bundle", &b, &id])
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(scratch.path().join("o2")).unwrap())
        .stderr(fs::File::create(scratch.path().join("e2")).unwrap())
        .spawn()
        .unwrap();
    wait_until(|| rt.run(["state", &id]).stdout.contains("running"));
    rt.run(["kill", &id, "KILL"]).ok();
    assert_eq!(child.wait().unwrap().code(), Some(137));
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

fn wait_until(mut ready: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("condition not reached in 10 s");
}

#[test]
fn run_passes_stdout_through() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "echo hello from $(hostname)"]);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("out"),
    ]);
    out.ok();
    assert!(out.stdout.starts_with("hello from"), "{}", out.stdout);
}

#[test]
fn exec_ps_pause_resume_on_a_running_container() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique("exec");
    rt.run([
        "run",
        "--detach",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &id,
    ])
    .ok();
    assert_eq!(rt.state(&id)["status"], "running");

    let out = rt.run(["exec", &id, "sh", "-c", "echo inside; exit 3"]);
    assert_eq!(out.code, 3);
    assert_eq!(out.stdout.trim(), "inside");
    // A program that is not there: runc's 255 and its words, once each.
    let out = rt.run(["exec", &id, "/nonexistent"]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().next().unwrap_or_default(),
        "gpurun: error: exec failed: unable to start container process: exec: \"/nonexistent\": stat /nonexistent: no such file or directory"
    );

    // --process with a process.json, as containerd's shim sends it.
    let scratch = Scratch::new("proc");
    let process = scratch.path().join("process.json");
    fs::write(
        &process,
        json!({"args": ["sh", "-c", "exit 4"], "cwd": "/", "env": ["PATH=/bin"],
               "user": {"uid": 0, "gid": 0}})
        .to_string(),
    )
    .unwrap();
    let out = rt.run(["exec", "--process", process.to_str().unwrap(), &id]);
    assert_eq!(out.code, 4, "{}", out.stderr);

    let ps = rt.run(["ps", "--format", "json", &id]);
    ps.ok();
    let pids: Vec<i32> = serde_json::from_str(&ps.stdout).unwrap();
    let init = rt.state(&id)["pid"].as_i64().unwrap() as i32;
    assert!(pids.contains(&init), "ps {pids:?} lacks init {init}");

    rt.run(["pause", &id]).ok();
    assert_eq!(rt.state(&id)["status"], "paused");
    let freezer = format!("/sys/fs/cgroup/freezer/gpurun/{id}/freezer.state");
    if let Ok(text) = fs::read_to_string(&freezer) {
        assert_eq!(text.trim(), "FROZEN");
    }
    let proc_state = fs::read_to_string(format!("/proc/{init}/stat")).unwrap();
    assert!(proc_state.contains(") S") || proc_state.contains(") D"));
    rt.run(["resume", &id]).ok();
    assert_eq!(rt.state(&id)["status"], "running");

    let listed = rt.run(["list", "--format", "json"]);
    let list: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());

    // Deleting a running container needs --force.
    let refused = rt.run(["delete", &id]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
    rt.run(["delete", "--force", &id]).ok();
    assert!(rt.leftovers().is_empty());
    assert!(!is_alive(init), "init {init} survived delete --force");
}

#[test]
fn kill_all_signals_every_process() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "sleep 300 & sleep 300 & wait"]);
    let id = unique("killall");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    std::thread::sleep(Duration::from_millis(100));
    let pids: Vec<i32> =
        serde_json::from_str(&rt.run(["ps", "--format", "json", &id]).stdout).unwrap();
    assert!(pids.len() >= 3, "{pids:?}");
    rt.run(["kill", "--all", &id, "9"]).ok();
    std::thread::sleep(Duration::from_millis(200));
    for pid in pids {
        assert!(!is_alive(pid), "pid {pid} survived kill --all");
    }
    rt.run(["delete", "--force", &id]).ok();
}

#[test]
fn cgroup_limits_reach_the_cgroup_files() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    bundle.edit(|c| {
        c["linux"]["resources"]["memory"] = json!({"limit": 67108864});
        c["linux"]["resources"]["pids"] = json!({"limit": 42});
        c["linux"]["resources"]["cpu"] = json!({"shares": 512});
    });
    let id = unique("limits");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory").is_dir();
    let read = |v1_path: &str, v2_path: &str| {
        let path = if v1 {
            format!("/sys/fs/cgroup/{v1_path}")
        } else {
            format!("/sys/fs/cgroup/gpurun/{id}/{v2_path}")
        };
        fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .trim()
            .to_owned()
    };
    assert_eq!(
        read(
            &format!("memory/gpurun/{id}/memory.limit_in_bytes"),
            "memory.max"
        ),
        "67108864"
    );
    assert_eq!(
        read(&format!("pids/gpurun/{id}/pids.max"), "pids.max"),
        "42"
    );
    if v1 {
        let cpu = ["cpu", "cpu,cpuacct"]
            .iter()
            .map(|c| format!("/sys/fs/cgroup/{c}/gpurun/{id}/cpu.shares"))
            .find(|p| std::path::Path::new(p).exists())
            .expect("cpu.shares of the container");
        assert_eq!(fs::read_to_string(cpu).unwrap().trim(), "512");
    }
    // The init is in that cgroup.
    let init = rt.state(&id)["pid"].as_i64().unwrap();
    let cgroups = fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap();
    assert!(cgroups.contains(&format!("/gpurun/{id}")), "{cgroups}");

    // update --resources - (Docker's form), JSON on stdin.
    let mut cmd = rt.command(["update", "--resources", "-", &id]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"pids":{"limit":17}}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        read(&format!("pids/gpurun/{id}/pids.max"), "pids.max"),
        "17"
    );

    rt.run(["delete", "--force", &id]).ok();
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
}

#[test]
fn errors_reach_the_json_log_as_one_line() {
    require_root!();
    let rt = Runtime::new();
    let scratch = Scratch::new("log");
    let log = scratch.path().join("log.json");
    let out = rt.run([
        "--log",
        log.to_str().unwrap(),
        "--log-format",
        "json",
        "start",
        "no-such-container",
    ]);
    assert_eq!(out.code, 1);
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let entry: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(entry["level"], "error");
    assert!(entry["msg"].as_str().unwrap().contains("does not exist"));
    assert!(entry["time"].is_string());
}

/// CAP_SYS_PTRACE in the bounding set: a root `run` then re-execs.
fn allow_ptrace(bundle: &Bundle) {
    bundle.edit(|c| {
        c["process"]["capabilities"]["bounding"]
            .as_array_mut()
            .unwrap()
            .push("CAP_SYS_PTRACE".into())
    });
}

/// What a container process could do to the runtime (CVE-2019-5736): hold
/// `/proc/<runtime>/exe` open while the runtime is in its namespaces, and
/// once the runtime is gone, open that file for writing with the ids the
/// container holds. It must fail:
///
/// - as root, `exec` (and a `run` whose container may hold CAP_SYS_PTRACE)
///   runs from a read-only private overlay, never from the host binary
///   (root could write that); a plain root `run` runs from the host binary
///   but stays outside the container's pid namespace, and its clones that
///   enter the container end in the exec stub (see
///   `the_program_never_execs_the_host_binary_through_proc_self_exe`);
/// - rootless with a root-owned binary, it runs from the binary itself (no
///   copy: no id of the container's can write it) and the write is refused;
/// - rootless with a binary the user owns, it runs from a sealed copy.
///
/// Tried for `run` and `exec`; each write is tried as the container's
/// root, its first subordinate id and its last, and a file those ids may
/// write is written the same way first, so a refusal means something.
#[test]
fn the_runtime_binary_cannot_be_written_through_proc_exe() {
    require_root!();
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    let held_exe = |pid: u32| -> Option<OwnedFd> {
        let path = std::ffi::CString::new(format!("/proc/{pid}/exe")).unwrap();
        // SAFETY: a valid path; an O_PATH descriptor reads and writes nothing.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        // SAFETY: a fresh descriptor owned here.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    };
    // Appends a byte to the file behind `fd` as (uid, gid), in a child
    // that reopens it through /proc/self/fd as a container process would.
    let write_as = |fd: &OwnedFd, (uid, gid): (u32, u32)| -> bool {
        let raw = fd.as_raw_fd();
        let mut sh = std::process::Command::new("/bin/sh");
        sh.args(["-c", "printf x >> /proc/self/fd/3"])
            .uid(uid)
            .gid(gid)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: dup2 is async-signal-safe; it runs in the child only.
        unsafe {
            sh.pre_exec(move || {
                if libc::dup2(raw, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        sh.status().unwrap().success()
    };
    let user = TestUser::get();
    let subuid = |nth: u32| {
        let line = fs::read_to_string("/etc/subuid").unwrap();
        let fields: Vec<u32> = line
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{}:", user.name)))
            .unwrap()
            .split(':')
            .map(|f| f.parse().unwrap())
            .collect();
        fields[0] + nth.min(fields[1] - 1)
    };
    // Copies of the binary: one root-owned in a root-owned 0755 directory
    // (the normal install), one the user owns.
    let bins = Scratch::new("sealbins");
    let install = |owner: Option<&TestUser>| {
        let dir = bins
            .path()
            .join(if owner.is_some() { "user" } else { "root" });
        fs::create_dir(&dir).unwrap();
        let bin = dir.join("gpurun");
        fs::copy(gpurun_bin(), &bin).unwrap();
        if let Some(u) = owner {
            chown(&dir, u);
            chown(&bin, u);
        }
        bin
    };
    let root_owned = install(None);
    let user_owned = install(Some(&user));

    struct Case {
        who: As,
        bin: std::path::PathBuf,
        copied: bool,
        /// `run` goes on in the host binary, outside the container (the
        /// exec stub's path).
        run_stays_out: bool,
        ptrace: bool,
        writers: Vec<(u32, u32)>,
    }
    let cases = [
        Case {
            who: As::Root,
            bin: root_owned.clone(),
            copied: true,
            run_stays_out: true,
            ptrace: false,
            writers: vec![(0, 0)],
        },
        Case {
            who: As::Root,
            bin: root_owned.clone(),
            copied: true,
            run_stays_out: false,
            ptrace: true,
            writers: vec![(0, 0)],
        },
        Case {
            who: As::User(user.clone()),
            bin: root_owned.clone(),
            copied: false,
            run_stays_out: false,
            ptrace: false,
            writers: vec![
                (user.uid, user.gid),
                (subuid(0), subuid(0)),
                (subuid(65535), subuid(65535)),
            ],
        },
        Case {
            who: As::User(user.clone()),
            bin: user_owned.clone(),
            copied: true,
            run_stays_out: false,
            ptrace: false,
            writers: vec![(user.uid, user.gid), (subuid(0), subuid(0))],
        },
    ];
    for case in cases {
        let who = format!("{:?} with {}", case.who, case.bin.display());
        let mut rt = Runtime::as_who(case.who.clone());
        rt.bin = case.bin.clone();
        let bundle = match &case.who {
            As::Root => Bundle::busybox(),
            As::User(u) => Bundle::busybox_rootless(u),
        };
        bundle.set_args(&["sleep", "300"]);
        if case.ptrace {
            allow_ptrace(&bundle);
        }
        let id = unique("seal");
        let scratch = Scratch::new("sealout");
        let mut run = rt
            .command(["run", "--bundle", bundle.dir.to_str().unwrap(), &id])
            .stdin(std::process::Stdio::null())
            .stdout(fs::File::create(scratch.path().join("out")).unwrap())
            .stderr(fs::File::create(scratch.path().join("err")).unwrap())
            .spawn()
            .unwrap();
        wait_until(|| rt.run(["state", &id]).stdout.contains("running"));
        let mut exec = rt
            .command(["exec", &id, "sleep", "300"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let host = fs::metadata(&case.bin).unwrap();
        let is_host_binary = |pid: u32| {
            fs::metadata(format!("/proc/{pid}/exe"))
                .is_ok_and(|m| (m.dev(), m.ino()) == (host.dev(), host.ino()))
        };
        // The re-exec, where there is one, is the first thing either does:
        // once the exec'd sleep runs in the container's pid namespace
        // (beside the init's), both runtimes are past it.
        let init = rt.state(&id)["pid"].as_i64().unwrap();
        let pid_ns = fs::read_link(format!("/proc/{init}/ns/pid")).unwrap();
        let sleeps_inside = || {
            fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter(|p| {
                    fs::read_link(p.path().join("ns/pid")).is_ok_and(|ns| ns == pid_ns)
                        && fs::read_to_string(p.path().join("comm")).is_ok_and(|c| c == "sleep\n")
                })
                .count()
        };
        wait_until(|| sleeps_inside() == 2);
        let mut held = Vec::new();
        if case.run_stays_out {
            let pid = run.id();
            assert!(is_host_binary(pid), "{who}: run re-exec'd");
            assert_ne!(
                fs::read_link(format!("/proc/{pid}/ns/pid")).unwrap(),
                pid_ns,
                "{who}: run is in the container's pid namespace"
            );
            assert!(!is_host_binary(init as u32), "{who}: the init runs gpurun");
        } else {
            assert_eq!(
                is_host_binary(run.id()),
                !case.copied,
                "{who}: whether run runs from the binary itself"
            );
            held.push(held_exe(run.id()).expect("open /proc/<pid>/exe"));
        }
        let pid = exec.id();
        assert_eq!(
            is_host_binary(pid),
            !case.copied,
            "{who}: whether exec runs from the binary itself"
        );
        held.push(held_exe(pid).expect("open /proc/<pid>/exe"));
        rt.run(["kill", &id, "KILL"]);
        assert_eq!(run.wait().unwrap().code(), Some(137));
        let _ = exec.wait();
        for &ids in &case.writers {
            let control = scratch.path().join(format!("control-{}", ids.0));
            fs::write(&control, "").unwrap();
            std::os::unix::fs::chown(&control, Some(ids.0), Some(ids.1)).unwrap();
            let control = fs::File::open(&control).unwrap();
            assert!(
                write_as(&OwnedFd::from(control), ids),
                "{who}: {ids:?} cannot write even its own file"
            );
            for fd in &held {
                assert!(
                    !write_as(fd, ids),
                    "{who}: {ids:?} wrote the runtime's binary"
                );
            }
        }
        assert_eq!(
            fs::read(&case.bin).unwrap(),
            fs::read(gpurun_bin()).unwrap()
        );
        assert!(rt.leftovers().is_empty());
    }
}

/// The other half of CVE-2019-5736: a container whose program is a
/// `#!/proc/self/exe` script (or whose loader resolves there) makes the
/// kernel exec whatever the exec'ing process runs from. A plain root
/// `run` execs the program from the sealed exec stub, so that is the
/// stub, which refuses to run on its own (127); where the container may
/// hold CAP_SYS_PTRACE, `run` has re-exec'd from the read-only overlay
/// instead, so it is a gpurun that cannot be written, which fails on the
/// arguments it gets. Either way the host's binary is never exec'd in the
/// container and stays as it was.
#[test]
fn the_program_never_execs_the_host_binary_through_proc_self_exe() {
    require_root!();
    let before = fs::read(gpurun_bin()).unwrap();
    for (ptrace, program) in [(false, "/evil"), (false, "evil"), (true, "/evil")] {
        let rt = Runtime::new();
        let bundle = Bundle::busybox();
        let script = bundle.rootfs().join("bin/evil");
        fs::write(&script, "#!/proc/self/exe\n").unwrap();
        fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        fs::copy(&script, bundle.rootfs().join("evil")).unwrap();
        bundle.set_args(&[program]);
        if ptrace {
            allow_ptrace(&bundle);
        }
        let id = unique("selfexe");
        let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
        if ptrace {
            assert_ne!(out.code, 127, "{out:?}");
            assert!(!out.stderr.contains("gpurun-exec"), "{out:?}");
        } else {
            assert_eq!(out.code, 127, "{program}: {out:?}");
            assert!(
                out.stderr.contains("gpurun-exec: not to be run on its own"),
                "{program}: {out:?}"
            );
        }
        assert!(rt.leftovers().is_empty());
    }
    assert!(
        fs::read(gpurun_bin()).unwrap() == before,
        "the binary changed"
    );
}

/// The device rules alone refuse: the container holds CAP_MKNOD (so mknod
/// works), and opening `c 42 0` (a number no driver has: ENXIO without the
/// rules) and this host's own disk fails with the device cgroup's EPERM.
/// The disk counts only where the host's root can open it: some sandboxes
/// refuse every block device open with EPERM, whatever the cgroup says.
#[test]
fn the_default_spec_denies_devices_it_does_not_list() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    bundle.edit(|c| {
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!("CAP_MKNOD"));
        }
    });
    // A block device this host has (the first in /proc/partitions), if
    // the host itself may open it.
    let partitions = fs::read_to_string("/proc/partitions").unwrap();
    let disk = partitions.lines().skip(2).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 4).then(|| (format!("{} {}", f[0], f[1]), format!("/dev/{}", f[3])))
    });
    let disk = disk.filter(|(_, node)| match fs::File::open(node) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("the disk is left out: the host cannot open {node} either ({e})");
            false
        }
    });
    let id = unique("devdeny");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    let mut probe =
        "mknod /dev/nodriver c 42 0 && echo mknod-ok; head -c1 /dev/nodriver".to_owned();
    if let Some((numbers, _)) = &disk {
        probe = format!(
            "mknod /dev/disk-probe b {numbers} && echo mknod-ok; head -c1 /dev/disk-probe >/dev/null; {probe}"
        );
    }
    let out = rt.run(["exec", &id, "sh", "-c", &probe]);
    rt.run(["delete", "--force", &id]).ok();
    let expected = 1 + usize::from(disk.is_some());
    assert_eq!(out.stdout.matches("mknod-ok").count(), expected, "{out:?}");
    assert_eq!(
        out.stderr.matches("Operation not permitted").count(),
        expected,
        "every open must be refused by the device cgroup: {out:?}"
    );
}

/// Every process of a container (its init, the init's children, an exec'd
/// process) is in the container's cgroup in every controller gpurun
/// manages, and each of those cgroups lists exactly the container's
/// processes. (gpurun joins v1 cgroups by moving a single thread, through
/// `tasks`; this is what makes that equal to moving the process.)
#[test]
fn every_container_process_is_in_the_container_cgroup_of_every_controller() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "sleep 300 & exec sleep 301"]);
    let id = unique("members");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    // exec runs from the config saved at create, not the bundle's.
    fs::remove_file(bundle.dir.join("config.json")).unwrap();
    rt.run(["exec", "-d", &id, "sleep", "302"]).ok();
    let ps = || -> Vec<i32> {
        serde_json::from_str(&rt.run(["ps", "--format", "json", &id]).stdout).unwrap()
    };
    wait_until(|| ps().len() == 3);
    let mut pids = ps();
    pids.sort();

    let ours = format!("/gpurun/{id}");
    let managed = [
        "cpu", "cpuacct", "cpuset", "devices", "memory", "freezer", "blkio", "pids",
    ];
    let v1 = std::path::Path::new("/sys/fs/cgroup/freezer").is_dir();
    let systemd_named = std::path::Path::new("/sys/fs/cgroup/systemd/tasks").exists();
    let hybrid = std::path::Path::new("/sys/fs/cgroup/unified/cgroup.threads").exists();
    let mut hierarchies = Vec::new();
    for pid in &pids {
        let table = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        for line in table.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            // On v1 also the hierarchies without controllers that runc
            // joins: systemd's named one and a hybrid host's unified one.
            let ours_to_manage = if v1 {
                controllers.split(',').any(|c| managed.contains(&c))
                    || (controllers == "name=systemd" && systemd_named)
                    || (controllers.is_empty() && hybrid)
            } else {
                controllers.is_empty()
            };
            if ours_to_manage {
                assert_eq!(path, ours, "pid {pid}: {line}");
                hierarchies.push(controllers.to_owned());
            }
        }
    }
    assert!(!hierarchies.is_empty(), "no managed hierarchy seen");
    hierarchies.sort();
    hierarchies.dedup();
    for controllers in hierarchies {
        let dir = if v1 {
            let hierarchy = match controllers.as_str() {
                "name=systemd" => "systemd",
                "" => "unified",
                named => named,
            };
            format!("/sys/fs/cgroup/{hierarchy}{ours}")
        } else {
            format!("/sys/fs/cgroup{ours}")
        };
        let mut members: Vec<i32> = fs::read_to_string(format!("{dir}/cgroup.procs"))
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        members.sort();
        assert_eq!(members, pids, "{dir}/cgroup.procs");
    }
    rt.run(["delete", "--force", &id]).ok();
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
}

/// A root `run` of `true` from a busybox bundle under `strace -f`, tracing
/// the system calls `calls`: the run's output and the trace.
fn strace_run_of_true(rt: &Runtime, calls: &str, id_prefix: &str) -> (Ran, String) {
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let scratch = Scratch::new(id_prefix);
    let trace = scratch.path().join("trace");
    let mut cmd = std::process::Command::new("strace");
    cmd.args([
        "-f",
        "-qq",
        "-s",
        "64",
        "-e",
        &format!("trace={calls}"),
        "-o",
    ])
    .arg(&trace)
    .arg(gpurun_bin())
    .arg("--root")
    .arg(&rt.root)
    .args([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique(id_prefix),
    ]);
    let out = run_cmd(&mut cmd, TIMEOUT);
    (out, fs::read_to_string(&trace).unwrap())
}

/// A root start with no user or time namespace clones the init straight
/// into its new pid namespace: no intermediate process is made (it names
/// itself `youki:[1:INTER]`), and the one clone that makes the init asks
/// for the pid namespace. The container's process is still pid 1 there.
#[test]
fn a_root_start_makes_no_intermediate_process() {
    require_root!();
    let rt = Runtime::new();
    let (out, trace) = strace_run_of_true(&rt, "clone,clone3,prctl", "nointer");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !trace.contains("INTER]"),
        "an intermediate process:\n{trace}"
    );
    assert!(trace.contains("youki:[2:INIT]"), "no init named:\n{trace}");
    let new_pid_ns = trace
        .lines()
        .filter(|l| l.contains("clone") && l.contains("CLONE_NEWPID"))
        .count();
    assert_eq!(new_pid_ns, 1, "{trace}");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());

    let bundle = Bundle::busybox();
    bundle.set_args(&["sh", "-c", "echo $$"]);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("nointer"),
    ]);
    assert_eq!((out.code, out.stdout.trim()), (0, "1"), "{}", out.stderr);
}

/// On cgroup v1 the container's single-threaded intermediate process joins
/// by moving its own thread through `tasks`: nothing is moved through
/// `cgroup.procs`, which would cost an RCU grace period on every start.
/// Seen from outside with strace; the test above checks the outcome.
#[test]
fn v1_start_moves_one_thread_and_no_process() {
    require_root!();
    if !std::path::Path::new("/sys/fs/cgroup/freezer").is_dir() {
        eprintln!("skipped: not a cgroup v1 host");
        return;
    }
    let rt = Runtime::new();
    let (_, trace) = strace_run_of_true(&rt, "openat", "v1tasks");
    let writes = |file: &str| {
        trace
            .lines()
            .filter(|l| l.contains(&format!("/{file}\"")) && l.contains("O_WRONLY"))
            .count()
    };
    assert!(writes("tasks") >= 1, "no thread moved:\n{trace}");
    assert_eq!(writes("cgroup.procs"), 0, "a process moved:\n{trace}");
    assert!(rt.leftovers().is_empty());
}

/// A root start on a v1 host reads the mount table twice in all, once for
/// the cgroup hierarchies (before the container's processes are cloned:
/// they inherit it) and once in the init for the rootfs's parent mount;
/// it makes one private procfs for pathrs, and opens `devices.allow` once
/// for all the rules. Each mount table read and procfs mount takes the
/// kernel's global mount lock, which every start on the host contends for
/// (a start read it six times and made two procfs mounts before). Cgroup
/// files and directories are reached from a descriptor of /sys/fs/cgroup,
/// never by an absolute path: each absolute walk takes sysfs's lock, which
/// every network namespace made or removed on the host takes for writing
/// (a hundred such walks per start before). The rules still land:
/// `tests/gpu.rs` reads the container's `devices.list`, and the device
/// rule tests above get the cgroup's EPERM; here the writes are counted.
#[test]
fn v1_root_start_reads_the_mount_table_twice_and_cgroupfs_from_one_descriptor() {
    require_root!();
    if !std::path::Path::new("/sys/fs/cgroup/devices").is_dir() {
        eprintln!("skipped: not a cgroup v1 host");
        return;
    }
    let rt = Runtime::new();
    let (out, trace) = strace_run_of_true(
        &rt,
        "openat,openat2,fsopen,write,mkdir,mkdirat,rmdir,unlinkat",
        "v1reads",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let count = |pred: &dyn Fn(&str) -> bool| trace.lines().filter(|l| pred(l)).count();
    let mountinfo = count(&|l| l.contains("\"mountinfo\"") && !l.contains("= -1"));
    assert_eq!(mountinfo, 2, "mountinfo reads:\n{trace}");
    let procfs = count(&|l| l.contains("fsopen(\"proc\", FSOPEN_CLOEXEC)"));
    assert!(procfs <= 1, "private procfs mounts: {procfs}\n{trace}");
    let allow_opens = count(&|l| l.contains("/devices.allow\"") && l.contains("O_WRONLY"));
    assert_eq!(allow_opens, 1, "devices.allow opens:\n{trace}");
    // Every rule of the default set (runc's: `c *:* m`, `b *:* m`, the
    // standard nodes, ptys, tun) was written through that one file.
    let rules = count(&|l| l.contains("write(") && l.contains("\"c *:* m\""));
    assert_eq!(rules, 1, "the default rules were not written:\n{trace}");
    let absolute = count(&|l| {
        [
            "openat(AT_FDCWD, ",
            "mkdir(",
            "rmdir(",
            "unlinkat(AT_FDCWD, ",
        ]
        .iter()
        .any(|call| l.contains(&format!("{call}\"/sys/fs/cgroup/")))
    });
    assert_eq!(absolute, 0, "absolute cgroupfs paths:\n{trace}");
    // The container joined every hierarchy through `tasks`, relative to
    // the descriptor, and its cgroups were made and removed so.
    let relative = |call: &str, tail: &str| {
        count(&|l| {
            l.contains(call) && !l.contains("AT_FDCWD") && l.contains(tail) && !l.contains("= -1")
        })
    };
    assert!(relative("openat(", "/tasks\", O_WRONLY") >= 9, "{trace}");
    assert!(relative("mkdirat(", "\", 0777)") >= 9, "{trace}");
    assert!(relative("unlinkat(", "AT_REMOVEDIR") >= 9, "{trace}");
    assert!(rt.leftovers().is_empty());
}

/// Run as uid 0 inside a user namespace (rootless Podman runs its runtime
/// so), the protected re-exec still goes through a private read-only
/// overlay, not a 7.6 MB memfd copy: the overlay's second layer is an empty
/// directory of its own, since the kernel refuses `/dev` there (its locked
/// submounts: "failed to clone lowerpath").
#[test]
fn inside_a_user_namespace_the_reexec_uses_the_overlay() {
    require_root!();
    let scratch = Scratch::new("usns");
    let out = run_cmd(
        std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "strace", "-f", "-e"])
            .arg("trace=fsmount,memfd_create")
            .arg(gpurun_bin())
            .arg("--root")
            .arg(scratch.path().join("root"))
            .args(["exec", "no-such-container", "true"]),
        TIMEOUT,
    );
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("fsmount(") && !l.contains("= -1")),
        "no overlay was mounted: {}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("memfd_create(\"gpurun-sealed\""),
        "the binary was copied: {}",
        out.stderr
    );
    let left: Vec<_> = fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("gpurun-seal-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A state root that fills up at each point of a create: every create
/// either works or fails with one line that names the full state root,
/// and leaves nothing behind (no state, no process, no cgroup, no mount),
/// as root and rootless.
#[test]
fn a_full_state_root_fails_with_one_line_and_leaves_nothing() {
    require_root!();
    for who in [As::Root, As::User(TestUser::get())] {
        let (bundle, uid) = match &who {
            As::Root => (Bundle::busybox(), 0),
            As::User(user) => (Bundle::busybox_rootless(user), user.uid),
        };
        bundle.set_args(&["true"]);
        let mut rt = Runtime::as_who(who.clone());
        let small = Scratch::new("full-root");
        let root = small.path().join("root");
        fs::create_dir(&root).unwrap();
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size=16k,uid={uid},mode=0700"),
                "tmpfs",
            ])
            .arg(&root)
            .status()
            .unwrap();
        assert!(mounted.success());
        let _unmount = Unmount(root.clone());
        rt.root = root.clone();
        let b = bundle.dir.to_str().unwrap();
        let mut failed = 0;
        // tmpfs counts pages: fill 0 to 3 of its 4 pages.
        for pages in 0..4 {
            fs::write(root.join("fill"), vec![b'0'; pages * 4096]).unwrap();
            let id = unique("full");
            let out = rt.run(["create", "--bundle", b, &id]);
            if out.code == 0 {
                rt.run(["delete", "--force", &id]).ok();
            } else {
                failed += 1;
                assert_eq!(out.code, 1, "{who:?} {pages}: {}", out.stderr);
                assert_eq!(
                    out.stderr.lines().count(),
                    1,
                    "{who:?} {pages}: {}",
                    out.stderr
                );
                assert!(
                    out.stderr.contains("No space left on device")
                        && out
                            .stderr
                            .contains("is full; free space there or give another --root"),
                    "{who:?} {pages}: {}",
                    out.stderr
                );
            }
            let left: Vec<String> = fs::read_dir(&root)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "fill")
                .collect();
            assert!(
                left.is_empty(),
                "{who:?} {pages}: left {left:?}: {}",
                out.stderr
            );
            let procs = processes_mentioning(&id);
            assert!(
                procs.is_empty(),
                "{who:?} {pages}: a process left: {:?} {}",
                describe_processes(&procs),
                out.stderr
            );
            assert!(
                cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
                "{who:?} {pages}: cgroup left"
            );
            assert!(
                mounts_mentioning(&id).is_empty(),
                "{who:?} {pages}: mount left"
            );
        }
        assert!(failed >= 2, "{who:?}: the state root never filled up");
    }
}

/// A create that died while a child of it lives on (holding its creator
/// lock) does not lock its id for ever: a forced delete takes the id over.
/// A live one is waited for, and then refused with one line.
#[test]
fn a_forced_delete_takes_over_from_a_dead_create_only() {
    require_root!();
    let rt = Runtime::new();
    let root = rt.root.clone();
    fs::create_dir_all(&root).unwrap();
    let hold = |id: &str, holder: &str| {
        let dir = root.join(format!("{id}@creating"));
        fs::create_dir_all(&dir).unwrap();
        let lock = dir.join("creator.lock");
        fs::write(&lock, holder).unwrap();
        // One process holding the lock: what a create's orphan is.
        std::process::Command::new("sh")
            .args(["-c", "exec 9>>\"$0\" && flock 9 && exec sleep 30"])
            .arg(&lock)
            .spawn()
            .unwrap()
    };
    let mut orphan = hold("dead", "1 0");
    wait_until_locked(&mut orphan, &root.join("dead@creating/creator.lock"));
    let out = rt.run(["delete", "--force", "dead"]);
    let _ = orphan.kill();
    let _ = orphan.wait();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!root.join("dead@creating").exists());

    let mut alive = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let stat = fs::read_to_string(format!("/proc/{}/stat", alive.id())).unwrap();
    let start = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_owned();
    let mut holder = hold("live", &format!("{} {start}", alive.id()));
    wait_until_locked(&mut holder, &root.join("live@creating/creator.lock"));
    let out = rt.run(["delete", "--force", "live"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .lines()
            .last()
            .unwrap_or_default()
            .contains("is being created or deleted by another gpurun"),
        "{}",
        out.stderr
    );
    assert!(
        root.join("live@creating").exists(),
        "a live create's directory was taken"
    );
    let _ = alive.kill();
    let _ = holder.kill();
    let _ = alive.wait();
    let _ = holder.wait();
    let _ = fs::remove_dir_all(root.join("live@creating"));
}

/// Waits until `flock` holds `lock` (its child runs).
fn wait_until_locked(flock: &mut std::process::Child, lock: &std::path::Path) {
    for _ in 0..200 {
        let held = std::process::Command::new("flock")
            .args(["-n", "-E", "99"])
            .arg(lock)
            .arg("true")
            .status()
            .unwrap()
            .code()
            == Some(99);
        if held {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = flock.kill();
    panic!("flock never took {}", lock.display());
}

/// While a create is under way (a createRuntime hook sleeping 2 s holds it
/// after the state is first saved, before the init has a pid), `state` and
/// `list` say "creating", not "stopped" (an engine would take that for a
/// container that died), and a plain `delete` and a `kill` refuse it
/// instead of taking down what the create is making. Once created, all is
/// as usual.
#[test]
fn a_container_being_created_is_creating_and_not_deleted_under_its_create() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| {
        c["hooks"] = json!({"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", "2"]}]});
    });
    let id = unique("creating");
    let mut create = rt
        .command(["create", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = |rt: &Runtime| {
        let out = rt.run(["state", &id]);
        serde_json::from_str::<serde_json::Value>(&out.stdout)
            .map(|v| v["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    while status(&rt).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(status(&rt), "creating");
    let listed = rt.run(["list"]);
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&id) && l.contains(" creating ")),
        "{}",
        listed.stdout
    );
    let out = rt.run(["delete", &id]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("is being created"), "{}", out.stderr);
    let out = rt.run(["kill", &id, "KILL"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("container not running"),
        "{}",
        out.stderr
    );
    assert!(create.wait().unwrap().success(), "the create failed");
    assert_eq!(status(&rt), "created");
    rt.run(["delete", &id]).ok();
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}
