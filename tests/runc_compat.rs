//! What runc does for these, gpurun does too (written from runc's own
//! documented behaviour and its bats tests): memory.disableOOMKiller, the
//! exec flags, a frozen cgroup, `update`'s flags and a limited parent,
//! error lines engines can grep, `events` and `--version`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpurun_tests::*;
use serde_json::json;

fn sleeping(rt: &Runtime, bundle: &Bundle) -> String {
    bundle.set_args(&["sleep", "300"]);
    let id = unique("compat");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    id
}

fn v1(controller: &str, cgroup: &str, file: &str) -> String {
    fs::read_to_string(
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(cgroup)
            .join(file),
    )
    .unwrap_or_default()
}

#[test]
fn disable_oom_killer_reaches_the_cgroup() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/memory").is_dir() {
        eprintln!("skipped: no cgroup v1 memory controller");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["resources"]["memory"] = json!({"limit": 67108864, "disableOOMKiller": true})
    });
    let id = sleeping(&rt, &bundle);
    let control = v1("memory", &format!("gpurun/{id}"), "memory.oom_control");
    // An update of the memory limit keeps it.
    rt.run(["update", "--memory", "128M", &id]).ok();
    let after_update = v1("memory", &format!("gpurun/{id}"), "memory.oom_control");
    rt.run(["delete", "--force", &id]).ok();
    assert!(control.contains("oom_kill_disable 1"), "{control}");
    assert!(
        after_update.contains("oom_kill_disable 1"),
        "{after_update}"
    );
}

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

#[test]
fn a_frozen_cgroup_is_refused_not_waited_on() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/freezer").is_dir() {
        eprintln!("skipped: no cgroup v1 freezer");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = unique("frozen");
    let dir = Path::new("/sys/fs/cgroup/freezer/gpurun").join(&id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("freezer.state"), "FROZEN").unwrap();
    bundle.set_args(&["true"]);
    let start = Instant::now();
    let out = rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let _ = fs::write(dir.join("freezer.state"), "THAWED");
    let _ = fs::remove_dir(&dir);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("container's cgroup unexpectedly frozen"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn update_changes_what_its_flags_name() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = sleeping(&rt, &bundle);
    let cg = format!("gpurun/{id}");
    rt.run(["update", "--cpuset-cpus", "0", &id]).ok();
    assert_eq!(v1("cpuset", &cg, "cpuset.cpus").trim(), "0");
    rt.run([
        "update",
        "--cpu-quota",
        "20000",
        "--cpu-period",
        "100000",
        &id,
    ])
    .ok();
    assert_eq!(v1("cpu", &cg, "cpu.cfs_quota_us").trim(), "20000");
    rt.run(["update", "--cpu-quota", "-1", &id]).ok();
    assert_eq!(v1("cpu", &cg, "cpu.cfs_quota_us").trim(), "-1");
    rt.run(["update", "--memory", "100M", "--pids-limit", "42", &id])
        .ok();
    assert_eq!(
        v1("memory", &cg, "memory.limit_in_bytes").trim(),
        "104857600"
    );
    assert_eq!(v1("pids", &cg, "pids.max").trim(), "42");
    rt.run(["delete", "--force", &id]).ok();
}

/// Under a parent limited to half a CPU, a shorter period is refused while
/// the old quota stands; the quota must go first.
#[test]
fn cpu_quota_under_a_limited_parent() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/cpu").is_dir() {
        eprintln!("skipped: no cgroup v1 cpu controller");
        return;
    }
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let parent = unique("gpurun-parent");
    let parent_dir = Path::new("/sys/fs/cgroup/cpu").join(&parent);
    fs::create_dir(&parent_dir).unwrap();
    fs::write(parent_dir.join("cpu.cfs_period_us"), "100000").unwrap();
    fs::write(parent_dir.join("cpu.cfs_quota_us"), "50000").unwrap();
    let id = unique("child");
    bundle.edit(|c| {
        c["linux"]["cgroupsPath"] = json!(format!("/{parent}/{id}"));
        c["linux"]["resources"]["cpu"] = json!({"quota": 40000, "period": 100000});
    });
    bundle.set_args(&["sleep", "300"]);
    let run = rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let update = rt.run([
        "update",
        "--cpu-period",
        "50000",
        "--cpu-quota",
        "20000",
        &id,
    ]);
    let child = parent_dir.join(&id);
    let quota = fs::read_to_string(child.join("cpu.cfs_quota_us")).unwrap_or_default();
    let period = fs::read_to_string(child.join("cpu.cfs_period_us")).unwrap_or_default();
    rt.run(["delete", "--force", &id]);
    let _ = fs::remove_dir(&parent_dir);
    for controller in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let _ = fs::remove_dir(controller.path().join(&parent));
    }
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(update.code, 0, "{}", update.stderr);
    assert_eq!((quota.trim(), period.trim()), ("20000", "50000"));
}

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

