//! Terminals, stdio ownership and the descriptors a container gets.

use super::*;

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

/// Output read through a terminal, a line each, without the `\r`s.
fn terminal_lines(text: &str) -> Vec<&str> {
    text.lines().map(|l| l.trim_end_matches('\r')).collect()
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
