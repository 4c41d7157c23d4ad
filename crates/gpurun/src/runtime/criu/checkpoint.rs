//! Checkpoint: dumps a running container with CRIU, as runc does.
//! The container is frozen through its own freezer cgroup while CRIU reads
//! it, and stops (and is deleted) afterwards unless --leave-running.

use std::fs::{self, DirBuilder, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};

use super::gpu;
use super::{apply_criu_flags, cgroups_mode, CheckpointOptions};
use crate::runtime::{cgroups, context::Ctx, criu, spec::prepare, state::containers};

pub fn checkpoint(ctx: &Ctx, args: CheckpointOptions) -> Result<()> {
    let id = &args.container_id;
    let (container, spec, paused) = load_running(ctx, id)?;
    let pid = container
        .pid()
        .with_context(|| format!("container {id:?} has no init process"))?
        .as_raw();
    let rootfs = prepare::rootfs_of(&spec, container.bundle())?;
    let gpu = gpu::find(ctx, &spec)?;
    refuse_mount_point_overlays(&spec, id)?;
    if gpu.is_some() && args.pre_dump {
        bail!("checkpoint --pre-dump of container {id:?}: a GPU container's memory is in the driver until its full checkpoint; take a full checkpoint");
    }

    check_parent_path(&args)?;
    let mut client = criu::client(ctx, gpu.is_some())?;
    let (images, work) = open_dirs(&args)?;
    client.set_images_dir_fd(images.as_raw_fd());
    if let Some(work) = &work {
        client.set_work_dir_fd(work.as_raw_fd());
    }
    let log_dir = args
        .criu
        .work_path
        .as_ref()
        .unwrap_or(&args.criu.image_path);
    if args.pre_dump {
        let freezer = freezer_of(pid);
        return pre_dump(
            ctx,
            &args,
            pid,
            &rootfs,
            (&images, work.as_ref()),
            freezer,
            log_dir,
        );
    }
    set_mounts_and_namespaces(&mut client, &spec, pid, &args.criu.image_path)?;
    record_descriptors(pid, &args.criu.image_path)?;
    if let Some(freezer) = freezer_of(pid) {
        client.set_freeze_cgroup(freezer.to_string_lossy().into_owned());
    }
    set_options(&mut client, &args)?;
    client.set_pid(pid);
    client.set_root(rootfs.to_string_lossy().into_owned());

    match &gpu {
        Some(gpu) => dump_gpu_container(client, &container, gpu, paused, &args)?,
        None => dump(client, &args)?,
    }
    if !args.leave_running {
        // CRIU killed the container's processes once dumped; what is left
        // is its state and cgroup.
        containers::wait_gone(&container);
        let mut container = container;
        container
            .delete(true)
            .with_context(|| format!("delete container {id:?} after its checkpoint"))?;
    }
    Ok(())
}

/// The container, its saved config, and whether it is paused: only a
/// running or paused container can be checkpointed.
fn load_running(ctx: &Ctx, id: &str) -> Result<(Container, Spec, bool)> {
    let mut container = containers::load(&ctx.root, id)?;
    container.refresh_status()?;
    // containerd pauses a task before it checkpoints it; runc takes both.
    let paused = match container.status() {
        ContainerStatus::Running => false,
        ContainerStatus::Paused => true,
        _ => bail!(
            "container {id:?} is {}: only a running or paused container can be checkpointed",
            containers::status_name(&container)
        ),
    };
    let saved = container.root.join("config.json");
    let spec = Spec::load(if saved.exists() {
        saved
    } else {
        container.bundle().join("config.json")
    })
    .with_context(|| format!("read the config of container {id:?}"))?;
    Ok((container, spec, paused))
}

