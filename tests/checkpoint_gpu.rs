//! Checkpoint and restore of GPU containers through the driver's own
//! checkpoint API, on the fake host whose libcuda.so.1 is the stand-in
//! tests/fixtures/fake_cuda.c (the real 535 driver has no such API). Its
//! "CUDA process", tests/fixtures/cuda_worker.c, keeps a pattern in
//! device memory and logs each round of GPU work to a host directory; it
//! holds the GPU's nodes open, so CRIU cannot dump it unless the driver
//! let go of them first. The stand-in logs each checkpoint call gpurun
//! makes (FAKE_CUDA_LOG) and fails the one it is told to (FAKE_CUDA_FAIL).
//! The rootfs is an overlay mount, as engines give: see
//! `refused_in_one_line_and_left_running` for a plain directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpurun_tests::*;
use serde_json::json;

const GPU0: &str = "GPU-5a1e0000-0000-4000-8000-00000000fa4e";

/// A glibc bundle on an overlay rootfs with the worker, its logs in
/// `logs` (bound at /log), running `args` with GPU `gpu`.
/// Fields drop in order: the overlay is unmounted before the bundle's
/// directory is removed.
struct CudaBundle {
    _overlay: Unmount,
    bundle: Bundle,
    logs: PathBuf,
}

impl CudaBundle {
    fn new(args: &[&str], gpu: &str) -> CudaBundle {
        let fixtures = GpuFixtures::get();
        let bundle = Bundle::glibc(None);
        let lower = bundle.dir.join("lower");
        fs::rename(bundle.rootfs(), &lower).unwrap();
        fs::copy(
            fixtures.dir.join("cuda_worker"),
            lower.join("usr/bin/cuda_worker"),
        )
        .unwrap();
        for dir in ["rootfs", "upper", "work", "logs"] {
            fs::create_dir(bundle.dir.join(dir)).unwrap();
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            bundle.dir.join("upper").display(),
            bundle.dir.join("work").display()
        );
        let mounted = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &options])
            .arg(bundle.rootfs())
            .status()
            .unwrap();
        assert!(mounted.success());
        let logs = bundle.dir.join("logs");
        let visible = format!("NVIDIA_VISIBLE_DEVICES={gpu}");
        bundle.set_process(
            args,
            &[&visible, "NVIDIA_DRIVER_CAPABILITIES=compute,utility"],
        );
        bundle.edit(|c| {
            c["root"]["readonly"] = json!(false);
            c["mounts"].as_array_mut().unwrap().push(json!({
                "destination": "/log", "type": "bind",
                "source": logs.to_str().unwrap(), "options": ["rbind", "rw"]}));
        });
        CudaBundle {
            _overlay: Unmount(bundle.rootfs()),
            bundle,
            logs,
        }
    }

    /// One worker with 8 MiB of device memory, a round every 100 ms.
    fn worker(gpu: &str) -> CudaBundle {
        Self::new(&["cuda_worker", "8", "100", "/log/a"], gpu)
    }

    /// Two workers and a process that is not a CUDA one.
    fn two_workers() -> CudaBundle {
        Self::new(
            &[
                "sh",
                "-c",
                "cuda_worker 4 100 /log/a & cuda_worker 4 100 /log/b & exec sleep 1000",
            ],
            "0",
        )
    }

    fn dir(&self) -> &str {
        self.bundle.dir.to_str().unwrap()
    }

    fn ticks(&self, log: &str) -> Vec<String> {
        fs::read_to_string(self.logs.join(log))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn wait_for_ticks(&self, log: &str, more_than: usize) {
        let start = Instant::now();
        while self.ticks(log).len() <= more_than {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{log} stays at {:?}",
                self.ticks(log)
            );
            sleep(Duration::from_millis(20));
        }
    }

    /// The worker runs on: more rounds come, each with its pattern intact.
    fn assert_works_on(&self, log: &str) {
        let before = self.ticks(log).len();
        self.wait_for_ticks(log, before + 2);
        for line in self.ticks(log).iter().skip(1) {
            assert!(line.ends_with("pattern ok work ok"), "{line}");
        }
    }
}

