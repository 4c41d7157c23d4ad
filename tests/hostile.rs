//! Hostile images, specs, GPU requests and state: each gets a clear error or
//! is handled safely, and nothing is created, changed or mounted outside the
//! container's rootfs and gpurun's state dir, and no host process is left.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpurun_tests::*;
use serde_json::json;

/// A directory outside every rootfs that must stay empty and unmounted.
struct Outside(Scratch);

impl Outside {
    fn new() -> Outside {
        let s = Scratch::new("outside");
        Outside(s)
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn assert_untouched(&self, case: &str) {
        assert_eq!(
            fs::read_dir(self.path()).unwrap().count(),
            0,
            "{case}: wrote outside"
        );
        let needle = self.path().to_str().unwrap().to_owned();
        assert!(
            mounts_mentioning(&needle).is_empty(),
            "{case}: mounted outside"
        );
    }
}

#[test]
fn mount_destinations_through_symlinks_stay_inside_the_rootfs() {
    require_root!();
    let outside = Outside::new();
    let rel = format!("../../../../../../..{}", outside.path().display());
    for (case, target) in [
        ("absolute", outside.path().to_str().unwrap()),
        ("relative", rel.as_str()),
    ] {
        let bundle = Bundle::busybox();
        std::os::unix::fs::symlink(target, bundle.rootfs().join("evil")).unwrap();
        bundle.set_args(&[
            "sh",
            "-c",
            "grep -c ' /evil/x\\| /tmp' /proc/self/mountinfo >/dev/null; ls -d /evil/x",
        ]);
        bundle.edit(|c| {
            c["mounts"].as_array_mut().unwrap().push(json!({
                "destination": "/evil/x", "type": "tmpfs", "source": "tmpfs"
            }));
        });
        let rt = Runtime::new();
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("mnt"),
        ]);
        assert_eq!(
            (out.code, out.stdout.trim()),
            (0, "/evil/x"),
            "{case}: {}",
            out.stderr
        );
        outside.assert_untouched(case);
        assert!(rt.leftovers().is_empty());
    }
}

#[test]
fn symlink_loops_and_proc_dev_symlinks_are_refused() {
    require_root!();
    let outside = Outside::new();
    let rt = Runtime::new();
    type Prep = Box<dyn Fn(&Bundle)>;
    let cases: Vec<(&str, Prep, &str)> = vec![
        (
            "loop",
            Box::new(|b: &Bundle| {
                std::os::unix::fs::symlink("b", b.rootfs().join("a")).unwrap();
                std::os::unix::fs::symlink("a", b.rootfs().join("b")).unwrap();
                b.edit(|c| {
                    c["mounts"].as_array_mut().unwrap().push(json!({
                        "destination": "/a/x", "type": "tmpfs", "source": "tmpfs"
                    }));
                });
            }),
            "mount destination /a/x: a symlink loop in the image",
        ),
        (
            "/proc symlink",
            Box::new({
                let target = outside.path().to_owned();
                move |b: &Bundle| {
                    fs::remove_dir(b.rootfs().join("proc")).unwrap();
                    std::os::unix::fs::symlink(&target, b.rootfs().join("proc")).unwrap();
                }
            }),
            "filesystem \"proc\" must be mounted on ordinary directory: /proc in the image is a symlink",
        ),
        (
            "/dev symlink",
            Box::new(|b: &Bundle| {
                fs::remove_dir_all(b.rootfs().join("dev")).unwrap();
                std::os::unix::fs::symlink("../../../../../../../tmp", b.rootfs().join("dev"))
                    .unwrap();
            }),
            "mount destination /dev goes through a symlink in the image",
        ),
    ];
    for (case, prep, want) in cases {
        let bundle = Bundle::busybox();
        prep(&bundle);
        let id = unique("sym");
        assert_clean_failure(
            &rt,
            &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
            &id,
            want,
        );
        outside.assert_untouched(case);
    }
}

