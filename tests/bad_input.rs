//! Bad input: one clear error line, exit code 1, and nothing left behind.

use std::fs;

use gpurun_tests::*;

#[test]
fn missing_config_json() {
    require_root!();
    let rt = Runtime::new();
    let dir = Scratch::new("empty");
    let id = unique("nocfg");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", dir.path().to_str().unwrap(), &id],
        &id,
        "no config.json",
    );
}

#[test]
fn malformed_config_json() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let id = unique("badjson");
    for (content, want) in [
        ("{\"ociVersion\": ", "not a valid OCI runtime config"),
        ("[1,2,3]", "not a valid OCI runtime config"),
        ("{\"ociVersion\": 5}", "not a valid OCI runtime config"),
        ("\u{ff}\u{fe}garbage", "not a valid OCI runtime config"),
        ("{}", "ociVersion missing"),
    ] {
        fs::write(bundle.dir.join("config.json"), content).unwrap();
        assert_clean_failure(
            &rt,
            &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
            &id,
            want,
        );
    }
}

#[test]
fn unknown_container_id() {
    require_root!();
    let rt = Runtime::new();
    for cmd in ["start", "state", "delete", "pause", "resume", "ps"] {
        assert_clean_failure(&rt, &[cmd, "ghost"], "ghost", "does not exist");
    }
    assert_clean_failure(&rt, &["kill", "ghost", "KILL"], "ghost", "does not exist");
    assert_clean_failure(&rt, &["exec", "ghost", "true"], "ghost", "does not exist");
    // --force on a missing container is not an error (runc and engines rely on it).
    rt.run(["delete", "--force", "ghost"]).ok();
}

#[test]
fn id_that_already_exists() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique("dup");
    let b = bundle.dir.to_str().unwrap();
    rt.run(["create", "--bundle", b, &id]).ok();
    let pid = rt.state(&id)["pid"].clone();
    let out = rt.run(["create", "--bundle", b, &id]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    // The first container is untouched.
    assert_eq!(rt.state(&id)["pid"], pid);
    assert_eq!(rt.state(&id)["status"], "created");
    rt.run(["delete", "--force", &id]).ok();
    assert!(rt.leftovers().is_empty());
}

#[test]
fn id_with_slash_or_dots() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let b = bundle.dir.to_str().unwrap();
    for id in ["a/b", "..", ".", "../escape", "x y", ""] {
        let out = rt.run(["create", "--bundle", b, id]);
        // runc's 1, the empty id (a usage error) included.
        assert_eq!(out.code, 1, "{id:?}: {}", out.stderr);
        assert!(!out.stderr.is_empty());
    }
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(!rt.root.parent().unwrap().join("escape").exists());
}

#[test]
fn rootfs_that_does_not_exist() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["root"]["path"] = "no-such-rootfs".into());
    let id = unique("norootfs");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "does not exist",
    );
}

#[test]
fn unsupported_oci_version() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["ociVersion"] = "2.0.0".into());
    let id = unique("ociver");
    assert_clean_failure(
        &rt,
        &["run", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "unsupported ociVersion \"2.0.0\"",
    );
}

#[test]
fn executable_missing_in_the_image_leaves_nothing() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["/no/such/binary"]);
    let id = unique("noexe");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_ne!(out.code, 0);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(
        cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
        "cgroup left"
    );
}

/// A program that exists but cannot be started (its interpreter or loader
/// is missing) ends the container with 255 and runc's kind of line on the
/// container's stderr, not in silence.
#[test]
fn a_program_that_cannot_be_started_says_why() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    std::fs::write(
        bundle.rootfs().join("bin/needs-bash"),
        "#!/bin/bash-that-is-not-there\necho never\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x"])
        .arg(bundle.rootfs().join("bin/needs-bash"))
        .status()
        .unwrap();
    bundle.set_args(&["/bin/needs-bash"]);
    let id = unique("noexec");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    assert_eq!(out.code, 255, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("gpurun: error: exec /bin/needs-bash: no such file or directory"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("never"));
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

#[test]
fn cgroup_paths_that_are_not_the_containers_own_are_refused() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let b = bundle.dir.to_str().unwrap().to_owned();
    // The test's own cgroup holds processes that must never be killed.
    let own = fs::read_to_string("/proc/self/cgroup").unwrap();
    let occupied = own
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .find(|p| *p != "/")
        .map(str::to_owned);
    let mut cases = vec![
        ("/".to_owned(), "root cgroup"),
        ("/a/../..".to_owned(), "climbs"),
    ];
    if let Some(path) = occupied {
        cases.push((path, "container's cgroup is not empty"));
    }
    for (path, want) in cases {
        bundle.edit(|c| c["linux"]["cgroupsPath"] = path.clone().into());
        let id = unique("cgpath");
        assert_clean_failure(&rt, &["run", "--bundle", &b, &id], &id, want);
    }
}

