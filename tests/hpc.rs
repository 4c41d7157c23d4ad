//! HPC without root: `gpurun import`, `gpurun run --rootfs`, Slurm's GPU
//! allocation and `gpurun doctor`, as root and as an unprivileged user.
//! Test images are built by tests/fixtures/make_image.py.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpurun_tests::*;

/// The good test image in all three formats, built once per test binary.
fn images() -> &'static PathBuf {
    static IMAGES: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    IMAGES.get_or_init(|| {
        let dir = per_process_dir("images");
        run_cmd(
            Command::new("python3")
                .arg(repo().join("tests/fixtures/make_image.py"))
                .arg("good")
                .arg(&dir),
            Duration::from_secs(60),
        )
        .ok();
        // Readable by the test user too.
        run_cmd(
            Command::new("chmod").args(["-R", "a+rX"]).arg(&dir),
            TIMEOUT,
        )
        .ok();
        dir
    })
}

/// Runs gpurun (no --root) as `who`, with extra environment.
fn gpurun(who: &As, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut cmd = Command::new(gpurun_bin());
    cmd.args(args);
    if let As::User(user) = who {
        user.apply(&mut cmd);
        cmd.env("XDG_RUNTIME_DIR", user.runtime_dir());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_cmd(&mut cmd, Duration::from_secs(60))
}

fn scratch_for(who: &As, prefix: &str) -> Scratch {
    let scratch = Scratch::new(prefix);
    if let As::User(user) = who {
        chown(scratch.path(), user);
    }
    scratch
}

fn busybox_for(who: &As) -> Bundle {
    match who {
        As::Root => Bundle::busybox(),
        As::User(u) => Bundle::busybox_rootless(u),
    }
}

/// path → "kind mode uid:gid [content|target]" for every entry under root.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            let m = fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let what = if m.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else if m.file_type().is_symlink() {
                format!("link -> {}", fs::read_link(&path).unwrap().display())
            } else if m.len() < 100 {
                format!("file {:?}", fs::read_to_string(&path).unwrap())
            } else {
                format!("file {} bytes", m.len())
            };
            out.insert(
                rel,
                format!("{what} {:o} {}:{}", m.mode() & 0o7777, m.uid(), m.gid()),
            );
        }
    }
    out
}

