//! `gpu plan --json BUNDLE` is what `create` of that bundle gives it, for
//! each source of a request: the plan's device nodes are the container's
//! `/dev/nvidia*` nodes, its mounts are mount points in the container and
//! its env is in the container's environment. Both come from one decision
//! (`flow::decide`); `gpu plan` skipped CDI specs, NVIDIA's CDI edits and
//! the Slurm step before.

use std::collections::BTreeSet;
use std::fs;

use gpurun_tests::*;
use serde_json::{json, Value};

/// What the container shows of its GPU setup: its NVIDIA nodes, then
/// `MOUNTS`, its mount points, then `ENV`, its environment.
const LOOK: &str = "find /dev -name 'nvidia*' -type c | sort; echo MOUNTS; \
    awk '{print $5}' /proc/self/mountinfo; echo ENV; env";

/// What one case gives: `gpu plan --json` and the container's view.
struct Seen {
    plan: Value,
    nodes: BTreeSet<String>,
    mounts: BTreeSet<String>,
    env: BTreeSet<String>,
    /// Each planned mount destination, resolved inside the container.
    resolved: std::collections::BTreeMap<String, String>,
}

impl Seen {
    /// Whether `destination` is a mount point in the container, itself or
    /// the file its links lead to.
    fn mounted(&self, destination: &str) -> bool {
        self.mounts.contains(destination)
            || self
                .resolved
                .get(destination)
                .is_some_and(|r| self.mounts.contains(r))
    }
}

/// Runs `gpu plan --json` and then `run` of `bundle` (whose process is
/// set to LOOK with `env`), both with `config` as GPURUN_CONFIG and
/// `extra` in gpurun's environment.
fn plan_and_run(bundle: &Bundle, env: &[&str], config: &str, extra: &[(&str, &str)]) -> Seen {
    plan_and_run_with(bundle, env, config, extra, &[])
}

