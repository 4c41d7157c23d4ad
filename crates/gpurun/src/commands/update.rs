use std::{fs, io};

use anyhow::{Context, Result};
use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
};
use liboci_cli::Update;

use crate::{containers, Ctx};

/// Changes cgroup limits: `--resources FILE|-` (Docker sends JSON on stdin)
/// or the single-value flags.
pub fn update(ctx: &Ctx, args: Update) -> Result<()> {
    let container = containers::load(&ctx.root, &args.container_id)?;
    if !containers::has_cgroup(&container) {
        anyhow::bail!(
            "container {:?} has no cgroup (rootless without delegation), so its limits cannot change",
            args.container_id
        );
    }
    let resources: LinuxResources = match &args.resources {
        Some(path) if path.as_os_str() == "-" => serde_json::from_reader(io::stdin())
            .context("--resources -: stdin is not a LinuxResources JSON object")?,
        Some(path) => serde_json::from_reader(io::BufReader::new(
            fs::File::open(path).with_context(|| format!("open {}", path.display()))?,
        ))
        .with_context(|| format!("{} is not a LinuxResources JSON object", path.display()))?,
        None => {
            let mut builder = LinuxResourcesBuilder::default();
            if let Some(limit) = args.pids_limit {
                builder = builder.pids(LinuxPidsBuilder::default().limit(limit).build()?);
            }
            if args.memory.is_some()
                || args.memory_swap.is_some()
                || args.memory_reservation.is_some()
            {
                let mut memory = LinuxMemoryBuilder::default();
                if let Some(m) = args.memory {
                    memory = memory.limit(m as i64);
                }
                if let Some(s) = args.memory_swap {
                    memory = memory.swap(s);
                }
                if let Some(r) = args.memory_reservation {
                    memory = memory.reservation(r as i64);
                }
                builder = builder.memory(memory.build()?);
            }
            if args.cpu_quota.is_some() || args.cpu_period.is_some() || args.cpu_share.is_some() {
                let mut cpu = LinuxCpuBuilder::default();
                if let Some(q) = args.cpu_quota {
                    cpu = cpu.quota(q as i64);
                }
                if let Some(p) = args.cpu_period {
                    cpu = cpu.period(p);
                }
                if let Some(s) = args.cpu_share {
                    cpu = cpu.shares(s);
                }
                builder = builder.cpu(cpu.build()?);
            }
            builder.build()?
        }
    };
    let manager = containers::cgroup_manager(&container)?;
    manager
        .apply(&ControllerOpt {
            resources: &resources,
            disable_oom_killer: false,
            oom_score_adj: None,
            freezer_state: None,
        })
        .with_context(|| format!("update container {:?}", args.container_id))
}