/// gpurun's mount-point overlays (gpurun-gpu's `mount_points`: a plain
/// directory rootfs gets the driver files' mount points in a private
/// overlay) are made from descriptors and a tmpfs mounted nowhere: CRIU
/// can neither save nor remake them, and a dump would not restore.
fn refuse_mount_point_overlays(spec: &Spec, id: &str) -> Result<()> {
    let overlaid: Vec<String> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| {
            m.typ().as_deref() == Some("overlay")
                && m.options().iter().flatten().any(|o| {
                    o.starts_with("lowerdir=")
                        && o.contains(gpurun_gpu::plan::mount_points::DESTINATION_LAYER)
                })
        })
        .map(|m| m.destination().to_string_lossy().into_owned())
        .collect();
    if !overlaid.is_empty() {
        bail!(
            "container {id:?} has its driver files' mount points in gpurun's private overlays ({}), which CRIU cannot save: checkpoint containers whose rootfs is a writable layer (as engines give: an overlay mount) or an image that has the mount points",
            overlaid.join(", ")
        );
    }
    Ok(())
}

/// --image-path and --work-path, made private to root where missing.
fn open_dirs(args: &CheckpointOptions) -> Result<(File, Option<File>)> {
    let open = |path: &Path, flag: &str| -> Result<File> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .with_context(|| format!("create {flag} {}", path.display()))?;
        File::open(path).with_context(|| format!("open {flag} {}", path.display()))
    };
    let images = open(&args.criu.image_path, "--image-path")?;
    let work = match &args.criu.work_path {
        Some(path) => Some(open(path, "--work-path")?),
        None => None,
    };
    Ok((images, work))
}

/// The mounts from outside the container (its binds, the host's cgroup
/// hierarchies) and the namespaces it joined by path: CRIU records a
/// reference to each, for restore to name again.
fn set_mounts_and_namespaces(
    client: &mut rust_criu::Criu,
    spec: &Spec,
    pid: i32,
    images: &Path,
) -> Result<()> {
    for (destination, _) in criu::external_binds(spec) {
        let key = destination.to_string_lossy().into_owned();
        client.set_external_mount(key.clone(), key);
    }
    let cgroup_mounts = criu::cgroup_mounts(pid)?;
    for (point, _) in &cgroup_mounts {
        let key = point.to_string_lossy().into_owned();
        client.set_external_mount(key.clone(), key);
    }
    fs::write(
        images.join(criu::CGROUP_MOUNTS),
        serde_json::to_string(&cgroup_mounts)?,
    )
    .context("record the container's cgroup mounts")?;
    // Namespaces the container joined by path belong to someone else: CRIU
    // records a reference only (as runc's external namespaces).
    for (typ, name) in [
        (LinuxNamespaceType::Network, "net"),
        (LinuxNamespaceType::Pid, "pid"),
    ] {
        if let Some(path) = namespace_path(spec, typ) {
            use std::os::unix::fs::MetadataExt;
            let inode = fs::metadata(&path)
                .with_context(|| format!("the {name} namespace {}", path.display()))?
                .ino();
            client.add_external(format!(
                "{name}[{inode}]:{}",
                rust_criu::criu_ns_to_key(name)
            ));
        }
    }
    Ok(())
}

/// Where fds 0-2 point, so restore can hand the same kind back.
fn record_descriptors(pid: i32, images: &Path) -> Result<()> {
    let descriptors: Vec<String> = (0..3)
        .map(|n| {
            fs::read_link(format!("/proc/{pid}/fd/{n}"))
                .map(|l| l.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "/dev/null".into())
        })
        .collect();
    fs::write(
        images.join(criu::DESCRIPTORS),
        serde_json::to_string(&descriptors)?,
    )
    .context("write descriptors.json")
}