/// `plan_and_run` with `flags` given to both `gpu plan` and `run` (`--gpus`).
fn plan_and_run_with(
    bundle: &Bundle,
    env: &[&str],
    config: &str,
    extra: &[(&str, &str)],
    flags: &[&str],
) -> Seen {
    let config_file = bundle.dir.join("gpurun-plan.toml");
    fs::write(&config_file, config).unwrap();
    let rt = Runtime::new();
    let fixtures = GpuFixtures::get();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let command = |args: &[&str]| {
        let mut cmd = rt.command(fixtures.args(args));
        cmd.env("GPURUN_CONFIG", &config_file);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        run_cmd(&mut cmd, std::time::Duration::from_secs(120))
    };
    bundle.set_process(&["true"], env);
    let plan = command(&[&["gpu", "plan", "--json"], flags, &[dir.as_str()]].concat());
    assert_eq!(plan.code, 0, "gpu plan: {}", plan.stderr);
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    // Each planned mount as the container resolves it: a driver file's
    // SONAME name may be a link to the file that is mounted.
    let destinations: Vec<String> = plan["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            plan["cdiEdits"]["addedMounts"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .map(|m| m["destination"].as_str().unwrap().to_owned())
        .collect();
    let look = format!(
        "{LOOK}; echo RESOLVED; for p in {}; do readlink -f \"$p\"; done",
        destinations.join(" ")
    );
    bundle.set_process(&["sh", "-c", &look], env);
    let id = unique("plan");
    let out = command(&[&["run"], flags, &["--bundle", dir.as_str(), id.as_str()]].concat());
    assert_eq!(out.code, 0, "run: {}", out.stderr);
    let (nodes, rest) = out.stdout.split_once("MOUNTS\n").unwrap();
    let (mounts, rest) = rest.split_once("ENV\n").unwrap();
    let (env, resolved) = rest.split_once("RESOLVED\n").unwrap();
    let set = |text: &str| text.lines().map(str::to_owned).collect::<BTreeSet<_>>();
    Seen {
        plan,
        nodes: set(nodes),
        mounts: set(mounts),
        env: set(env),
        resolved: destinations
            .into_iter()
            .zip(resolved.lines().map(str::to_owned))
            .collect(),
    }
}

/// The plan's device nodes, mount destinations and env, read back from the
/// container: the same nodes, every mount there, every variable set.
fn assert_plan_is_what_the_container_got(case: &str, seen: &Seen) {
    let plan = &seen.plan;
    assert!(!plan.is_null(), "{case}: no plan");
    let nodes: BTreeSet<String> = plan["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap().to_owned())
        .filter(|p| p.starts_with("/dev/nvidia"))
        .collect();
    assert_eq!(nodes, seen.nodes, "{case}: device nodes");
    for m in plan["mounts"].as_array().unwrap() {
        let destination = m["destination"].as_str().unwrap();
        assert!(
            seen.mounted(destination),
            "{case}: mount {destination} not in the container"
        );
    }
    for e in plan["env"].as_array().unwrap() {
        assert!(
            seen.env.contains(e.as_str().unwrap()),
            "{case}: env {e} not in the container"
        );
    }
}

/// The GPU indexes of a plan.
fn planned_gpus(plan: &Value) -> Vec<u64> {
    plan["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["index"].as_u64().unwrap())
        .collect()
}

#[test]
fn env_annotation_volume_mount_and_slurm_requests() {
    require_root!();
    let bundle = Bundle::glibc(None);
    // NVIDIA_VISIBLE_DEVICES in the env.
    let seen = plan_and_run(&bundle, &["NVIDIA_VISIBLE_DEVICES=1"], "", &[]);
    assert_eq!(planned_gpus(&seen.plan), [1]);
    assert_plan_is_what_the_container_got("env", &seen);

    // A CDI name in an annotation that no spec defines: gpurun's own GPU.
    bundle.edit(|c| c["annotations"] = json!({"cdi.k8s.io/gpu": "nvidia.com/gpu=0"}));
    let seen = plan_and_run(&bundle, &[], "", &[]);
    assert_eq!(planned_gpus(&seen.plan), [0]);
    assert_plan_is_what_the_container_got("annotation", &seen);
    bundle.edit(|c| c["annotations"] = json!({}));

    // The device plugin's volume mounts, on a node whose config takes them.
    bundle.edit(|c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.push(json!({"destination": "/var/run/nvidia-container-devices/1",
            "type": "bind", "source": "/dev/null", "options": ["rbind", "ro"]}));
    });
    let strict = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n\
                  accept-nvidia-visible-devices-as-volume-mounts = true\n";
    let seen = plan_and_run(&bundle, &[], strict, &[]);
    assert_eq!(planned_gpus(&seen.plan), [1]);
    assert_plan_is_what_the_container_got("volume mounts", &seen);

    // A Slurm job by its environment: GPU 1 allocated, the image asks all.
    let job = [("SLURM_JOB_ID", "7"), ("SLURM_STEP_GPUS", "1")];
    let seen = plan_and_run(&bundle, &["NVIDIA_VISIBLE_DEVICES=all"], "", &job);
    assert_eq!(planned_gpus(&seen.plan), [1]);
    assert_plan_is_what_the_container_got("slurm job", &seen);
}

/// A shared node's strict settings: an unprivileged container's own env
/// does not count, and both say so (plan null, no node in the container).
#[test]
fn the_strict_multi_tenant_settings() {
    require_root!();
    let bundle = Bundle::glibc(None);
    bundle.edit(|c| {
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set] = json!(["CAP_CHOWN"]);
        }
    });
    let strict = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n";
    let seen = plan_and_run(&bundle, &["NVIDIA_VISIBLE_DEVICES=0"], strict, &[]);
    assert!(seen.plan.is_null(), "{}", seen.plan);
    assert!(seen.nodes.is_empty(), "{:?}", seen.nodes);
    // `run --gpus` is the invoker's own request: it counts there, and
    // `gpu plan --gpus` plans it the same.
    let seen = plan_and_run_with(&bundle, &[], strict, &[], &["--gpus", "1"]);
    assert_eq!(planned_gpus(&seen.plan), [1]);
    assert_plan_is_what_the_container_got("--gpus", &seen);
}

