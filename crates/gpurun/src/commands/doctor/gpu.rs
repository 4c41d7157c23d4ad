//! Whether a GPU container would get its GPUs: the driver, its files, the nodes.

use std::fs;
use std::os::unix::fs::FileTypeExt;

use gpurun_gpu::inventory::Inventory;
use gpurun_gpu::plan::Plan;
use gpurun_gpu::{flow, inventory, request, Roots, Source};

use super::{Level, Report};
use crate::runtime::spec::idmap::UserIds;
use crate::runtime::{context::Ctx, spec::driver_paths};

/// The NVIDIA driver, judged the way `run` judges it: the same request
/// turned into a plan by the same code, for every GPU with the default
/// capabilities (utility, compute).
/// Inside a Slurm job, the job's allocation bounds it as it bounds a
/// container.
pub(super) fn check_gpu(r: &mut Report, ctx: &Ctx, user: &UserIds) -> Option<bool> {
    if let Err(e) = driver_paths::check_config() {
        r.line(
            Level::Fail,
            true,
            "configuration",
            format!("a GPU container would fail: {e:#}"),
        );
        return None;
    }
    let planned = driver_paths::resolve(&ctx.settings).and_then(|roots| {
        let request = request::from_env(&["NVIDIA_VISIBLE_DEVICES=all"])?;
        let job = flow::SlurmJob::from_env(false)?;
        match flow::decide_request(|| Ok(roots.clone()), request, job.as_ref(), None, None)? {
            flow::Decision::Planned {
                inventory, plan, ..
            } => Ok((roots, *inventory, *plan)),
            _ => anyhow::bail!("the Slurm job has no GPUs"),
        }
    });
    let (roots, inv, plan) = match planned {
        Ok(planned) => planned,
        Err(e) => {
            r.line(
                Level::Fail,
                true,
                "NVIDIA driver",
                format!("a GPU container would fail: {e:#}"),
            );
            return None;
        }
    };
    report_driver_files(r, &roots, &inv, &plan);
    let answers = report_kernel_driver(r, &roots);
    report_device_nodes(r, &roots, &plan, user);
    Some(answers)
}

/// The files a GPU container most needs, and what they are.
const EXPECTED: [(&str, &str); 3] = [
    ("nvidia-smi", "nvidia-smi (an ELF program)"),
    ("libnvidia-ml.so.1", "libnvidia-ml.so.1"),
    ("libcuda.so.1", "libcuda.so.1"),
];

/// The driver found, and the files a GPU container most needs.
fn report_driver_files(r: &mut Report, roots: &Roots, inv: &Inventory, plan: &Plan) {
    r.line(
        Level::Ok,
        true,
        "NVIDIA driver",
        format!(
            "{} ({} kernel module) under {}: {} GPU(s), {} driver files for utility,compute",
            inv.driver_version,
            inv.kernel_module.as_deref().unwrap_or("no"),
            roots.driver_root.display(),
            inv.gpus.len(),
            plan.mounts.len()
        ),
    );
    report_platform(r, inv);
    for note in &inv.notes {
        r.line(Level::Info, true, "driver files", note);
    }
    let has = |name: &str| {
        plan.mounts
            .iter()
            .any(|m| m.destination.file_name().is_some_and(|f| f == name))
    };
    // A Tegra's CSV says what containers get; it need not hold these.
    let expected: &[(&str, &str)] = if inv.tegra.is_some() { &[] } else { &EXPECTED };
    for (file, what) in expected.iter().copied() {
        if !has(file) {
            r.line(
                Level::Warn,
                true,
                "driver files",
                format!(
                    "no {what} found under {}: GPU containers will not have it; set --driver-root to where the driver is",
                    roots.driver_root.display()
                ),
            );
        }
    }
}

/// Whether a kernel driver answers: NVML, loaded in a child that cannot
/// change the host, says so.
fn report_kernel_driver(r: &mut Report, roots: &Roots) -> bool {
    let answers = inventory::discover(roots, Source::Auto).is_ok_and(|i| i.source == "nvml");
    let kernel = roots.proc_root.join("driver/nvidia/version");
    if answers {
        r.line(
            Level::Ok,
            true,
            "kernel driver",
            "loaded and answering (NVML)",
        );
    } else if roots.driver_root.join("etc/nv_tegra_release").exists() {
        r.line(
            Level::Info,
            true,
            "kernel driver",
            "Tegra: the integrated GPU has no /proc/driver/nvidia or NVML here; containers get what the CSV files list",
        );
    } else if roots.dev_root.join("dev/dxg").exists() {
        r.line(
            Level::Info,
            true,
            "kernel driver",
            "WSL2: the GPU is Windows', reached through /dev/dxg, and NVML does not answer: nvidia-smi in a container will exit 9",
        );
    } else if kernel.is_file() {
        r.line(
            Level::Info,
            true,
            "kernel driver",
            format!(
                "{} exists, but NVML does not initialise: nvidia-smi in a container will exit 9",
                kernel.display()
            ),
        );
    } else {
        r.line(
            Level::Info,
            true,
            "kernel driver",
            format!(
                "not loaded (no {}): containers get the driver files, and nvidia-smi exits 9",
                kernel.display()
            ),
        );
    }
    answers
}

/// The GPU device nodes, and whether this user can open them.
fn report_device_nodes(r: &mut Report, roots: &Roots, plan: &Plan, user: &UserIds) {
    if plan.device_nodes.is_empty() {
        r.line(
            Level::Fail,
            true,
            "device nodes",
            format!(
                "no /dev/nvidia* under {}: load the driver (nvidia-modprobe) or set --dev-root",
                roots.dev_root.display()
            ),
        );
        return;
    }
    let blocked: Vec<String> = plan
        .device_nodes
        .iter()
        .filter(|n| {
            let is_char = fs::metadata(&n.host_path).is_ok_and(|m| m.file_type().is_char_device());
            !is_char
                || nix::unistd::access(
                    &n.host_path,
                    nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
                )
                .is_err()
        })
        .map(|n| n.host_path.display().to_string())
        .collect();
    if blocked.is_empty() {
        r.line(
            Level::Ok,
            true,
            "device nodes",
            format!(
                "{} nodes, read-write for uid {}",
                plan.device_nodes.len(),
                user.uid
            ),
        );
    } else {
        r.line(
            Level::Fail,
            true,
            "device nodes",
            format!(
                "uid {} cannot open {}: make them mode 0666 (NVreg_DeviceFileMode=0666) or add the user to their group",
                user.uid,
                blocked.join(", ")
            ),
        );
    }
}

/// What kind of host this is, where it is not the usual one: WSL2's
/// driver store, a Tegra's CSV files.
fn report_platform(r: &mut Report, inv: &Inventory) {
    if let Some(wsl) = &inv.wsl {
        let dxcore = if wsl.dxcore.is_some() {
            "with"
        } else {
            "without"
        };
        r.line(
            Level::Ok,
            true,
            "WSL2",
            format!(
                "{} and the driver store {}, {dxcore} libdxcore.so",
                gpurun_gpu::inventory::wsl::DXG,
                wsl.stores_shown()
            ),
        );
    }
    if let Some(tegra) = &inv.tegra {
        r.line(
            Level::Ok,
            true,
            "Tegra",
            format!(
                "CSV mode: {} entries from {} in {}",
                tegra.list.entries.len(),
                tegra.csv_files.join(", "),
                gpurun_gpu::inventory::tegra::CSV_DIR
            ),
        );
    }
}