/// runc's terminal handling: `spec` asks for one; a foreground `run` or
/// `exec -t` without `--console-socket` gets a pty whose master gpurun
/// relays to its own stdin and stdout; a detached one needs a socket.
#[test]
fn a_foreground_terminal_is_relayed() {
    require_root!();
    let scratch = Scratch::new("spec");
    run_cmd(
        Command::new(gpurun_bin())
            .arg("spec")
            .current_dir(scratch.path()),
        TIMEOUT,
    )
    .ok();
    let spec: serde_json::Value =
        serde_json::from_slice(&fs::read(scratch.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(spec["process"]["terminal"], true);

    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["process"]["terminal"] = json!(true));
    bundle.set_args(&["sh", "-c", "tty; test -t 0 && test -t 1 && echo both-ttys"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    let out = rt.run(["run", "--bundle", &dir, &unique("tty")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = terminal_lines(&out.stdout);
    assert_eq!(lines, ["/dev/pts/0", "both-ttys"], "{}", out.stdout);

    let out = rt.run(["run", "-d", "--bundle", &dir, &unique("tty")]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("--console-socket"), "{}", out.stderr);
    assert!(!out.stderr.contains("youki"), "{}", out.stderr);

    // Typed input reaches the container through a real terminal.
    bundle.set_args(&["sh", "-c", "read line; echo got:$line"]);
    let driver = "import os, pty, sys, time\n\
pid, fd = pty.fork()\n\
if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n\
time.sleep(1.0)\n\
os.write(fd, b'hello\\r')\n\
out = b''\n\
while True:\n    try:\n        chunk = os.read(fd, 4096)\n    except OSError:\n        break\n    if not chunk:\n        break\n    out += chunk\n\
_, status = os.waitpid(pid, 0)\n\
sys.stdout.write(out.decode(errors='replace'))\n\
sys.exit(os.waitstatus_to_exitcode(status))\n";
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(driver).arg(gpurun_bin()).args([
        "--root",
        rt.root.to_str().unwrap(),
        "run",
        "--bundle",
        &dir,
        &unique("tty"),
    ]);
    let out = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
    assert!(out.stdout.contains("got:hello"), "{:?}", out.stdout);

    // exec -t.
    bundle.edit(|c| c["process"]["terminal"] = json!(false));
    let id = sleeping(&rt, &bundle);
    let out = rt.run(["exec", "-t", &id, "sh", "-c", "test -t 1 && echo exec-tty"]);
    assert_eq!(
        out.stdout.trim_end(),
        "exec-tty\r".trim_end(),
        "{}",
        out.stderr
    );
    rt.run(["delete", "--force", &id]);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

fn seccomp(bundle: &Bundle, profile: serde_json::Value, no_new_privileges: bool) {
    bundle.edit(|c| {
        c["process"]["noNewPrivileges"] = json!(no_new_privileges);
        c["linux"]["seccomp"] = profile;
    });
}

/// Seccomp as runc loads it: with `noNewPrivileges: false` (loaded while
/// the capabilities are still held), SCMP_CMP_MASKED_EQ as
/// (argument & value) == valueTwo, and SCMP_ACT_NOTIFY handing the
/// listener at listenerPath the notify descriptor and the state.
#[test]
fn seccomp_rules_notify_and_no_new_privileges_false() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let mode_arg = |names: &[&str], index: u32| {
        json!({"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
               "args": [{"index": index, "value": 0o4000, "valueTwo": 0o4000, "op": "SCMP_CMP_MASKED_EQ"}]})
    };
    for nnp in [false, true] {
        seccomp(
            &bundle,
            json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64"],
                "syscalls": [
                    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
                    mode_arg(&["chmod", "fchmod"], 1),
                    mode_arg(&["fchmodat"], 2),
                ]
            }),
            nnp,
        );
        bundle.set_args(&[
            "sh",
            "-c",
            "mkdir /dev/shm/d 2>/dev/null || echo mkdir-refused; touch /dev/shm/f; \
             chmod 755 /dev/shm/f && echo chmod-755-allowed; \
             chmod 4755 /dev/shm/f 2>/dev/null || echo chmod-4755-refused",
        ]);
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("seccomp"),
        ]);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["mkdir-refused", "chmod-755-allowed", "chmod-4755-refused"],
            "noNewPrivileges={nnp}: {}",
            out.stderr
        );
    }

    // SCMP_ACT_NOTIFY: the listener gets the descriptor and the state; once
    // it closes the descriptor, the notified call fails with ENOSYS.
    let scratch = Scratch::new("listener");
    let socket = scratch.path().join("seccomp.sock");
    let got = scratch.path().join("got");
    let listener = "import array, os, socket, sys\n\
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
s.bind(sys.argv[1]); s.listen(1)\n\
open(sys.argv[2] + '.ready', 'w').close()\n\
c, _ = s.accept()\n\
fds = array.array('i')\n\
msg, anc, _, _ = c.recvmsg(65536, socket.CMSG_LEN(16))\n\
for level, kind, data in anc:\n    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:\n        fds.frombytes(data[:len(data) - len(data) % 4])\n\
open(sys.argv[2], 'w').write('fds=%d %s' % (len(fds), msg.decode()))\n\
[os.close(fd) for fd in fds]\n";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(listener)
        .arg(&socket)
        .arg(&got)
        .spawn()
        .unwrap();
    let ready = got.with_extension("ready");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    seccomp(
        &bundle,
        json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": socket,
            "listenerMetadata": "from-the-spec",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_NOTIFY"}]
        }),
        false,
    );
    bundle.set_args(&[
        "sh",
        "-c",
        "mkdir /dev/shm/n 2>/dev/null || echo notified-and-refused",
    ]);
    let id = unique("notify");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.stdout.trim(), "notified-and-refused", "{}", out.stderr);
    let got = fs::read_to_string(&got).unwrap();
    assert!(got.starts_with("fds=1 "), "{got}");
    let state: serde_json::Value = serde_json::from_str(got.trim_start_matches("fds=1 ")).unwrap();
    assert_eq!(state["metadata"], "from-the-spec");
    assert_eq!(state["state"]["id"], id.as_str());
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
    assert_eq!(out.code, 2);
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

