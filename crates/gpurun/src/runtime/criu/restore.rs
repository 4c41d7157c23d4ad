//! Restore: a container back from `gpurun checkpoint` images, as
//! runc restores. The bundle is prepared as for `create` (same edits, same
//! saved config), CRIU restores the process tree as gpurun's sibling
//! (`rst_sibling`) with the rootfs bind-mounted in a mount namespace of
//! gpurun's own, and before CRIU lets the tree run (its post-restore
//! notification) gpurun moves it into the container's cgroup and applies
//! the spec's limits. A failed restore leaves no state and no cgroup.

use std::cell::RefCell;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcgroups::common::{AnyCgroupManager, CgroupManager, ControllerOpt};
use libcontainer::config::YoukiConfig;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::oci_spec::runtime::Spec;
use nix::mount::{mount, MsFlags};
use nix::unistd::Pid;
use rust_criu::rust_criu_protobuf::rpc::Criu_notify;

use super::{apply_criu_flags, gpu, RestoreOptions};
use crate::runtime::spec::prepare::{self, CreateOptions};
use crate::runtime::{cgroups, context::Ctx, criu, launch::foreground, state::containers};

/// What the post-restore notification needs; CRIU's callback is a plain
/// function, so it is handed over here.
struct Restoring {
    manager: AnyCgroupManager,
    spec: Spec,
    pid: Option<i32>,
    error: Option<String>,
}

thread_local! {
    static RESTORING: RefCell<Option<Restoring>> = const { RefCell::new(None) };
}

pub fn restore(ctx: &Ctx, args: RestoreOptions) -> Result<i32> {
    let id = args.container_id.as_str();
    containers::validate_id(id)?;
    if containers::exists(&ctx.root, id) {
        bail!("container {id:?} already exists: delete it or restore under another id");
    }
    if !args.criu.image_path.join("inventory.img").is_file() {
        bail!(
            "--image-path {}: not a checkpoint (no inventory.img); make one with gpurun checkpoint --image-path DIR ID",
            args.criu.image_path.display()
        );
    }
    let prepared = prepare::prepare(&CreateOptions {
        root: &ctx.root,
        id,
        bundle: &args.bundle,
        settings: &ctx.settings,
        invoker_gpus: None,
        spec: None,
        slurm_gpus_by_default: false,
    })?;
    // A GPU checkpoint: the driver and GPUs checked before CRIU runs.
    let gpu = gpu::check_restore(ctx, &prepared.spec, &args.criu.image_path)?;
    if prepared
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false)
    {
        bail!("container {id:?} has a terminal (process.terminal): restore takes containers without one");
    }
    let client = criu::client(ctx, gpu.is_some())?;
    if !args.detach {
        // Before CRIU makes the process, so no SIGCHLD is lost.
        foreground::block_signals()?;
        if !args.no_subreaper {
            let _ = nix::sys::prctl::set_child_subreaper(true);
        }
    }

    let (mut container, mut made, manager, cgroup_path) = make_state(ctx, id, &prepared)?;
    let pid = run_criu(
        client,
        &args,
        &prepared.spec,
        &made.dir,
        manager,
        &cgroup_path,
    )?;
    if let Some(gpu) = &gpu {
        give_gpus_back(gpu, pid, made.manager.as_ref(), id)?;
    }
    container
        .set_pid(pid)
        .set_status(ContainerStatus::Running)
        .save()?;
    if let Some(pid_file) = &args.pid_file {
        fs::write(pid_file, pid.to_string())
            .with_context(|| format!("write --pid-file {}", pid_file.display()))?;
    }
    made.armed = false;
    if args.detach {
        return Ok(0);
    }
    let code = foreground::wait_for_init(Pid::from_raw(pid));
    let _ = container.refresh_status();
    container
        .delete(true)
        .with_context(|| format!("delete container {id:?}"))?;
    code
}

/// The container's state, as create leaves it, and its cgroup manager:
/// the guard removes both again unless the restore disarms it.
fn make_state(
    ctx: &Ctx,
    id: &str,
    prepared: &prepare::PreparedBundle,
) -> Result<(Container, StateGuard, AnyCgroupManager, PathBuf)> {
    let state_dir = containers::state_dir(&ctx.root, id);
    fs::create_dir(&state_dir)
        .with_context(|| format!("create the state directory {}", state_dir.display()))?;
    let mut made = StateGuard {
        dir: state_dir.clone(),
        manager: None,
        armed: true,
    };
    let mut container = Container::new(
        id,
        ContainerStatus::Creating,
        None,
        &prepared.user_bundle,
        &state_dir,
    )?;
    container.set_systemd(ctx.settings.systemd_cgroup);
    container.state.created = Some(chrono::Utc::now());
    container.save()?;
    let youki = YoukiConfig::from_spec(&prepared.spec, id)?;
    youki.save(&state_dir)?;
    fs::rename(
        prepared.dir().join("config.json"),
        state_dir.join("config.json"),
    )
    .context("save the container's config")?;
    let manager = libcgroups::common::create_cgroup_manager(libcgroups::common::CgroupConfig {
        cgroup_path: youki.cgroup_path.clone(),
        systemd_cgroup: ctx.settings.systemd_cgroup,
        container_name: id.to_owned(),
    })?;
    made.manager = Some(cgroups::container::manager(&container)?);
    Ok((container, made, manager, youki.cgroup_path))
}