#[test]
fn a_reader_that_goes_away_ends_a_listing_quietly() {
    use std::os::unix::process::ExitStatusExt;
    // `gpurun features | head -0`: the pipe's reader is gone before gpurun
    // writes. It must end on SIGPIPE, as runc does, not panic on EPIPE;
    // `--version`, answered before any command is parsed, too.
    let scratch = Scratch::new("epipe");
    for arg in ["features", "--version"] {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        drop(read_end);
        let err_path = scratch.path().join("stderr");
        let status = std::process::Command::new(gpurun_bin())
            .arg(arg)
            .stdout(std::process::Stdio::from(write_end))
            .stderr(std::fs::File::create(&err_path).unwrap())
            .status()
            .unwrap();
        let stderr = std::fs::read_to_string(&err_path).unwrap();
        assert!(!stderr.contains("panicked"), "{arg}: {stderr}");
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{arg}: {status:?}: {stderr}"
        );
    }
}

#[test]
fn an_rlimit_above_what_the_host_allows_names_the_limit() {
    require_root!();
    // Above fs.nr_open no one can raise RLIMIT_NOFILE (and without
    // CAP_SYS_RESOURCE, as on this VM, not above gpurun's own hard limit):
    // it failed in the container's init with a bare EPERM.
    let nr_open: u64 = fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["process"]["rlimits"] = serde_json::json!([
            {"type": "RLIMIT_NOFILE", "soft": 1024, "hard": nr_open + 1}
        ]);
    });
    let id = unique("rlimit");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "process.rlimits RLIMIT_NOFILE: hard limit",
    );
}

#[test]
fn a_capability_the_runtime_lacks_is_named() {
    require_root!();
    // gpurun runs without CAP_SYS_MODULE in its bounding set (as on a host
    // or in an outer container that withholds it; this VM withholds
    // CAP_SYS_RESOURCE, and so every `docker run --privileged` failed here
    // with a bare "failed syscall").
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!("CAP_SYS_MODULE"));
        }
    });
    let id = unique("nocap");
    let gpurun = rt.command(["create", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--bounding-set", "-sys_module"])
        .arg(gpurun.get_program())
        .args(gpurun.get_args());
    let out = run_cmd(&mut cmd, std::time::Duration::from_secs(60));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("process.capabilities asks for CAP_SYS_MODULE"),
        "{}",
        out.stderr
    );
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    assert!(cgroup_dirs(&format!("gpurun/{id}")).is_empty());
}

#[test]
fn errors_from_the_container_init_name_what_failed() {
    require_root!();
    // They were the outermost words only ("failed to prepare rootfs").
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/data", "type": "bind",
            "source": "/nonexistent/gpurun-src", "options": ["rbind"]
        }));
    });
    let id = unique("mountsrc");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "mount \"/nonexistent/gpurun-src\" (bind) at /data: syscall: ENOENT",
    );
    // uid (uid_t)-1 means "unchanged" to the kernel: refused before anything.
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["process"]["user"]["uid"] = serde_json::json!(4294967295u32));
    let id = unique("uidminus1");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "process.user.uid 4294967295 is (uid_t)-1",
    );
}