/// Each runtime, on its own state root, for the runc-versus-gpurun tests.
fn each_runtime() -> Vec<(std::path::PathBuf, Scratch)> {
    vec![
        (gpurun_bin(), Scratch::new("rt-gpurun")),
        ("runc".into(), Scratch::new("rt-runc")),
    ]
}

/// Output read through a terminal, a line each, without the `\r`s.
fn terminal_lines(text: &str) -> Vec<&str> {
    text.lines().map(|l| l.trim_end_matches('\r')).collect()
}

/// A detached busybox `sleep 300` under one runtime; its bundle (kept
/// while the container runs) and id.
fn sleeping_under(program: &Path, root: &Scratch, prefix: &str) -> (Bundle, String) {
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique(prefix);
    let dir = bundle.dir.to_str().unwrap();
    runtime_cmd(program, root, &["run", "-d", "--bundle", dir, &id]).ok();
    (bundle, id)
}

/// `run` of `bundle` under one runtime, with a fresh id from `prefix`.
fn run_bundle(program: &Path, root: &Scratch, bundle: &Bundle, prefix: &str) -> Ran {
    let dir = bundle.dir.to_str().unwrap();
    runtime_cmd(program, root, &["run", "--bundle", dir, &unique(prefix)])
}

/// Waits up to 5 s for container `id` to be stopped under one runtime.
fn wait_stopped(program: &Path, root: &Scratch, id: &str) {
    for _ in 0..500 {
        if runtime_cmd(program, root, &["state", id])
            .stdout
            .contains("stopped")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn runtime_cmd(program: &Path, root: &Scratch, args: &[&str]) -> Ran {
    run_cmd(
        Command::new(program)
            .arg("--root")
            .arg(root.path())
            .args(args),
        TIMEOUT,
    )
}

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

/// A process running as a uid other than 0 owns its stdio as runc leaves
/// it (runc's fixStdioPermissions): the engine's pipes and its terminal
/// are given to the process's uid, /dev/null is left alone. Without it a
/// `docker run -it -u 1000` process could not open its own tty by path.
#[test]
fn a_non_root_process_owns_its_stdio_and_its_terminal() {
    require_root!();
    let script = "stat -L -c %u /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2";
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["sh", "-c", script]);
        bundle.edit(|c| c["process"]["user"] = json!({"uid": 1000, "gid": 1000}));
        let out = run_bundle(&program, &root, &bundle, "stdio");
        assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
        // stdout and stderr are the caller's files (runc: its pipes): the
        // user's now. stdin is /dev/null (run_cmd), which both leave alone;
        // a foreground runc puts a pipe of its own in front of it.
        let owners: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(owners[1..], ["1000", "1000"], "{program:?}");
        if program == gpurun_bin() {
            assert_eq!(owners[0], "0", "/dev/null was given away");
        }
    }

    // The terminal: gpurun relays a foreground one itself (runc would need
    // its own stdin to be a tty).
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["terminal"] = json!(true);
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    });
    bundle.set_args(&[
        "sh",
        "-c",
        "t=$(tty); stat -c '%u %a' $t; echo written > $t && echo opened-by-path",
    ]);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("tty"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = terminal_lines(&out.stdout);
    assert_eq!(lines[0], "1000 620", "{}", out.stdout);
    assert!(lines.contains(&"opened-by-path"), "{}", out.stdout);
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

/// seccomp notify failures reach the user in runc's words, under both
/// runtimes: SCMP_ACT_NOTIFY on `write` (the agent could never be told),
/// and an agent socket nobody listens on (with its path).
#[test]
fn seccomp_notify_errors_say_what_failed() {
    require_root!();
    let socket = Scratch::new("agent");
    let path = socket.path().join("agent.sock");
    let cases = [
        (
            "write",
            "SCMP_ACT_NOTIFY cannot be used for the write syscall",
        ),
        (
            "mkdir",
            "failed to connect with seccomp agent specified in the seccomp profile",
        ),
    ];
    for (program, root) in each_runtime() {
        for (syscall, words) in &cases {
            let bundle = Bundle::busybox();
            bundle.set_args(&["true"]);
            bundle.edit(|c| {
                c["linux"]["seccomp"] = json!({
                    "defaultAction": "SCMP_ACT_ALLOW",
                    "listenerPath": path,
                    "syscalls": [{"names": [syscall], "action": "SCMP_ACT_NOTIFY"}],
                })
            });
            let out = run_bundle(&program, &root, &bundle, "notify");
            assert_eq!(out.code, 1, "{program:?} {syscall}: {}", out.stderr);
            assert!(
                out.stderr.contains(words),
                "{program:?} {syscall}: {}",
                out.stderr
            );
            if *syscall == "mkdir" {
                assert!(
                    out.stderr.contains(path.to_str().unwrap()),
                    "{program:?}: {}",
                    out.stderr
                );
            }
        }
        assert!(fs::read_dir(root.path()).map_or(true, |d| d.count() == 0));
    }
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

/// cgroup v1 leftovers of runc's reading of a config: a device rule's
/// access keeps only r, w and m (the kernel refuses "rwa"; runc ignores the
/// `a`), and `linux.resources.unified` on a v1 or hybrid host is refused in
/// runc's words rather than dropped.
#[test]
fn v1_device_access_and_unified_as_runc_reads_them() {
    require_root!();
    let unified_host = fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup ") && l.contains(" - cgroup2 "));
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["sh", "-c", "head -c 0 /dev/null && echo read"]);
        bundle.edit(|c| {
            c["linux"]["resources"]["devices"]
                .as_array_mut()
                .unwrap()
                .push(json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwa"}))
        });
        let out = run_bundle(&program, &root, &bundle, "rwa");
        assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
        assert_eq!(out.stdout.trim(), "read", "{program:?}");

        if unified_host {
            continue;
        }
        let bundle = Bundle::busybox();
        bundle.set_args(&["true"]);
        bundle.edit(|c| c["linux"]["resources"]["unified"] = json!({"memory.max": "100000000"}));
        let out = run_bundle(&program, &root, &bundle, "unified");
        assert_eq!(out.code, 1, "{program:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot use unified on cgroup v1"),
            "{program:?}: {}",
            out.stderr
        );
        assert!(fs::read_dir(root.path()).map_or(true, |d| d.count() == 0));
    }
}

