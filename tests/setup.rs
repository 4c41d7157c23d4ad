//! `gpurun setup` on config files, and the nvidia-container-runtime-hook
//! link it installs: under runc (which runs it as a prestart hook) it must
//! fail the create cleanly, with a message that says how to use gpurun.

use std::fs;
use std::process::Command;

use gpurun_tests::*;

fn setup(args: &[&str]) -> Ran {
    run_cmd(Command::new(gpurun_bin()).arg("setup").args(args), TIMEOUT)
}

#[test]
fn setup_writes_a_backup_changes_nothing_twice_and_dry_run_writes_nothing() {
    let scratch = Scratch::new("setup");
    let bin = gpurun_bin();
    let bin = bin.to_str().unwrap();
    for (engine, file, original, kept) in [
        (
            "containerd",
            "config.toml",
            "version = 2\noom_score = -999\n",
            "oom_score = -999",
        ),
        (
            "docker",
            "daemon.json",
            "{\"debug\": true}\n",
            "\"debug\": true",
        ),
        (
            "podman",
            "containers.conf",
            "[containers]\nlog_size_max = 7\n",
            "log_size_max = 7",
        ),
    ] {
        let path = scratch.path().join(file);
        fs::write(&path, original).unwrap();
        let path_s = path.to_str().unwrap();
        let hooks = scratch.path().join(format!("hooks-{engine}"));
        fs::create_dir(&hooks).unwrap();
        let common = [
            "--config",
            path_s,
            "--binary",
            bin,
            "--hook-dir",
            hooks.to_str().unwrap(),
        ];

        let dry = setup(&[&[engine, "--dry-run"][..], &common].concat());
        assert_eq!(dry.code, 0, "{}", dry.stderr);
        assert!(dry.stdout.contains(bin), "{engine}: {}", dry.stdout);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            original,
            "{engine}: dry run wrote"
        );
        assert_eq!(
            fs::read_dir(&hooks).unwrap().count(),
            0,
            "{engine}: dry run linked"
        );

        setup(&[&[engine][..], &common].concat()).ok();
        let written = fs::read_to_string(&path).unwrap();
        assert!(written.contains(bin), "{engine}: {written}");
        assert!(written.contains(kept), "{engine} lost {kept}: {written}");
        let backups: Vec<_> = fs::read_dir(scratch.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{file}."))
            })
            .collect();
        assert_eq!(backups.len(), 1, "{engine}: one backup");
        assert_eq!(fs::read_to_string(backups[0].path()).unwrap(), original);

        let again = setup(&[&[engine][..], &common].concat());
        assert!(
            again.stdout.contains("nothing to change"),
            "{engine}: {}",
            again.stdout
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), written);

        let link = hooks.join("nvidia-container-runtime-hook");
        assert_eq!(link.exists(), engine == "docker", "{engine}: hook link");
    }

    // A config that is not what it should be is refused and left alone.
    let bad = scratch.path().join("bad.json");
    fs::write(&bad, "[1, 2]").unwrap();
    let out = setup(&["docker", "--config", bad.to_str().unwrap(), "--binary", bin]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("not a JSON object"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&bad).unwrap(), "[1, 2]");
}

