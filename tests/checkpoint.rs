//! checkpoint and restore with CRIU, as runc does them: the process goes
//! on where it stopped (its shell variables, not a restart), in the new
//! container's cgroup with the spec's limits, exec reaches it, and failures
//! leave nothing. CRIU comes from scripts/fixtures/criu.sh (Debian 12's 3.17 cannot
//! read current kernels' vDSO; the script fetches Debian 13's 4.1).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use gpurun_tests::*;
use serde_json::json;

/// A container whose shell counts in a variable and writes it to
/// /tmp/count ten times a second (by rename, so a reader never sees the
/// file half written); it exits 3 once the count reaches `end`.
fn counting(end: u32) -> Bundle {
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["root"]["readonly"] = json!(false);
        c["process"]["terminal"] = json!(false);
        c["process"]["args"] = json!([
            "sh",
            "-c",
            format!("i=0; while [ $i -lt {end} ]; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done; exit 3")
        ]);
        c["linux"]["resources"]["memory"] = json!({"limit": 67108864});
        c["linux"]["resources"]["pids"] = json!({"limit": 40});
    });
    bundle
}

fn count(bundle: &Bundle) -> u32 {
    fs::read_to_string(bundle.rootfs().join("tmp/count"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn wait_for_count(bundle: &Bundle, at_least: u32) {
    let start = Instant::now();
    while count(bundle) < at_least {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the count stays at {}",
            count(bundle)
        );
        sleep(Duration::from_millis(50));
    }
}

/// `run -d` with stdio on /dev/null: CRIU, as under runc, cannot dump a
/// container whose stdio is a file outside its mount namespace.
fn start(rt: &Runtime, bundle: &Bundle, id: &str) {
    start_detached(rt.command(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), id]));
}

fn checkpoint(rt: &Runtime, image_path: &Path, flags: &[&str], id: &str) -> Ran {
    let mut args = vec!["--criu", criu(false), "checkpoint"];
    args.extend(flags);
    args.extend(["--image-path", image_path.to_str().unwrap(), id]);
    rt.run(args)
}

fn restore(rt: &Runtime, image_path: &Path, bundle: &str, flags: &[&str], id: &str) -> Ran {
    let mut args = vec!["--criu", criu(false), "restore"];
    args.extend(flags);
    args.extend([
        "--image-path",
        image_path.to_str().unwrap(),
        "--bundle",
        bundle,
        id,
    ]);
    rt.run(args)
}