/// The GPU config (driver roots) is read only for a container that asks
/// for a GPU: a broken one stops GPU containers with its name, and leaves
/// every other container alone.
#[test]
fn a_broken_gpu_config_stops_only_gpu_containers() {
    require_root!();
    let rt = Runtime::new();
    let scratch = Scratch::new("badcfg");
    let config = scratch.path().join("config.toml");
    fs::write(&config, "not = [valid").unwrap();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    let run = |id: &str| {
        let mut cmd = rt.command(["run", "--bundle", &dir, id]);
        cmd.env("GPURUN_CONFIG", &config);
        run_cmd(&mut cmd, TIMEOUT)
    };
    let plain = run(&unique("nogpu"));
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    bundle.set_process(&["true"], &["NVIDIA_VISIBLE_DEVICES=all"]);
    let gpu = run(&unique("gpu"));
    assert_eq!(gpu.code, 1);
    let first = gpu.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("gpurun: error: ")
            && first.contains("is not valid TOML")
            && first.contains("(line 1): fix that line")
            && first.contains("unset GPURUN_CONFIG"),
        "{}",
        gpu.stderr
    );
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    // doctor names the configuration, not the driver.
    let mut cmd = rt.command(["doctor", "--gpu"]);
    cmd.env("GPURUN_CONFIG", &config);
    let doctor = run_cmd(&mut cmd, TIMEOUT);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("FAIL  configuration: ") && l.contains("is not valid TOML")),
        "{}",
        doctor.stdout
    );
    assert!(
        !doctor.stdout.contains("NVIDIA driver"),
        "{}",
        doctor.stdout
    );
}

/// A config file named by GPURUN_CONFIG that is missing is one error line
/// naming it (it was passed over, and the defaults used); the NVIDIA
/// Container Toolkit's own config.toml, `[features]` table and all, is
/// read as is.
#[test]
fn a_named_config_must_exist_and_the_toolkits_is_read_as_is() {
    let rt = Runtime::new();
    let scratch = Scratch::new("cfgnamed");
    let bundle = Bundle::busybox();
    bundle.set_process(&["true"], &["NVIDIA_VISIBLE_DEVICES=0"]);
    let dir = bundle.dir.to_str().unwrap().to_owned();
    let plan = |config: &std::path::Path| {
        let mut cmd = rt.command(GpuFixtures::get().args(&["gpu", "plan", &dir]));
        cmd.env("GPURUN_CONFIG", config);
        run_cmd(&mut cmd, TIMEOUT)
    };
    let missing = scratch.path().join("missing.toml");
    let out = plan(&missing);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        format!(
            "gpurun: error: GPURUN_CONFIG names {}, which does not exist: create it, or unset GPURUN_CONFIG for the default files",
            missing.display()
        )
    );
    let toolkit = scratch.path().join("toolkit.toml");
    fs::write(
        &toolkit,
        "disable-require = false\n[features]\nenable-cdi-in-runtime = true\n\
         [nvidia-container-cli]\nload-kmods = true\n[nvidia-container-runtime]\nmode = \"auto\"\n\
         [nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"/etc/cdi\"]\n\
         [nvidia-container-runtime-hook]\nskip-mode-detection = false\n[nvidia-ctk]\npath = \"nvidia-ctk\"\n",
    )
    .unwrap();
    let out = plan(&toolkit);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("/dev/nvidia0"), "{}", out.stdout);
    assert!(
        !out.stderr.contains("warning"),
        "the toolkit's keys: {}",
        out.stderr
    );
    // A key neither gpurun's nor the toolkit's (a typo) is named, not
    // passed over in silence.
    let typo = scratch.path().join("typo.toml");
    fs::write(&typo, "driver-rot = \"/x\"\n").unwrap();
    let out = plan(&typo);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("gpurun: warning:")
            && out.stderr.contains("unknown key \"driver-rot\"")
            && out.stderr.contains("did you mean \"driver-root\"?"),
        "{}",
        out.stderr
    );
    // A directory is said to be one.
    let out = plan(scratch.path());
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("is a directory, not a config file"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("unset GPURUN_CONFIG"), "{}", out.stderr);
}