fn expected_tree(owner_1000: u32) -> BTreeMap<String, String> {
    let busybox = fs::metadata("/bin/busybox").unwrap().len();
    let o = owner_1000;
    [
        ("a", "dir 755 R"),
        ("a/keep", "file \"keep\\n\" 644 R"),
        ("bin", "dir 755 R"),
        ("bin/busybox", &format!("file {busybox} bytes 755 R")),
        ("bin/sh", "link -> busybox 777 R"),
        ("data", "dir 755 R"),
        ("data/link", "file \"linked\\n\" 644 R"),
        ("data/orig", "file \"linked\\n\" 644 R"),
        ("dev", "dir 755 R"),
        ("etc", "dir 755 R"),
        ("etc/group", "file \"root:x:0:\\napp:x:1000:\\n\" 644 R"),
        ("etc/motd", "file \"hello from layer 2\\n\" 644 R"),
        (
            "etc/passwd",
            "file \"root:x:0:0:root:/root:/bin/sh\\napp:x:1000:1000::/home/app:/bin/sh\\n\" 644 R",
        ),
        ("home", "dir 755 R"),
        ("home/app", &format!("dir 700 {o}:{o}")),
        ("home/app/file", &format!("file \"mine\\n\" 600 {o}:{o}")),
        ("opq", "dir 755 R"),
        ("opq/new", "file \"new\\n\" 644 R"),
        ("proc", "dir 755 R"),
        ("ro", "dir 555 R"),
        ("ro/inside", "file \"x\\n\" 644 R"),
        ("ro/late", "file \"late\\n\" 644 R"),
        ("sys", "dir 755 R"),
        ("tmp", "dir 1777 R"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[test]
fn import_gives_exactly_the_expected_tree_in_every_format() {
    require_root!();
    for who in As::both() {
        let (root_owner, owner_1000) = match &who {
            As::Root => ("0:0".to_owned(), 1000),
            As::User(u) => (format!("{}:{}", u.uid, u.gid), u.subuid_start() + 999),
        };
        for format in ["layout", "image.oci.tar", "image.docker.tar"] {
            let scratch = scratch_for(&who, "import");
            let out_dir = scratch.path().join("bundle");
            let out = gpurun(
                &who,
                &[
                    "import",
                    images().join(format).to_str().unwrap(),
                    "-o",
                    out_dir.to_str().unwrap(),
                ],
                &[],
            );
            assert_eq!(out.code, 0, "{format}: {}", out.stderr);
            let expected: BTreeMap<String, String> = expected_tree(owner_1000)
                .into_iter()
                .map(|(k, v)| (k, v.replace(" R", &format!(" {root_owner}"))))
                .collect();
            let got = tree(&out_dir.join("rootfs"));
            assert_eq!(got, expected, "{format} as {who:?}");
            let rootfs = out_dir.join("rootfs");
            assert_eq!(
                fs::metadata(rootfs.join("data/orig")).unwrap().ino(),
                fs::metadata(rootfs.join("data/link")).unwrap().ino(),
                "data/link is a hard link"
            );

            // The written config runs as it is.
            let config: serde_json::Value =
                serde_json::from_slice(&fs::read(out_dir.join("config.json")).unwrap()).unwrap();
            assert_eq!(
                config["process"]["args"],
                serde_json::json!(["sh", "-c", "cat /etc/motd"])
            );
            assert_eq!(config["process"]["cwd"], "/data");
            let rt = Runtime::as_who(who.clone());
            let ran = rt.run(["run", "--bundle", out_dir.to_str().unwrap(), &unique("imp")]);
            assert_eq!(
                (ran.code, ran.stdout.as_str()),
                (0, "hello from layer 2\n"),
                "{}",
                ran.stderr
            );

            // And goes again, whatever owns its files.
            let removed = gpurun(
                &who,
                &["import", "--remove", "-o", out_dir.to_str().unwrap()],
                &[],
            );
            assert_eq!(removed.code, 0, "{}", removed.stderr);
            assert!(!out_dir.exists());
        }
    }
}

#[test]
fn rootless_import_keeps_image_owners_inside_the_user_namespace() {
    require_root!();
    let who = As::User(TestUser::get());
    let scratch = scratch_for(&who, "owners");
    let out_dir = scratch.path().join("b");
    let image = images().join("image.docker.tar");
    gpurun(
        &who,
        &[
            "import",
            image.to_str().unwrap(),
            "-o",
            out_dir.to_str().unwrap(),
        ],
        &[],
    )
    .ok();
    let rootfs = out_dir.join("rootfs");
    let ran = gpurun(
        &who,
        &[
            "run",
            "--rootfs",
            rootfs.to_str().unwrap(),
            "--",
            "busybox",
            "stat",
            "-c",
            "%u:%g %n",
            "/home/app",
            "/etc/passwd",
        ],
        &[],
    );
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "1000:1000 /home/app\n0:0 /etc/passwd\n"),
        "{}",
        ran.stderr
    );
}

#[test]
fn hostile_images_are_refused_and_nothing_is_written_outside() {
    require_root!();
    for who in As::both() {
        let scratch = scratch_for(&who, "hostile");
        let target = scratch.path().join("outside");
        fs::create_dir(&target).unwrap();
        if let As::User(u) = &who {
            chown(&target, u);
        }
        let cases = scratch.path().join("cases");
        run_cmd(
            Command::new("python3")
                .arg(repo().join("tests/fixtures/make_image.py"))
                .arg("hostile")
                .arg(&cases)
                .arg(&target),
            Duration::from_secs(60),
        )
        .ok();
        run_cmd(
            Command::new("chmod").args(["-R", "a+rX"]).arg(&cases),
            TIMEOUT,
        )
        .ok();
        for (case, reason) in [
            ("dotdot", "has \"..\": it would escape the target directory"),
            (
                "absolute",
                "is absolute: it would escape the target directory",
            ),
            (
                "symlink-absolute",
                "would be written through symlink \"evil\", which leaves the target directory",
            ),
            (
                "symlink-relative",
                "would be written through symlink \"evil\", which leaves the target directory",
            ),
            ("symlink-loop", "symlink loop"),
            ("hardlink-outside", "has \"..\""),
            ("bad-digest", "digest mismatch"),
            ("blob-symlink", "(or it is a symlink)"),
        ] {
            let out_dir = scratch.path().join(format!("out-{case}"));
            let out = gpurun(
                &who,
                &[
                    "import",
                    cases.join(case).to_str().unwrap(),
                    "-o",
                    out_dir.to_str().unwrap(),
                ],
                &[],
            );
            assert_eq!(out.code, 1, "{case} as {who:?}: {}", out.stderr);
            let errors: Vec<&str> = out
                .stderr
                .lines()
                .filter(|l| l.starts_with("gpurun: error: "))
                .collect();
            assert_eq!(errors.len(), 1, "{case}: {}", out.stderr);
            assert!(errors[0].contains(reason), "{case}: {}", errors[0]);
            assert!(!out_dir.exists(), "{case}: the output dir was left behind");
            assert_eq!(
                fs::read_dir(&target).unwrap().count(),
                0,
                "{case} wrote outside"
            );
        }
    }
}

#[test]
fn import_refuses_a_non_empty_output_and_a_missing_image() {
    require_root!();
    let scratch = Scratch::new("imparg");
    fs::write(scratch.path().join("x"), "x").unwrap();
    let out = gpurun(
        &As::Root,
        &[
            "import",
            images().join("layout").to_str().unwrap(),
            "-o",
            scratch.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("is not empty"), "{}", out.stderr);
    assert!(scratch.path().join("x").exists());
    let out = gpurun(
        &As::Root,
        &[
            "import",
            "/no/such/image",
            "-o",
            scratch.path().join("n").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("no such file or directory: name an OCI layout directory"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("os error"),
        "said twice: {}",
        out.stderr
    );
    assert!(!scratch.path().join("n").exists());
}

#[test]
fn run_rootfs_needs_no_config_and_shares_the_host_network() {
    require_root!();
    let host_net = fs::read_link("/proc/self/ns/net").unwrap();
    for who in As::both() {
        let bundle = busybox_for(&who);
        fs::remove_file(bundle.dir.join("config.json")).unwrap();
        let data = scratch_for(&who, "vol");
        fs::write(data.path().join("in"), "from host\n").unwrap();
        let volume = format!("{}:/data:ro", data.path().display());
        let state = scratch_for(&who, "rstate");
        let root = state.path().join("root");
        let out = gpurun(
            &who,
            &[
                "--root", root.to_str().unwrap(),
                "run", "--rootfs", bundle.rootfs().to_str().unwrap(),
                "-e", "GREETING=hi", "-w", "/tmp", "-v", &volume,
                "--", "sh", "-c",
                "id -u; echo $GREETING; pwd; cat /data/in; touch /data/x 2>/dev/null || echo ro; readlink /proc/self/ns/net; exit 3",
            ],
            &[],
        );
        assert_eq!(out.code, 3, "{who:?}: {}", out.stderr);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            [
                "0",
                "hi",
                "/tmp",
                "from host",
                "ro",
                host_net.to_str().unwrap()
            ],
            "{who:?}"
        );
        let left: Vec<_> = fs::read_dir(&root)
            .map(|d| d.flatten().count())
            .into_iter()
            .collect();
        assert!(left.iter().all(|&n| n == 0), "{who:?}: state left behind");
        if let As::User(u) = &who {
            let kept = gpurun(
                &who,
                &[
                    "run",
                    "--rootfs",
                    bundle.rootfs().to_str().unwrap(),
                    "--keep-uid",
                    "--",
                    "id",
                    "-u",
                ],
                &[],
            );
            assert_eq!(
                (kept.code, kept.stdout.trim()),
                (0, u.uid.to_string().as_str()),
                "{}",
                kept.stderr
            );
        }
    }
    let out = gpurun(
        &As::Root,
        &["run", "--rootfs", "/no/such/dir", "--", "true"],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("--rootfs /no/such/dir: no such directory"),
        "{}",
        out.stderr
    );
    let out = gpurun(&As::Root, &["run", "--rootfs", "/tmp"], &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("needs a command after \"--\""),
        "{}",
        out.stderr
    );
}

/// `run --rootfs` of a glibc rootfs over the fake GPU host, with `env`.
fn gpu_run(who: &As, extra: &[&str], env: &[(&str, &str)], script: &str) -> Ran {
    let bundle = Bundle::glibc(who.user());
    let rootfs = bundle.rootfs().to_string_lossy().into_owned();
    let rest: Vec<&str> = ["run", "--rootfs", &rootfs]
        .into_iter()
        .chain(extra.iter().copied())
        .chain(["--", "sh", "-c", script])
        .collect();
    let args = GpuFixtures::get().args(&rest);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    gpurun(who, &args, env)
}

const GPU_SCRIPT: &str =
    "ls /dev/nvidia[0-9]* 2>/dev/null; nvidia-smi >/dev/null 2>&1; echo smi=$?";

#[test]
fn run_rootfs_with_gpus_as_a_user() {
    require_root!();
    let who = As::User(TestUser::get());
    let out = gpu_run(&who, &["--gpus", "all"], &[], GPU_SCRIPT);
    assert_eq!(
        (out.code, out.stdout.lines().collect::<Vec<_>>()),
        (0, vec!["/dev/nvidia0", "/dev/nvidia1", "smi=9"]),
        "{}",
        out.stderr
    );
    // No --gpus outside Slurm: no GPU.
    let out = gpu_run(&who, &[], &[], GPU_SCRIPT);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["smi=127"],
        "{}",
        out.stderr
    );
}

#[test]
fn slurm_allocation_bounds_the_gpus() {
    require_root!();
    for who in As::both() {
        let step = [("SLURM_JOB_ID", "77"), ("SLURM_STEP_GPUS", "1")];
        // No --gpus: exactly the allocated GPU, by its device number.
        let out = gpu_run(&who, &[], &step, GPU_SCRIPT);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["/dev/nvidia1", "smi=9"],
            "{}",
            out.stderr
        );
        // "all" means all of the allocation.
        let out = gpu_run(&who, &["--gpus", "all"], &step, GPU_SCRIPT);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["/dev/nvidia1", "smi=9"],
            "{}",
            out.stderr
        );
        // Asking for more is refused.
        let out = gpu_run(&who, &["--gpus", "0"], &step, GPU_SCRIPT);
        assert_eq!(out.code, 1);
        assert!(
            out.stderr
                .contains("GPU 0 is not allocated to Slurm job 77"),
            "{}",
            out.stderr
        );
        // A job without GPUs gets none, and "all" is an error.
        let none = [("SLURM_JOB_ID", "78")];
        let out = gpu_run(&who, &[], &none, GPU_SCRIPT);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["smi=127"],
            "{}",
            out.stderr
        );
        let out = gpu_run(&who, &["--gpus", "all"], &none, GPU_SCRIPT);
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.contains("Slurm job 78 has no GPUs"),
            "{}",
            out.stderr
        );
        // CUDA_VISIBLE_DEVICES alone (no device constraint here): ordinal 1.
        let cuda = [("SLURM_JOB_ID", "79"), ("CUDA_VISIBLE_DEVICES", "1")];
        let out = gpu_run(&who, &[], &cuda, GPU_SCRIPT);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["/dev/nvidia1", "smi=9"],
            "{}",
            out.stderr
        );
    }
}

