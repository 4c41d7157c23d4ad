//! CDI: `gpurun gpu cdi` writes NVIDIA's form of the spec (validated by the
//! container-device-interface crate, the Rust port of the library Podman
//! and containerd use), and a config.json with NVIDIA's CDI edits applied,
//! as containerd applies them, runs with no NVIDIA toolkit on the host:
//! gpurun does the `nvidia-cdi-hook` hooks' work itself, and runs no hook
//! process. Over the fake GPU host: nvidia-smi exits 9 only when
//! libnvidia-ml.so.1 resolves through the linker cache, which the hooks
//! must have written (the driver's folder is one no image searches).

use std::fs;
use std::path::{Path, PathBuf};

use gpurun_tests::*;
use serde_json::{json, Value};

/// `gpurun gpu cdi` over the fake host, with the hooks naming `program`.
fn nvidia_spec(program: &str) -> Value {
    let scratch = Scratch::new("cdi-spec");
    let path = scratch.path().join("nvidia.json");
    let out_path = path.to_string_lossy();
    Runtime::new()
        .run(GpuFixtures::get().args(&["gpu", "cdi", "-o", &out_path, "--hook-program", program]))
        .ok();
    serde_json::from_slice(&fs::read(&path).unwrap()).unwrap()
}

/// The spec `nvidia-ctk cdi generate` (1.17-1.20) writes for the fake
/// host, in the form of its golden test (`generate_test.go`), written here
/// independently of gpurun: the utility and compute libraries mounted at
/// their driver-root paths, nvidia-smi in /usr/bin, the nodes, and the
/// hooks naming `program` (`prefix` before the subcommand).
fn toolkit_spec(program: &Path, prefix: &[&str]) -> Value {
    let host = GpuFixtures::get().dir.join("host");
    let driver = host.join("driver");
    let version = "535.309.01";
    let mut mounts = Vec::new();
    for lib in [
        "libnvidia-ml",
        "libnvidia-cfg",
        "libcuda",
        "libcudadebugger",
        "libnvidia-allocator",
        "libnvidia-nvvm",
        "libnvidia-ptxjitcompiler",
    ] {
        let in_root = format!("{FOLDER}/{lib}.so.{version}");
        let host_path = driver.join(in_root.trim_start_matches('/'));
        assert!(host_path.is_file(), "{}", host_path.display());
        mounts.push(json!({"hostPath": host_path, "containerPath": in_root,
            "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}));
    }
    mounts.push(
        json!({"hostPath": driver.join("usr/lib/nvidia/current/nvidia-smi"),
        "containerPath": "/usr/bin/nvidia-smi",
        "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}),
    );
    let hook = |args: &[&str]| {
        let mut all: Vec<&str> = vec![program.file_name().unwrap().to_str().unwrap()];
        all.extend_from_slice(prefix);
        all.extend_from_slice(args);
        json!({"hookName": "createContainer", "path": program, "args": all,
            "env": ["NVIDIA_CTK_DEBUG=false"]})
    };
    let node = |name: &str| json!({"path": format!("/dev/{name}"), "hostPath": host.join("dev").join(name)});
    let link = format!("libcuda.so.1::{FOLDER}/libcuda.so");
    let driver_version = format!("--host-driver-version={version}");
    json!({
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [
            {"name": "0", "containerEdits": {"deviceNodes": [node("nvidia0")]}},
            {"name": "1", "containerEdits": {"deviceNodes": [node("nvidia1")]}},
        ],
        "containerEdits": {
            "env": [format!("NVIDIA_CTK_LIBCUDA_DIR={FOLDER}"), "NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [node("nvidiactl"), node("nvidia-uvm"), node("nvidia-uvm-tools")],
            "hooks": [
                hook(&["create-symlinks", "--link", &link]),
                hook(&["enable-cuda-compat", &driver_version]),
                hook(&["update-ldcache", "--folder", FOLDER]),
                hook(&["disable-device-node-modification"]),
            ],
            "mounts": mounts,
        }
    })
}

/// The toolkit's own form: /usr/bin/nvidia-cdi-hook, absent here.
fn toolkit_form() -> Value {
    assert!(!Path::new("/usr/bin/nvidia-cdi-hook").exists());
    toolkit_spec(Path::new("/usr/bin/nvidia-cdi-hook"), &[])
}

/// Applies the spec's common edits and `device`'s to the bundle's config,
/// as containerd's CDI code does: env replaced by key, nodes as
/// `linux.devices` with allow rules (or, `rootless`, bind mounts as rootless
/// Podman gives them), mounts and hooks appended.
fn apply_cdi(bundle: &Bundle, spec: &Value, device: &str, rootless: bool) {
    use std::os::unix::fs::MetadataExt;
    let mut edits = vec![spec["containerEdits"].clone()];
    edits.extend(
        spec["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["name"] == device)
            .map(|d| d["containerEdits"].clone()),
    );
    bundle.edit(|c| {
        for e in &edits {
            for kv in e["env"].as_array().into_iter().flatten() {
                let kv = kv.as_str().unwrap();
                let key = kv.split('=').next().unwrap();
                let env = c["process"]["env"].as_array_mut().unwrap();
                match env
                    .iter()
                    .position(|x| x.as_str().unwrap().split('=').next() == Some(key))
                {
                    Some(i) => env[i] = kv.into(),
                    None => env.push(kv.into()),
                }
            }
            for n in e["deviceNodes"].as_array().into_iter().flatten() {
                let host = n["hostPath"].as_str().unwrap();
                if rootless {
                    c["mounts"].as_array_mut().unwrap().push(json!({
                        "source": host, "destination": n["path"], "type": "bind",
                        "options": ["bind", "nosuid", "noexec"]
                    }));
                    continue;
                }
                let rdev = fs::metadata(host).unwrap().rdev();
                let (major, minor) = (libc::major(rdev), libc::minor(rdev));
                if c["linux"]["devices"].is_null() {
                    c["linux"]["devices"] = json!([]);
                }
                c["linux"]["devices"].as_array_mut().unwrap().push(json!({
                    "path": n["path"], "type": "c", "major": major, "minor": minor, "fileMode": 438
                }));
                let rules = &mut c["linux"]["resources"]["devices"];
                if rules.is_null() {
                    *rules = json!([]);
                }
                rules.as_array_mut().unwrap().push(
                    json!({"allow": true, "type": "c", "major": major, "minor": minor, "access": "rwm"}),
                );
            }
            for m in e["mounts"].as_array().into_iter().flatten() {
                c["mounts"].as_array_mut().unwrap().push(json!({
                    "source": m["hostPath"], "destination": m["containerPath"],
                    "type": "bind", "options": m["options"]
                }));
            }
            for h in e["hooks"].as_array().into_iter().flatten() {
                let stage = h["hookName"].as_str().unwrap();
                let mut hook = h.clone();
                hook.as_object_mut().unwrap().remove("hookName");
                if c["hooks"][stage].is_null() {
                    c["hooks"][stage] = json!([]);
                }
                c["hooks"][stage].as_array_mut().unwrap().push(hook);
            }
        }
    });
}

/// What the container sees of its GPU: its GPU nodes, nvidia-smi's exit
/// code, cudaGetDeviceCount's, and the linker cache's libcuda entries.
const PROBE: &str = "for n in /dev/nvidia0 /dev/nvidia1; do [ -c $n ] && echo $n; done; \
     nvidia-smi >/dev/null 2>&1; echo smi=$?; \
     LD_LIBRARY_PATH=/opt/cudart cuda_probe >/dev/null 2>&1; echo cuda=$?; \
     ldconfig -p | grep -o 'libcuda.so[.1]* (libc6,x86-64) => [^ ]*'; true";

const FOLDER: &str = "/usr/lib/x86_64-linux-gnu/nvidia/current";

fn run_bundle(rt: &Runtime, bundle: &Bundle) -> Ran {
    GpuFixtures::get().run_bundle(rt, bundle, &BundleRun::default())
}

fn assert_gpu_0_works(out: &Ran, what: &str) {
    assert_eq!(out.code, 0, "{what}: {}", out.stderr);
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines.len() >= 3, "{what}: {}\n{}", out.stdout, out.stderr);
    assert_eq!(
        lines[..3],
        ["/dev/nvidia0", "smi=9", "cuda=100"],
        "{what}: {}",
        out.stderr
    );
    let mut cache = lines.split_off(3);
    cache.sort();
    assert_eq!(
        cache,
        [
            format!("libcuda.so (libc6,x86-64) => {FOLDER}/libcuda.so"),
            format!("libcuda.so.1 (libc6,x86-64) => {FOLDER}/libcuda.so.1"),
        ],
        "{what}: {}",
        out.stderr
    );
}

#[test]
fn the_cdi_spec_validates_and_is_nvidias_form() {
    require_root!();
    let spec = nvidia_spec("gpurun");
    let scratch = Scratch::new("cdi");
    let path = scratch.path().join("nvidia.json");
    fs::write(&path, spec.to_string()).unwrap();
    container_device_interface::spec::read_spec(&path, 0).expect("a valid CDI spec");

    assert_eq!(spec["kind"], "nvidia.com/gpu");
    let names = cdi_device_names(&spec);
    assert_eq!(
        names,
        [
            "0",
            "GPU-5a1e0000-0000-4000-8000-00000000fa4e",
            "1",
            "GPU-5a1e0001-0000-4000-8000-00000000fa4f",
            "all"
        ]
    );
    let edits = &spec["containerEdits"];
    assert_eq!(
        edits["env"],
        json!([
            format!("NVIDIA_CTK_LIBCUDA_DIR={FOLDER}"),
            "NVIDIA_VISIBLE_DEVICES=void"
        ])
    );
    // The driver's files at their driver-root paths, as the toolkit mounts them.
    assert!(edits["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["containerPath"] == format!("{FOLDER}/libnvidia-ml.so.535.309.01")));
    let hooks: Vec<Vec<&str>> = edits["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert_eq!(h["path"], gpurun_bin().to_string_lossy().as_ref());
            assert_eq!(h["hookName"], "createContainer");
            h["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect()
        })
        .collect();
    let link = format!("libcuda.so.1::{FOLDER}/libcuda.so");
    assert_eq!(
        hooks,
        [
            vec!["gpurun", "cdi-hook", "create-symlinks", "--link", &link],
            vec![
                "gpurun",
                "cdi-hook",
                "enable-cuda-compat",
                "--host-driver-version=535.309.01"
            ],
            vec!["gpurun", "cdi-hook", "update-ldcache", "--folder", FOLDER],
            vec!["gpurun", "cdi-hook", "disable-device-node-modification"],
        ]
    );

    // The validation is real: a broken spec is refused.
    let mut broken = spec.clone();
    broken["kind"] = "not a kind".into();
    fs::write(&path, broken.to_string()).unwrap();
    assert!(container_device_interface::spec::read_spec(&path, 0).is_err());
}

#[test]
fn nvidia_cdi_hooks_are_done_natively_with_no_toolkit_on_the_host() {
    require_root!();
    let spec = toolkit_form();
    for readonly in [false, true] {
        let bundle = Bundle::glibc(None);
        bundle.set_process(&["sh", "-c", PROBE], &["NVIDIA_VISIBLE_DEVICES=all"]);
        bundle.edit(|c| c["root"]["readonly"] = readonly.into());
        apply_cdi(&bundle, &spec, "0", false);
        let before = tree_fingerprint(&bundle.rootfs());
        let rt = Runtime::new();
        let out = run_bundle(&rt, &bundle);
        assert_gpu_0_works(&out, &format!("readonly={readonly}"));
        // The links and the cache are the container's, not the image's.
        assert_eq!(
            tree_changes(&before, &tree_fingerprint(&bundle.rootfs())),
            Vec::<String>::new(),
            "readonly={readonly}: the image was changed"
        );
    }
}

/// Toolkit 1.19's compat hook of an Orin (`--host-cuda-version` with no
/// driver version, `--cuda-compat-container-root`), done natively: the
/// image's library in that folder leads libcuda.so.1 when its note's CUDA
/// (12.9) is newer than the host's, and not when it is not.
#[test]
fn an_orin_compat_hook_is_done_natively_by_cuda_version() {
    require_root!();
    for (host_cuda, want) in [
        ("12.2", "=> /usr/local/cuda/compat_orin/libcuda.so.1"),
        ("12.9", &format!("=> {FOLDER}/libcuda.so.1")[..]),
    ] {
        let mut spec = toolkit_form();
        for h in spec["containerEdits"]["hooks"].as_array_mut().unwrap() {
            if h["args"][1] == "enable-cuda-compat" {
                h["args"] = json!([
                    "nvidia-cdi-hook",
                    "enable-cuda-compat",
                    format!("--host-cuda-version={host_cuda}"),
                    "--cuda-compat-container-root=/usr/local/cuda/compat_orin"
                ]);
            }
        }
        let bundle = Bundle::glibc(None);
        GpuFixtures::get().copy_compat("note-listed", &bundle, "compat_orin");
        bundle.set_process(&["sh", "-c", "ldconfig -p | grep 'libcuda.so.1 '"], &[]);
        apply_cdi(&bundle, &spec, "0", false);
        let out = run_bundle(&Runtime::new(), &bundle);
        assert_eq!(out.code, 0, "{host_cuda}: {}", out.stderr);
        assert!(out.stdout.contains(want), "{host_cuda}: {}", out.stdout);
    }
}

#[test]
fn a_recording_hook_at_the_hook_path_is_never_run_and_debug_says_what_was_done() {
    require_root!();
    let scratch = Scratch::new("cdi-recorder");
    let hook = scratch.path().join("nvidia-cdi-hook");
    let record = scratch.path().join("ran");
    fs::write(
        &hook,
        format!("#!/bin/sh\necho \"$@\" >> {}\n", record.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = toolkit_form();
    for h in spec["containerEdits"]["hooks"].as_array_mut().unwrap() {
        h["path"] = hook.to_string_lossy().as_ref().into();
    }
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sh", "-c", PROBE], &[]);
    apply_cdi(&bundle, &spec, "0", false);
    let rt = Runtime::new();
    let dir = bundle.dir.to_string_lossy();
    let out =
        rt.run(GpuFixtures::get().args(&["--debug", "run", "--bundle", &dir, &unique("rec")]));
    assert_gpu_0_works(&out, "recording hook");
    assert!(
        !record.exists(),
        "the hook program ran: {:?}",
        fs::read_to_string(&record)
    );
    let step: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("NVIDIA CDI hooks done natively"))
        .collect();
    assert_eq!(step.len(), 1, "{}", out.stderr);
    for what in [
        "create-symlinks: 1 links",
        "update-ldcache: ",
        "enable-cuda-compat: ",
    ] {
        assert!(step[0].contains(what), "{what:?} not in {:?}", step[0]);
    }
}

#[test]
fn rootless_gets_the_nodes_bound_and_the_hooks_done() {
    require_root!();
    let user = TestUser::get();
    let spec = toolkit_form();
    let bundle = Bundle::glibc(Some(&user));
    bundle.set_process(&["sh", "-c", PROBE], &[]);
    apply_cdi(&bundle, &spec, "0", true);
    let rt = Runtime::as_who(As::User(user));
    let out = run_bundle(&rt, &bundle);
    assert_gpu_0_works(&out, "rootless");
}

#[test]
fn the_images_own_nvidia_visible_devices_never_widens_what_cdi_gave() {
    require_root!();
    let spec = toolkit_form();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sh", "-c", PROBE], &[]);
    apply_cdi(&bundle, &spec, "0", false);
    // The worst order an engine could leave: the image's `all` last.
    bundle.edit(|c| {
        c["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push("NVIDIA_VISIBLE_DEVICES=all".into())
    });
    let rt = Runtime::new();
    let out = run_bundle(&rt, &bundle);
    assert_gpu_0_works(&out, "image env all after CDI");
    assert!(
        out.stderr.contains("ignoring the GPU request from env"),
        "{}",
        out.stderr
    );
}

#[test]
fn runc_needs_the_hook_program_and_runs_with_gpurun_cdi_hook() {
    require_root!();
    let state = Scratch::new("runc-state");
    let runc = |bundle: &Bundle| {
        run_cmd(
            std::process::Command::new("runc")
                .arg("--root")
                .arg(state.path())
                .args(["run", "--bundle"])
                .arg(&bundle.dir)
                .arg(unique("runc-cdi")),
            TIMEOUT,
        )
    };
    let without = Bundle::glibc(None);
    without.set_process(&["sh", "-c", PROBE], &[]);
    apply_cdi(&without, &toolkit_form(), "0", false);
    let out = runc(&without);
    assert_ne!(
        out.code, 0,
        "runc ran without the hook program: {}",
        out.stdout
    );

    let gpurun_form = Bundle::glibc(None);
    gpurun_form.set_process(&["sh", "-c", PROBE], &[]);
    let spec = toolkit_spec(&gpurun_bin(), &["cdi-hook"]);
    apply_cdi(&gpurun_form, &spec, "0", false);
    let out = runc(&gpurun_form);
    assert_gpu_0_works(&out, "runc with gpurun cdi-hook");
    // And the spec gpurun writes itself, under runc.
    let written = Bundle::glibc(None);
    written.set_process(&["sh", "-c", PROBE], &[]);
    apply_cdi(&written, &nvidia_spec("gpurun"), "0", false);
    assert_gpu_0_works(&runc(&written), "runc with gpurun gpu cdi's spec");
}

/// Hooks with hostile arguments, against a rootfs whose folders are
/// symlinks pointing out of it: nothing outside the rootfs changes, natively
/// (root and rootless) and as `gpurun cdi-hook` in place.
#[test]
fn hostile_hook_arguments_write_nothing_outside_the_rootfs() {
    require_root!();
    let canary = Scratch::new("cdi-canary");
    fs::write(canary.path().join("file"), "host").unwrap();
    fs::set_permissions(
        canary.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let hostile: Vec<Vec<String>> = vec![
        vec![
            "create-symlinks".into(),
            "--link".into(),
            "../../../../etc/x::/y".into(),
        ],
        vec![
            "create-symlinks".into(),
            "--link".into(),
            "x::/../../etc/passwd".into(),
        ],
        vec![
            "create-symlinks".into(),
            "--link".into(),
            "x::/evil-abs/link".into(),
        ],
        vec![
            "create-symlinks".into(),
            "--link".into(),
            "x::/evil-up/link".into(),
        ],
        vec![
            "update-ldcache".into(),
            "--folder".into(),
            "/proc/self/root/etc".into(),
        ],
        vec![
            "update-ldcache".into(),
            "--folder".into(),
            "/evil-abs".into(),
        ],
        vec![
            "update-ldcache".into(),
            "--folder".into(),
            "/evil-up".into(),
        ],
        vec!["update-application-profile".into()],
        vec![
            "chmod".into(),
            "--mode".into(),
            "777".into(),
            "--path".into(),
            "/evil-abs/file".into(),
        ],
    ];
    // The test user first: creating it writes /etc/passwd.
    let user = TestUser::get();
    let host_passwd = fs::read("/etc/passwd").unwrap();
    let prepare = |bundle: &Bundle| {
        let rootfs = bundle.rootfs();
        std::os::unix::fs::symlink(canary.path(), rootfs.join("evil-abs")).unwrap();
        let up = format!("{}{}", "../".repeat(12), canary.path().display());
        std::os::unix::fs::symlink(up, rootfs.join("evil-up")).unwrap();
    };
    let canary_before = tree_fingerprint(canary.path());
    // Natively, root and rootless.
    for who in [As::Root, As::User(user)] {
        let bundle = Bundle::glibc(who.user());
        prepare(&bundle);
        bundle.set_process(&["true"], &[]);
        bundle.edit(|c| {
            c["hooks"]["createContainer"] = hostile
                .iter()
                .map(|args| {
                    let mut all = vec!["nvidia-cdi-hook".to_owned()];
                    all.extend(args.iter().cloned());
                    json!({"path": "/usr/bin/nvidia-cdi-hook", "args": all})
                })
                .collect();
        });
        let rt = Runtime::as_who(who.clone());
        let out = run_bundle(&rt, &bundle);
        assert_eq!(out.code, 0, "{who:?}: {}", out.stderr);
    }
    // In place, as runc would run `gpurun cdi-hook`.
    let bundle = Bundle::glibc(None);
    prepare(&bundle);
    let state =
        json!({"ociVersion": "1.0.2", "id": "x", "pid": 1, "bundle": bundle.dir}).to_string();
    for args in &hostile {
        let mut cmd = std::process::Command::new(gpurun_bin());
        cmd.arg("cdi-hook")
            .args(args)
            .stdin(std::process::Stdio::piped());
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(state.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // What went in place stayed inside the rootfs.
    let rootfs = bundle.rootfs();
    assert!(
        rootfs.join("etc/passwd").is_symlink(),
        "the rootfs's own /etc/passwd is the link"
    );
    let inside: PathBuf = rootfs.join(canary.path().strip_prefix("/").unwrap());
    assert!(inside.join("link").is_symlink(), "{}", inside.display());
    assert_eq!(
        tree_fingerprint(canary.path()),
        canary_before,
        "the canary changed"
    );
    assert_eq!(
        fs::read("/etc/passwd").unwrap(),
        host_passwd,
        "the host's /etc/passwd changed"
    );
    assert!(!Path::new("/etc/x").exists() && !Path::new("/y").exists());
}

/// A spec directory of the test's own holding `specs` (file name, JSON),
/// and a gpurun config naming it as the only one.
fn spec_dir(scratch: &Scratch, specs: &[(&str, Value)]) -> PathBuf {
    let dir = scratch.path().join("cdi");
    fs::create_dir_all(&dir).unwrap();
    for (name, spec) in specs {
        fs::write(dir.join(name), serde_json::to_vec_pretty(spec).unwrap()).unwrap();
    }
    let config = scratch.path().join("config.toml");
    fs::write(
        &config,
        format!("spec-dirs = [{:?}]\n", dir.display().to_string()),
    )
    .unwrap();
    config
}

/// `gpurun run` of the bundle with `config` as gpurun's config file, as an
/// engine-launched runtime finds its settings.
fn run_with_config(rt: &Runtime, bundle: &Bundle, config: &Path) -> Ran {
    let how = BundleRun {
        config: Some(config),
        ..BundleRun::default()
    };
    GpuFixtures::get().run_bundle(rt, bundle, &how)
}

fn annotate(bundle: &Bundle, names: &str) {
    bundle.edit(|c| c["annotations"] = json!({"cdi.k8s.io/devices": names}));
}

#[test]
fn a_cdi_name_resolves_from_the_spec_dirs_and_nvidias_hooks_are_done_natively() {
    require_root!();
    // containerd 1.6 with the device plugin's CDI annotations: the runtime
    // resolves the names from the host's specs.
    let scratch = Scratch::new("cdi-dirs");
    let config = spec_dir(&scratch, &[("nvidia.json", toolkit_form())]);
    let bundle = Bundle::glibc(None);
    // The image's own `all` never widens what the annotation names.
    bundle.set_process(&["sh", "-c", PROBE], &["NVIDIA_VISIBLE_DEVICES=all"]);
    annotate(&bundle, "nvidia.com/gpu=0");
    let rt = Runtime::new();
    let out = run_with_config(&rt, &bundle, &config);
    assert_gpu_0_works(&out, "cdi.k8s.io annotation");

    // NVIDIA_VISIBLE_DEVICES holding a CDI name, as the toolkit accepts.
    let bundle = Bundle::glibc(None);
    bundle.set_process(
        &[
            "sh",
            "-c",
            "ls /dev/nvidia[0-9]*; echo $NVIDIA_CTK_LIBCUDA_DIR",
        ],
        &["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=1"],
    );
    let out = run_with_config(&rt, &bundle, &config);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("/dev/nvidia1\n{FOLDER}\n"),
        "{}",
        out.stderr
    );
}

/// Another vendor's spec: an env entry, a file bind-mounted, a device node
/// (the host's /dev/null under its own name) and a createRuntime hook that
/// records it ran on the host.
fn vendor_spec(scratch: &Scratch) -> Value {
    let info = scratch.path().join("example-info");
    fs::write(&info, "vendor file\n").unwrap();
    let marker = scratch.path().join("hook-ran");
    json!({
        "cdiVersion": "0.6.0",
        "kind": "example.com/net",
        "containerEdits": {"env": ["EXAMPLE_COMMON=yes"]},
        "devices": [
            {"name": "eth0", "containerEdits": {
                "env": ["EXAMPLE_NET=eth0"],
                "deviceNodes": [{"path": "/dev/example0", "hostPath": "/dev/null"}],
                "mounts": [{"hostPath": info, "containerPath": "/opt/example/info",
                            "options": ["ro", "rbind"]}],
                "hooks": [{"hookName": "createRuntime", "path": "/bin/sh",
                           "args": ["sh", "-c", format!("echo ran > {}", marker.display())]}]
            }},
            {"name": "eth1", "containerEdits": {"env": ["EXAMPLE_NET=eth1"]}}
        ]
    })
}

#[test]
fn another_vendors_cdi_device_gets_its_edits_beside_gpurun_s_own_gpu() {
    require_root!();
    let scratch = Scratch::new("cdi-vendor");
    let config = spec_dir(&scratch, &[("example.json", vendor_spec(&scratch))]);
    let bundle = Bundle::glibc(None);
    bundle.set_process(
        &[
            "sh",
            "-c",
            "echo $EXAMPLE_COMMON $EXAMPLE_NET; cat /opt/example/info; \
             [ -c /dev/example0 ] && echo x > /dev/example0 && echo node-ok; \
             ls /dev/nvidia[0-9]*; nvidia-smi >/dev/null 2>&1; echo smi=$?",
        ],
        &[],
    );
    // No NVIDIA spec in the directory: nvidia.com/gpu=1 is gpurun's own.
    annotate(&bundle, "example.com/net=eth0,nvidia.com/gpu=1");
    let rt = Runtime::new();
    let out = run_with_config(&rt, &bundle, &config);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout, "yes eth0\nvendor file\nnode-ok\n/dev/nvidia1\nsmi=9\n",
        "{}",
        out.stderr
    );
    assert_eq!(
        fs::read_to_string(scratch.path().join("hook-ran")).unwrap(),
        "ran\n",
        "the vendor's own hook runs as any hook does"
    );
}

#[test]
fn a_bad_cdi_spec_or_an_unknown_device_is_one_clear_error() {
    require_root!();
    let scratch = Scratch::new("cdi-bad");
    let mut broken = vendor_spec(&scratch);
    broken["devices"] = json!([]);
    let config = spec_dir(&scratch, &[("broken.json", broken)]);
    let rt = Runtime::new();
    for (names, want) in [
        ("example.com/net=eth0", "broken.json is invalid"),
        (
            "other.com/fpga=0",
            "CDI device other.com/fpga=0: no CDI spec in",
        ),
    ] {
        let bundle = Bundle::busybox();
        annotate(&bundle, names);
        let id = unique("cdi-bad");
        let dir = bundle.dir.to_string_lossy().into_owned();
        let mut cmd = rt.command(["create", "--bundle", &dir, &id]);
        cmd.env("GPURUN_CONFIG", &config);
        let out = run_cmd(&mut cmd, TIMEOUT);
        assert_eq!(out.code, 1, "{names}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{names}: one line: {}", out.stderr);
        assert!(lines[0].starts_with("gpurun: error: "), "{}", lines[0]);
        assert!(
            lines[0].contains(want),
            "{names}: {:?} lacks {want:?}",
            lines[0]
        );
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
    }
}

/// NVIDIA's CDI edits in a user namespace started by root (a `hostUsers:
/// false` pod, Podman's `--userns=auto`): the hooks are done natively there
/// too. The nodes come as bind mounts of the fake host's nodes (an engine's
/// `linux.devices` in a user namespace are bound from the same path in the
/// host's /dev, which the fake host does not populate).
#[test]
fn nvidia_cdi_edits_in_a_user_namespace_started_by_root() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sh", "-c", PROBE], &["NVIDIA_VISIBLE_DEVICES=all"]);
    apply_cdi(&bundle, &toolkit_form(), "0", true);
    // The engine's allow rules for those nodes: the device cgroup applies
    // to a root-started container, user namespace or not.
    bundle.edit(|c| {
        use std::os::unix::fs::MetadataExt;
        let binds: Vec<String> = c["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                m["destination"]
                    .as_str()
                    .unwrap()
                    .starts_with("/dev/nvidia")
            })
            .map(|m| m["source"].as_str().unwrap().to_owned())
            .collect();
        let rules = c["linux"]["resources"]["devices"].as_array_mut().unwrap();
        for source in binds {
            let rdev = fs::metadata(&source).unwrap().rdev();
            rules.push(
                json!({"allow": true, "type": "c", "major": libc::major(rdev),
                "minor": libc::minor(rdev), "access": "rwm"}),
            );
        }
    });
    bundle.map_root_to(100000);
    let out = std::process::Command::new("chown")
        .args(["-R", "100000:100000"])
        .arg(bundle.rootfs())
        .status()
        .unwrap();
    assert!(out.success());
    let rt = Runtime::new();
    let out = run_bundle(&rt, &bundle);
    assert_gpu_0_works(&out, "root-started user namespace");
}

/// `gpu cdi --check FILE` says whether a spec written earlier is what this
/// host gives now (the toolkit's nvidia-cdi-refresh regenerates specs that
/// a driver or MIG change left stale): 0 and "up to date" for the spec just
/// written, 1 and "stale" against another host's driver layout, 1 and
/// "missing" for no file.
#[test]
fn gpu_cdi_check_says_whether_a_spec_is_current() {
    let fixtures = GpuFixtures::get();
    let rt = Runtime::new();
    let scratch = Scratch::new("cdi-check");
    let spec = scratch.path().join("nvidia.yaml");
    let spec_arg = spec.to_str().unwrap();
    let out = rt.run(fixtures.args(&["gpu", "cdi", "-o", spec_arg]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = rt.run(fixtures.args(&["gpu", "cdi", "--check", spec_arg]));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);
    let other = fixtures.layout("usr-local-nvidia", "open");
    let out = rt.run(other.args(&["gpu", "cdi", "--check", spec_arg]));
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("stale"), "{}", out.stdout);
    let missing = scratch.path().join("none.json");
    let out = rt.run(fixtures.args(&["gpu", "cdi", "--check", missing.to_str().unwrap()]));
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("missing"), "{}", out.stdout);
}

/// A musl image given NVIDIA's CDI spec: the `update-ldcache` hook's
/// folders go into /etc/ld-musl-<arch>.path too (musl reads no
/// ld.so.cache), natively under gpurun and as `gpurun cdi-hook` under runc,
/// and a musl program's dlopen finds libcuda.so.1 there (loads it, or
/// fails later on a glibc symbol: not "No such file").
#[test]
fn a_musl_image_gets_the_hook_folders_in_its_loader_path() {
    require_root!();
    let arch = std::env::consts::ARCH;
    let probe =
        format!("tr '\\n' ' ' < /etc/ld-musl-{arch}.path; echo; /usr/bin/musl_dlopen libcuda.so.1");
    // The hook's folders, as the spec names them.
    let spec = toolkit_form();
    let hook = spec["containerEdits"]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["args"].to_string().contains("update-ldcache"))
        .unwrap();
    let args: Vec<&str> = hook["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let folders: String = args
        .windows(2)
        .filter(|w| w[0] == "--folder")
        .map(|w| format!("{} ", w[1]))
        .collect();
    assert!(!folders.is_empty(), "{args:?}");
    let want = [
        format!("/lib /usr/local/lib /usr/lib {folders}"),
        "libcuda.so.1 found".to_owned(),
    ];
    let musl_bundle = |spec: &Value| {
        let bundle = Bundle::musl(None);
        bundle.edit(|c| {
            c["process"]["args"] = json!(["/bin/sh", "-c", probe]);
            c["process"]["env"] = json!(["PATH=/usr/bin:/bin"]);
        });
        apply_cdi(&bundle, spec, "0", false);
        bundle
    };
    let native = musl_bundle(&spec);
    let out = run_bundle(&Runtime::new(), &native);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        want,
        "native: {}",
        out.stderr
    );

    let state = Scratch::new("runc-musl");
    let in_place = musl_bundle(&toolkit_spec(&gpurun_bin(), &["cdi-hook"]));
    let out = run_cmd(
        std::process::Command::new("runc")
            .arg("--root")
            .arg(state.path())
            .args(["run", "--bundle"])
            .arg(&in_place.dir)
            .arg(unique("runc-musl")),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        want,
        "runc: {}",
        out.stderr
    );
}

/// The files the CDI hooks' work reads or writes in the image, as
/// `strace -f -e trace=openat,openat2,open` of a CDI run showed them: the
/// linker's config and cache, and the user database the init reads.
const IMAGE_PATHS_THE_HOOKS_OPEN: [&str; 4] = [
    "etc/ld.so.cache",
    "etc/ld.so.conf",
    "etc/ld.so.conf.d/image.conf",
    "etc/passwd",
];

/// A FIFO, a socket or a directory at each: the hooks' work never blocks
/// on one; the run ends, with a GPU that works or one line naming the
/// path, and nothing left.
#[test]
fn no_image_file_of_the_wrong_type_blocks_the_cdi_hooks() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["sh", "-c", PROBE], &["NVIDIA_VISIBLE_DEVICES=all"]);
    apply_cdi(&bundle, &toolkit_form(), "0", false);
    let rootfs = bundle.rootfs();
    with_each_wrong_kind(&rootfs, &IMAGE_PATHS_THE_HOOKS_OPEN, |path, kind| {
        let out = run_bundle(&Runtime::new(), &bundle);
        let case = format!("{path} as {kind}");
        if out.code == 0 {
            assert_eq!(
                out.stdout.lines().nth(1),
                Some("smi=9"),
                "{case}: {}",
                out.stderr
            );
        } else {
            let first = out.stderr.lines().next().unwrap_or_default();
            let name = Path::new(path).file_name().unwrap().to_str().unwrap();
            assert!(
                first.starts_with("gpurun: error: ") && first.contains(name),
                "{case}: {}",
                out.stderr
            );
        }
        assert!(
            mounts_mentioning(rootfs.to_str().unwrap()).is_empty(),
            "{case}: mount left"
        );
    });
}

/// A WSL2 host's spec (`gpu cdi` over the fake WSL2 host): one device,
/// "all", `/dev/dxg` in the common edits, the driver store at its own
/// path, no CUDA compat hook (Windows' libcuda); applied as containerd
/// applies it, it runs under gpurun with the hooks done natively: the
/// store's libraries resolve through the cache (nvidia-smi 9, CUDA 100).
#[test]
fn a_wsl2_hosts_spec_runs_with_the_hooks_done_natively() {
    require_root!();
    let host = GpuFixtures::get().wsl();
    let scratch = Scratch::new("wsl-cdi");
    let path = scratch.path().join("nvidia.json");
    let rt = Runtime::new();
    rt.run(host.args(&["gpu", "cdi", "-o", path.to_str().unwrap()]))
        .ok();
    let spec: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let names = cdi_device_names(&spec);
    assert_eq!(names, ["all"]);
    assert_eq!(spec["containerEdits"]["deviceNodes"][0]["path"], "/dev/dxg");
    let hooks = spec["containerEdits"]["hooks"].to_string();
    assert!(!hooks.contains("enable-cuda-compat"), "{hooks}");
    assert!(hooks.contains("/usr/lib/wsl/lib"), "{hooks}");
    let bundle = Bundle::glibc(None);
    bundle.set_process(
        &[
            "sh",
            "-c",
            "[ -c /dev/dxg ] && echo dxg; nvidia-smi >/dev/null 2>&1; echo smi=$?; \
             LD_LIBRARY_PATH=/opt/cudart cuda_probe >/dev/null 2>&1; echo cuda=$?",
        ],
        &[],
    );
    apply_cdi(&bundle, &spec, "all", false);
    let dir = bundle.dir.to_string_lossy();
    let out = rt.run(host.args(&["run", "--bundle", &dir, &unique("wsl")]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["dxg", "smi=9", "cuda=100"]
    );
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}
