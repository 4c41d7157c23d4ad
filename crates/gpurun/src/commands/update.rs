//! `gpurun update`: change a running container's cgroup limits, from
//! `--resources FILE|-` (Docker sends LinuxResources JSON on stdin) or from
//! runc's single-value flags.

use std::{fs, io};

use anyhow::{bail, Context, Result};
use libcgroups::common::{AnyCgroupManager, CgroupManager, ControllerOpt};
use libcontainer::oci_spec::runtime::{
    LinuxBlockIoBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources,
    LinuxResourcesBuilder,
};

use crate::cli::UpdateArgs;
use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, state::containers};

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
    if !cgroups::container::has_cgroup(&container) {
        bail!(
            "container {:?} has no cgroup (rootless without delegation), so its limits cannot change",
            args.container_id
        );
    }
    let asked: LinuxResources = match &args.resources {
        Some(path) if path.as_os_str() == "-" => serde_json::from_reader(io::stdin())
            .context("--resources -: stdin is not a LinuxResources JSON object")?,
        Some(path) => serde_json::from_reader(io::BufReader::new(
            fs::File::open(path).with_context(|| format!("open {}", path.display()))?,
        ))
        .with_context(|| format!("{} is not a LinuxResources JSON object", path.display()))?,
        None => from_flags(&args)?,
    };
    let mut resources = zeros_unset(asked);
    let created_with = crate::runtime::spec::prepare::load_spec(&container.root)
        .ok()
        .and_then(|spec| spec.linux().as_ref()?.resources().clone())
        .unwrap_or_default();
    // A memory update rewrites memory.oom_control: keep what the container
    // was created with unless the update says otherwise.
    let disable_oom_killer = resources
        .memory()
        .as_ref()
        .and_then(|m| m.disable_oom_killer())
        .or_else(|| created_with.memory().as_ref()?.disable_oom_killer())
        .unwrap_or(false);
    let manager = cgroups::container::manager(&container)?;
    // An update never changes device rules (runc's takes none), but the v2
    // and systemd managers rebuild the device program and the unit's list
    // from the rules they are given: give them the container's own, or
    // its GPUs would be lost. v1 only adds its allow rules again, which
    // needs nothing and would briefly deny everything if re-applied.
    if !matches!(manager, AnyCgroupManager::V1(_)) {
        resources.set_devices(created_with.devices().clone());
    }
    manager
        .apply(&ControllerOpt {
            resources: &resources,
            disable_oom_killer,
            oom_score_adj: None,
            freezer_state: None,
        })
        .with_context(|| format!("update container {:?}", args.container_id))
}

/// An update as runc reads one: Docker sends every field, 0 (or "") where
/// the user set nothing, so a 0 leaves that limit as it is. -1 stays "no
/// limit".
fn zeros_unset(mut resources: LinuxResources) -> LinuxResources {
    fn set<T: PartialEq + Default>(value: Option<T>) -> Option<T> {
        value.filter(|v| *v != T::default())
    }
    if let Some(mut memory) = *resources.memory() {
        memory.set_limit(set(memory.limit()));
        memory.set_reservation(set(memory.reservation()));
        memory.set_swap(set(memory.swap()));
        memory.set_kernel(set(memory.kernel()));
        memory.set_kernel_tcp(set(memory.kernel_tcp()));
        resources.set_memory(Some(memory));
    }
    if let Some(cpu) = resources.cpu().clone() {
        let mut cpu = cpu;
        cpu.set_shares(set(cpu.shares()));
        cpu.set_quota(set(cpu.quota()));
        cpu.set_period(set(cpu.period()));
        cpu.set_realtime_runtime(set(cpu.realtime_runtime()));
        cpu.set_realtime_period(set(cpu.realtime_period()));
        cpu.set_cpus(set(cpu.cpus().clone()));
        cpu.set_mems(set(cpu.mems().clone()));
        resources.set_cpu(Some(cpu));
    }
    if resources.pids().as_ref().is_some_and(|p| p.limit() == 0) {
        resources.set_pids(None);
    }
    if let Some(block_io) = resources.block_io().clone() {
        let mut block_io = block_io;
        block_io.set_weight(set(block_io.weight()));
        resources.set_block_io(Some(block_io));
    }
    resources
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockers_zeros_leave_limits_alone() {
        // What dockerd 20.10 sends for `docker update --memory 128m` on a
        // container created without limits.
        let sent = r#"{"memory":{"limit":134217728,"reservation":0,"swap":268435456,"kernel":0,"kernelTCP":0,"swappiness":null,"disableOOMKiller":false},
            "cpu":{"shares":0,"quota":0,"period":0,"realtimeRuntime":0,"realtimePeriod":0,"cpus":"","mems":""},
            "pids":{"limit":0},"blockIO":{"weight":0}}"#;
        let resources = zeros_unset(serde_json::from_str(sent).unwrap());
        let memory = (*resources.memory()).unwrap();
        assert_eq!(memory.limit(), Some(134217728));
        assert_eq!(memory.swap(), Some(268435456));
        assert_eq!(memory.reservation(), None);
        assert_eq!(memory.kernel(), None);
        let cpu = resources.cpu().clone().unwrap();
        assert_eq!(
            (cpu.shares(), cpu.quota(), cpu.period()),
            (None, None, None)
        );
        assert_eq!((cpu.cpus().clone(), cpu.mems().clone()), (None, None));
        assert!(resources.pids().is_none());
        assert_eq!(resources.block_io().clone().unwrap().weight(), None);
    }

    #[test]
    fn minus_one_still_means_no_limit() {
        let sent = r#"{"memory":{"limit":-1,"swap":-1},"pids":{"limit":-1},"cpu":{"quota":-1}}"#;
        let resources = zeros_unset(serde_json::from_str(sent).unwrap());
        assert_eq!((*resources.memory()).unwrap().limit(), Some(-1));
        assert_eq!((*resources.memory()).unwrap().swap(), Some(-1));
        assert_eq!((*resources.pids()).unwrap().limit(), -1);
        assert_eq!(resources.cpu().clone().unwrap().quota(), Some(-1));
    }
}