/// A syscall newer than every one the seccomp profile names gets ENOSYS
/// (libc falls back only on ENOSYS: clone3 to clone), as runc's stub gives
/// it; one inside the named range that the profile does not allow keeps
/// the profile's default (EPERM here). A static probe, compiled here, makes
/// the raw syscalls inside the container.
#[test]
fn newer_syscalls_get_enosys_under_an_errno_profile() {
    require_root!();
    let build = Scratch::new("probe");
    let source = build.path().join("probe.c");
    fs::write(
        &source,
        "#include <errno.h>\n#include <stdio.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n\
         int main(void) {\n\
           long nrs[] = {1000, 135};\n\
           for (int i = 0; i < 2; i++) { errno = 0; long r = syscall(nrs[i], 0, 0, 0); \
             printf(\"%ld:%ld:%d\\n\", nrs[i], r, errno); }\n\
           return 0;\n}\n",
    )
    .unwrap();
    let probe = build.path().join("probe");
    run_cmd(
        Command::new("cc")
            .args(["-static", "-O2", "-o"])
            .arg(&probe)
            .arg(&source),
        TIMEOUT,
    )
    .ok();
    // What both runtimes' inits and the probe need once the filter is in
    // (gpurun's init waits for `start` in accept4, runc's in openat).
    let allowed = [
        "read",
        "write",
        "openat",
        "close",
        "fstat",
        "newfstatat",
        "stat",
        "lstat",
        "statx",
        "statfs",
        "fstatfs",
        "mmap",
        "mprotect",
        "munmap",
        "brk",
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "ioctl",
        "execve",
        "exit",
        "exit_group",
        "arch_prctl",
        "set_tid_address",
        "set_robust_list",
        "rseq",
        "prlimit64",
        "getrandom",
        "readlink",
        "uname",
        "getpid",
        "getppid",
        "gettid",
        "tgkill",
        "capget",
        "capset",
        "prctl",
        "fcntl",
        "futex",
        "close_range",
        "setgroups",
        "setresuid",
        "setresgid",
        "faccessat",
        "faccessat2",
        "writev",
        "lseek",
        "sigaltstack",
        "getcwd",
        "chdir",
        "fchdir",
        "sendmsg",
        "recvmsg",
        "sendto",
        "recvfrom",
        "accept4",
        "getdents64",
        "nanosleep",
        "clock_gettime",
        "sched_yield",
        "sched_getaffinity",
        "clone",
        "madvise",
        "dup2",
        "dup3",
        "pipe2",
        "epoll_create1",
        "epoll_ctl",
        "epoll_pwait",
        "setsid",
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "mincore",
        "kill",
        "pread64",
    ];
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        fs::copy(&probe, bundle.rootfs().join("bin/probe")).unwrap();
        bundle.set_args(&["/bin/probe"]);
        bundle.edit(|c| {
            c["linux"]["seccomp"] = json!({
                "defaultAction": "SCMP_ACT_ERRNO",
                "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
                "syscalls": [{"names": allowed.to_vec(), "action": "SCMP_ACT_ALLOW"}],
            })
        });
        let out = run_bundle(&program, &root, &bundle, "enosys");
        assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines,
            [
                format!("1000:-1:{}", libc::ENOSYS),
                format!("135:-1:{}", libc::EPERM)
            ],
            "{program:?}"
        );
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

