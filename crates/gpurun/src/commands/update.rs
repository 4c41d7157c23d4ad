//! `gpurun update`: change a running container's cgroup limits, from
//! `--resources FILE|-` (Docker sends LinuxResources JSON on stdin) or from
//! runc's single-value flags.

use std::{fs, io};

use anyhow::{bail, Context, Result};
use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::oci_spec::runtime::{
    LinuxBlockIoBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources,
    LinuxResourcesBuilder,
};

use crate::cli::UpdateArgs;
use crate::runtime::{containers, context::Ctx};

fn from_flags(args: &UpdateArgs) -> Result<LinuxResources> {
    if args.l3_cache_schema.is_some() || args.mem_bw_schema.is_some() {
        bail!("--l3-cache-schema and --mem-bw-schema need Intel RDT, which gpurun does not manage");
    }
    let mut builder = LinuxResourcesBuilder::default();
    if let Some(limit) = args.pids_limit {
        builder = builder.pids(LinuxPidsBuilder::default().limit(limit).build()?);
    }
    if args.memory.is_some() || args.memory_swap.is_some() || args.memory_reservation.is_some() {
        let mut memory = LinuxMemoryBuilder::default();
        if let Some(m) = args.memory {
            memory = memory.limit(m);
        }
        if let Some(s) = args.memory_swap {
            memory = memory.swap(s);
        }
        if let Some(r) = args.memory_reservation {
            memory = memory.reservation(r);
        }
        builder = builder.memory(memory.build()?);
    }
    let cpu_flags = [
        args.cpu_quota.is_some(),
        args.cpu_period.is_some(),
        args.cpu_share.is_some(),
        args.cpu_rt_period.is_some(),
        args.cpu_rt_runtime.is_some(),
        args.cpuset_cpus.is_some(),
        args.cpuset_mems.is_some(),
    ];
    if cpu_flags.contains(&true) {
        let mut cpu = LinuxCpuBuilder::default();
        if let Some(q) = args.cpu_quota {
            cpu = cpu.quota(q);
        }
        if let Some(p) = args.cpu_period {
            cpu = cpu.period(p);
        }
        if let Some(s) = args.cpu_share {
            cpu = cpu.shares(s);
        }
        if let Some(p) = args.cpu_rt_period {
            cpu = cpu.realtime_period(p);
        }
        if let Some(r) = args.cpu_rt_runtime {
            cpu = cpu.realtime_runtime(r);
        }
        if let Some(c) = &args.cpuset_cpus {
            cpu = cpu.cpus(c.clone());
        }
        if let Some(m) = &args.cpuset_mems {
            cpu = cpu.mems(m.clone());
        }
        builder = builder.cpu(cpu.build()?);
    }
    if let Some(w) = args.blkio_weight {
        builder = builder.block_io(LinuxBlockIoBuilder::default().weight(w).build()?);
    }
    Ok(builder.build()?)
}

pub fn update(ctx: &Ctx, args: UpdateArgs) -> Result<()> {
    let container = containers::load(&ctx.root, &args.container_id)?;
    if !containers::has_cgroup(&container) {
        bail!(
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
        None => from_flags(&args)?,
    };
    // A memory update rewrites memory.oom_control: keep what the container
    // was created with unless the update says otherwise.
    let disable_oom_killer = resources
        .memory()
        .as_ref()
        .and_then(|m| m.disable_oom_killer())
        .or_else(|| {
            crate::runtime::prepare::load_spec(&container.root)
                .ok()?
                .linux()
                .as_ref()?
                .resources()
                .as_ref()?
                .memory()
                .as_ref()?
                .disable_oom_killer()
        })
        .unwrap_or(false);
    let manager = containers::cgroup_manager(&container)?;
    manager
        .apply(&ControllerOpt {
            resources: &resources,
            disable_oom_killer,
            oom_score_adj: None,
            freezer_state: None,
        })
        .with_context(|| format!("update container {:?}", args.container_id))
}
