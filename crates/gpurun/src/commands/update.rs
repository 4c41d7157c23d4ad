//! `gpurun update`: change a running container's cgroup limits, from
//! `--resources FILE|-` (Docker sends LinuxResources JSON on stdin) or from
//! runc's single-value flags.

use std::{fs, io};

use anyhow::{bail, Context, Result};
use clap::Args;
use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::oci_spec::runtime::{
    LinuxBlockIoBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources,
    LinuxResourcesBuilder,
};

use crate::{containers, context::Ctx};

/// runc's `update` flags. Values that may be -1 (no limit) are signed.
#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// A file with LinuxResources JSON, or - for stdin
    #[arg(short, long)]
    pub resources: Option<std::path::PathBuf>,
    /// Relative block I/O weight (10-1000)
    #[arg(long)]
    pub blkio_weight: Option<u16>,
    /// CPU CFS period in microseconds
    #[arg(long)]
    pub cpu_period: Option<u64>,
    /// CPU CFS quota in microseconds (-1: no limit)
    #[arg(long, allow_hyphen_values = true)]
    pub cpu_quota: Option<i64>,
    /// CPU realtime period in microseconds
    #[arg(long)]
    pub cpu_rt_period: Option<u64>,
    /// CPU realtime runtime in microseconds (-1: no limit)
    #[arg(long, allow_hyphen_values = true)]
    pub cpu_rt_runtime: Option<i64>,
    /// CPU shares (relative weight)
    #[arg(long)]
    pub cpu_share: Option<u64>,
    /// CPUs the container may use (0-3, 0,1)
    #[arg(long)]
    pub cpuset_cpus: Option<String>,
    /// Memory nodes the container may use (0-3, 0,1)
    #[arg(long)]
    pub cpuset_mems: Option<String>,
    /// Memory limit in bytes, with an optional k, m or g (-1: no limit)
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory: Option<i64>,
    /// Memory soft limit in bytes, with an optional k, m or g
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory_reservation: Option<i64>,
    /// Memory plus swap limit in bytes, with an optional k, m or g (-1: no limit)
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory_swap: Option<i64>,
    /// Most tasks the container may have (-1 or 0: no limit)
    #[arg(long, allow_hyphen_values = true)]
    pub pids_limit: Option<i64>,
    /// Intel RDT/CAT L3 cache schema
    #[arg(long)]
    pub l3_cache_schema: Option<String>,
    /// Intel RDT/MBA memory bandwidth schema
    #[arg(long)]
    pub mem_bw_schema: Option<String>,
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub container_id: String,
}

/// "512", "64k", "100M", "2g" or "-1".
fn parse_size(text: &str) -> Result<i64, String> {
    if text == "-1" {
        return Ok(-1);
    }
    let lower = text.to_ascii_lowercase();
    let trimmed = lower.trim_end_matches('b');
    let (digits, unit) = match trimmed.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&trimmed[..i], c),
        _ => (trimmed, ' '),
    };
    let factor: i64 = match unit {
        ' ' => 1,
        'k' => 1 << 10,
        'm' => 1 << 20,
        'g' => 1 << 30,
        't' => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?}: use bytes, or a number with k, m, g or t"
            ))
        }
    };
    digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|n| *n >= 0)
        .ok_or_else(|| format!("{text:?}: use bytes, or a number with k, m, g or t"))
}

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
            crate::prepare::load_spec(&container.root)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_runc_reads_them() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("-1"), Ok(-1));
        assert!(parse_size("-2").is_err());
        assert!(parse_size("12x").is_err());
    }
}