/// runc's checkpoint flags, as CRIU options.
fn set_options(client: &mut rust_criu::Criu, args: &CheckpointOptions) -> Result<()> {
    client.set_log_file("dump.log".into());
    apply_criu_flags(&args.criu, client)?;
    if let Some(address) = &args.page_server {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<i32>().ok()?)))
            .with_context(|| format!("--page-server {address:?}: give ADDRESS:PORT"))?;
        client.set_page_server(host.to_owned(), port);
    }
    if let Some(parent) = &args.parent_path {
        client.set_parent_img(parent.clone());
    }
    if let Some(fd) = args.status_fd {
        client.set_status_fd(fd);
    }
    client.set_leave_running(args.leave_running);
    client.set_link_remap(args.link_remap);
    client.set_orphan_pts_master(true);
    client.cgroups_mode(cgroups_mode(&args.criu.manage_cgroups_mode));
    Ok(())
}

/// CRIU's dump, its failure as one line with the log's errors.
fn dump(mut client: rust_criu::Criu, args: &CheckpointOptions) -> Result<()> {
    let started = std::time::Instant::now();
    if let Err(e) = client.dump() {
        let log = args
            .criu
            .work_path
            .as_ref()
            .unwrap_or(&args.criu.image_path)
            .join("dump.log");
        bail!(
            "checkpoint of container {:?} failed: {e}: {} (see {})",
            args.container_id,
            criu::log_errors(&log),
            log.display()
        );
    }
    tracing::debug!(
        "CRIU dumped the container in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(())
}

/// A GPU container: its CUDA processes saved through the driver, then the
/// dump. Any failure gives every process its GPU back (the container runs
/// on) and names the process and the driver's error.
fn dump_gpu_container(
    client: rust_criu::Criu,
    container: &Container,
    gpu: &gpu::GpuContainer,
    paused: bool,
    args: &CheckpointOptions,
) -> Result<()> {
    let id = &args.container_id;
    let images = &args.criu.image_path;
    const RUNS_ON: &str = "its CUDA processes have their GPUs back and it runs on";
    let saved = gpu::thawed(container, paused, || {
        gpu::save(gpu, container, args.cuda_lock_timeout)
    })?
    .map_err(|e| anyhow::anyhow!("checkpoint of container {id:?} failed: {e:#}; {RUNS_ON}"))?;
    gpu::write_record(gpu, images, saved.count())?;
    if let Err(e) = dump(client, args) {
        gpu::thawed(container, paused, || saved.resume())??;
        bail!("{e:#}; {RUNS_ON}");
    }
    let bytes = gpu::record_size(images)?;
    tracing::debug!(
        "checkpoint of {id:?}: {} CUDA process(es), {:.1} MiB of images in {}",
        saved.count(),
        bytes as f64 / (1024.0 * 1024.0),
        images.display()
    );
    if args.leave_running {
        gpu::thawed(container, paused, || saved.resume())??;
    } else {
        saved.keep();
    }
    Ok(())
}

/// runc's `--parent-path` rule, checked before CRIU runs: a path relative
/// to `--image-path` (CRIU reads it from there) naming a directory.
fn check_parent_path(args: &CheckpointOptions) -> Result<()> {
    let Some(parent) = &args.parent_path else {
        return Ok(());
    };
    if Path::new(parent).is_absolute() {
        bail!("--parent-path must be relative (to --image-path): give ../NAME of the earlier checkpoint's directory");
    }
    let real = args.criu.image_path.join(parent);
    match fs::metadata(&real) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => bail!("invalid --parent-path: {}: not a directory", real.display()),
        Err(e) => bail!("invalid --parent-path: {}: {e}", real.display()),
    }
}

