//! Checkpoint and restore of GPU containers: what `checkpoint.rs` and
//! `restore.rs` do around CRIU when the container has NVIDIA devices.
//! Checkpoint saves the CUDA processes' state through the driver
//! (`cuda.rs`) and records the driver and GPUs; restore checks them,
//! CRIU brings the processes back, and the driver gives them their GPUs.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use gpurun_gpu::checkpoint::{self as record, Record, RecordedGpu};
use gpurun_gpu::flow;
use gpurun_gpu::inventory::Inventory;
use libcgroups::common::{CgroupManager, FreezerState};
use libcontainer::container::Container;
use libcontainer::oci_spec::runtime::Spec;

use super::cuda::{self, Driver, GpuPair};
use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, spec::driver_paths};

/// CRIU 4.0 is the first that checkpoints processes which used a GPU.
pub const CRIU_MINIMUM: u32 = 40000;

/// A GPU container's driver and GPUs, found before anything is touched.
pub struct GpuContainer {
    pub inventory: Inventory,
    pub driver: Driver,
    pub gpus: Vec<RecordedGpu>,
}

/// The inventory (procfs facts) and the loaded driver, for a container
/// with NVIDIA devices; `None` for one without.
pub fn find(ctx: &Ctx, spec: &Spec) -> Result<Option<GpuContainer>> {
    if !record::has_nvidia_devices(spec) {
        return Ok(None);
    }
    if let Some(why) = record::refusal(spec) {
        bail!("a GPU container is checkpointed through the NVIDIA driver, and this one cannot be: {why}");
    }
    let roots = driver_paths::resolve(&ctx.settings)?;
    let inventory = flow::inventory(&roots, Some(&ctx.root.join(flow::CACHE_DIR)))?;
    let driver = Driver::load(&inventory)?;
    let gpus = record::recorded_gpus(&record::gpu_minors(spec), &inventory);
    Ok(Some(GpuContainer {
        inventory,
        driver,
        gpus,
    }))
}

/// Runs `f` with the container's cgroup thawed, and frozen again after
/// if it was paused: the driver works through a thread in each CUDA
/// process, which must run.
pub fn thawed<T>(container: &Container, paused: bool, f: impl FnOnce() -> T) -> Result<T> {
    if !paused {
        return Ok(f());
    }
    let manager = cgroups::container::manager(container)?;
    manager
        .freeze(FreezerState::Thawed)
        .context("thaw the paused container for its CUDA processes")?;
    let result = f();
    manager
        .freeze(FreezerState::Frozen)
        .context("pause the container again")?;
    Ok(result)
}

/// Locks and checkpoints every CUDA process in the container's cgroup.
pub fn save<'a>(
    gpu: &'a GpuContainer,
    container: &Container,
    lock_timeout: Duration,
) -> Result<cuda::Saved<'a>> {
    let mut pids: Vec<i32> = cgroups::container::manager(container)?
        .get_all_pids()?
        .iter()
        .map(|p| p.as_raw())
        .collect();
    pids.sort_unstable();
    cuda::save(&gpu.driver, &pids, lock_timeout)
}

pub fn write_record(gpu: &GpuContainer, images: &Path, cuda_processes: usize) -> Result<()> {
    let record = Record {
        driver_version: gpu.inventory.driver_version.clone(),
        gpus: gpu.gpus.clone(),
        cuda_processes,
        image_bytes: 0,
    };
    write(images, &record)
}

fn write(images: &Path, record: &Record) -> Result<()> {
    fs::write(images.join(record::RECORD), serde_json::to_vec(record)?)
        .context("record the checkpoint's driver and GPUs")
}

/// After the dump: the images' size goes into the record and the log.
pub fn record_size(images: &Path) -> Result<u64> {
    let bytes = dir_size(images);
    let path = images.join(record::RECORD);
    let mut record: Record = serde_json::from_slice(&fs::read(&path)?)?;
    record.image_bytes = bytes;
    write(images, &record)?;
    Ok(bytes)
}