/// Beyond runc 1.1 (runtime-spec 1.3, runc 1.3): `linux.netDevices` moves
/// a host interface into the container's network namespace under its new
/// name. One that the host does not have is named before anything is made.
#[test]
fn net_devices_move_a_host_interface_into_the_container() {
    require_root!();
    let host = format!("gpv{}", std::process::id() % 100_000);
    let peer = format!("{host}p");
    let made = run_cmd(
        Command::new("ip").args(["link", "add", &host, "type", "veth", "peer", "name", &peer]),
        TIMEOUT,
    );
    assert_eq!(made.code, 0, "ip link add: {}", made.stderr);
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&[
        "sh",
        "-c",
        "cat /sys/class/net/eth9/ifindex && ls /sys/class/net",
    ]);
    bundle.edit(|c| c["linux"]["netDevices"] = json!({ host.as_str(): {"name": "eth9"} }));
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("netdev"),
    ]);
    // The veth pair goes with the container's namespace; remove what is left.
    let _ = run_cmd(Command::new("ip").args(["link", "del", &peer]), TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.lines().any(|l| l == "eth9"), "{}", out.stdout);
    assert!(!out.stdout.lines().any(|l| l == host), "{}", out.stdout);

    bundle.edit(|c| c["linux"]["netDevices"] = json!({"gpurun-none0": {"name": "eth9"}}));
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("netdev"),
    ]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("\"gpurun-none0\""), "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// In a user namespace, a bind mount's source under a directory the