/// With no mount on /dev, the runtime makes the default nodes and links in
/// the image's own /dev. Where that is a symlink, it resolves inside the
/// rootfs (as runc's secure join does), never to the host's directory it
/// names: nothing is made there, and its `ptmx` is not replaced.
#[test]
fn dev_symlink_without_a_dev_mount_stays_inside_the_rootfs() {
    require_root!();
    let victim = Scratch::new("victim");
    let rel = format!("../../../../../../..{}", victim.path().display());
    // In a user namespace the nodes are bound rather than made.
    for (case, target, userns) in [
        ("absolute", victim.path().to_str().unwrap(), false),
        ("relative", rel.as_str(), false),
        ("user namespace", victim.path().to_str().unwrap(), true),
    ] {
        fs::write(victim.path().join("ptmx"), "the host's\n").unwrap();
        let bundle = Bundle::busybox();
        if userns {
            bundle.map_root_to(100000);
            let out = run_cmd(
                Command::new("chown")
                    .arg("-R")
                    .arg("100000:100000")
                    .arg(bundle.rootfs()),
                TIMEOUT,
            );
            assert_eq!(out.code, 0, "{}", out.stderr);
        }
        bundle.edit(|c| {
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .retain(|m| !m["destination"].as_str().unwrap().starts_with("/dev"));
        });
        fs::remove_dir_all(bundle.rootfs().join("dev")).unwrap();
        std::os::unix::fs::symlink(target, bundle.rootfs().join("dev")).unwrap();
        bundle.set_args(&[
            "sh",
            "-c",
            "test -c /dev/null && test -L /dev/fd && echo ok",
        ]);
        let rt = Runtime::new();
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("devsym"),
        ]);
        let names: Vec<_> = fs::read_dir(victim.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["ptmx"], "{case}: made on the host");
        assert_eq!(
            fs::read_to_string(victim.path().join("ptmx")).unwrap(),
            "the host's\n",
            "{case}: the host's ptmx replaced"
        );
        assert_eq!(
            (out.code, out.stdout.trim()),
            (0, "ok"),
            "{case}: {}",
            out.stderr
        );
        assert!(mounts_mentioning(victim.path().to_str().unwrap()).is_empty());
        assert!(rt.leftovers().is_empty());
    }
}

/// With no mount on /dev the image's own /dev is used; its /dev/null as a
/// FIFO hung `run` for ever (init blocked in the open, SIGTERM ignored). Each
/// wrong type gets one line naming it, and nothing is left; the null device
/// itself runs.
#[test]
fn an_image_dev_null_of_the_wrong_type_is_refused_without_blocking() {
    require_root!();
    let [fifo, socket, directory] = NOT_FILES;
    let cases: [(&str, Make); 4] = [
        fifo,
        socket,
        directory,
        ("the null device", |p| {
            let dev = nix::sys::stat::makedev(1, 3);
            let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
            nix::sys::stat::mknod(p, nix::sys::stat::SFlag::S_IFCHR, mode, dev).unwrap();
        }),
    ];
    for (kind, make) in cases {
        let bundle = Bundle::busybox();
        bundle.edit(|c| {
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .retain(|m| !m["destination"].as_str().unwrap().starts_with("/dev"));
            c["root"]["readonly"] = json!(false);
        });
        make(&bundle.rootfs().join("dev/null"));
        bundle.set_args(&["sh", "-c", "echo ran"]);
        let rt = Runtime::new();
        let id = unique("devnull");
        let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
        if kind == "the null device" {
            assert_eq!(
                (out.code, out.stdout.trim()),
                (0, "ran"),
                "{kind}: {}",
                out.stderr
            );
        } else {
            let first = out.stderr.lines().next().unwrap_or_default();
            assert_ne!(out.code, 0, "{kind}: ran: {}", out.stdout);
            assert!(
                first.starts_with("gpurun: error: ")
                    && first.contains(&format!(
                        "/dev/null is {kind}, not the character device 1:3"
                    )),
                "{kind}: {}",
                out.stderr
            );
        }
        assert!(rt.leftovers().is_empty(), "{kind}: {:?}", rt.leftovers());
        assert!(
            cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
            "{kind}: cgroup left"
        );
        let rootfs = bundle.rootfs();
        assert!(
            mounts_mentioning(rootfs.to_str().unwrap()).is_empty(),
            "{kind}: mount left"
        );
    }
}