#[test]
fn a_restored_container_goes_on_where_it_was_checkpointed() {
    require_root!();
    let rt = Runtime::new();
    let bundle = counting(100_000);
    let images = Scratch::new("images");
    let image_path = images.path().join("ckpt");
    let id = unique("ckpt");
    start(&rt, &bundle, &id);
    wait_for_count(&bundle, 10);

    let out = checkpoint(&rt, &image_path, &[], &id);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The container is gone: no state, no cgroup, no process counting.
    assert!(!rt.leftovers().contains(&id), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
    let stopped_at = count(&bundle);
    sleep(Duration::from_millis(400));
    assert_eq!(
        count(&bundle),
        stopped_at,
        "still counting after checkpoint"
    );

    // Restored under another id: it counts on from stopped_at, never from 1.
    let restored = unique("restored");
    let out = restore(
        &rt,
        &image_path,
        bundle.dir.to_str().unwrap(),
        &["-d"],
        &restored,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let start_time = Instant::now();
    while start_time.elapsed() < Duration::from_millis(600) {
        let now = count(&bundle);
        assert!(
            now >= stopped_at,
            "counting again from {now}: restarted, not restored"
        );
        sleep(Duration::from_millis(40));
    }
    assert!(count(&bundle) > stopped_at, "not counting after restore");

    let state = rt.state(&restored);
    assert_eq!(state["status"], "running");
    let pid = state["pid"].as_i64().unwrap();
    // In the new container's cgroup, with the spec's limits.
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroups.contains(&format!("gpurun/{restored}")), "{cgroups}");
    let memory = PathBuf::from(format!(
        "/sys/fs/cgroup/memory/gpurun/{restored}/memory.limit_in_bytes"
    ));
    if memory.exists() {
        assert_eq!(fs::read_to_string(memory).unwrap().trim(), "67108864");
    }
    let pids = PathBuf::from(format!("/sys/fs/cgroup/pids/gpurun/{restored}/pids.max"));
    if pids.exists() {
        assert_eq!(fs::read_to_string(pids).unwrap().trim(), "40");
    }
    // exec joins the restored container.
    let out = rt.run(["exec", &restored, "cat", "/tmp/count"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.trim().parse::<u32>().unwrap() > stopped_at);

    rt.run(["delete", "--force", &restored]).ok();
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{restored}")).is_empty());
    assert!(!is_alive(pid as i32));
}

#[test]
fn leave_running_and_a_foreground_restore() {
    require_root!();
    let rt = Runtime::new();
    let bundle = counting(40);
    let images = Scratch::new("images");
    let image_path = images.path().join("ckpt");
    let id = unique("ckpt");
    start(&rt, &bundle, &id);
    wait_for_count(&bundle, 5);

    // containerd pauses a task before it checkpoints it: a paused
    // container is checkpointed, and stays paused with --leave-running.
    assert_eq!(rt.run(["pause", &id]).code, 0);
    let out = checkpoint(&rt, &image_path, &["--leave-running", "--auto-dedup"], &id);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(rt.state(&id)["status"], "paused");
    assert_eq!(rt.run(["resume", &id]).code, 0);
    assert_eq!(rt.state(&id)["status"], "running");
    rt.run(["delete", "--force", &id]).ok();

    // A foreground restore waits for the container and returns its exit
    // code (the shell ends with 3 at 40), then deletes it. -no-subreaper
    // with one dash is how containerd's go-runc spells it (runc's flag
    // parser takes both).
    let restored = unique("fg");
    let out = restore(
        &rt,
        &image_path,
        bundle.dir.to_str().unwrap(),
        &["-no-subreaper", "--auto-dedup", "--lsm-profile", ""],
        &restored,
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(count(&bundle), 40);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{restored}")).is_empty());
}

#[test]
fn failed_checkpoints_and_restores_leave_nothing() {
    require_root!();
    let rt = Runtime::new();
    let bundle = counting(100_000);
    let images = Scratch::new("images");
    let bundle_path = bundle.dir.to_str().unwrap();

    // Not a checkpoint.
    let empty = images.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let id = unique("bad");
    let out = restore(&rt, &empty, bundle_path, &[], &id);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("not a checkpoint"), "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());

    // A created container is not running: nothing to checkpoint.
    let created = unique("created");
    rt.run(["create", "--bundle", bundle_path, &created]).ok();
    let out = checkpoint(&rt, &images.path().join("x"), &[], &created);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("only a running or paused container"),
        "{}",
        out.stderr
    );
    rt.run(["delete", "--force", &created]).ok();

    // A real checkpoint, restored onto a rootfs that is not the one it was
    // taken from: CRIU fails, and the restore leaves no state and no cgroup.
    let running = unique("ckpt");
    start(&rt, &bundle, &running);
    wait_for_count(&bundle, 3);
    let image_path = images.path().join("ckpt");
    checkpoint(&rt, &image_path, &[], &running).ok();
    let other = counting(10);
    fs::remove_dir_all(other.rootfs().join("bin")).unwrap();
    let failed = unique("failed");
    let out = restore(
        &rt,
        &image_path,
        other.dir.to_str().unwrap(),
        &["-d"],
        &failed,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("restore.log"), "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{failed}")).is_empty());
    assert!(mounts_mentioning("criu-root").is_empty());

    // The same images restore once, and a second restore under the same id
    // is refused while the first runs.
    let out = restore(&rt, &image_path, bundle_path, &["-d"], &failed);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = restore(&rt, &image_path, bundle_path, &["-d"], &failed);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    rt.run(["delete", "--force", &failed]).ok();
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());

    // runc's other flags are taken; what this CRIU client cannot do is
    // named, and the container runs on.
    let id = unique("flags");
    start(&rt, &bundle, &id);
    let out = checkpoint(&rt, &images.path().join("p"), &["--empty-ns", "ipc"], &id);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("only the network namespace"),
        "{}",
        out.stderr
    );
    let out = checkpoint(
        &rt,
        &images.path().join("p"),
        &["--page-server", "nohost"],
        &id,
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("ADDRESS:PORT"), "{}", out.stderr);
    assert_eq!(rt.state(&id)["status"], "running");
    rt.run(["delete", "--force", &id]).ok();

    // A criu that does not run is named with the fix.
    let id = unique("nocriu");
    start(&rt, &bundle, &id);
    let out = rt.run([
        "--criu",
        "/nonexistent/criu",
        "checkpoint",
        "--image-path",
        images.path().join("y").to_str().unwrap(),
        &id,
    ]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("--criu"), "{}", out.stderr);
    assert_eq!(rt.state(&id)["status"], "running");
    rt.run(["delete", "--force", &id]).ok();
}