/// gpurun on the checkpoint host, its calls to the driver logged.
fn gpurun(rt: &Runtime, calls: &Path, env: &[(&str, &str)], args: &[&str]) -> Ran {
    let flags = GpuFixtures::get().checkpoint_host_flags();
    let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
    all.extend(["--criu", criu(true)]);
    all.extend(args);
    let mut cmd = rt.command(all);
    cmd.env("FAKE_CUDA_LOG", calls);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_cmd(&mut cmd, Duration::from_secs(60))
}

/// `run -d` of `bundle` on the checkpoint host, once it works.
fn start(rt: &Runtime, bundle: &CudaBundle, id: &str) {
    let mut args = GpuFixtures::get().checkpoint_host_flags();
    args.extend(["run", "-d", "--bundle", bundle.dir(), id].map(String::from));
    start_detached(rt.command(args));
    bundle.wait_for_ticks("a", 2);
}

/// The driver calls logged, as "CALL PID RESULT", emptied.
fn take_calls(calls: &Path) -> Vec<String> {
    let text = fs::read_to_string(calls).unwrap_or_default();
    let _ = fs::remove_file(calls);
    text.lines().map(str::to_owned).collect()
}

fn pid_of(call: &str) -> &str {
    call.split(' ').nth(1).unwrap()
}

fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    lines[0]
}