#[test]
fn a_dangling_symlink_inside_the_image_is_a_valid_destination() {
    require_root!();
    // /etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf, as in
    // systemd-resolved images; engines bind their resolv.conf over it.
    let bundle = Bundle::busybox();
    fs::create_dir_all(bundle.rootfs().join("run")).unwrap();
    std::os::unix::fs::symlink(
        "../run/systemd/resolve/stub-resolv.conf",
        bundle.rootfs().join("etc/resolv.conf"),
    )
    .unwrap();
    let host_file = Scratch::new("resolv");
    fs::write(
        host_file.path().join("resolv.conf"),
        "nameserver 192.0.2.1\n",
    )
    .unwrap();
    bundle.set_args(&["cat", "/etc/resolv.conf"]);
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/etc/resolv.conf", "type": "bind",
            "source": host_file.path().join("resolv.conf"), "options": ["rbind", "ro"]
        }));
    });
    let rt = Runtime::new();
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("dangling"),
    ]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "nameserver 192.0.2.1\n"),
        "{}",
        out.stderr
    );
}

#[test]
fn cwd_into_proc_self_fd_with_a_leaked_descriptor_is_refused() {
    require_root!();
    let rt = Runtime::new();
    for (case, cwd, link) in [
        ("direct", "/proc/self/fd/7", false),
        ("via a symlink in the image", "/work", true),
        ("with ..", "/tmp/../proc/self/fd/7", false),
    ] {
        let bundle = Bundle::busybox();
        if link {
            std::os::unix::fs::symlink("/proc/self/fd/7", bundle.rootfs().join("work")).unwrap();
        }
        bundle.set_args(&["sh", "-c", "pwd; ls"]);
        bundle.edit(|c| c["process"]["cwd"] = json!(cwd));
        let id = unique("cwd");
        // The caller leaks a descriptor of a host directory as fd 7.
        let host_dir = fs::File::open("/etc").unwrap();
        let raw = std::os::fd::AsRawFd::as_raw_fd(&host_dir);
        let mut cmd = rt.command(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
        // SAFETY: dup2 is async-signal-safe; fd 7 is left open on exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(raw, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = run_cmd(&mut cmd, TIMEOUT);
        assert_eq!(out.code, 1, "{case}: ran with cwd {cwd}: {}", out.stdout);
        assert!(
            out.stderr.contains("is under /proc"),
            "{case}: {}",
            out.stderr
        );
        assert!(
            !out.stdout.contains("passwd"),
            "{case}: listed the host's /etc"
        );
        assert!(rt.leftovers().is_empty(), "{case}: {:?}", rt.leftovers());
    }
}

/// A shared object whose constructor writes `marker` on the host: if any
/// host program ever ran with the image's LD_PRELOAD, the marker appears.
fn canary(dir: &Path, marker: &Path) -> std::path::PathBuf {
    let src = dir.join("canary.c");
    fs::write(
        &src,
        format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void hit(void) {{ FILE *f = fopen(\"{}\", \"w\"); if (f) fclose(f); }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let so = dir.join("canary.so");
    run_cmd(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src),
        Duration::from_secs(60),
    )
    .ok();
    so
}

#[test]
fn ld_preload_in_the_image_runs_no_host_program() {
    require_root!();
    let scratch = Scratch::new("canary");
    let marker = scratch.path().join("HIT");
    let so = canary(scratch.path(), &marker);
    for who in [As::Root, As::User(TestUser::get())] {
        let bundle = Bundle::glibc(who.user());
        let preload = format!("LD_PRELOAD={}", so.display());
        bundle.set_process(
            &["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?"],
            &[&preload, "NVIDIA_VISIBLE_DEVICES=0"],
        );
        let rt = Runtime::as_who(who.clone());
        let dir = bundle.dir.to_string_lossy();
        let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("preload")]));
        assert_eq!(out.stdout.trim(), "smi=9", "{who:?}: {}", out.stderr);
        assert!(
            !marker.exists(),
            "{who:?}: a host program ran with the image's LD_PRELOAD"
        );
    }
}

#[test]
fn hostile_ld_so_cache_files_do_not_break_injection() {
    require_root!();
    let header = |count: u32, strtab: u32| {
        let mut b = b"glibc-ld.so.cache1.1".to_vec();
        b.extend(count.to_le_bytes());
        b.extend(strtab.to_le_bytes());
        b.extend([0u8; 20]);
        b
    };
    let mut past_end = header(1, 16);
    // One entry whose key and value point far past the end of the file.
    past_end.extend(3u32.to_le_bytes());
    past_end.extend(0x7fff_0000u32.to_le_bytes());
    past_end.extend(0x7fff_0100u32.to_le_bytes());
    past_end.extend([0u8; 12]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", b"glibc-ld.so.cach".to_vec()),
        ("huge count", header(u32::MAX, u32::MAX)),
        ("offsets past the end", past_end),
        ("empty", Vec::new()),
    ];
    for (case, bytes) in cases {
        let bundle = Bundle::glibc(None);
        fs::write(bundle.rootfs().join("etc/ld.so.cache"), &bytes).unwrap();
        bundle.set_process(
            &["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?"],
            &["NVIDIA_VISIBLE_DEVICES=0"],
        );
        let rt = Runtime::new();
        let dir = bundle.dir.to_string_lossy();
        let out = rt.run(GpuFixtures::get().args(&["run", "--bundle", &dir, &unique("cache")]));
        assert_eq!(
            (out.code, out.stdout.trim()),
            (0, "smi=9"),
            "{case}: {}",
            out.stderr
        );
        assert_eq!(
            fs::read(bundle.rootfs().join("etc/ld.so.cache")).unwrap(),
            bytes,
            "{case}: image file changed"
        );
    }
}

#[test]
fn hostile_gpu_request_values_get_one_clear_error() {
    require_root!();
    let long = "0,".repeat(3000);
    let cases: Vec<(&str, String)> = vec![
        ("very long", long),
        ("NUL byte", "0\u{0}1".to_owned()),
        ("commas only", ",,,".to_owned()),
        ("UUID with a path", "GPU-../../../etc/passwd".to_owned()),
        ("CDI name with a path", "nvidia.com/gpu=../../x".to_owned()),
        ("unknown words", "\u{202e}all".to_owned()),
    ];
    let rt = Runtime::new();
    for (case, value) in cases {
        let bundle = Bundle::busybox();
        bundle.set_args(&["true"]);
        bundle.edit(|c| {
            c["process"]["env"]
                .as_array_mut()
                .unwrap()
                .push(json!(format!("NVIDIA_VISIBLE_DEVICES={value}")));
        });
        let id = unique("req");
        let dir = bundle.dir.to_string_lossy();
        let out = rt.run(GpuFixtures::get().args(&["create", "--bundle", &dir, &id]));
        assert_eq!(out.code, 1, "{case}: {} {}", out.stdout, out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{case}: {}", out.stderr);
        assert!(
            lines[0].starts_with("gpurun: error: ") && lines[0].contains("NVIDIA_VISIBLE_DEVICES"),
            "{case}: {}",
            lines[0]
        );
        assert!(
            lines[0].len() < 400,
            "{case}: the error repeats the whole value"
        );
        assert!(rt.leftovers().is_empty(), "{case}");
    }
}

#[test]
fn hostile_config_json_files_are_refused_cleanly() {
    require_root!();
    let rt = Runtime::new();
    let nested = format!(
        "{{\"ociVersion\":\"1.0.2\",\"annotations\":{}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut huge = b"{\"ociVersion\":\"1.0.2\",\"annotations\":{\"a\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 17 << 20));
    huge.extend(b"\"}}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("huge", huge, "larger than 16 MiB"),
        (
            "deeply nested",
            nested.into_bytes(),
            "not a valid OCI runtime config",
        ),
        (
            "wrong types",
            br#"{"ociVersion":"1.0.2","process":5,"root":{"path":"rootfs"}}"#.to_vec(),
            "not a valid OCI runtime config",
        ),
        (
            "not UTF-8",
            b"{\"ociVersion\":\"1.0.2\xff\xfe\"}".to_vec(),
            "not a valid OCI runtime config",
        ),
    ];
    for (case, bytes, want) in cases {
        let bundle = Bundle::busybox();
        fs::write(bundle.dir.join("config.json"), &bytes).unwrap();
        let id = unique("cfg");
        assert_clean_failure(
            &rt,
            &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
            &id,
            want,
        );
        let _ = case;
    }
}

#[test]
fn two_creates_of_one_id_at_once_exactly_one_wins() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "100"]);
    for round in 0..5 {
        let id = unique("race");
        // Files, not pipes: the winner's container keeps its stdio open.
        let logs = Scratch::new("race-logs");
        let children: Vec<_> = (0..6)
            .map(|n| {
                let mut cmd = rt.command(["create", "--bundle", bundle.dir.to_str().unwrap(), &id]);
                let err = fs::File::create(logs.path().join(n.to_string())).unwrap();
                cmd.stdout(std::process::Stdio::null()).stderr(err);
                (n, cmd.spawn().unwrap())
            })
            .collect();
        let results: Vec<(bool, String)> = children
            .into_iter()
            .map(|(n, mut c)| {
                let ok = c.wait().unwrap().success();
                (
                    ok,
                    fs::read_to_string(logs.path().join(n.to_string())).unwrap(),
                )
            })
            .collect();
        let winners = results.iter().filter(|r| r.0).count();
        assert_eq!(winners, 1, "round {round}: {winners} creates won");
        for (_, err) in results.iter().filter(|r| !r.0) {
            assert!(
                err.contains("is being created by another gpurun")
                    || err.contains("already exists"),
                "round {round}: {err}"
            );
        }
        assert_eq!(rt.state(&id)["status"], "created");
        rt.run(["delete", "--force", &id]).ok();
        assert!(
            rt.leftovers().is_empty(),
            "round {round}: {:?}",
            rt.leftovers()
        );
        assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    }
}

#[test]
fn kill_9_halfway_through_create_then_delete_force_cleans_up() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "100"]);
    // A createRuntime hook holds the create halfway: namespaces and cgroup
    // made, the container's init waiting.
    bundle.edit(|c| {
        c["hooks"] = json!({"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", "2"]}]});
    });
    let id = unique("k9");
    let mut child = rt
        .command(["create", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cgroup_dirs(&format!("gpurun/{id}")).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
        "create never got halfway"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let out = rt.run(["--debug", "delete", "--force", &id]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    let left = cgroup_dirs(&format!("gpurun/{id}"));
    assert!(left.is_empty(), "cgroup left: {left:?}\n{}", out.stderr);
    std::thread::sleep(Duration::from_millis(200));
    let alive: Vec<i32> = processes_mentioning(&id)
        .into_iter()
        .filter(|pid| is_alive(*pid))
        .collect();
    assert!(alive.is_empty(), "processes left: {alive:?}");
}

/// The container's init looks up the user's home directory inside the
/// image. Through glibc that would follow the image's nsswitch.conf and
/// dlopen the image's `libnss_<service>.so.2`, running image code in the
/// runtime's init before exec. gpurun reads /etc/passwd instead: the
/// image's NSS module never runs, and HOME still comes from the image.
#[test]
fn an_nss_module_in_the_image_never_runs_in_the_runtime() {
    require_root!();
    let scratch = Scratch::new("nss");
    // The marker path is read inside the container: it lands in the rootfs.
    let module = canary(scratch.path(), Path::new("/nss-module-ran"));
    let bundle = Bundle::busybox();
    let rootfs = bundle.rootfs();
    bundle.edit(|c| {
        c["root"]["readonly"] = json!(false);
        c["process"]["env"] = json!(["PATH=/bin"]);
    });
    bundle.set_args(&["sh", "-c", "echo HOME=$HOME"]);
    fs::create_dir_all(rootfs.join("lib/x86_64-linux-gnu")).unwrap();
    fs::copy(
        &module,
        rootfs.join("lib/x86_64-linux-gnu/libnss_evil.so.2"),
    )
    .unwrap();
    fs::create_dir_all(rootfs.join("etc")).unwrap();
    fs::write(
        rootfs.join("etc/nsswitch.conf"),
        "passwd: evil\ngroup: evil\n",
    )
    .unwrap();
    fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/home-from-image:/bin/sh\n",
    )
    .unwrap();
    let rt = Runtime::new();
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("nss"),
    ]);
    out.ok();
    assert_eq!(out.stdout.trim(), "HOME=/home-from-image");
    assert!(
        !rootfs.join("nss-module-ran").exists(),
        "the image's NSS module ran inside the runtime's init"
    );
    assert!(rt.leftovers().is_empty());
}

