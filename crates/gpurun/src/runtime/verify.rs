//! `gpurun gpu verify`'s check of our own injection: `nvidia-smi -L` in a
//! throwaway container, and what it saw beside what the host has.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gpurun_gpu::{flow, Platform, Roots};
use libcontainer::oci_spec::runtime::Spec;

use crate::runtime::launch::{self, LaunchArgs};
use crate::runtime::{context::Ctx, spec::driver_paths};

/// Libraries nvidia-smi links against, copied from the host into the
/// throwaway rootfs when no --rootfs is given (with the platform's loader).
const HOST_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
];

fn minimal_rootfs(dir: &Path) -> Result<()> {
    let platform = Platform::native();
    let multiarch = Path::new("usr/lib").join(platform.triplet);
    let lib = dir.join(&multiarch);
    for d in [
        &lib,
        &dir.join("usr/bin"),
        &dir.join("usr/lib64"),
        &dir.join("proc"),
        &dir.join("dev"),
        &dir.join("sys"),
        &dir.join("etc"),
        &dir.join("tmp"),
    ] {
        fs::create_dir_all(d)?;
    }
    // Debian and Ubuntu keep them in the multiarch directory, RHEL in
    // /usr/lib64.
    let host_lib = [Path::new("/").join(&multiarch), PathBuf::from("/usr/lib64")]
        .into_iter()
        .find(|d| d.join("libc.so.6").exists())
        .context("the host's libc.so.6 is neither in its multiarch directory nor in /usr/lib64")?;
    for name in HOST_LIBS.iter().chain([&platform.loader]) {
        fs::copy(host_lib.join(name), lib.join(name))
            .with_context(|| format!("copy the host's {name} into the verify rootfs"))?;
    }
    // Where programs ask for the loader (/lib64/... or /lib/...: both lead
    // into /usr below), inside the container.
    let loader_at = Path::new("usr").join(platform.loader_path.trim_start_matches('/'));
    symlink(
        Path::new("/").join(&multiarch).join(platform.loader),
        dir.join(loader_at),
    )?;
    for (link, target) in [
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("bin", "usr/bin"),
    ] {
        symlink(target, dir.join(link))?;
    }
    Ok(())
}

fn write_spec(bundle: &Path, rootfs: &Path, args: &[&str], gpus: &str) -> Result<()> {
    let spec = verify_spec(rootfs, args, gpus)?;
    fs::write(bundle.join("config.json"), serde_json::to_vec(&spec)?)?;
    Ok(())
}

/// The throwaway container's config: `args` with `gpus` and utility.
fn verify_spec(rootfs: &Path, args: &[&str], gpus: &str) -> Result<Spec> {
    let mut spec = if nix::unistd::geteuid().is_root() {
        Spec::default()
    } else {
        Spec::rootless(
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    };
    let mut value = serde_json::to_value(&spec)?;
    value["root"] = serde_json::json!({"path": rootfs, "readonly": true});
    value["process"]["terminal"] = false.into();
    value["process"]["args"] = serde_json::json!(args);
    value["process"]["env"] = serde_json::json!([
        "PATH=/usr/bin:/bin:/usr/sbin:/sbin",
        format!("NVIDIA_VISIBLE_DEVICES={gpus}"),
        "NVIDIA_DRIVER_CAPABILITIES=utility",
    ]);
    spec = serde_json::from_value(value)?;
    Ok(spec)
}

/// The GPUs the container should list, from the decision its create makes
/// (`flow::decide`: a Slurm job's or step's allocation, the config): what
/// verify compares with is what the launched container is given.
fn expected_gpus(ctx: &Ctx, roots: Roots, rootfs: &Path, gpus: &str) -> Result<Vec<String>> {
    let mut spec = verify_spec(rootfs, &["nvidia-smi", "-L"], gpus)?;
    let slurm_step = crate::runtime::spec::prepare::slurm_step_we_run_in();
    let store = ctx.root.join(flow::CACHE_DIR);
    let around = flow::Surroundings {
        invoker: None,
        slurm_gpus_by_default: false,
        slurm_step: slurm_step.as_ref(),
        rootfs,
        cache_dir: Some(&store),
    };
    let decision = flow::decide(
        &mut spec,
        || Ok(roots),
        driver_paths::request_policy,
        &around,
    )?;
    Ok(match decision {
        flow::Decision::Planned { plan, .. } => plan.gpus.iter().map(|g| g.uuid.clone()).collect(),
        _ => Vec::new(),
    })
}

/// UUIDs in `nvidia-smi -L` lines: "GPU 0: NVIDIA H100 (UUID: GPU-…)".
fn listed_uuids(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.split("(UUID: ").nth(1))
        .map(|rest| rest.trim_end_matches(')').trim().to_owned())
        .filter(|u| u.starts_with("GPU-"))
        .collect()
}

fn run_smi(
    ctx: &Ctx,
    work: &Path,
    rootfs: &Path,
    args: &[&str],
    gpus: &str,
    n: usize,
) -> Result<(i32, String)> {
    let bundle = work.join(format!("bundle{n}"));
    fs::create_dir_all(&bundle)?;
    write_spec(&bundle, rootfs, args, gpus)?;
    let out_path = work.join(format!("out{n}"));
    let out = fs::File::create(&out_path)?;
    let id = format!("gpurun-verify-{}-{n}", std::process::id());
    let code = launch::run_foreground(
        ctx,
        LaunchArgs {
            detach: false,
            output: Some(out.into()),
            ..LaunchArgs::new(&id, &bundle)
        },
        true,
        false,
        None,
    )?;
    Ok((code, fs::read_to_string(&out_path).unwrap_or_default()))
}