#[test]
fn a_cuda_container_goes_on_after_restore_with_its_device_memory() {
    require_root!();
    let rt = Runtime::new();
    let bundle = CudaBundle::worker("0");
    let scratch = Scratch::new("cuda-ckpt");
    let (images, calls) = (scratch.path().join("images"), scratch.path().join("calls"));
    let id = unique("cuda");
    start(&rt, &bundle, &id);

    let out = gpurun(
        &rt,
        &calls,
        &[],
        &[
            "--debug",
            "checkpoint",
            "--image-path",
            images.to_str().unwrap(),
            &id,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let made = take_calls(&calls);
    let worker = pid_of(&made[0]).to_owned();
    assert_eq!(
        made,
        [format!("lock {worker} 0"), format!("checkpoint {worker} 0")]
    );
    assert!(
        out.stderr
            .contains(&format!("CUDA process {worker}: running -> locked")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("locked -> checkpointed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("MiB of images"), "{}", out.stderr);
    let record: serde_json::Value =
        serde_json::from_slice(&fs::read(images.join("gpurun-gpu.json")).unwrap()).unwrap();
    assert_eq!(record["driverVersion"], "535.309.01");
    assert_eq!(record["gpus"][0]["uuid"], GPU0);
    assert_eq!(record["cudaProcesses"], 1);
    assert!(record["imageBytes"].as_u64().unwrap() > 8 << 20, "{record}");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    let stopped = bundle.ticks("a").len();
    sleep(Duration::from_millis(400));
    assert_eq!(
        bundle.ticks("a").len(),
        stopped,
        "works on after its checkpoint"
    );

    let restored = unique("restored");
    let out = gpurun(
        &rt,
        &calls,
        &[],
        &[
            "--debug",
            "restore",
            "-d",
            "--image-path",
            images.to_str().unwrap(),
            "--bundle",
            bundle.dir(),
            &restored,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let made = take_calls(&calls);
    let worker = pid_of(&made[0]).to_owned();
    assert_eq!(
        made,
        [format!("restore {worker} 0"), format!("unlock {worker} 0")]
    );
    assert!(
        out.stderr.contains("checkpointed -> locked"),
        "{}",
        out.stderr
    );
    bundle.assert_works_on("a");
    let log = bundle.ticks("a");
    assert_eq!(
        log.iter().filter(|l| l.starts_with("started")).count(),
        1,
        "restarted: {log:?}"
    );
    assert!(
        log[stopped].starts_with(&format!("tick {stopped} ")),
        "{log:?}"
    );
    assert!(log
        .last()
        .unwrap()
        .contains("GPU-fa000000-0000-0000-0000-000000000000"));
    assert_eq!(rt.state(&restored)["status"], "running");
    rt.run(["delete", "--force", &restored]).ok();
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{restored}")).is_empty());
}

/// Every CUDA process in the container is locked before any is
/// checkpointed, processes without CUDA are left alone, and a paused
/// container (containerd pauses before it checkpoints) is thawed for the
/// driver and paused again; --leave-running gives the GPUs back.
#[test]
fn every_cuda_process_is_saved_and_leave_running_gives_them_back() {
    require_root!();
    let rt = Runtime::new();
    let bundle = CudaBundle::two_workers();
    let scratch = Scratch::new("cuda-ckpt");
    let (images, calls) = (scratch.path().join("images"), scratch.path().join("calls"));
    let id = unique("cuda2");
    start(&rt, &bundle, &id);
    bundle.wait_for_ticks("b", 2);
    assert_eq!(rt.run(["pause", &id]).code, 0);

    let out = gpurun(
        &rt,
        &calls,
        &[],
        &[
            "checkpoint",
            "--leave-running",
            "--image-path",
            images.to_str().unwrap(),
            &id,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let made = take_calls(&calls);
    let (a, b) = (pid_of(&made[0]).to_owned(), pid_of(&made[1]).to_owned());
    assert_ne!(a, b);
    assert_eq!(
        made,
        [
            format!("lock {a} 0"),
            format!("lock {b} 0"),
            format!("checkpoint {a} 0"),
            format!("checkpoint {b} 0"),
            format!("restore {a} 0"),
            format!("unlock {a} 0"),
            format!("restore {b} 0"),
            format!("unlock {b} 0"),
        ]
    );
    assert_eq!(rt.state(&id)["status"], "paused");
    assert_eq!(rt.run(["resume", &id]).code, 0);
    bundle.assert_works_on("a");
    bundle.assert_works_on("b");
    rt.run(["delete", "--force", &id]).ok();
}

/// A failure at any step (the driver's lock, its checkpoint, CRIU's dump)
/// gives every process touched its GPU back: the container runs on and
/// the error names the process and the driver's result.
#[test]
fn each_failure_gives_the_gpus_back_and_the_container_runs_on() {
    require_root!();
    let rt = Runtime::new();
    let bundle = CudaBundle::two_workers();
    let scratch = Scratch::new("cuda-ckpt");
    let (images, calls) = (scratch.path().join("images"), scratch.path().join("calls"));
    let id = unique("cudafail");
    start(&rt, &bundle, &id);
    bundle.wait_for_ticks("b", 2);
    let image_path = images.to_str().unwrap();

    let cases: [(&str, &[&str], &[&str]); 3] = [
        ("lock:2", &[], &["lock A 0", "lock B 999", "unlock A 0"]),
        (
            "checkpoint:2",
            &[],
            &[
                "lock A 0",
                "lock B 0",
                "checkpoint A 0",
                "checkpoint B 999",
                "restore A 0",
                "unlock A 0",
                "unlock B 0",
            ],
        ),
        (
            "",
            &["--page-server", "127.0.0.1:1"],
            &[
                "lock A 0",
                "lock B 0",
                "checkpoint A 0",
                "checkpoint B 0",
                "restore A 0",
                "unlock A 0",
                "restore B 0",
                "unlock B 0",
            ],
        ),
    ];
    for (fail, flags, want) in cases {
        let mut args = vec!["checkpoint", "--image-path", image_path];
        args.extend(flags);
        args.push(&id);
        let out = gpurun(&rt, &calls, &[("FAKE_CUDA_FAIL", fail)], &args);
        assert_eq!(out.code, 1, "{fail}: {}", out.stderr);
        let line = one_line(&out.stderr);
        assert!(line.contains("runs on"), "{line}");
        let made = take_calls(&calls);
        let (a, b) = (pid_of(&made[0]).to_owned(), pid_of(&made[1]).to_owned());
        if !fail.is_empty() {
            assert!(line.contains(&format!("CUDA process {b}")), "{line}");
            assert!(line.contains("CUDA_ERROR_UNKNOWN (999)"), "{line}");
        }
        let named: Vec<String> = made
            .iter()
            .map(|c| {
                c.replace(&format!(" {a} "), " A ")
                    .replace(&format!(" {b} "), " B ")
            })
            .collect();
        assert_eq!(named, want, "{fail}");
        assert_eq!(rt.state(&id)["status"], "running");
        bundle.assert_works_on("a");
        bundle.assert_works_on("b");
    }
    rt.run(["delete", "--force", &id]).ok();
}

/// What cannot be checkpointed is refused in one line before anything is
/// touched, and the container runs on: a driver without the checkpoint
/// API (the fake host's real 535), CRIU 3, --pre-dump, and gpurun's own
/// mount-point overlays (a plain directory rootfs).
#[test]
fn refused_in_one_line_and_left_running() {
    require_root!();
    let rt = Runtime::new();
    let bundle = CudaBundle::worker("0");
    let scratch = Scratch::new("cuda-ckpt");
    let images = scratch.path().join("images");
    let calls = scratch.path().join("calls");
    let image_path = images.to_str().unwrap();
    let id = unique("refused");
    start(&rt, &bundle, &id);

    let mut real_535 = GpuFixtures::get().flags();
    real_535.extend(
        [
            "--criu",
            criu(true),
            "checkpoint",
            "--image-path",
            image_path,
            &id,
        ]
        .map(String::from),
    );
    let out = rt.run(&real_535);
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr).contains("has no checkpoint API (cuCheckpointProcess"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("driver 570 or later"), "{}", out.stderr);

    // Debian 12's CRIU 3.17, where the system has it.
    let system_criu = run_cmd(
        Command::new("criu").arg("--version"),
        Duration::from_secs(10),
    );
    if system_criu.stdout.contains("Version: 3.") {
        let mut args = GpuFixtures::get().checkpoint_host_flags();
        args.extend(
            [
                "--criu",
                "criu",
                "checkpoint",
                "--image-path",
                image_path,
                &id,
            ]
            .map(String::from),
        );
        let out = rt.run(&args);
        assert_eq!(out.code, 1);
        assert!(
            one_line(&out.stderr).contains("GPU containers need CRIU 4.0 or later"),
            "{}",
            out.stderr
        );
    }

    let out = gpurun(
        &rt,
        &calls,
        &[],
        &["checkpoint", "--pre-dump", "--image-path", image_path, &id],
    );
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr).contains("take a full checkpoint"),
        "{}",
        out.stderr
    );
    assert!(take_calls(&calls).is_empty());
    assert_eq!(rt.state(&id)["status"], "running");
    bundle.assert_works_on("a");
    rt.run(["delete", "--force", &id]).ok();

    // A plain directory as the rootfs: the driver files' mount points are
    // in gpurun's private overlays, which CRIU cannot save.
    let plain = Bundle::glibc(None);
    plain.set_process(&["sleep", "1000"], &["NVIDIA_VISIBLE_DEVICES=0"]);
    let id = unique("plain");
    start_detached(rt.command(GpuFixtures::get().args(&[
        "run",
        "-d",
        "--bundle",
        plain.dir.to_str().unwrap(),
        &id,
    ])));
    let out = gpurun(
        &rt,
        &calls,
        &[],
        &["checkpoint", "--image-path", image_path, &id],
    );
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr).contains("private overlays"),
        "{}",
        out.stderr
    );
    assert_eq!(rt.state(&id)["status"], "running");
    rt.run(["delete", "--force", &id]).ok();
}

/// Restore checks the driver before CRIU runs, fails cleanly when the
/// driver cannot give a process its GPU back, and moves the processes
/// onto other GPUs of the same model through the driver's GPU pairs.
#[test]
fn restore_checks_the_driver_and_moves_onto_other_gpus() {
    require_root!();
    let rt = Runtime::new();
    let bundle = CudaBundle::worker("0");
    let scratch = Scratch::new("cuda-ckpt");
    let (images, calls) = (scratch.path().join("images"), scratch.path().join("calls"));
    let image_path = images.to_str().unwrap();
    let id = unique("move");
    start(&rt, &bundle, &id);
    let out = gpurun(
        &rt,
        &calls,
        &[],
        &["checkpoint", "--image-path", image_path, &id],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stopped = bundle.ticks("a").len();
    let restore = |env: &[(&str, &str)], bundle_dir: &str, id: &str| {
        gpurun(
            &rt,
            &calls,
            env,
            &[
                "restore",
                "-d",
                "--image-path",
                image_path,
                "--bundle",
                bundle_dir,
                id,
            ],
        )
    };
    let assert_nothing_left = |id: &str| {
        assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
        assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
        assert_eq!(bundle.ticks("a").len(), stopped, "the worker ran");
    };

    // Images from a host with another driver.
    let record_path = images.join("gpurun-gpu.json");
    let record = fs::read_to_string(&record_path).unwrap();
    fs::write(&record_path, record.replace("535.309.01", "550.54.15")).unwrap();
    let other = unique("other");
    let out = restore(&[], bundle.dir(), &other);
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr)
            .contains("taken on NVIDIA driver 550.54.15 and this host has 535.309.01"),
        "{}",
        out.stderr
    );
    assert_nothing_left(&other);
    fs::write(&record_path, record).unwrap();

    // The driver fails to give the process its GPU back.
    let out = restore(&[("FAKE_CUDA_FAIL", "restore")], bundle.dir(), &other);
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr)
            .contains("cuCheckpointProcessRestore failed with CUDA_ERROR_UNKNOWN (999)"),
        "{}",
        out.stderr
    );
    take_calls(&calls);
    assert_nothing_left(&other);

    // Onto GPU 1: a driver before 580 cannot; 580 takes the pair.
    let gpu1 = Scratch::new("gpu1");
    let mut config = bundle.bundle.config();
    config["root"]["path"] = json!(bundle.bundle.rootfs());
    for var in config["process"]["env"].as_array_mut().unwrap() {
        if var == "NVIDIA_VISIBLE_DEVICES=0" {
            *var = json!("NVIDIA_VISIBLE_DEVICES=1");
        }
    }
    fs::write(gpu1.path().join("config.json"), config.to_string()).unwrap();
    let out = restore(
        &[("FAKE_CUDA_DRIVER_VERSION", "12080")],
        gpu1.path().to_str().unwrap(),
        &other,
    );
    assert_eq!(out.code, 1);
    assert!(
        one_line(&out.stderr).contains("cannot move a CUDA process onto other GPUs"),
        "{}",
        out.stderr
    );
    assert_nothing_left(&other);

    let out = restore(&[], gpu1.path().to_str().unwrap(), &other);
    assert_eq!(out.code, 0, "{}", out.stderr);
    bundle.assert_works_on("a");
    assert!(bundle
        .ticks("a")
        .last()
        .unwrap()
        .contains("GPU-fa000000-0000-0000-0000-000000000001"));
    let out = rt.run(["exec", &other, "ls", "/dev"]);
    assert!(
        out.stdout.contains("nvidia1") && !out.stdout.contains("nvidia0\n"),
        "{}",
        out.stdout
    );
    rt.run(["delete", "--force", &other]).ok();
}
