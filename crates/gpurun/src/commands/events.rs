//! `gpurun events`: runc's event stream. One JSON object a line,
//! `{"type":"stats","id":ID,"data":{...}}` every `--interval` (a Go
//! duration: `5s`, `100ms`, `1m`), `{"type":"oom","id":ID}` when the
//! kernel's OOM killer acts in the container's cgroup, and with `--stats` a
//! single stats event. The stream ends when the container stops.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libcgroups::common::{CgroupManager, CgroupSetup};
use libcgroups::stats::{BlkioDeviceStat, MemoryData, Stats};
use libcontainer::container::{Container, ContainerStatus};
use serde_json::{json, Map, Value};

use crate::cli::EventsArgs;
use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, state::containers};

fn entry(d: &MemoryData) -> Value {
    json!({"limit": d.limit, "usage": d.usage, "max": d.max_usage, "failcnt": d.fail_count})
}

fn blkio(list: &[BlkioDeviceStat]) -> Value {
    list.iter()
        .map(|s| json!({"major": s.major, "minor": s.minor, "op": s.op_type.clone().unwrap_or_default(), "value": s.value}))
        .collect()
}

/// libcgroups' stats in runc's `events` shape (libcontainer/events types).
fn runc_stats(s: &Stats) -> Value {
    let mut hugetlb = Map::new();
    for (size, h) in &s.hugetlb {
        hugetlb.insert(
            size.clone(),
            json!({"usage": h.usage, "max": h.max_usage, "failcnt": h.fail_count}),
        );
    }
    json!({
        "cpu": {
            "usage": {
                "total": s.cpu.usage.usage_total,
                "percpu": s.cpu.usage.per_core_usage_total,
                "kernel": s.cpu.usage.usage_kernel,
                "user": s.cpu.usage.usage_user,
            },
            "throttling": {
                "periods": s.cpu.throttling.periods,
                "throttledPeriods": s.cpu.throttling.throttled_periods,
                "throttledTime": s.cpu.throttling.throttled_time,
            },
        },
        "memory": {
            "cache": s.memory.cache,
            "usage": entry(&s.memory.memory),
            "swap": entry(&s.memory.memswap),
            "kernel": entry(&s.memory.kernel),
            "kernelTCP": entry(&s.memory.kernel_tcp),
            "raw": s.memory.stats,
        },
        "pids": {"current": s.pids.current, "limit": s.pids.limit},
        "blkio": {
            "ioServiceBytesRecursive": blkio(&s.blkio.service_bytes),
            "ioServicedRecursive": blkio(&s.blkio.serviced),
            "ioQueueRecursive": blkio(&s.blkio.queued),
            "ioServiceTimeRecursive": blkio(&s.blkio.service_time),
            "ioWaitTimeRecursive": blkio(&s.blkio.wait_time),
            "ioMergedRecursive": blkio(&s.blkio.merged),
            "ioTimeRecursive": blkio(&s.blkio.time),
            "sectorsRecursive": blkio(&s.blkio.sectors),
        },
        "hugetlb": hugetlb,
    })
}

fn emit(kind: &str, id: &str, data: Option<Value>) -> Result<()> {
    let mut event = json!({"type": kind, "id": id});
    if let Some(data) = data {
        event["data"] = data;
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{event}").context("write the event")?;
    out.flush().context("write the event")
}

/// What tells of OOM kills in a cgroup.
enum OomWatch {
    /// cgroup v1: an eventfd registered on memory.oom_control.
    V1(OwnedFd),
    /// cgroup v2: the oom_kill count in memory.events.
    V2 {
        events: PathBuf,
        seen: u64,
    },
    None,
}

fn oom_kills(events: &Path) -> u64 {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn oom_watch(cgroup: &Path) -> OomWatch {
    let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
    match libcgroups::common::get_cgroup_setup() {
        Ok(CgroupSetup::Unified) => {
            let events = Path::new("/sys/fs/cgroup")
                .join(relative)
                .join("memory.events");
            let seen = oom_kills(&events);
            OomWatch::V2 { events, seen }
        }
        Ok(_) => {
            let dir = Path::new("/sys/fs/cgroup/memory").join(relative);
            let Ok(control) = std::fs::File::open(dir.join("memory.oom_control")) else {
                return OomWatch::None;
            };
            // SAFETY: eventfd returns a new descriptor or -1.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
            if efd < 0 {
                return OomWatch::None;
            }
            // SAFETY: a fresh descriptor owned here.
            let efd = unsafe { OwnedFd::from_raw_fd(efd) };
            let line = format!("{} {}", efd.as_raw_fd(), control.as_raw_fd());
            match std::fs::write(dir.join("cgroup.event_control"), line) {
                Ok(()) => OomWatch::V1(efd),
                Err(_) => OomWatch::None,
            }
        }
        Err(_) => OomWatch::None,
    }
}

/// Waits up to `timeout` for an OOM kill; true if one happened.
fn wait_for_oom(watch: &mut OomWatch, timeout: Duration) -> bool {
    match watch {
        OomWatch::V1(efd) => {
            let mut poll = libc::pollfd {
                fd: efd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut poll, 1, ms) } > 0 {
                let mut count = [0u8; 8];
                // SAFETY: reading the eventfd's 8-byte counter.
                unsafe { libc::read(efd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
                return true;
            }
            false
        }
        OomWatch::V2 { events, seen } => {
            let deadline = Instant::now() + timeout;
            loop {
                let now = oom_kills(events);
                if now > *seen {
                    *seen = now;
                    return true;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
        }
        OomWatch::None => {
            std::thread::sleep(timeout);
            false
        }
    }
}

fn running(container: &mut Container) -> bool {
    container.refresh_status().is_ok() && container.status() == ContainerStatus::Running
}

pub fn events(ctx: &Ctx, args: EventsArgs) -> Result<()> {
    let id = &args.container_id;
    let mut container = containers::load(&ctx.root, id)?;
    if !running(&mut container) {
        bail!(
            "container {id:?} is {}: events needs a running container",
            containers::status_name(&container)
        );
    }
    if !cgroups::container::has_cgroup(&container) {
        bail!("container {id:?} has no cgroup (rootless without delegation): it has no stats or OOM events");
    }
    let manager = cgroups::container::manager(&container)?;
    let stats = |m: &libcgroups::common::AnyCgroupManager| -> Result<Value> {
        Ok(runc_stats(
            &m.stats()
                .with_context(|| format!("stats of container {id:?}"))?,
        ))
    };
    if args.stats {
        return emit("stats", id, Some(stats(&manager)?));
    }
    let mut watch = oom_watch(&cgroups::container::path(&container)?);
    let mut next_stats = Instant::now();
    while running(&mut container) {
        let now = Instant::now();
        if now >= next_stats {
            emit("stats", id, Some(stats(&manager)?))?;
            next_stats = now + args.interval;
        }
        let wait = next_stats
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1));
        if wait_for_oom(&mut watch, wait) {
            emit("oom", id, None)?;
        }
    }
    Ok(())
}