#[test]
fn setup_containerd_multi_tenant_writes_gpuruns_strict_settings() {
    let scratch = Scratch::new("setup-mt");
    let bin = gpurun_bin();
    let containerd = scratch.path().join("config.toml");
    let mine = scratch.path().join("gpurun.toml");
    fs::write(&mine, "driver-root = \"/usr/local/nvidia\"\n").unwrap();
    let args = [
        "containerd",
        "--config",
        containerd.to_str().unwrap(),
        "--binary",
        bin.to_str().unwrap(),
        "--multi-tenant",
        "--gpurun-config",
        mine.to_str().unwrap(),
    ];
    let out = setup(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let written = fs::read_to_string(&mine).unwrap();
    assert!(
        written.contains("driver-root = \"/usr/local/nvidia\""),
        "{written}"
    );
    assert!(
        written.contains("accept-nvidia-visible-devices-envvar-when-unprivileged = false")
            && written.contains("accept-nvidia-visible-devices-as-volume-mounts = true"),
        "{written}"
    );
    let again = setup(&args);
    assert!(
        again
            .stdout
            .contains("already has the multi-tenant settings"),
        "{}",
        again.stdout
    );
    assert_eq!(fs::read_to_string(&mine).unwrap(), written);
    // gpurun reads what it wrote.
    let plan = run_cmd(
        Command::new(&bin)
            .args(["gpu", "info"])
            .env("GPURUN_CONFIG", &mine),
        TIMEOUT,
    );
    assert!(
        !plan.stderr.contains("not a valid gpurun config")
            && !plan.stderr.contains("is not valid TOML"),
        "{}",
        plan.stderr
    );
    let out = setup(&[
        "docker",
        "--config",
        "/nonexistent/daemon.json",
        "--multi-tenant",
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("--multi-tenant is for containerd"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_hook_link_under_runc_fails_the_create_and_leaves_nothing() {
    require_root!();
    let scratch = Scratch::new("hooklink");
    let link = scratch.path().join("nvidia-container-runtime-hook");
    std::os::unix::fs::symlink(gpurun_bin(), &link).unwrap();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    bundle.edit(|c| {
        c["hooks"] = serde_json::json!({"prestart": [{
            "path": link, "args": ["nvidia-container-runtime-hook", "prestart"]
        }]});
    });
    let state = scratch.path().join("runc-state");
    let out = run_cmd(
        Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["run", "--bundle"])
            .arg(&bundle.dir)
            .arg(unique("hook")),
        TIMEOUT,
    );
    assert_ne!(out.code, 0, "runc ran the container: {}", out.stderr);
    assert!(
        out.stderr
            .contains("run this container with gpurun as its runtime"),
        "{}",
        out.stderr
    );
    let left = run_cmd(
        Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["list", "-q"]),
        TIMEOUT,
    );
    assert_eq!(left.stdout.trim(), "", "runc kept a container");
}

/// `setup ENGINE --undo` puts the engine's config back as it was: the
/// backup setup made goes back in place, a file setup created is removed,
/// Docker's hook link goes, and a file that holds more than setup wrote is
/// left alone with an error.
#[test]
fn setup_undo_puts_the_config_back() {
    let scratch = Scratch::new("setup-undo");
    let bin = gpurun_bin();
    let bin = bin.to_str().unwrap();
    let hooks = scratch.path().join("hooks");
    fs::create_dir(&hooks).unwrap();
    let hook_dir = hooks.to_str().unwrap();
    // An existing daemon.json: backed up, then put back.
    let daemon = scratch.path().join("daemon.json");
    fs::write(&daemon, "{\"debug\": true}\n").unwrap();
    let cfg = daemon.to_str().unwrap();
    let docker = |more: &[&str]| {
        let mut args = vec![
            "docker",
            "--config",
            cfg,
            "--binary",
            bin,
            "--hook-dir",
            hook_dir,
        ];
        args.extend_from_slice(more);
        setup(&args)
    };
    let out = docker(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(fs::read_to_string(&daemon).unwrap().contains("gpurun"));
    assert!(hooks.join("nvidia-container-runtime-hook").is_symlink());
    let out = docker(&["--undo"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("restart the engine"), "{}", out.stdout);
    assert_eq!(fs::read_to_string(&daemon).unwrap(), "{\"debug\": true}\n");
    assert!(
        !hooks.join("nvidia-container-runtime-hook").exists(),
        "the link stayed"
    );
    let left: Vec<_> = fs::read_dir(scratch.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bak"))
        .collect();
    assert!(left.is_empty(), "backups left: {left:?}");
    // Nothing left to undo: said, and no engine to restart.
    let missing = scratch.path().join("none.json");
    let out = setup(&[
        "docker",
        "--config",
        missing.to_str().unwrap(),
        "--binary",
        bin,
        "--hook-dir",
        hook_dir,
        "--undo",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nothing to undo"), "{}", out.stdout);
    assert!(!out.stdout.contains("restart"), "{}", out.stdout);
    // A containerd config setup created: removed.
    let created = scratch.path().join("config.toml");
    let cfg = created.to_str().unwrap();
    assert_eq!(
        setup(&["containerd", "--config", cfg, "--binary", bin]).code,
        0
    );
    assert!(created.exists());
    let out = setup(&["containerd", "--config", cfg, "--binary", bin, "--undo"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!created.exists(), "the file setup created stayed");
    // One edited since, with no backup: left alone, and said why.
    assert_eq!(
        setup(&["containerd", "--config", cfg, "--binary", bin]).code,
        0
    );
    let mut text = fs::read_to_string(&created).unwrap();
    text.push_str("oom_score = -999\n");
    fs::write(&created, &text).unwrap();
    let out = setup(&["containerd", "--config", cfg, "--binary", bin, "--undo"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("gpurun: error: ") && out.stderr.contains("edit it by hand"),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read_to_string(&created).unwrap(), text);
}