#[test]
fn doctor_verdicts_match_what_a_container_does() {
    require_root!();
    let fixtures = GpuFixtures::get().flags();
    let flags: Vec<&str> = fixtures.iter().map(String::as_str).collect();
    for who in As::both() {
        let doctor = gpurun(&who, &[&flags[..], &["doctor", "--gpu"]].concat(), &[]);
        assert_eq!(doctor.code, 0, "{who:?}: {}", doctor.stdout);
        assert!(
            doctor.stdout.contains("verdict:  container: would run"),
            "{}",
            doctor.stdout
        );
        assert!(
            doctor.stdout.contains("GPU container: would run with the driver files injected, but no kernel driver answers"),
            "{}",
            doctor.stdout
        );
        // And so it does: the container runs and nvidia-smi exits 9.
        let out = gpu_run(&who, &["--gpus", "0"], &[], GPU_SCRIPT);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["/dev/nvidia0", "smi=9"],
            "{}",
            out.stderr
        );

        // Without a driver: no GPU, and a GPU request fails the same way.
        let no_driver = [
            "--driver-root",
            "/nonexistent",
            "--proc-root",
            "/nonexistent",
        ];
        let doctor = gpurun(&who, &[&no_driver[..], &["doctor", "--gpu"]].concat(), &[]);
        assert_eq!(doctor.code, 1, "{}", doctor.stdout);
        assert!(
            doctor.stdout.contains("GPU container: would NOT get a GPU"),
            "{}",
            doctor.stdout
        );
        let bundle = busybox_for(&who);
        let out = gpurun(
            &who,
            &[
                &no_driver[..],
                &[
                    "run",
                    "--rootfs",
                    bundle.rootfs().to_str().unwrap(),
                    "--gpus",
                    "0",
                    "--",
                    "true",
                ],
            ]
            .concat(),
            &[],
        );
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.contains("no NVIDIA driver found"),
            "{}",
            out.stderr
        );
    }
    // A state directory the user cannot write: doctor says no, and so does run.
    let user = As::User(TestUser::get());
    let doctor = gpurun(&user, &["--root", "/root/gpurun-forbidden", "doctor"], &[]);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("FAIL  state directory"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains("container: would NOT run"),
        "{}",
        doctor.stdout
    );
    let bundle = busybox_for(&user);
    let out = gpurun(
        &user,
        &[
            "--root",
            "/root/gpurun-forbidden",
            "run",
            "--rootfs",
            bundle.rootfs().to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
}

/// Inside a Slurm job, `gpu plan` shows what the container gets: with
/// NVIDIA_VISIBLE_DEVICES=all and GPU 1 allocated to the step, both the plan
/// and the container have GPU 1 only. (The plan listed both GPUs while the
/// container got one: plan and doctor did not apply the job's allocation.)
#[test]
fn gpu_plan_inside_a_slurm_job_is_what_the_container_gets() {
    require_root!();
    let job = [("SLURM_JOB_ID", "7"), ("SLURM_STEP_GPUS", "1")];
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sh", "-c", GPU_SCRIPT], &["NVIDIA_VISIBLE_DEVICES=all"]);
    let dir = bundle.dir.to_string_lossy().into_owned();
    let fixtures = GpuFixtures::get();

    let args = fixtures.args(&["gpu", "plan", "--json", &dir]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = gpurun(&As::Root, &args, &job);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let planned: Vec<u64> = plan["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["index"].as_u64().unwrap())
        .collect();
    assert_eq!(planned, [1]);

    let id = unique("slurmplan");
    let args = fixtures.args(&["run", "--bundle", &dir, &id]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = gpurun(&As::Root, &args, &job);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["/dev/nvidia1", "smi=9"],
        "{}",
        out.stderr
    );
}

/// A shell line printing the file system type of the container's root
/// (the field after mountinfo's "-" on its "/" line).
const ROOT_FS_TYPE: &str = "awk '$5 == \"/\" {for (i = 7; i < NF; i++) if ($i == \"-\") t = $(i + 1)} END {print t}' /proc/self/mountinfo";

/// The loop devices whose backing file is `image`.
fn loops_backed_by(image: &Path) -> Vec<String> {
    let wanted = image.to_string_lossy().into_owned();
    fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter(|e| {
            fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|b| b.trim_end() == wanted)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A squashfs image of the glibc rootfs, made with mksquashfs. The loop
/// module is loaded first: a host's udev loads it when /dev/loop-control
/// is first opened, the test VMs' minimal init does not.
fn squashfs_image(scratch: &Scratch) -> PathBuf {
    let _ = Command::new("modprobe").arg("loop").status();
    let bundle = Bundle::glibc(None);
    let image = scratch.path().join("app.sqsh");
    run_cmd(
        Command::new("mksquashfs")
            .arg(bundle.rootfs())
            .arg(&image)
            .args(["-quiet", "-noappend"]),
        Duration::from_secs(120),
    )
    .ok();
    image
}

/// `run --image FILE.sqsh` runs the image in place: its root is the
/// squashfs, read-only (a write fails with EROFS), or an overlay with a
/// tmpfs layer under --writable; GPUs reach it as a directory's (the GPU
/// flow writes nothing into the image: nvidia-smi is injected and exits
/// 9). The image file is unchanged, and once each run ends the host has no
/// mount of it, no loop device on it, and the state root is empty.
#[test]
fn a_squashfs_image_runs_in_place_read_only_or_writable_on_request() {
    require_root!();
    let scratch = Scratch::new("sqsh");
    let image = squashfs_image(&scratch);
    let before = fs::read(&image).unwrap();
    let image_arg = image.to_string_lossy().into_owned();
    let probe = format!(
        "{ROOT_FS_TYPE}; echo x > /probe 2>/dev/null; echo write=$?; \
         nvidia-smi >/dev/null 2>&1; echo smi=$?"
    );
    for (flags, root_fs, write) in [
        (&[][..], "squashfs", "write=1"),
        (&["--writable"][..], "overlay", "write=0"),
    ] {
        let rt = Runtime::new();
        let mut args = vec!["run", "--image", &image_arg, "--gpus", "0"];
        args.extend_from_slice(flags);
        args.extend(["--", "sh", "-c", &probe]);
        let out = rt.run(GpuFixtures::get().args(&args));
        assert_eq!(out.code, 0, "{flags:?}: {}", out.stderr);
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            [root_fs, write, "smi=9"],
            "{flags:?}: {}",
            out.stderr
        );
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
        assert!(mounts_mentioning(&image_arg).is_empty());
        assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
        assert!(
            loops_backed_by(&image).is_empty(),
            "{:?}",
            loops_backed_by(&image)
        );
    }
    assert!(
        fs::read(&image).unwrap() == before,
        "the image file was written"
    );
}

/// An image whose config (where `import -o` keeps it) has an entrypoint:
/// `run --image` runs the entrypoint and Cmd; a command given replaces
/// both, or, with --image-entrypoint (pyxis's --container-entrypoint),
/// only Cmd: `sh -c` then runs the given string, which as a program of
/// its own does not exist (the create fails, as runc's does).
#[test]
fn an_images_entrypoint_runs_with_the_command_under_image_entrypoint() {
    require_root!();
    let _ = Command::new("modprobe").arg("loop").status();
    let scratch = Scratch::new("sqsh-entry");
    let tree = scratch.path().join("tree");
    let copied = run_cmd(
        Command::new("cp")
            .arg("-a")
            .arg(Bundle::glibc(None).rootfs())
            .arg(&tree),
        TIMEOUT,
    );
    assert_eq!(copied.code, 0, "{}", copied.stderr);
    fs::create_dir(tree.join(".gpurun")).unwrap();
    fs::write(
        tree.join(".gpurun/image-config.json"),
        r#"{"config": {"Entrypoint": ["sh", "-c"], "Cmd": ["echo default"], "Env": ["PATH=/bin:/usr/bin"]}}"#,
    )
    .unwrap();
    let image = scratch.path().join("entry.sqsh");
    let made = run_cmd(
        Command::new("mksquashfs")
            .arg(&tree)
            .arg(&image)
            .args(["-quiet", "-noappend"]),
        Duration::from_secs(120),
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let image = image.to_string_lossy().into_owned();
    let rt = Runtime::new();
    for (flags, code, stdout) in [
        (&[][..], 0, "default\n"),
        (&["--", "echo", "given"][..], 0, "given\n"),
        (
            &["--image-entrypoint", "--", "echo $0 kept"][..],
            0,
            "sh kept\n",
        ),
        (&["--", "echo $0 kept"][..], 1, ""),
    ] {
        let mut args = vec!["run", "--image", &image];
        args.extend_from_slice(flags);
        let out = rt.run(&args);
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (code, stdout),
            "{flags:?}: {}",
            out.stderr
        );
        if code == 1 {
            assert!(
                out.stderr.contains("executable file not found"),
                "{}",
                out.stderr
            );
        }
    }
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}

/// A `run --image` container takes an exec (into its read-only root). A
/// `run --image` killed with SIGKILL while its container runs leaves
/// the host no mount (they were in the run's own mount namespace); the
/// container keeps the image until it is deleted, and then the loop
/// device clears itself and nothing is left. A file that is no squashfs
/// is refused in one line.
#[test]
fn a_killed_image_run_leaves_nothing_once_its_container_is_deleted() {
    require_root!();
    let scratch = Scratch::new("sqsh-kill");
    let image = squashfs_image(&scratch);
    let image_arg = image.to_string_lossy().into_owned();
    let rt = Runtime::new();
    let id = unique("sqsh");
    let mut child = rt
        .command(["run", "--image", &image_arg, &id, "--", "sleep", "300"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = runs_soon(&rt, &id);
    assert!(running, "the container never ran");
    assert_eq!(loops_backed_by(&image).len(), 1);
    // An exec joins it, though the host does not see its root.
    let exec = rt.run(["exec", &id, "sh", "-c", "echo x > /x 2>/dev/null; echo $?"]);
    assert_eq!((exec.code, exec.stdout.trim()), (0, "1"), "{}", exec.stderr);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(mounts_mentioning(&image_arg).is_empty());
    assert!(mounts_mentioning(&format!("{id}@image")).is_empty());
    // The container still runs from the image.
    assert!(rt.run(["state", &id]).stdout.contains("\"running\""));
    let deleted = rt.run(["delete", "--force", &id]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    let cleared = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        loops_backed_by(&image).is_empty()
    });
    assert!(cleared, "loop devices left: {:?}", loops_backed_by(&image));
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());

    let not_squashfs = scratch.path().join("not.sqsh");
    fs::write(&not_squashfs, b"\x7fELF").unwrap();
    let out = rt.run([
        "run",
        "--image",
        &not_squashfs.to_string_lossy(),
        "--",
        "true",
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("not a squashfs image"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}

/// `import IMAGE -o FILE.sqsh`, as root and as a user, writes one
/// squashfs file (nothing else beside it) whose tree, unpacked by
/// unsquashfs, is exactly the image's with the owners it has inside (the
/// user's import packs from inside its user namespace), and the image's
/// config at /.gpurun/image-config.json; `run --image` runs the image's
/// own command; an existing file is refused and left as it was.
#[test]
fn import_writes_a_squashfs_image_with_the_images_owners() {
    require_root!();
    let _ = Command::new("modprobe").arg("loop").status();
    let expected: BTreeMap<String, String> = expected_tree(1000)
        .into_iter()
        .map(|(k, v)| (k, v.replace(" R", " 0:0")))
        .collect();
    for who in As::both() {
        let scratch = scratch_for(&who, "import-sqsh");
        let file = scratch.path().join("app.sqsh");
        let file_arg = file.to_string_lossy().into_owned();
        let image = images().join("image.docker.tar");
        let out = gpurun(
            &who,
            &["import", image.to_str().unwrap(), "-o", &file_arg],
            &[],
        );
        assert_eq!(out.code, 0, "{who:?}: {}", out.stderr);
        let beside: Vec<_> = fs::read_dir(scratch.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(beside, ["app.sqsh"], "{who:?}");
        let unpacked = scratch.path().join("unpacked");
        let listed = run_cmd(
            Command::new("unsquashfs")
                .args(["-q", "-d"])
                .arg(&unpacked)
                .arg(&file),
            Duration::from_secs(60),
        );
        assert_eq!(listed.code, 0, "{}", listed.stderr);
        // The image's config, kept inside for `run --image`.
        let mut got = tree(&unpacked);
        assert!(got.remove(".gpurun/image-config.json").is_some(), "{got:?}");
        assert!(got.remove(".gpurun").is_some());
        assert_eq!(got, expected, "{who:?}");
        assert_eq!(
            fs::metadata(unpacked.join("data/orig")).unwrap().ino(),
            fs::metadata(unpacked.join("data/link")).unwrap().ino(),
            "data/link is a hard link"
        );
        let rt = Runtime::new();
        // The image's own command, from its working directory.
        let ran = rt.run(["run", "--image", &file_arg]);
        assert_eq!(
            (ran.code, ran.stdout.as_str()),
            (0, "hello from layer 2\n"),
            "{}",
            ran.stderr
        );
        let before = fs::read(&file).unwrap();
        let again = gpurun(
            &who,
            &["import", image.to_str().unwrap(), "-o", &file_arg],
            &[],
        );
        assert_eq!(again.code, 1);
        assert!(again.stderr.contains("the file exists"), "{}", again.stderr);
        assert!(fs::read(&file).unwrap() == before);
    }
}

fn siftool(args: &[&str]) {
    let out = run_cmd(Command::new("siftool").args(args), Duration::from_secs(60));
    assert_eq!(out.code, 0, "siftool {args:?}: {}", out.stderr);
}

/// A SIF file, as sylabs' siftool makes one: `squashfs` as its primary
/// system partition, and a signature object linked to it.
fn sif_image(scratch: &Scratch, squashfs: &Path) -> PathBuf {
    let sif = scratch.path().join("app.sif");
    let (sif_arg, squashfs_arg) = (sif.to_str().unwrap(), squashfs.to_str().unwrap());
    let signature = scratch.path().join("signature");
    fs::write(&signature, [7u8; 600]).unwrap();
    siftool(&["new", sif_arg]);
    let partition = ["--datatype", "4", "--partfs", "1", "--partarch", "2"];
    siftool(
        &[
            &["add", sif_arg, squashfs_arg, "--parttype", "2"][..],
            &partition,
        ]
        .concat(),
    );
    siftool(&[
        "add",
        sif_arg,
        signature.to_str().unwrap(),
        "--datatype",
        "5",
        "--signentity",
        "433FE984155206BD962725E20E8713472A879943",
        "--signhash",
        "1",
        "--link",
        "1",
    ]);
    sif
}

/// A SIF file made by sylabs' reference tool (Debian's siftool): its
/// primary system partition (a squashfs) runs in place through a loop
/// device set to the partition's offset, a signature object beside it
/// changes nothing, and a SIF file with only a data partition is refused
/// in one line.
#[test]
fn a_sif_files_system_partition_runs_in_place() {
    require_root!();
    let scratch = Scratch::new("sif");
    let squashfs = squashfs_image(&scratch);
    let sif = sif_image(&scratch, &squashfs);
    let (sif_arg, squashfs_arg) = (sif.to_str().unwrap(), squashfs.to_str().unwrap());
    let partition = ["--datatype", "4", "--partfs", "1", "--partarch", "2"];
    let rt = Runtime::new();
    let probe = format!("{ROOT_FS_TYPE}; cat /etc/passwd | head -1");
    let out = rt.run(["run", "--image", sif_arg, "--", "sh", "-c", &probe]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let root_line = fs::read_to_string(Bundle::glibc(None).rootfs().join("etc/passwd")).unwrap();
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["squashfs", root_line.lines().next().unwrap()]
    );
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    assert!(loops_backed_by(&sif).is_empty());

    let data_only = scratch.path().join("data.sif");
    let data_arg = data_only.to_str().unwrap();
    siftool(&["new", data_arg]);
    siftool(
        &[
            &["add", data_arg, squashfs_arg, "--parttype", "3"][..],
            &partition,
        ]
        .concat(),
    );
    let out = rt.run(["run", "--image", data_arg, "--", "true"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no system partition"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
}

/// /dev/fuse open to users while it lives, as udev's default rule makes
/// it (mode 0666) on every systemd host; this test host has no udev and
/// leaves it 0600. The mode it had comes back on drop.
/// Tests that change it, or depend on its mode, take turns.
struct FuseOpenToUsers {
    mode: u32,
    _turn: std::sync::MutexGuard<'static, ()>,
}

static FUSE_MODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fuse_mode_turn() -> std::sync::MutexGuard<'static, ()> {
    FUSE_MODE.lock().unwrap_or_else(|e| e.into_inner())
}

impl FuseOpenToUsers {
    fn new() -> FuseOpenToUsers {
        use std::os::unix::fs::PermissionsExt;
        let turn = fuse_mode_turn();
        let _ = Command::new("modprobe")
            .arg("fuse")
            .stderr(std::process::Stdio::null())
            .status();
        let mode = fs::metadata("/dev/fuse")
            .expect("/dev/fuse")
            .permissions()
            .mode();
        fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(0o666)).unwrap();
        FuseOpenToUsers {
            mode: mode & 0o7777,
            _turn: turn,
        }
    }
}

impl Drop for FuseOpenToUsers {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(self.mode));
    }
}

/// The FUSE daemons still serving mounts under `state_root`.
fn fuse_daemons_under(state_root: &Path) -> Vec<String> {
    let daemons: Vec<i32> = processes_mentioning(&state_root.to_string_lossy())
        .into_iter()
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| matches!(comm.trim(), "squashfuse" | "fuse-overlayfs"))
        })
        .collect();
    describe_processes(&daemons)
}

/// Whether container `id` of `rt` is running within ten seconds.
fn runs_soon(rt: &Runtime, id: &str) -> bool {
    (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        rt.run(["state", id]).stdout.contains("\"running\"")
    })
}

/// A user's `run --image`, of a squashfs file and of a SIF file, mounts
/// it through FUSE (squashfuse, read-only), with every file root's inside
/// the user namespace; under --writable the container's init lays the
/// kernel's overlayfs over it in the container's user namespace (not
/// fuse-overlayfs, which --layer and --save keep), and a
/// GPU (nvidia-smi injected, exit 9) though the image takes no mount
/// point. The file is unchanged, and once each run ends the host has no
/// mount under the state root, no daemon, and the state root is empty.
#[test]
fn a_users_squashfs_and_sif_images_run_in_place_through_fuse() {
    require_root!();
    let _fuse = FuseOpenToUsers::new();
    let test_user = TestUser::get();
    let user = As::User(test_user.clone());
    let scratch = scratch_for(&user, "sqsh-user");
    let squashfs = squashfs_image(&scratch);
    let sif = sif_image(&scratch, &squashfs);
    let probe = format!(
        "{ROOT_FS_TYPE}; stat -c %u:%g /etc/passwd; echo x > /probe 2>/dev/null; echo write=$?; \
         nvidia-smi >/dev/null 2>&1; echo smi=$?"
    );
    for image in [&squashfs, &sif] {
        let before = fs::read(image).unwrap();
        let image_arg = image.to_string_lossy().into_owned();
        for (flags, root_fs, write) in [
            (&[][..], "fuse.squashfuse", "write=1"),
            (&["--writable"][..], "overlay", "write=0"),
        ] {
            let rt = Runtime::as_who(user.clone());
            let mut args = vec!["run", "--image", &image_arg, "--gpus", "0"];
            args.extend_from_slice(flags);
            args.extend(["--", "sh", "-c", &probe]);
            let out = rt.run(GpuFixtures::get().args(&args));
            assert_eq!(out.code, 0, "{image_arg} {flags:?}: {}", out.stderr);
            assert_eq!(
                out.stdout.lines().collect::<Vec<_>>(),
                [root_fs, "0:0", write, "smi=9"],
                "{image_arg} {flags:?}: {}",
                out.stderr
            );
            assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
            assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
            assert!(fuse_daemons_under(&rt.root).is_empty());
        }
        assert!(
            fs::read(image).unwrap() == before,
            "{image_arg} was written"
        );
    }
}

/// A user's `run --image` killed with SIGKILL while its container runs:
/// the daemons keep serving the container (an exec writes to its layer)
/// until `delete`, which unmounts them; then no mount, daemon or state is
/// left. Without FUSE open to users, the run fails in one line that says
/// so, and leaves nothing.
#[test]
fn a_users_killed_image_run_is_cleaned_up_by_delete() {
    require_root!();
    let fuse = FuseOpenToUsers::new();
    let test_user = TestUser::get();
    let user = As::User(test_user.clone());
    let scratch = scratch_for(&user, "sqsh-user-kill");
    let image = squashfs_image(&scratch);
    let image_arg = image.to_string_lossy().into_owned();
    let rt = Runtime::as_who(user.clone());
    let id = unique("sqsh-user");
    let mut child = rt
        .command([
            "run",
            "--image",
            &image_arg,
            "--writable",
            &id,
            "--",
            "sleep",
            "300",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = runs_soon(&rt, &id);
    assert!(running, "the container never ran");
    child.kill().unwrap();
    child.wait().unwrap();
    let exec = rt.run(["exec", &id, "sh", "-c", "echo kept > /x && cat /x"]);
    assert_eq!(
        (exec.code, exec.stdout.trim()),
        (0, "kept"),
        "{}",
        exec.stderr
    );
    // The image's squashfuse; the writable layer is the container's own.
    assert_eq!(mounts_mentioning(&format!("{id}@image")).len(), 1);
    let deleted = rt.run(["delete", "--force", &id]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        fuse_daemons_under(&rt.root).is_empty()
    });
    assert!(gone, "daemons left: {:?}", fuse_daemons_under(&rt.root));
    assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());

    drop(fuse);
    let _turn = fuse_mode_turn();
    let closed = fs::metadata("/dev/fuse").unwrap();
    if std::os::unix::fs::PermissionsExt::mode(&closed.permissions()) & 0o006 == 0 {
        let out = rt.run(["run", "--image", &image_arg, "--", "true"]);
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.contains("/dev/fuse is not open to users"),
            "{}",
            out.stderr
        );
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    }
}

/// `run --image FILE --layer DIR` (pyxis's --container-name under the
/// plugin), root and a user: what a container writes stays in DIR for the
/// next run with DIR alone, which runs the recorded image; a second
/// container on DIR while one runs, and another image over it, are
/// refused in one line; the image file is unchanged and nothing is left
/// mounted or running under the state root.
#[test]
fn a_kept_layer_carries_a_containers_writes_to_the_next_run() {
    require_root!();
    let _fuse = FuseOpenToUsers::new();
    for who in As::both() {
        let scratch = scratch_for(&who, "sqsh-layer");
        let image = squashfs_image(&scratch);
        let image_arg = image.to_string_lossy().into_owned();
        let before = fs::read(&image).unwrap();
        let layer = scratch.path().join("layer");
        let layer_arg = layer.to_string_lossy().into_owned();
        let rt = Runtime::as_who(who.clone());
        let first = rt.run([
            "run",
            "--image",
            &image_arg,
            "--layer",
            &layer_arg,
            "--",
            "sh",
            "-c",
            "echo one > /kept",
        ]);
        assert_eq!(first.code, 0, "{who:?}: {}", first.stderr);
        let id = unique("layer");
        let mut holder = rt
            .command(["run", "--layer", &layer_arg, &id, "--", "sleep", "300"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let running = runs_soon(&rt, &id);
        assert!(running, "{who:?}: the container never ran");
        let busy = rt.run(["run", "--layer", &layer_arg, "--", "true"]);
        assert_eq!(busy.code, 1, "{who:?}");
        assert!(
            busy.stderr.contains("in use by another container"),
            "{}",
            busy.stderr
        );
        let kept = rt.run(["exec", &id, "cat", "/kept"]);
        assert_eq!(
            (kept.code, kept.stdout.as_str()),
            (0, "one\n"),
            "{who:?}: {}",
            kept.stderr
        );
        assert_eq!(rt.run(["kill", &id, "KILL"]).code, 0);
        holder.wait().unwrap();
        let other = scratch.path().join("other.sqsh");
        fs::copy(&image, &other).unwrap();
        let refused = rt.run([
            "run",
            "--image",
            other.to_str().unwrap(),
            "--layer",
            &layer_arg,
            "--",
            "true",
        ]);
        assert_eq!(refused.code, 1, "{who:?}");
        assert!(refused.stderr.contains("lies over"), "{}", refused.stderr);
        let again = rt.run(["run", "--layer", &layer_arg, "--", "cat", "/kept"]);
        assert_eq!(
            (again.code, again.stdout.as_str()),
            (0, "one\n"),
            "{who:?}: {}",
            again.stderr
        );
        assert!(
            fs::read(&image).unwrap() == before,
            "{who:?}: the image was written"
        );
        assert!(
            rt.leftovers().is_empty(),
            "{who:?} left: {:?}",
            rt.leftovers()
        );
        assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
        assert!(mounts_mentioning(&layer_arg).is_empty());
        assert!(fuse_daemons_under(&rt.root).is_empty());
    }
}

/// `run --image FILE --writable --save OUT` (pyxis's --container-save
/// under the plugin), root and a user: once the container ends, OUT is
/// the image with what the container wrote, and runs as an image of its
/// own; the image file is unchanged; a read-only run has nothing to save
/// and is refused before anything runs.
#[test]
fn a_saved_container_is_an_image_with_its_writes() {
    require_root!();
    let _fuse = FuseOpenToUsers::new();
    for who in As::both() {
        let scratch = scratch_for(&who, "sqsh-save");
        let image = squashfs_image(&scratch);
        let image_arg = image.to_string_lossy().into_owned();
        let before = fs::read(&image).unwrap();
        let saved = scratch.path().join("saved.sqsh");
        let saved_arg = saved.to_string_lossy().into_owned();
        let rt = Runtime::as_who(who.clone());
        let refused = rt.run([
            "run", "--image", &image_arg, "--save", &saved_arg, "--", "true",
        ]);
        assert_eq!(refused.code, 1, "{who:?}");
        assert!(
            refused.stderr.contains("nothing to save"),
            "{}",
            refused.stderr
        );
        let ran = rt.run([
            "run",
            "--image",
            &image_arg,
            "--writable",
            "--save",
            &saved_arg,
            "--",
            "sh",
            "-c",
            "echo written > /saved-file; rm /bin/true",
        ]);
        assert_eq!(ran.code, 0, "{who:?}: {}", ran.stderr);
        let again = rt.run([
            "run",
            "--image",
            &saved_arg,
            "--",
            "sh",
            "-c",
            "cat /saved-file; test -e /bin/true; echo true=$?",
        ]);
        assert_eq!(
            (again.code, again.stdout.as_str()),
            (0, "written\ntrue=1\n"),
            "{who:?}: {}",
            again.stderr
        );
        assert!(
            fs::read(&image).unwrap() == before,
            "{who:?}: the image was written"
        );
        let beside: Vec<_> = fs::read_dir(scratch.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(beside.is_empty(), "{who:?}: left beside: {beside:?}");
        assert!(
            rt.leftovers().is_empty(),
            "{who:?} left: {:?}",
            rt.leftovers()
        );
        assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
    }
}

/// `run --image -d`, root and a user: the container outlives the run and
/// still reads its image (a user's FUSE daemons keep serving it) until
/// `delete`, or, without an id, until it ends and the run's supervisor
/// deletes it; then no mount, daemon or state is left. `--layer` with
/// `-d` is refused: the run holds the layer only while it waits.
#[test]
fn a_detached_image_run_keeps_its_image_until_the_container_is_deleted() {
    require_root!();
    let _fuse = FuseOpenToUsers::new();
    for who in As::both() {
        let scratch = scratch_for(&who, "sqsh-detach");
        let image = squashfs_image(&scratch);
        let image_arg = image.to_string_lossy().into_owned();
        let rt = Runtime::as_who(who.clone());
        let id = unique("sqsh-d");
        let started = rt.run([
            "run", "--image", &image_arg, "-d", &id, "--", "sleep", "300",
        ]);
        assert_eq!(started.code, 0, "{who:?}: {}", started.stderr);
        let read = rt.run(["exec", &id, "ls", "/bin/sh"]);
        assert_eq!(
            (read.code, read.stdout.as_str()),
            (0, "/bin/sh\n"),
            "{who:?}: {}",
            read.stderr
        );
        assert_eq!(rt.run(["delete", "--force", &id]).code, 0);
        let made_up = rt.run(["run", "--image", &image_arg, "-d", "--", "sleep", "300"]);
        assert_eq!(made_up.code, 0, "{who:?}: {}", made_up.stderr);
        let id = made_up.stdout.trim().to_owned();
        let read = rt.run(["exec", &id, "ls", "/bin/sh"]);
        assert_eq!(
            (read.code, read.stdout.as_str()),
            (0, "/bin/sh\n"),
            "{who:?}: {}",
            read.stderr
        );
        assert_eq!(rt.run(["kill", &id, "KILL"]).code, 0);
        let cleared = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            rt.leftovers().is_empty() && fuse_daemons_under(&rt.root).is_empty()
        });
        assert!(
            cleared,
            "{who:?} left: {:?} {:?}",
            rt.leftovers(),
            fuse_daemons_under(&rt.root)
        );
        assert!(mounts_mentioning(&rt.root.to_string_lossy()).is_empty());
        let layer = scratch.path().join("layer").to_string_lossy().into_owned();
        let refused = rt.run([
            "run", "--image", &image_arg, "--layer", &layer, "-d", "--", "true",
        ]);
        assert_eq!(refused.code, 1, "{who:?}");
        assert!(
            refused.stderr.contains("leave -d out"),
            "{}",
            refused.stderr
        );
    }
}
