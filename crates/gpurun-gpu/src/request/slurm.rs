//! The GPUs Slurm gave a job step, so that gpurun inside `srun` never hands
//! a container more than that.
//!
//! Slurm names its GPUs three ways, tried in this order:
//! - `SLURM_STEP_GPUS` / `SLURM_JOB_GPUS`: the numbers of the device files
//!   in gres.conf (`/dev/nvidia2` is 2), that is, device minors;
//! - `CUDA_VISIBLE_DEVICES`: with `ConstrainDevices=yes` these are ordinals
//!   into the GPUs the step's device cgroup lets it open, so they only mean
//!   something together with that list.
//!
//! Under `srun --container`, slurmstepd starts the runtime with slurmd's
//! environment (none of those variables), but in the step's cgroup: there
//! the step is read from the process's own cgroup, and its GPUs are those
//! the step's device cgroup (`ConstrainDevices=yes`) lets it open.

use anyhow::{bail, Result};
use serde::Serialize;

use crate::formats::devlist::{DeviceRef, DeviceSelection};
use crate::inventory::Gpu;

/// How a Slurm step names the GPUs it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum Allocated {
    /// Device minors, from SLURM_STEP_GPUS or SLURM_JOB_GPUS.
    Minors { minors: Vec<u32> },
    /// CUDA_VISIBLE_DEVICES entries: ordinals among the GPUs the step may
    /// open, or GPU UUIDs.
    CudaVisible { entries: Vec<String> },
    /// A Slurm job with no GPU at all.
    Nothing,
    /// Started by slurmstepd in a step's cgroup: the GPUs that cgroup lets
    /// this process open.
    StepCgroup { cgroup: String },
}

/// The Slurm job step whose cgroup a process runs in, read from its
/// `/proc/<pid>/cgroup`: Slurm's cgroup plugins name them
/// `.../job_<id>/step_<id>/...` (v1: `/slurm[_<node>]/uid_<uid>/job_<id>/
/// step_<id>/task_<n>` in the hierarchies Slurm constrains; v2:
/// `/system.slice/slurmstepd.scope/job_<id>/step_<id>/user/task_<n>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCgroup {
    pub job_id: String,
    /// The step's cgroup, up to and including `step_<id>`: in the v1
    /// devices hierarchy, or in the unified one.
    pub step: String,
    /// The process's own cgroup there (its task's).
    pub own: String,
    pub unified: bool,
}

impl StepCgroup {
    /// From the text of `/proc/<pid>/cgroup`; `None` outside a Slurm step.
    pub fn parse(proc_cgroup: &str) -> Option<StepCgroup> {
        let line = |wanted: &dyn Fn(&str, &str) -> bool| {
            proc_cgroup.lines().find_map(|l| {
                let mut fields = l.splitn(3, ':');
                let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                wanted(id, controllers).then(|| path.to_owned())
            })
        };
        // v1: the devices hierarchy, which ConstrainDevices uses; else the
        // unified one (pure v2).
        let (own, unified) = match line(&|_, c| c.split(',').any(|n| n == "devices")) {
            Some(path) => (path, false),
            None => (line(&|id, c| id == "0" && c.is_empty())?, true),
        };
        let parts: Vec<&str> = own.split('/').collect();
        let job = parts.windows(2).position(|w| {
            w[0].strip_prefix("job_")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && w[1].starts_with("step_")
        })?;
        Some(StepCgroup {
            job_id: parts[job]["job_".len()..].to_owned(),
            step: parts[..job + 2].join("/"),
            own: own.clone(),
            unified,
        })
    }

    /// Where a container this process makes goes, below the step: on v1
    /// beside the tasks in the step's cgroup; on v2 a leaf beside the
    /// task's (a v2 cgroup holding processes can have no controlled
    /// children).
    pub fn container_cgroup(&self, id: &str) -> String {
        let parent = if self.unified {
            self.own
                .rsplit_once('/')
                .map(|(parent, _)| parent)
                .filter(|parent| parent.len() > self.step.len())
                .unwrap_or(&self.step)
        } else {
            &self.step
        };
        format!("{parent}/gpurun-{id}")
    }
}

/// A Slurm job step's GPU allocation, and the variable it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allocation {
    pub job_id: String,
    /// `NAME=value`, for messages.
    pub source: String,
    pub gpus: Allocated,
}

/// Reads the allocation from an environment; `None` outside a Slurm job.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Allocation>> {
    let Some(job_id) = get("SLURM_JOB_ID").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    for var in ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"] {
        if let Some(value) = get(var) {
            let minors = value
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim().parse::<u32>().map_err(|_| {
                        anyhow::anyhow!("{var}={value:?} is not a list of GPU numbers")
                    })
                })
                .collect::<Result<Vec<u32>>>()?;
            return Ok(Some(Allocation {
                job_id,
                source: format!("{var}={value}"),
                gpus: Allocated::Minors { minors },
            }));
        }
    }
    if let Some(value) = get("CUDA_VISIBLE_DEVICES") {
        let entries: Vec<String> = value
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty() && s != "NoDevFiles")
            .collect();
        return Ok(Some(Allocation {
            job_id,
            source: format!("CUDA_VISIBLE_DEVICES={value}"),
            gpus: Allocated::CudaVisible { entries },
        }));
    }
    Ok(Some(Allocation {
        job_id,
        source: "no SLURM_STEP_GPUS, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES".to_owned(),
        gpus: Allocated::Nothing,
    }))
}