/// runc's `checkpoint --pre-dump`: memory only, the container keeps
/// counting, and a full checkpoint with `--parent-path` (relative to
/// `--image-path`, checked before CRIU runs) builds on it; the restored
/// container goes on. Where the kernel cannot track dirty pages (no
/// CONFIG_MEM_SOFT_DIRTY, as on the CI host; the host matrix's Debian
/// kernels have it), the pre-dump is refused in runc's words and the
/// container is left running.
#[test]
fn pre_dump_then_a_checkpoint_on_top_of_it() {
    require_root!();
    let rt = Runtime::new();
    let bundle = counting(100_000);
    let images = Scratch::new("images");
    let (pre, full) = (images.path().join("pre"), images.path().join("full"));
    fs::create_dir_all(&full).unwrap();
    let id = unique("predump");
    start(&rt, &bundle, &id);
    wait_for_count(&bundle, 5);

    let absolute = pre.to_str().unwrap();
    let out = checkpoint(&rt, &full, &["--parent-path", absolute], &id);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("--parent-path must be relative"),
        "{}",
        out.stderr
    );
    let out = checkpoint(&rt, &full, &["--parent-path", "../missing"], &id);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("invalid --parent-path"),
        "{}",
        out.stderr
    );
    assert_eq!(rt.state(&id)["status"], "running");

    let tracks = Command::new(criu(false))
        .args(["check", "--feature", "mem_dirty_track"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    let out = checkpoint(&rt, &pre, &["--pre-dump"], &id);
    if !tracks {
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("memory tracking not supported"),
            "{}",
            out.stderr
        );
        assert_eq!(rt.state(&id)["status"], "running");
        rt.run(["delete", "--force", &id]).ok();
        return;
    }
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pages = |dir: &Path| {
        fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("pages-"))
    };
    assert!(pages(&pre), "the pre-dump wrote no memory pages");
    assert_eq!(rt.state(&id)["status"], "running");
    let after_pre_dump = count(&bundle);
    wait_for_count(&bundle, after_pre_dump + 3);

    let out = checkpoint(&rt, &full, &["--parent-path", "../pre"], &id);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        fs::symlink_metadata(full.join("parent")).is_ok_and(|m| m.file_type().is_symlink()),
        "the checkpoint does not name its parent"
    );
    let stopped_at = count(&bundle);
    let restored = unique("predump-restored");
    let out = restore(&rt, &full, bundle.dir.to_str().unwrap(), &["-d"], &restored);
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for_count(&bundle, stopped_at + 2);
    assert!(count(&bundle) > stopped_at);
    rt.run(["delete", "--force", &restored]).ok();
}