fn dir_size(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// What restore needs for a GPU checkpoint: the driver, and the pairs
/// that move the processes onto the container's new GPUs.
pub struct GpuRestore {
    pub driver: Driver,
    pub record: Record,
    pub pairs: Vec<(String, String)>,
    gpus: Vec<RecordedGpu>,
}

/// Reads the checkpoint's record, if it has one, and checks that this
/// host and the new container can take it: the same driver version, as
/// many GPUs of the same models, a driver that moves processes between
/// GPUs where they differ. Runs before CRIU, so a refusal leaves nothing.
pub fn check_restore(ctx: &Ctx, spec: &Spec, images: &Path) -> Result<Option<GpuRestore>> {
    let path = images.join(record::RECORD);
    let Ok(text) = fs::read(&path) else {
        return Ok(None);
    };
    let record: Record = serde_json::from_slice(&text)
        .with_context(|| format!("read the checkpoint's GPU record {}", path.display()))?;
    let Some(gpu) = find(ctx, spec)? else {
        bail!(
            "the checkpoint in {} is of a container with NVIDIA GPUs and the restored one gets none: request its GPUs in the bundle (NVIDIA_VISIBLE_DEVICES or a CDI device)",
            images.display()
        );
    };
    record::check_driver(&record, &gpu.inventory, images)?;
    let pairs = record::gpu_pairs(&record.gpus, &gpu.gpus)?;
    if !pairs.is_empty() {
        if !gpu.driver.takes_gpu_pairs() {
            bail!(
                "NVIDIA driver {} cannot move a CUDA process onto other GPUs (that needs driver 580 or later): restore the container onto the GPUs it had ({})",
                gpu.driver.version,
                record.gpus.iter().map(|g| g.uuid.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        if record::binds_nvidia_nodes(spec) {
            bail!(
                "a container in a user namespace restores only onto the GPUs it had ({}): give it those GPUs",
                record.gpus.iter().map(|g| g.uuid.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(Some(GpuRestore {
        driver: gpu.driver,
        record,
        pairs,
        gpus: gpu.gpus,
    }))
}

impl GpuRestore {
    /// After CRIU's restore, with the tree in the new cgroup: the new
    /// GPUs' nodes replace the old ones in the container's /dev (CRIU
    /// brought back the old /dev), then each checkpointed CUDA process is
    /// restored onto its GPUs and unlocked.
    pub fn resume(&self, init: i32, pids: &[i32]) -> Result<()> {
        if !self.pairs.is_empty() {
            replace_nodes(init, &self.record.gpus, &self.gpus)?;
        }
        let mut pairs: Vec<GpuPair> = self
            .pairs
            .iter()
            .map(|(old, new)| {
                Ok(GpuPair {
                    old_uuid: record::uuid_bytes(old).with_context(|| format!("GPU UUID {old}"))?,
                    new_uuid: record::uuid_bytes(new).with_context(|| format!("GPU UUID {new}"))?,
                })
            })
            .collect::<Result<_>>()?;
        let done = cuda::resume_restored(&self.driver, pids, &mut pairs)?;
        if done != self.record.cuda_processes {
            bail!(
                "{} CUDA process(es) were checkpointed and {done} came back checkpointed",
                self.record.cuda_processes
            );
        }
        Ok(())
    }
}

/// In the restored container's /dev, the old GPUs' nodes go and the new
/// GPUs' are made (the device rules allow only the new ones).
fn replace_nodes(init: i32, old: &[RecordedGpu], new: &[RecordedGpu]) -> Result<()> {
    use nix::sys::stat::{makedev, mknodat, Mode, SFlag};
    use nix::unistd::{unlinkat, UnlinkatFlags};

    let root = safe_fs::Rootfs::open(Path::new(&format!("/proc/{init}/root")))
        .context("open the restored container's root")?;
    let dev = root
        .open_in(Path::new("/dev"), libc::O_DIRECTORY)
        .context("open the restored container's /dev")?;
    for gpu in old {
        let name = format!("nvidia{}", gpu.minor);
        let _ = unlinkat(
            Some(dev.as_raw_fd()),
            name.as_str(),
            UnlinkatFlags::NoRemoveDir,
        );
    }
    for gpu in new {
        let name = format!("nvidia{}", gpu.minor);
        mknodat(
            Some(dev.as_raw_fd()),
            name.as_str(),
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(195, u64::from(gpu.minor)),
        )
        .with_context(|| format!("make /dev/{name} in the restored container"))?;
        // As libcontainer makes them: read and write for all (no umask).
        nix::sys::stat::fchmodat(
            Some(dev.as_raw_fd()),
            name.as_str(),
            Mode::from_bits_truncate(0o666),
            nix::sys::stat::FchmodatFlags::NoFollowSymlink,
        )
        .with_context(|| format!("set the mode of /dev/{name} in the restored container"))?;
    }
    Ok(())
}