/// container's root cannot search (0700, the host's root's) still mounts:
/// runc opens the sources as the host's root, inside the container's mount
/// namespace, and mounts from the descriptors (Kubernetes `hostUsers:
/// false`, Docker userns-remap and Podman `--userns` volumes).
#[test]
fn userns_bind_mounts_from_a_directory_only_host_root_can_search() {
    require_root!();
    let private = Scratch::new("userns-private");
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let data = private.path().join("data");
    fs::create_dir(&data).unwrap();
    fs::set_permissions(&data, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(data.join("hello"), "from a dir\n").unwrap();
    let file = private.path().join("file.txt");
    fs::write(&file, "from a file\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.map_root_to(300000);
        bundle.edit(|c| {
            c["mounts"].as_array_mut().unwrap().extend([
                json!({"destination": "/mnt/data", "type": "bind",
                       "source": data, "options": ["rbind", "ro"]}),
                json!({"destination": "/mnt/file.txt", "type": "bind",
                       "source": file, "options": ["bind", "ro"]}),
            ]);
        });
        bundle.set_args(&["cat", "/mnt/data/hello", "/mnt/file.txt"]);
        // The mount points exist: the container's root could not make them.
        fs::create_dir_all(bundle.rootfs().join("mnt/data")).unwrap();
        fs::write(bundle.rootfs().join("mnt/file.txt"), "").unwrap();
        let out = run_bundle(&program, &root, &bundle, "userns-bind");
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, "from a dir\nfrom a file\n"),
            "{}: {}",
            program.display(),
            out.stderr
        );
    }
}

/// cgroup v1: `blockIO.weightDevice` (Docker's `--blkio-weight-device`)
/// reaches the container's cgroup as runc writes it: BFQ's
/// `blkio.bfq.weight_device` on kernels without CFQ. The device is a loop
/// device of the test's own, switched to BFQ.
#[test]
fn blkio_weight_devices_reach_the_cgroup() {
    require_root!();
    if !Path::new("/sys/fs/cgroup/blkio").is_dir() {
        return; // cgroup v2: tests/cgroup_v2.rs
    }
    struct Loop(String);
    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let scratch = Scratch::new("blkio");
    let image = scratch.path().join("disk");
    fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let attached = run_cmd(
        Command::new("losetup").args(["-f", "--show"]).arg(&image),
        TIMEOUT,
    );
    attached.ok();
    let device = Loop(attached.stdout.trim().to_owned());
    let name = Path::new(&device.0)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    fs::write(format!("/sys/block/{name}/queue/scheduler"), "bfq").unwrap();
    let rdev = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&device.0).unwrap().rdev()
    };
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.edit(|c| {
            c["linux"]["resources"]["blockIO"] = json!({
                "weightDevice": [{"major": major, "minor": minor, "weight": 321}]
            });
        });
        bundle.set_args(&["sleep", "300"]);
        let id = unique("blkio");
        let dir = bundle.dir.to_str().unwrap();
        runtime_cmd(&program, &root, &["run", "-d", "--bundle", dir, &id]).ok();
        let state: serde_json::Value =
            serde_json::from_str(&runtime_cmd(&program, &root, &["state", &id]).stdout).unwrap();
        let cgroups = fs::read_to_string(format!("/proc/{}/cgroup", state["pid"])).unwrap();
        let blkio = cgroups
            .lines()
            .find_map(|l| l.split_once(":blkio:").map(|(_, p)| p.to_owned()))
            .unwrap();
        let weights = fs::read_to_string(format!(
            "/sys/fs/cgroup/blkio{blkio}/blkio.bfq.weight_device"
        ))
        .unwrap_or_default();
        runtime_cmd(&program, &root, &["delete", "--force", &id]).ok();
        assert!(
            weights.lines().any(|l| l == format!("{major}:{minor} 321")),
            "{program:?}: {weights}"
        );
    }
}