/// A bundle whose config.json is a FIFO, a socket, a directory or a device
/// (a symlink to /dev/zero): `run` and `create` end at once (runc 1.1.5
/// blocks for ever on the FIFO) with one line naming the file and what it
/// is, and nothing is left.
#[test]
fn a_config_json_that_is_no_file_is_refused_without_blocking() {
    require_root!();
    let [fifo, socket, directory] = NOT_FILES;
    let cases: [(&str, Make); 4] = [
        fifo,
        socket,
        directory,
        ("a device", |p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
    ];
    for (kind, make) in cases {
        let bundle = Bundle::busybox();
        let config = bundle.dir.join("config.json");
        fs::remove_file(&config).unwrap();
        make(&config);
        let rt = Runtime::new();
        for command in ["run", "create"] {
            let id = unique("config");
            // rt.run's own limit ends a hang as a test failure.
            let out = rt.run([command, "--bundle", bundle.dir.to_str().unwrap(), &id]);
            assert_eq!(out.code, 1, "{kind} {command}: {}", out.stderr);
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            assert!(
                out.stderr
                    .contains(&format!("{} is {kind}, not a file", config.display())),
                "{kind} {command}: {}",
                out.stderr
            );
            assert!(
                rt.leftovers().is_empty(),
                "{kind}: left {:?}",
                rt.leftovers()
            );
        }
    }
}

/// Every file a GPU `run` reads or opens in the image, as
/// `strace -f -e trace=openat,openat2,open` of one showed it (root, a
/// non-root user, the image's own /dev or a tmpfs, every capability, a CUDA
/// compat library), and the image's /dev nodes runc checks.
const IMAGE_PATHS_OPENED: [&str; 11] = [
    "etc/ld.so.cache",
    "etc/ld.so.conf",
    "etc/passwd",
    "etc/group",
    "usr/share/glvnd/egl_vendor.d/10_nvidia.json",
    "usr/share/vulkan/icd.d/nvidia_icd.json",
    "usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
    "usr/local/cuda/compat/libcuda.so.999.1.2",
    "dev/null",
    "dev/ptmx",
    "dev/zero",
];

/// A FIFO, a socket or a directory at each of those paths: every GPU `run`
/// ends (the helper's own limit), ran or refused in one line naming the
/// path, with nothing left behind.
#[test]
fn no_image_file_of_the_wrong_type_blocks_a_gpu_run() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let bundle = Bundle::glibc(None);
    bundle.edit(|c| {
        // The image's own /dev, as a bundle without a /dev mount has it.
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .retain(|m| !m["destination"].as_str().unwrap().starts_with("/dev"));
        c["root"]["readonly"] = json!(false);
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    });
    bundle.set_process(
        &["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?"],
        &["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=all"],
    );
    let rootfs = bundle.rootfs();
    with_each_wrong_kind(&rootfs, &IMAGE_PATHS_OPENED, |path, kind| {
        let rt = Runtime::new();
        let id = unique("opened");
        let dir = bundle.dir.to_str().unwrap();
        let out = rt.run(fixtures.args(&["run", "--bundle", dir, &id]));
        let case = format!("{path} as {kind}");
        if out.code != 0 {
            let first = out.stderr.lines().next().unwrap_or_default();
            let name = Path::new(path).file_name().unwrap().to_str().unwrap();
            assert!(
                first.starts_with("gpurun: error: ")
                    && first.contains(name)
                    && first.contains("the image's"),
                "{case}: {}",
                out.stderr
            );
        } else {
            assert_eq!(out.stdout.trim(), "smi=9", "{case}: {}", out.stderr);
        }
        assert!(rt.leftovers().is_empty(), "{case}: {:?}", rt.leftovers());
        assert!(
            cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
            "{case}: cgroup"
        );
        assert!(
            mounts_mentioning(rootfs.to_str().unwrap()).is_empty(),
            "{case}: mount left"
        );
    });
}