/// The restored CUDA processes get their GPUs back through the driver.
/// If that fails, the restored tree (all in the new cgroup) is killed, so
/// the failed restore leaves nothing.
fn give_gpus_back(
    gpu: &gpu::GpuRestore,
    init: i32,
    manager: Option<&AnyCgroupManager>,
    id: &str,
) -> Result<()> {
    let manager = manager.context("the restored container has no cgroup")?;
    let mut pids: Vec<i32> = manager.get_all_pids()?.iter().map(|p| p.as_raw()).collect();
    pids.sort_unstable();
    let Err(e) = gpu.resume(init, &pids) else {
        return Ok(());
    };
    for pid in &pids {
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
    }
    cgroups::container::wait_empty(manager);
    bail!("restore of {id:?} failed: {e:#}; the restored processes were stopped")
}

/// Removes what a failed restore made: the state directory and the cgroup.
struct StateGuard {
    dir: PathBuf,
    manager: Option<AnyCgroupManager>,
    armed: bool,
}

impl Drop for StateGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(manager) = &self.manager {
            let _ = manager.remove();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn run_criu(
    mut client: rust_criu::Criu,
    args: &RestoreOptions,
    spec: &Spec,
    state_dir: &Path,
    manager: AnyCgroupManager,
    cgroup_path: &Path,
) -> Result<i32> {
    let images = File::open(&args.criu.image_path)
        .with_context(|| format!("open --image-path {}", args.criu.image_path.display()))?;
    client.set_images_dir_fd(images.as_raw_fd());
    let work = args
        .criu
        .work_path
        .as_ref()
        .map(|p| File::open(p).with_context(|| format!("open --work-path {}", p.display())))
        .transpose()?;
    if let Some(work) = &work {
        client.set_work_dir_fd(work.as_raw_fd());
    }
    let log = args
        .criu
        .work_path
        .as_ref()
        .unwrap_or(&args.criu.image_path)
        .join("restore.log");
    let criu_root = bind_root(spec, &args.bundle, state_dir)?;
    client.set_root(criu_root.to_string_lossy().into_owned());
    set_externals(&mut client, args, spec, cgroup_path)?;
    client.set_log_file("restore.log".into());
    apply_criu_flags(&args.criu, &mut client)?;
    client.set_rst_sibling(true);
    client.set_orphan_pts_master(false);
    // The cgroups in the images are the old container's: CRIU leaves them
    // alone, and the post-restore notification moves the tree into ours.
    client.cgroups_mode(rust_criu::CgMode::IGNORE);
    client.set_notify_scripts(true);
    client.set_notify_cb(on_notify);
    RESTORING.with(|r| {
        *r.borrow_mut() = Some(Restoring {
            manager,
            spec: spec.clone(),
            pid: None,
            error: None,
        })
    });
    let started = std::time::Instant::now();
    let result = client.restore();
    tracing::debug!(
        "CRIU restored the container in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let restoring = RESTORING.with(|r| r.borrow_mut().take());
    let _ = nix::mount::umount2(&criu_root, nix::mount::MntFlags::MNT_DETACH);
    let _ = fs::remove_dir(&criu_root);
    let restoring = restoring.context("the restore's state went missing")?;
    if let Some(error) = restoring.error {
        bail!("restore of {:?}: {error}", args.container_id);
    }
    if let Err(e) = result {
        bail!(
            "restore of {:?} failed: {e}: {} (see {})",
            args.container_id,
            criu::log_errors(&log),
            log.display()
        );
    }
    restoring
        .pid
        .context("CRIU restored no process (no post-restore notification)")
}

/// CRIU wants its root to be a mount point: the rootfs bound in a mount
/// namespace of our own, gone with this process. Its mounts are the
/// host's slaves, not private: where the host's mounts are shared (a
/// systemd host), the container's binds were slaves of theirs, and CRIU
/// copies that sharing from the binds' sources, which a private mount has
/// none of ("Failed to copy sharing from source").
fn bind_root(spec: &Spec, bundle: &Path, state_dir: &Path) -> Result<PathBuf> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .context("a private mount namespace for the restore")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .context("make the restore's mounts slaves of the host's")?;
    let rootfs = prepare::rootfs_of(spec, bundle)?;
    let criu_root = state_dir.join("criu-root");
    fs::create_dir(&criu_root)?;
    mount(
        Some(&rootfs),
        &criu_root,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("bind the rootfs {}", rootfs.display()))?;
    Ok(criu_root)
}

/// What comes from outside the container: its binds and cgroup mounts,
/// named again, and stdio that was a pipe, handed over from ours (as runc
/// does).
fn set_externals(
    client: &mut rust_criu::Criu,
    args: &RestoreOptions,
    spec: &Spec,
    cgroup_path: &Path,
) -> Result<()> {
    for (destination, source) in criu::external_binds(spec) {
        client.set_external_mount(
            destination.to_string_lossy().into_owned(),
            source.to_string_lossy().into_owned(),
        );
    }
    for (point, source) in cgroup_binds(&args.criu.image_path, cgroup_path)? {
        client.set_external_mount(point, source);
    }
    let descriptors: Vec<String> = fs::read_to_string(args.criu.image_path.join(criu::DESCRIPTORS))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    for (fd, target) in descriptors.iter().enumerate().take(3) {
        if target.starts_with("pipe:") {
            client
                .add_inherit_fd(fd as RawFd, target.clone())
                .map_err(|e| anyhow::anyhow!("hand stdio {fd} to CRIU: {e}"))?;
        }
    }
    Ok(())
}

/// CRIU's notifications. At post-restore the tree exists and has not run
/// yet: it goes into the container's cgroup, which gets the spec's limits.
fn on_notify(script: &str, notify: &Criu_notify, _fd: Option<RawFd>) -> i32 {
    if script != "post-restore" {
        return 0;
    }
    RESTORING.with(|r| {
        let mut borrow = r.borrow_mut();
        let Some(restoring) = borrow.as_mut() else {
            return -1;
        };
        let pid = notify.pid();
        restoring.pid = Some(pid);
        match join_cgroup(restoring, pid) {
            Ok(()) => 0,
            Err(e) => {
                restoring.error = Some(format!("{e:#}"));
                -1
            }
        }
    })
}

fn join_cgroup(restoring: &Restoring, init: i32) -> Result<()> {
    for pid in process_tree(init) {
        restoring
            .manager
            .add_task(Pid::from_raw(pid))
            .with_context(|| format!("move restored process {pid} into the container's cgroup"))?;
    }
    if let Some(resources) = restoring
        .spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
    {
        restoring
            .manager
            .apply(&ControllerOpt {
                resources,
                disable_oom_killer: resources
                    .memory()
                    .as_ref()
                    .and_then(|m| m.disable_oom_killer())
                    .unwrap_or(false),
                oom_score_adj: None,
                freezer_state: None,
            })
            .context("apply the container's cgroup limits")?;
    }
    Ok(())
}

/// `init` and every process below it (threads move with their process).
fn process_tree(init: i32) -> Vec<i32> {
    let mut found = vec![init];
    let mut next = 0;
    while next < found.len() {
        let pid = found[next];
        next += 1;
        for task in fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            found.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// The container's cgroup mounts (recorded at checkpoint) and, for each,
/// the directory CRIU binds there (`cgroup_bind_plan`); the new cgroup's
/// directories are made here (a failed restore removes them with the
/// cgroup).
fn cgroup_binds(images: &Path, cgroup_path: &Path) -> Result<Vec<(String, String)>> {
    let recorded: Vec<(PathBuf, String)> =
        match fs::read_to_string(images.join(criu::CGROUP_MOUNTS)) {
            Ok(text) => {
                serde_json::from_str(&text).context("read the checkpoint's cgroup mounts")?
            }
            Err(_) => return Ok(Vec::new()),
        };
    let host = criu::cgroup_mounts(std::process::id() as i32)?;
    let own = fs::read_to_string("/proc/self/cgroup").context("read /proc/self/cgroup")?;
    let plan = cgroup_bind_plan(&recorded, &host, &own, cgroup_path)?;
    let mut binds = Vec::new();
    for bind in plan {
        if bind.new_cgroup {
            fs::create_dir_all(&bind.source)
                .with_context(|| format!("create cgroup {}", bind.source.display()))?;
        }
        binds.push((
            bind.point.to_string_lossy().into_owned(),
            bind.source.to_string_lossy().into_owned(),
        ));
    }
    Ok(binds)
}

/// Where one recorded cgroup mount's bind comes from.
#[derive(Debug, PartialEq, Eq)]
struct CgroupBind {
    point: PathBuf,
    source: PathBuf,
    /// The source is the new cgroup's directory, to be made.
    new_cgroup: bool,
}

/// For each cgroup mount `recorded` at checkpoint, by the `host`'s
/// cgroup mounts and this process's `/proc/self/cgroup` (`own`): in a
/// hierarchy the container's cgroup manager runs (or the unified one),
/// the new cgroup's directory (`cgroup_path`); in any other (a `name=`
/// hierarchy) the one gpurun itself is in, as the container had at
/// create. A hierarchy the host lacks is refused.
fn cgroup_bind_plan(
    recorded: &[(PathBuf, String)],
    host: &[(PathBuf, String)],
    own: &str,
    cgroup_path: &Path,
) -> Result<Vec<CgroupBind>> {
    let relative = cgroup_path.strip_prefix("/").unwrap_or(cgroup_path);
    let mut binds = Vec::new();
    for (point, name) in recorded {
        let Some((host_point, _)) = host.iter().find(|(_, n)| n == name) else {
            bail!("the checkpoint had a cgroup hierarchy ({name}) this host has not mounted");
        };
        let managed = name == criu::CGROUP2 || name.split(',').any(|c| MANAGED.contains(&c));
        let source = if managed {
            host_point.join(relative)
        } else {
            let mine = cgroups::host::in_proc_cgroup(own, |names| names == name).unwrap_or("/");
            host_point.join(mine.trim_start_matches('/'))
        };
        binds.push(CgroupBind {
            point: point.clone(),
            source,
            new_cgroup: managed,
        });
    }
    Ok(binds)
}

/// The v1 controllers a container's cgroup manager runs.
const MANAGED: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "hugetlb",
    "memory",
    "pids",
    "perf_event",
    "blkio",
    "net_prio",
    "net_cls",
    "freezer",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts(list: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
        list.iter()
            .map(|(point, name)| (PathBuf::from(point), name.to_string()))
            .collect()
    }

    /// A hybrid host: memory and pids managed, systemd's named hierarchy
    /// and the unified one beside them.
    const OWN: &str = "5:memory:/user.slice\n4:pids:/user.slice\n1:name=systemd:/user.slice/session-3.scope\n0::/user.slice/session-3.scope\n";

    #[test]
    fn a_restore_binds_the_new_cgroup_where_it_is_managed_and_gpuruns_own_elsewhere() {
        let host = mounts(&[
            ("/sys/fs/cgroup/memory", "memory"),
            ("/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct"),
            ("/sys/fs/cgroup/systemd", "name=systemd"),
            ("/sys/fs/cgroup/unified", "cgroup2"),
        ]);
        let recorded = mounts(&[
            ("/sys/fs/cgroup/memory", "memory"),
            ("/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct"),
            ("/sys/fs/cgroup/systemd", "name=systemd"),
            ("/sys/fs/cgroup/unified", "cgroup2"),
        ]);
        let plan = cgroup_bind_plan(&recorded, &host, OWN, Path::new("/gpurun/restored")).unwrap();
        let got: Vec<(&str, bool)> = plan
            .iter()
            .map(|b| (b.source.to_str().unwrap(), b.new_cgroup))
            .collect();
        assert_eq!(
            got,
            [
                ("/sys/fs/cgroup/memory/gpurun/restored", true),
                ("/sys/fs/cgroup/cpu,cpuacct/gpurun/restored", true),
                ("/sys/fs/cgroup/systemd/user.slice/session-3.scope", false),
                ("/sys/fs/cgroup/unified/gpurun/restored", true),
            ]
        );
        assert_eq!(plan[2].point, Path::new("/sys/fs/cgroup/systemd"));
    }

    #[test]
    fn a_hierarchy_the_host_has_not_mounted_is_refused() {
        let host = mounts(&[("/sys/fs/cgroup", "cgroup2")]);
        let recorded = mounts(&[("/sys/fs/cgroup/memory", "memory")]);
        let err = cgroup_bind_plan(&recorded, &host, "0::/\n", Path::new("/c"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the checkpoint had a cgroup hierarchy (memory) this host has not mounted"
        );
    }

    #[test]
    fn the_process_tree_holds_every_descendant() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut tree = Vec::new();
        for _ in 0..200 {
            tree = process_tree(pid);
            if tree.len() >= 4 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for &p in &tree {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.wait();
        assert_eq!(
            tree.len(),
            4,
            "sh, its sleep, the inner sh and its sleep: {tree:?}"
        );
        assert!(tree.contains(&pid));
    }
}