/// CDI names resolved from this host's spec directories (a spec from
/// `gpurun gpu cdi`, NVIDIA's form with its hooks): the plan says the CDI
/// edits decide, and lists the nodes and mounts the container then has.
/// `gpu plan` used to plan gpurun's own GPU here instead.
#[test]
fn cdi_names_from_the_spec_directories() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let specs = Scratch::new("plan-cdi");
    let spec_file = specs.path().join("nvidia.json");
    let rt = Runtime::new();
    let out = rt.run(fixtures.args(&[
        "gpu",
        "cdi",
        "--hook-program",
        "nvidia-cdi-hook",
        "-o",
        spec_file.to_str().unwrap(),
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let config = format!("spec-dirs = [{:?}]\n", specs.path());
    let bundle = Bundle::glibc(None);
    let seen = plan_and_run(
        &bundle,
        &["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=1"],
        &config,
        &[],
    );
    let edits = &seen.plan["cdiEdits"];
    assert_eq!(
        edits["cdiDevices"],
        json!(["nvidia.com/gpu=1"]),
        "{}",
        seen.plan
    );
    let nodes: BTreeSet<String> = edits["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .filter(|p| p.starts_with("/dev/nvidia"))
        .collect();
    assert_eq!(nodes, seen.nodes, "CDI device nodes");
    assert!(seen.nodes.contains("/dev/nvidia1") && !seen.nodes.contains("/dev/nvidia0"));
    let mounts = edits["addedMounts"].as_array().unwrap();
    assert!(!mounts.is_empty(), "{}", seen.plan);
    for m in mounts {
        let destination = m["destination"].as_str().unwrap();
        assert!(
            seen.mounted(destination),
            "mount {destination} not in the container"
        );
    }
}

/// Under `srun --container`, slurmstepd starts the runtime in the step's
/// cgroup with no Slurm variables: the step's device cgroup says which GPUs
/// it holds. Here a step cgroup (`.../job_77/step_0` in the v1 devices
/// hierarchy) denies GPU 0; `gpu plan` and `run`, started in it, both give
/// GPU 1 only. (`gpu plan` ignored the step before.)
#[test]
fn a_slurm_step_by_its_cgroup() {
    require_root!();
    use std::os::unix::process::CommandExt;
    let top = unique("slurmstep");
    let devices = std::path::Path::new("/sys/fs/cgroup/devices");
    let step = devices.join(&top).join("uid_0/job_77/step_0");
    if fs::create_dir_all(&step).is_err() {
        return; // no cgroup v1 devices hierarchy: Slurm's v2 path is the 6.12 guest's
    }
    fs::write(step.join("devices.deny"), "c 195:0 rwm").unwrap();
    let bundle = Bundle::glibc(None);
    bundle.set_process(&["true"], &[]);
    let rt = Runtime::new();
    let fixtures = GpuFixtures::get();
    let dir = bundle.dir.to_string_lossy().into_owned();
    let procs = step.join("cgroup.procs");
    let in_step = |args: &[&str]| {
        let mut cmd = rt.command(fixtures.args(args));
        let procs = procs.clone();
        // SAFETY: only a write(2) to a file, between fork and exec.
        unsafe {
            cmd.pre_exec(move || fs::write(&procs, "0"));
        }
        run_cmd(&mut cmd, std::time::Duration::from_secs(120))
    };
    let plan = in_step(&["gpu", "plan", "--json", &dir]);
    bundle.set_process(&["sh", "-c", "find /dev -name 'nvidia[0-9]*' -type c"], &[]);
    let id = unique("step");
    let out = in_step(&["run", "--bundle", &dir, &id]);
    let leftovers: Vec<std::path::PathBuf> = walk_dirs(&devices.join(&top));
    for dir in leftovers.iter().rev() {
        let _ = fs::remove_dir(dir);
    }
    for hierarchy in cgroup_dirs(&top) {
        for dir in walk_dirs(&hierarchy).iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    assert!(!plan.is_null(), "gpu plan ignored the step");
    assert_eq!(planned_gpus(&plan), [1]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "/dev/nvidia1");
}

/// `dir` and every directory below it, parents first.
fn walk_dirs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if let Ok(entries) = fs::read_dir(&all[i]) {
            all.extend(
                entries
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    all
}