/// The image's own /dev (no tmpfs on it) with /dev/console not a file: a
/// FIFO or a socket is covered by the terminal's pty, as runc covers them,
/// never opened; a directory is one line naming it; nothing is left.
#[test]
fn an_image_dev_console_of_another_kind_is_covered_or_named() {
    require_root!();
    let [fifo, socket, directory] = NOT_FILES;
    for (kind, make) in [fifo, socket, directory] {
        let bundle = Bundle::busybox();
        bundle.edit(|c| {
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .retain(|m| m["destination"] != "/dev");
            c["root"]["readonly"] = json!(false);
            c["process"]["terminal"] = json!(true);
        });
        make(&bundle.rootfs().join("dev/console"));
        let rt = Runtime::new();
        let scratch = Scratch::new("console");
        let socket = scratch.path().join("console.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let id = unique("console");
        let mut create = rt.command(["create", "--bundle", bundle.dir.to_str().unwrap()]);
        create.arg("--console-socket").arg(&socket).arg(&id);
        let creator = std::thread::spawn(move || run_cmd(&mut create, TIMEOUT));
        if kind == "a directory" {
            // The pty is sent after /dev/console is mounted: none comes.
            let out = creator.join().unwrap();
            let first = out.stderr.lines().next().unwrap_or_default();
            assert!(
                out.code != 0 && first.contains("the image's /dev/console is a directory"),
                "{kind}: {}",
                out.stderr
            );
        } else {
            let _master = receive_console(&listener);
            let out = creator.join().unwrap();
            assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
            let state = rt.state(&id);
            assert_eq!(state["status"], "created", "{kind}");
            let pid = state["pid"].as_i64().unwrap();
            let console = fs::metadata(format!("/proc/{pid}/root/dev/console")).unwrap();
            use std::os::unix::fs::FileTypeExt;
            assert!(console.file_type().is_char_device(), "{kind}: not the pty");
            rt.run(["delete", "--force", &id]).ok();
        }
        assert!(rt.leftovers().is_empty(), "{kind}: {:?}", rt.leftovers());
        assert!(
            cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
            "{kind}: cgroup"
        );
    }
}
