//! Seccomp profiles as runc loads them: notify, no_new_privileges, newer syscalls.

use super::*;

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
                "architectures": [native_scmp_arch()],
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
            "architectures": [native_scmp_arch()],
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