/// runc's `checkpoint --pre-dump`: the container's memory only, with the
/// kernel's dirty-page tracking started, so that a later checkpoint with
/// `--parent-path` writes only what changed since; the container keeps
/// running. rust-criu's client has no pre-dump, so this is CRIU's own RPC
/// (`criu::request`), after CRIU says it can track memory here.
fn pre_dump(
    ctx: &Ctx,
    args: &CheckpointOptions,
    pid: i32,
    rootfs: &Path,
    (images, work): (&File, Option<&File>),
    freezer: Option<std::path::PathBuf>,
    log_dir: &Path,
) -> Result<()> {
    use protobuf::MessageField;
    use rust_criu::rust_criu_protobuf::rpc;

    let id = &args.container_id;
    let criu = criu::path(ctx);
    let mut check = rpc::Criu_req::new();
    check.set_type(rpc::Criu_req_type::FEATURE_CHECK);
    let mut wanted = rpc::Criu_features::new();
    wanted.set_mem_track(true);
    check.features = MessageField::some(wanted);
    if !criu::request(&criu, &check)?.features.mem_track() {
        bail!("checkpoint --pre-dump of container {id:?}: memory tracking not supported (the kernel has no soft-dirty page tracking, CONFIG_MEM_SOFT_DIRTY): take a full checkpoint");
    }
    let mut opts = rpc::Criu_opts::new();
    opts.set_images_dir_fd(images.as_raw_fd());
    if let Some(work) = work {
        opts.set_work_dir_fd(work.as_raw_fd());
    }
    opts.set_log_level(4);
    opts.set_log_file("dump.log".into());
    opts.set_pid(pid);
    opts.set_root(rootfs.to_string_lossy().into_owned());
    opts.set_track_mem(true);
    opts.set_manage_cgroups(true);
    // rust-criu's modes carry CRIU's RPC numbers.
    let mode = cgroups_mode(&args.criu.manage_cgroups_mode) as i32;
    opts.set_manage_cgroups_mode(protobuf::Enum::from_i32(mode).unwrap_or(rpc::Criu_cg_mode::SOFT));
    opts.set_shell_job(args.criu.shell_job);
    opts.set_ext_unix_sk(args.criu.ext_unix_sk);
    opts.set_tcp_established(args.criu.tcp_established);
    opts.set_file_locks(args.criu.file_locks);
    if let Some(parent) = &args.parent_path {
        opts.set_parent_img(parent.clone());
    }
    if let Some(freezer) = freezer {
        opts.set_freeze_cgroup(freezer.to_string_lossy().into_owned());
    }
    let mut request = rpc::Criu_req::new();
    request.set_type(rpc::Criu_req_type::PRE_DUMP);
    request.opts = MessageField::some(opts);
    let answer = criu::request(&criu, &request)?;
    if !answer.success() {
        let log = log_dir.join("dump.log");
        bail!(
            "checkpoint --pre-dump of container {id:?} failed: {} (errno {}): {} (see {})",
            answer.cr_errmsg(),
            answer.cr_errno(),
            criu::log_errors(&log),
            log.display()
        );
    }
    Ok(())
}

fn namespace_path(spec: &Spec, typ: LinuxNamespaceType) -> Option<std::path::PathBuf> {
    spec.linux()
        .as_ref()?
        .namespaces()
        .as_ref()?
        .iter()
        .find(|n| n.typ() == typ)?
        .path()
        .clone()
}

/// The freezer of the container whose init is `pid`: its v1 freezer
/// cgroup, else its v2 cgroup, as /proc/PID/cgroup names them. (The
/// systemd driver's cgroups path, `slice:prefix:name`, is no directory: a
/// paused container whose freezer CRIU was not told of could not run
/// CRIU's parasite, and the dump hung.)
fn freezer_of(pid: i32) -> Option<std::path::PathBuf> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path_of = |wanted: &dyn Fn(&str) -> bool| {
        cgroups::host::in_proc_cgroup(&text, wanted).map(|p| p.trim_start_matches('/').to_owned())
    };
    let v1 = path_of(&|c| c.split(',').any(|c| c == "freezer"))
        .map(|p| std::path::Path::new("/sys/fs/cgroup/freezer").join(p));
    let v2 = path_of(&|c| c.is_empty()).map(|p| std::path::Path::new("/sys/fs/cgroup").join(p));
    v1.into_iter()
        .chain(v2)
        .find(|d| d.join("cgroup.procs").exists())
}