/// What `nvidia-smi` in the throwaway container saw, beside the host's GPUs
/// and the ones requested.
pub struct Verification {
    pub driver_version: String,
    pub host: Vec<String>,
    pub expected: Vec<String>,
    pub code: i32,
    pub output: String,
}

impl Verification {
    /// The GPUs the container listed.
    pub fn seen(&self) -> Vec<String> {
        listed_uuids(&self.output)
    }

    /// The container saw exactly the GPUs it was given.
    pub fn passed(&self) -> bool {
        sees_exactly(self.code, &self.seen(), &self.expected)
    }

    /// Why it did not pass.
    pub fn verdict(&self) -> String {
        verdict(self.code, &self.output)
    }
}

/// Runs `nvidia-smi -L` (plain `nvidia-smi` where it has no -L) with `gpus`
/// in a container on `rootfs` (a minimal one by default).
pub fn verify(ctx: &Ctx, rootfs: Option<PathBuf>, gpus: &str) -> Result<Verification> {
    // It runs containers (from a rootfs the caller may name): the same
    // protected re-exec as `run`, before anything is made.
    crate::runtime::protect::seal::ensure_sealed()?;
    let roots = driver_paths::resolve(&ctx.settings)?;
    let inv = flow::inventory(&roots, Some(&ctx.root.join(flow::CACHE_DIR)))?;
    gpurun_gpu::formats::devlist::parse(Some(gpus))?;

    let work = ctx.root.join(format!("verify@{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    let result = (|| -> Result<(Vec<String>, i32, String)> {
        let rootfs = match rootfs {
            Some(dir) => {
                fs::canonicalize(&dir).with_context(|| format!("--rootfs {}", dir.display()))?
            }
            None => {
                let dir = work.join("rootfs");
                minimal_rootfs(&dir)?;
                dir
            }
        };
        let expected = expected_gpus(ctx, roots.clone(), &rootfs, gpus)?;
        let (code, output) = run_smi(ctx, &work, &rootfs, &["nvidia-smi", "-L"], gpus, 1)?;
        if code == 2 {
            // An nvidia-smi without -L.
            let (code, output) = run_smi(ctx, &work, &rootfs, &["nvidia-smi"], gpus, 2)?;
            return Ok((expected, code, output));
        }
        Ok((expected, code, output))
    })();
    let _ = fs::remove_dir_all(&work);
    let (expected, code, output) = result?;
    Ok(Verification {
        driver_version: inv.driver_version.clone(),
        host: inv.gpus.iter().map(|g| g.uuid.clone()).collect(),
        expected,
        code,
        output,
    })
}

/// Whether `nvidia-smi -L` in the container passed: it exited 0 listing
/// exactly the requested GPUs, in order.
fn sees_exactly(code: i32, seen: &[String], expected: &[String]) -> bool {
    code == 0 && seen == expected
}

/// What a failed `nvidia-smi -L` in the container says about the injection.
fn verdict(code: i32, output: &str) -> String {
    let exec_failed = output.lines().find_map(|l| {
        l.strip_prefix("gpurun: error: ")
            .filter(|l| l.starts_with("exec "))
    });
    if let Some(line) = exec_failed {
        return format!(
            "FAILED: nvidia-smi could not be started in the container ({line}): a wrapper script or a program whose loader the image lacks was injected"
        );
    }
    match code {
        0 => "MISMATCH: the container sees other GPUs than requested".into(),
        9 => "no kernel driver: nvidia-smi and libnvidia-ml were injected and resolved, but no NVIDIA kernel driver answers on this host".into(),
        12 => "FAILED: nvidia-smi was injected but libnvidia-ml.so.1 does not resolve in the container".into(),
        127 => "FAILED: nvidia-smi was not injected".into(),
        255 if output.contains("Failed to initialize NVML: Unknown Error") => {
            "FAILED: the device nodes are there but cannot be opened (device cgroup or permissions)".into()
        }
        _ => format!(
            "FAILED: nvidia-smi exited {code}: {}",
            output.lines().next().unwrap_or("no output")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvidia_smi_list_lines() {
        let out = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5a1e0000-0000-4000-8000-00000000fa4e)\n\
                   GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-5a1e0001-0000-4000-8000-00000000fa4f)\n";
        assert_eq!(
            listed_uuids(out),
            [
                "GPU-5a1e0000-0000-4000-8000-00000000fa4e",
                "GPU-5a1e0001-0000-4000-8000-00000000fa4f"
            ]
        );
        assert!(listed_uuids("NVIDIA-SMI has failed because it couldn't communicate").is_empty());
    }

    #[test]
    fn exactly_the_requested_gpus_pass() {
        let host = "GPU 0: NVIDIA H200 (UUID: GPU-1be11b0e-d9c7-f695-cfb6-fb82f383fb21)\n";
        let seen = listed_uuids(host);
        let requested = vec!["GPU-1be11b0e-d9c7-f695-cfb6-fb82f383fb21".to_owned()];
        assert!(sees_exactly(0, &seen, &requested));
        assert!(!sees_exactly(9, &seen, &requested));
        assert!(!sees_exactly(0, &seen, &["GPU-other".to_owned()]));
        assert!(!sees_exactly(0, &seen, &[]));
    }

    #[test]
    fn verdicts_name_the_cause() {
        assert!(verdict(
            255,
            "gpurun: error: exec nvidia-smi: no such file or directory\n"
        )
        .contains("could not be started"));
        assert!(
            verdict(255, "Failed to initialize NVML: Unknown Error\n").contains("device cgroup")
        );
        assert!(!verdict(255, "something else\n").contains("device cgroup"));
        assert!(verdict(9, "").starts_with("no kernel driver"));
        assert!(verdict(127, "").contains("not injected"));
    }
}