/// Only stdio and `--preserve-fds` reach the container's process, under
/// `run`, `run -d`, `--log` and `exec`: the same descriptor numbers as
/// under runc (`ls` adds one of its own, the highest).
#[test]
fn only_stdio_and_preserved_descriptors_reach_the_container() {
    require_root!();
    let mut seen = Vec::new();
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.set_args(&["ls", "/proc/self/fd"]);
        let dir = bundle.dir.to_str().unwrap();
        let log = root.path().join("log.json");
        let log = log.to_str().unwrap();
        let fds = |args: &[&str], preserve: bool| {
            let mut cmd = Command::new(&program);
            cmd.arg("--root").arg(root.path()).args(args);
            if preserve {
                // One descriptor to pass as fd 3, and one (fd 4) not to.
                let files = [
                    fs::File::open("/dev/null").unwrap(),
                    fs::File::open("/dev/null").unwrap(),
                ];
                use std::os::fd::AsRawFd;
                let (keep, other) = (files[0].as_raw_fd(), files[1].as_raw_fd());
                // SAFETY: dup2 onto fds 3 and 4 of the child only.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::dup2(keep, 3);
                        libc::dup2(other, 4);
                        // dup2 onto itself keeps close-on-exec.
                        libc::fcntl(3, libc::F_SETFD, 0);
                        libc::fcntl(4, libc::F_SETFD, 0);
                        Ok(())
                    });
                }
                let out = run_cmd(cmd.stdin(Stdio::null()), TIMEOUT);
                drop(files);
                return out;
            }
            run_cmd(cmd.stdin(Stdio::null()), TIMEOUT)
        };
        let mut lists = Vec::new();
        for (args, preserve) in [
            (vec!["run", "--bundle", dir, &unique("fds")], false),
            (
                vec![
                    "--log",
                    log,
                    "--log-format",
                    "json",
                    "run",
                    "--bundle",
                    dir,
                    &unique("fds"),
                ],
                false,
            ),
            (
                vec![
                    "run",
                    "--preserve-fds",
                    "1",
                    "--bundle",
                    dir,
                    &unique("fds"),
                ],
                true,
            ),
        ] {
            let out = fds(&args, preserve);
            assert_eq!(out.code, 0, "{program:?} {args:?}: {}", out.stderr);
            lists.push(
                out.stdout
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>(),
            );
        }
        let (_sleeping, id) = sleeping_under(&program, &root, "fds");
        let out = runtime_cmd(&program, &root, &["exec", &id, "ls", "/proc/self/fd"]);
        assert_eq!(out.code, 0, "{program:?}: {}", out.stderr);
        lists.push(out.stdout.split_whitespace().map(str::to_owned).collect());
        runtime_cmd(&program, &root, &["delete", "--force", &id]).ok();
        seen.push((program, lists));
    }
    let (ours, runc) = (&seen[0].1, &seen[1].1);
    assert_eq!(ours, runc, "descriptors under gpurun and under runc");
    assert_eq!(ours[0], ["0", "1", "2", "3"], "{ours:?}");
    assert_eq!(ours[2], ["0", "1", "2", "3", "4"], "{ours:?}");
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