#[test]
fn run_with_no_id_names_both_forms() {
    let rt = Runtime::new();
    let out = rt.run(["run"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("gpurun: error: run needs a container id"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--rootfs DIR -- CMD"), "{}", out.stderr);
}

/// `run`'s flags that only `--rootfs` uses were taken beside `--bundle` and
/// ignored (the process ran without the variable, in `/`, exit 0): each is
/// refused in one line naming it and where a bundle says the same.
#[test]
fn rootfs_only_run_flags_beside_a_bundle_are_refused() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    let dir = bundle.dir.to_str().unwrap();
    let id = unique("rootfsflag");
    for (flags, want) in [
        (
            &["-e", "A=B"][..],
            "-e/--env needs --rootfs DIR; with a bundle, set it in process.env",
        ),
        (
            &["-w", "/tmp"],
            "-w/--workdir needs --rootfs DIR; with a bundle, set process.cwd",
        ),
        (&["-v", "/tmp:/mnt"], "-v/--volume needs --rootfs DIR"),
        (&["--keep-uid"], "--keep-uid needs --rootfs DIR"),
        (
            &["--private-network"],
            "--private-network needs --rootfs DIR",
        ),
        (&["--writable"], "--writable needs --image FILE"),
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend(["--bundle", dir, &id]);
        assert_clean_failure(&rt, &args, &id, want);
    }
}

/// `gpu plan DIR` for a DIR with no config.json says to run `gpurun spec`;
/// `spec --bundle DIR` for a DIR not made yet said only "No such file or
/// directory". Now it says the directory is missing and how to make it.
#[test]
fn spec_for_a_bundle_directory_not_made_yet() {
    let dir = Scratch::new("spec");
    let bundle = dir.path().join("not-made");
    let out = run_cmd(
        std::process::Command::new(gpurun_bin())
            .args(["spec", "--bundle"])
            .arg(&bundle),
        TIMEOUT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let want = format!(
        "gpurun: error: the bundle directory {} does not exist: make it (mkdir -p {}), then run gpurun spec again",
        bundle.display(),
        bundle.display()
    );
    assert_eq!(out.stderr.trim_end(), want);
    assert!(!bundle.exists());
}

#[test]
fn a_usage_error_is_one_gpurun_error_line_with_its_usage() {
    // clap's several lines (message, tips, usage, "For more information")
    // become one, in the words every other error has; runc's exit
    // statuses (1; 3 for a command there is none of, urfave/cli's).
    for (args, names, code) in [
        (&["kill"][..], "CONTAINER_ID", 1),
        (&["run", "--nope", "x"][..], "--nope", 1),
        (&["frob"][..], "frob", 3),
    ] {
        let out = run_cmd(std::process::Command::new(gpurun_bin()).args(args), TIMEOUT);
        assert_eq!(out.code, code, "{args:?}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
        assert!(lines[0].starts_with("gpurun: error: "), "{}", lines[0]);
        assert!(lines[0].contains(names), "{}", lines[0]);
        assert!(lines[0].contains("usage: gpurun"), "{}", lines[0]);
    }
    // A bad --gpus is named as the flag (it was named NVIDIA_VISIBLE_DEVICES,
    // which the user never wrote), with what it takes.
    let out = run_cmd(
        std::process::Command::new(gpurun_bin()).args(["run", "--gpus", "foo", "x"]),
        TIMEOUT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("gpurun: error: ")
            && out.stderr.contains("'--gpus <GPUS>'")
            && out.stderr.contains("give all, none")
            && !out.stderr.contains("NVIDIA_VISIBLE_DEVICES"),
        "{}",
        out.stderr
    );
    // Help is still help, on stdout, exit 0.
    let out = run_cmd(
        std::process::Command::new(gpurun_bin()).args(["kill", "--help"]),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Usage: gpurun kill"), "{}", out.stdout);
}

/// A container the state root does not hold: one line naming the root,
/// and the `list` command that shows that root (with the user's `--root`;
/// the bare `gpurun list` would show another one).
#[test]
fn a_missing_container_names_the_list_of_its_own_root() {
    let rt = Runtime::new();
    let root = rt.root.to_string_lossy().into_owned();
    for args in [
        &["state", "nope"][..],
        &["kill", "nope", "KILL"][..],
        &["delete", "nope"][..],
    ] {
        let out = rt.run(args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "container \"nope\" does not exist in {root}: see \"gpurun --root {root} list\""
            )),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// A directory that is no image, and a bundle directory that does not
/// exist: one line naming the path and what to do.
#[test]
fn an_empty_image_dir_and_a_missing_bundle_are_named() {
    let rt = Runtime::new();
    let scratch = Scratch::new("not-an-image");
    let empty = scratch.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let out_dir = scratch.path().join("out");
    let out = rt.run([
        "import",
        empty.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{} is not an image: it has no index.json",
            empty.display()
        )),
        "{}",
        out.stderr
    );
    assert!(!out_dir.exists(), "import made {}", out_dir.display());
    // A reference that is none is refused before anything is pulled.
    let out = rt.run(["import", "docker://", "-o", out_dir.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("gpurun: error: docker://: not an image reference"),
        "{}",
        out.stderr
    );
    let missing = scratch.path().join("no-bundle");
    let out = rt.run(["gpu", "plan", missing.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the bundle directory {} does not exist: make it and write its config with \"gpurun spec --bundle {}\"",
            missing.display(),
            missing.display()
        )),
        "{}",
        out.stderr
    );
}