/// The allocation of the step whose cgroup this is.
pub fn from_step_cgroup(step: &StepCgroup) -> Allocation {
    Allocation {
        job_id: step.job_id.clone(),
        source: format!("the device cgroup of step {}", step.step),
        gpus: Allocated::StepCgroup {
            cgroup: step.step.clone(),
        },
    }
}

impl Allocation {
    /// The NVML indexes of the allocated GPUs. `may_open` tells whether the
    /// step's device cgroup lets it open a GPU's node; it only matters for
    /// CUDA_VISIBLE_DEVICES ordinals.
    pub fn gpu_indexes(&self, gpus: &[Gpu], may_open: impl Fn(&Gpu) -> bool) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        match &self.gpus {
            Allocated::Nothing => {}
            Allocated::StepCgroup { .. } => {
                out.extend(gpus.iter().filter(|g| may_open(g)).map(|g| g.index));
            }
            Allocated::Minors { minors } => {
                for minor in minors {
                    let gpu = gpus.iter().find(|g| g.minor == *minor).ok_or_else(|| {
                        anyhow::anyhow!(
                            "Slurm allocated GPU {minor} ({}), but this host has no /dev/nvidia{minor}: check gres.conf",
                            self.source
                        )
                    })?;
                    out.push(gpu.index);
                }
            }
            Allocated::CudaVisible { entries } => {
                let openable: Vec<&Gpu> = gpus.iter().filter(|g| may_open(g)).collect();
                for entry in entries {
                    // An ordinal, or a UUID (GPU-...).
                    let gpu = match entry.parse::<usize>() {
                        Ok(n) => openable.get(n).copied(),
                        Err(_) => gpus.iter().find(|g| g.uuid.eq_ignore_ascii_case(entry)),
                    };
                    let gpu = gpu.ok_or_else(|| {
                        anyhow::anyhow!(
                            "Slurm's {} names GPU {entry:?}, which this step cannot open",
                            self.source
                        )
                    })?;
                    out.push(gpu.index);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// The request a container may have inside this allocation. `explicit` says
/// whether the user asked (--gpus or NVIDIA_VISIBLE_DEVICES): without a
/// request, the container gets exactly the allocated GPUs; `all` means all
/// of those; a GPU outside them is an error.
pub fn constrain(
    requested: &DeviceSelection,
    explicit: bool,
    allowed: &[u32],
    selected: &[u32],
    alloc: &Allocation,
) -> Result<DeviceSelection> {
    let as_list = |indexes: &[u32]| {
        DeviceSelection::List(
            indexes
                .iter()
                .map(|&index| DeviceRef::Index { index })
                .collect(),
        )
    };
    match requested {
        DeviceSelection::Void if !explicit => Ok(if allowed.is_empty() {
            DeviceSelection::Void
        } else {
            as_list(allowed)
        }),
        DeviceSelection::Void | DeviceSelection::None => Ok(requested.clone()),
        DeviceSelection::All if allowed.is_empty() => bail!(
            "Slurm job {} has no GPUs ({}): ask for them with srun --gres=gpu:N",
            alloc.job_id,
            alloc.source
        ),
        DeviceSelection::All => Ok(as_list(allowed)),
        DeviceSelection::List(_) => {
            if let Some(outside) = selected.iter().find(|i| !allowed.contains(i)) {
                bail!(
                    "GPU {outside} is not allocated to Slurm job {} ({}): ask for it with srun --gres=gpu:N",
                    alloc.job_id,
                    alloc.source
                );
            }
            Ok(requested.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn inventory(minors: &[u32]) -> Vec<Gpu> {
        let mut inv = Vec::new();
        for (i, &minor) in minors.iter().enumerate() {
            inv.push(Gpu {
                index: i as u32,
                minor,
                uuid: format!("GPU-00000000-0000-4000-8000-00000000000{i}"),
                pci_bus_id: String::new(),
                model: String::new(),
                arch: None,
                brand: None,
                node: None,
                drm_nodes: Vec::new(),
                migs: Vec::new(),
            });
        }
        inv
    }

    #[test]
    fn outside_slurm_there_is_no_allocation() {
        assert_eq!(
            from_env(env(&[("CUDA_VISIBLE_DEVICES", "0")])).unwrap(),
            None
        );
    }

    #[test]
    fn step_gpus_win_over_job_gpus_and_cuda() {
        let a = from_env(env(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURM_JOB_GPUS", "0,1,2"),
            ("SLURM_STEP_GPUS", "2"),
            ("CUDA_VISIBLE_DEVICES", "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.gpus, Allocated::Minors { minors: vec![2] });
        // Minor 2 is NVML index 1 on a host whose minors are 0 and 2.
        assert_eq!(a.gpu_indexes(&inventory(&[0, 2]), |_| true).unwrap(), [1]);
        assert!(a.gpu_indexes(&inventory(&[0, 1]), |_| true).is_err());
        assert!(from_env(env(&[("SLURM_JOB_ID", "1"), ("SLURM_STEP_GPUS", "x")])).is_err());
    }

    #[test]
    fn cuda_visible_devices_are_ordinals_among_openable_gpus() {
        let a = from_env(env(&[("SLURM_JOB_ID", "7"), ("CUDA_VISIBLE_DEVICES", "0")]))
            .unwrap()
            .unwrap();
        let inv = inventory(&[0, 1, 2, 3]);
        // The cgroup lets the step open GPUs 2 and 3 only: ordinal 0 is GPU 2.
        assert_eq!(a.gpu_indexes(&inv, |g| g.index >= 2).unwrap(), [2]);
        let by_uuid = from_env(env(&[
            ("SLURM_JOB_ID", "7"),
            (
                "CUDA_VISIBLE_DEVICES",
                "GPU-00000000-0000-4000-8000-000000000003",
            ),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(by_uuid.gpu_indexes(&inv, |_| false).unwrap(), [3]);
    }

    #[test]
    fn requests_are_held_to_the_allocation() {
        let alloc = from_env(env(&[("SLURM_JOB_ID", "9"), ("SLURM_STEP_GPUS", "1")]))
            .unwrap()
            .unwrap();
        let one = DeviceSelection::List(vec![DeviceRef::Index { index: 1 }]);
        // No request: the allocation.
        assert_eq!(
            constrain(&DeviceSelection::Void, false, &[1], &[], &alloc).unwrap(),
            one
        );
        // "all": all of the allocation.
        assert_eq!(
            constrain(&DeviceSelection::All, true, &[1], &[0, 1], &alloc).unwrap(),
            one
        );
        // A GPU outside it.
        let zero = DeviceSelection::List(vec![DeviceRef::Index { index: 0 }]);
        let err = constrain(&zero, true, &[1], &[0], &alloc).unwrap_err();
        assert!(err.to_string().contains("GPU 0 is not allocated"), "{err}");
        assert_eq!(constrain(&one, true, &[1], &[1], &alloc).unwrap(), one);
        // A job without GPUs.
        let none = from_env(env(&[("SLURM_JOB_ID", "9")])).unwrap().unwrap();
        assert!(constrain(&DeviceSelection::All, true, &[], &[], &none).is_err());
        assert_eq!(
            constrain(&DeviceSelection::Void, false, &[], &[], &none).unwrap(),
            DeviceSelection::Void
        );
    }

    #[test]
    fn a_v1_step_is_read_from_the_devices_hierarchy() {
        let text = "9:name=systemd:/\n5:devices:/slurm_node1/uid_1000/job_42/step_0/task_3\n\
                    4:memory:/slurm_node1/uid_1000/job_42/step_0/task_3\n1:cpu:/\n0::/\n";
        let step = StepCgroup::parse(text).unwrap();
        assert_eq!(step.job_id, "42");
        assert_eq!(step.step, "/slurm_node1/uid_1000/job_42/step_0");
        assert!(!step.unified);
        assert_eq!(
            step.container_cgroup("c1"),
            "/slurm_node1/uid_1000/job_42/step_0/gpurun-c1"
        );
    }

    #[test]
    fn a_v2_step_gets_a_leaf_beside_its_task() {
        let text = "0::/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0\n";
        let step = StepCgroup::parse(text).unwrap();
        assert_eq!(step.job_id, "7");
        assert_eq!(step.step, "/system.slice/slurmstepd.scope/job_7/step_batch");
        assert!(step.unified);
        assert_eq!(
            step.container_cgroup("c1"),
            "/system.slice/slurmstepd.scope/job_7/step_batch/user/gpurun-c1"
        );
    }

    #[test]
    fn outside_a_step_there_is_none() {
        assert_eq!(
            StepCgroup::parse("0::/user.slice/user-1000.slice/session-3.scope\n"),
            None
        );
        assert_eq!(StepCgroup::parse("5:devices:/gpurun/job_1\n0::/\n"), None);
        assert_eq!(StepCgroup::parse("5:devices:/job_x/step_0\n"), None);
        assert_eq!(StepCgroup::parse(""), None);
    }

    #[test]
    fn a_step_cgroup_allocates_what_it_lets_open() {
        let step = StepCgroup::parse("5:devices:/slurm/uid_0/job_3/step_0/task_0\n").unwrap();
        let alloc = from_step_cgroup(&step);
        let gpus = inventory(&[0, 1, 2]);
        assert_eq!(alloc.gpu_indexes(&gpus, |g| g.minor == 1).unwrap(), vec![1]);
        assert_eq!(
            alloc.gpu_indexes(&gpus, |_| false).unwrap(),
            Vec::<u32>::new()
        );
    }
}