/// `features` promises only what works: every option of its
/// `mountOptions` is accepted on a tmpfs (a bind mount for `bind` and
/// `rbind`), and each whose effect shows in mountinfo shows it; runc's
/// `tmpcopyup` seeds the tmpfs with the image's files, owners, modes and
/// symlinks (Podman's `--tmpfs` sends it).
#[test]
fn every_mount_option_features_lists_works() {
    require_root!();
    let rt = Runtime::new();
    let out = rt.run(["features"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let features: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let options: Vec<String> = features["mountOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect();
    assert!(options.len() > 50, "{options:?}");
    let bundle = Bundle::busybox();
    let source = Scratch::new("mount-options");
    let seed = bundle.rootfs().join("mnt/seed");
    fs::create_dir_all(seed.join("sticky")).unwrap();
    fs::set_permissions(seed.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(seed.join("f"), "seeded").unwrap();
    std::os::unix::fs::chown(seed.join("f"), Some(7), Some(8)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", seed.join("link")).unwrap();
    let base = bundle.config();
    // What mountinfo must show for an option, in the mount's own options
    // (before " - ") or the superblock's (after the type and source).
    let shows = |option: &str| -> Option<&str> {
        Some(match option {
            "ro" | "rro" => "own:ro",
            "nosuid" | "rnosuid" => "own:nosuid",
            "nodev" | "rnodev" => "own:nodev",
            "noexec" | "rnoexec" => "own:noexec",
            "noatime" | "rnoatime" => "own:noatime",
            "nodiratime" | "rnodiratime" => "own:nodiratime",
            "nosymfollow" | "rnosymfollow" => "own:nosymfollow",
            "strictatime" | "rstrictatime" => "own:rw",
            "shared" | "rshared" => "tag:shared:",
            "unbindable" | "runbindable" => "tag:unbindable",
            "sync" => "super:sync",
            "dirsync" => "super:dirsync",
            "lazytime" => "super:lazytime",
            "bind" | "rbind" => "type:not-tmpfs",
            _ => return None,
        })
    };
    for option in &options {
        let mount = if option == "bind" || option == "rbind" {
            json!({"type": "bind", "source": source.path(), "destination": "/mnt", "options": [option]})
        } else {
            json!({"type": "tmpfs", "source": "tmpfs", "destination": "/mnt", "options": [option]})
        };
        let mut config = base.clone();
        config["mounts"].as_array_mut().unwrap().push(mount);
        config["process"]["args"] = json!([
            "sh",
            "-c",
            "grep ' /mnt ' /proc/self/mountinfo; ls /mnt/seed 2>/dev/null | tr '\\n' ' '"
        ]);
        bundle.set_config(&config);
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("opt"),
        ]);
        assert_eq!(out.code, 0, "option {option}: {}", out.stderr);
        let line = out.stdout.lines().next().unwrap_or_default();
        let (own_part, super_part) = line.split_once(" - ").unwrap_or((line, ""));
        let fields: Vec<&str> = own_part.split(' ').collect();
        let own: Vec<&str> = fields
            .get(5)
            .copied()
            .unwrap_or_default()
            .split(',')
            .collect();
        let tags = fields.get(6..).map(|t| t.join(" ")).unwrap_or_default();
        let mut sup = super_part.split(' ');
        let fstype = sup.next().unwrap_or_default();
        let super_opts: Vec<&str> = sup.nth(1).unwrap_or_default().split(',').collect();
        match shows(option) {
            Some(want) => {
                let (kind, token) = want.split_once(':').unwrap();
                let ok = match kind {
                    "own" if token == "rw" => own == ["rw"],
                    "own" => own.contains(&token),
                    "tag" => tags.contains(token),
                    "super" => super_opts.contains(&token),
                    _ => fstype != "tmpfs",
                };
                assert!(ok, "option {option}: want {want} in {line:?}");
            }
            None if option == "tmpcopyup" => {
                assert!(out.stdout.contains("f link sticky"), "{}", out.stdout)
            }
            None => assert_eq!(fstype, "tmpfs", "option {option}: {line:?}"),
        }
    }

    // tmpcopyup keeps owners, modes and symlinks (as links, not followed).
    let mut config = base.clone();
    config["mounts"].as_array_mut().unwrap().push(
        json!({"type": "tmpfs", "source": "tmpfs", "destination": "/mnt", "options": ["tmpcopyup"]}),
    );
    config["process"]["args"] = json!([
        "sh",
        "-c",
        "stat -c '%n %u:%g %a' /mnt/seed/f /mnt/seed/sticky; readlink /mnt/seed/link; cat /mnt/seed/f; \
         echo new > /mnt/seed/f; grep ' /mnt ' /proc/self/mountinfo | grep -c tmpfs"
    ]);
    bundle.set_config(&config);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("tcu"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "/mnt/seed/f 7:8 644\n/mnt/seed/sticky 0:0 1777\n/etc/passwd\nseeded1\n",
    );
    // The image itself is untouched by the write to the tmpfs.
    assert_eq!(fs::read_to_string(seed.join("f")).unwrap(), "seeded");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// The `time` namespace `features` lists: `linux.timeOffsets` reach the
/// container's clocks (its uptime is boottime's offset ahead of the host's).
#[test]
fn time_namespace_offsets_reach_the_container() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "time"}));
        c["linux"]["timeOffsets"] = json!({
            "monotonic": {"secs": 86400, "nanosecs": 0},
            "boottime": {"secs": 3600, "nanosecs": 0}
        });
        c["process"]["args"] = json!([
            "sh",
            "-c",
            "cat /proc/self/timens_offsets; cut -d. -f1 /proc/uptime"
        ]);
    });
    let host_uptime = |text: String| -> u64 { text.split('.').next().unwrap().parse().unwrap() };
    let before = host_uptime(fs::read_to_string("/proc/uptime").unwrap());
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("timens"),
    ]);
    let after = host_uptime(fs::read_to_string("/proc/uptime").unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let offsets: Vec<Vec<&str>> = lines[..2]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        offsets,
        [["monotonic", "86400", "0"], ["boottime", "3600", "0"]]
    );
    let inside: u64 = lines[2].parse().unwrap();
    assert!(
        inside >= before + 3600 && inside <= after + 3600,
        "uptime {inside} in the container, {before}..{after} on the host"
    );
}
