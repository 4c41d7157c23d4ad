use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use safe_fs::Rootfs;

use crate::cli::RunArgs;
use crate::runtime::context::Ctx;
use crate::runtime::launch::{self, LaunchArgs};
use crate::runtime::protect::seal;
use crate::runtime::protect::stub_policy::{self, Protection};
use crate::runtime::spec::idmap::UserIds;
use crate::runtime::spec::prepare;
use crate::runtime::spec::rootfs_spec::{self, AdhocOptions, RootLayer};
use crate::runtime::spec::slurm_mpi;
use crate::runtime::squashfs;
use crate::runtime::state::containers;
use gpurun_gpu::flow::InvokerGpus;
use gpurun_image::defaults::ImageDefaults;

pub fn run(ctx: &Ctx, args: RunArgs, protection: Protection) -> Result<i32> {
    if args.writable && args.image.is_none() && args.layer.is_none() {
        anyhow::bail!("--writable needs --image FILE: it lays a writable layer over an image file");
    }
    if args.layer.is_some() && (args.rootfs.is_some() || args.bundle.is_some()) {
        anyhow::bail!("--layer needs --image FILE: it keeps the writable layer over an image file");
    }
    if args.image.is_some() || args.layer.is_some() {
        return run_image(ctx, args, protection);
    }
    if args.rootfs.is_some() {
        return run_rootfs(ctx, args, protection, RootLayer::None);
    }
    if let Some((flag, instead)) = rootfs_only_flag(&args) {
        anyhow::bail!("{flag} needs --rootfs DIR; with a bundle, {instead}");
    }
    if !args.command.is_empty() {
        anyhow::bail!("a command after \"--\" needs --rootfs DIR; with a bundle the command is process.args in config.json");
    }
    let invoker_gpus = args.invoker_gpus();
    let Some(id) = args.container_id.as_deref() else {
        anyhow::bail!(
            "run needs a container id: \"gpurun run [-b BUNDLE] ID\" runs a bundle's config.json, \"gpurun run --rootfs DIR -- CMD\" a directory with no config"
        );
    };
    let bundle = args.bundle.clone().unwrap_or_else(|| ".".into());
    // Read once, here, for the choice of protection and for the launch; a
    // config that cannot be read takes the re-exec, whose run reports why.
    let spec = std::fs::canonicalize(&bundle)
        .ok()
        .and_then(|dir| prepare::load_spec(&dir).ok());
    stub_policy::protect_run(protection, spec.as_ref())?;
    let launch_args = LaunchArgs {
        spec,
        ..launch_args(&args, id, &bundle, invoker_gpus.as_ref())
    };
    finish(ctx, &args, launch_args)
}

/// What `run`'s runc flags ask of the launch, for container `id` from
/// `bundle` with the GPU flags' environment.
fn launch_args<'a>(
    args: &'a RunArgs,
    id: &'a str,
    bundle: &'a std::path::Path,
    invoker_gpus: Option<&'a InvokerGpus>,
) -> LaunchArgs<'a> {
    LaunchArgs {
        pid_file: args.pid_file.as_ref(),
        console_socket: args.console_socket.as_ref(),
        preserve_fds: args.preserve_fds,
        no_pivot: args.no_pivot,
        detach: args.detach,
        invoker_gpus,
        relay_terminal: !args.detach,
        ..LaunchArgs::new(id, bundle)
    }
}

fn finish(ctx: &Ctx, args: &RunArgs, launch_args: LaunchArgs) -> Result<i32> {
    if !args.detach {
        return launch::run_foreground(ctx, launch_args, !args.no_subreaper, args.keep, None);
    }
    let (mut container, _) = launch::create(ctx, launch_args)?;
    launch::start_or_delete(ctx, &mut container)?;
    Ok(0)
}

/// The first flag given that only `--rootfs` uses, and where a bundle's
/// config.json says the same (clap's `requires` is not checked beside
/// `--bundle`, which conflicts with `--rootfs`).
fn rootfs_only_flag(args: &RunArgs) -> Option<(&'static str, &'static str)> {
    [
        (
            !args.volumes.is_empty(),
            "-v/--volume",
            "add the bind mount to mounts in config.json",
        ),
        (
            !args.env.is_empty(),
            "-e/--env",
            "set it in process.env in config.json",
        ),
        (
            args.workdir.is_some(),
            "-w/--workdir",
            "set process.cwd in config.json",
        ),
        (
            args.keep_uid,
            "--keep-uid",
            "set process.user and the id mappings in config.json",
        ),
        (
            args.private_network,
            "--private-network",
            "add a network namespace to linux.namespaces in config.json",
        ),
        (args.job_env, "--job-env", "set process.env in config.json"),
        (
            args.image_entrypoint,
            "--image-entrypoint",
            "set process.args in config.json",
        ),
    ]
    .into_iter()
    .find_map(|(given, flag, instead)| given.then_some((flag, instead)))
}

/// `run --image FILE.sqsh -- CMD`: the image mounted in place, read-only
/// (a layer over it with --writable), then run as `--rootfs` runs a
/// directory. Root's mounts are this run's and the container's alone; a
/// user's are FUSE mounts of the user's own.
fn run_image(ctx: &Ctx, mut args: RunArgs, protection: Protection) -> Result<i32> {
    if args.layer.is_some() && args.detach {
        anyhow::bail!(
            "--layer with -d: the layer is held only while the run waits for its container; leave -d out"
        );
    }
    let given = args.image.take();
    let (kept, path) = match &args.layer {
        Some(dir) => {
            let (kept, path) = squashfs::KeptLayer::open(dir, given.as_deref())?;
            (Some(kept), path)
        }
        None => (None, given.expect("checked by the caller")),
    };
    let writable = match &kept {
        Some(kept) => squashfs::Writable::KeptIn(&kept.dir),
        None if args.writable => squashfs::Writable::Fresh,
        None => squashfs::Writable::No,
    };
    args.writable = writable.is_writable();
    let save = match &args.save {
        Some(_) if !args.writable => anyhow::bail!(
            "--save needs --writable or --layer DIR: a read-only container has nothing to save"
        ),
        Some(_) if args.detach => anyhow::bail!(
            "--save with -d: the run must wait for the container to end to save it; leave -d out"
        ),
        Some(file) => Some(squashfs::SaveTo::check(file)?),
        None => None,
    };
    let image = squashfs::open_image(&path)?;
    let id = adhoc_id(&args);
    containers::validate_id(&id)?;
    // Protected before anything is mounted: a re-exec after the mounts
    // would start the command over and mount again.
    if protection == Protection::ChosenByRun {
        seal::ensure_sealed()?;
    }
    args.private_tmp = !args.writable;
    let mount_points = image_mount_points(&args)?;
    let by_root = nix::unistd::geteuid().is_root();
    let layer = if !by_root && squashfs::user_layer_in_container(writable, save.is_some()) {
        RootLayer::InContainer
    } else {
        RootLayer::None
    };
    let mounted = if by_root {
        squashfs::mount(&image, &ctx.root, &id, writable, &mount_points)?
    } else {
        // With --keep-uid the container's own root is a subordinate id,
        // which a FUSE mount lets in only with allow_other.
        if args.keep_uid && !squashfs::users_may_allow_others() {
            anyhow::bail!(
                "--keep-uid with --image as a user: the image's FUSE mount must let the container's other ids in, which needs user_allow_other in /etc/fuse.conf (ask the admin), or leave --keep-uid out"
            );
        }
        squashfs::mount_for_user(
            &image,
            &ctx.root,
            &id,
            writable,
            &mount_points,
            args.keep_uid,
            layer == RootLayer::InContainer,
        )?
    };
    drop(image);
    args.container_id = Some(id);
    args.rootfs = Some(mounted.rootfs.clone());
    let all_root = !args.keep_uid && !by_root;
    let detach = args.detach;
    let rootfs = mounted.rootfs.clone();
    let code = run_rootfs(ctx, args, Protection::Done, layer)?;
    if detach {
        // The container outlives this run: what serves its image stays
        // until `delete` (a user's FUSE daemons; root's mounts live in the
        // container's own namespace).
        mounted.leave_for_delete();
        return Ok(code);
    }
    if let Some(save) = &save {
        save.save(&rootfs, all_root)?;
    }
    drop(mounted);
    drop(kept);
    Ok(code)
}

/// Where a read-only image needs directories to mount on: the -v
/// destinations, the working directory, a Slurm step's PMI directories,
/// and /tmp for the container's own tmpfs (what goes below it needs none).
fn image_mount_points(args: &RunArgs) -> Result<Vec<PathBuf>> {
    let mut points: Vec<PathBuf> = args
        .volumes
        .iter()
        .map(|v| rootfs_spec::parse_volume(v).map(|v| PathBuf::from(v.destination)))
        .collect::<Result<_>>()?;
    points.extend(args.workdir.as_ref().map(PathBuf::from));
    let step = slurm_mpi::for_step(&std::env::vars().collect(), |p| p.is_dir());
    points.extend(step.binds);
    if args.private_tmp {
        points.retain(|p| !p.starts_with("/tmp"));
        points.push(PathBuf::from("/tmp"));
    }
    Ok(points)
}

/// The id of a `--rootfs` or `--image` run: the one given, else one made
/// up from this process's pid.
fn adhoc_id(args: &RunArgs) -> String {
    args.container_id
        .clone()
        .unwrap_or_else(|| format!("gpurun-{}", std::process::id()))
}

/// `run --rootfs DIR -- CMD`: no config.json; the spec is made here, with
/// `layer` over the root.
fn run_rootfs(ctx: &Ctx, args: RunArgs, protection: Protection, layer: RootLayer) -> Result<i32> {
    let dir = args.rootfs.as_deref().expect("checked by the caller");
    let rootfs = std::fs::canonicalize(dir)
        .ok()
        .filter(|p| p.is_dir())
        .with_context(|| format!("--rootfs {}: no such directory", dir.display()))?;
    let mut volumes = args
        .volumes
        .iter()
        .map(|v| rootfs_spec::parse_volume(v))
        .collect::<Result<Vec<_>>>()?;
    // An imported image's own entrypoint, environment and working
    // directory (import keeps its config beside the rootfs).
    let image = ImageDefaults::beside(&rootfs)?.unwrap_or_default();
    let command = if args.command.is_empty() {
        image.command.clone()
    } else if args.image_entrypoint {
        [image.entrypoint.clone(), args.command.clone()].concat()
    } else {
        args.command.clone()
    };
    let workdir = args.workdir.clone().or(image.workdir.clone());
    // The image's environment, then the terminal type that follows the
    // user in, then -e.
    let mut env: Vec<String> = image.env.clone();
    if args.job_env {
        env.extend(rootfs_spec::job_env(&image.env, std::env::vars()));
    }
    env.extend(std::env::var("TERM").map(|t| format!("TERM={t}")));
    // In a Slurm step, what its MPI library needs of the step's PMI.
    let step = slurm_mpi::for_step(&std::env::vars().collect(), |p| p.is_dir());
    env.extend(step.env);
    volumes.extend(step.binds.into_iter().map(|dir| rootfs_spec::Volume {
        destination: dir.to_string_lossy().into_owned(),
        source: dir,
        read_only: false,
    }));
    env.extend(rootfs_spec::resolve_env(&args.env, |k| {
        std::env::var(k).ok()
    })?);
    let user = (!nix::unistd::geteuid().is_root()).then(UserIds::current);
    let host_network = !args.private_network;
    let host_files: Vec<&str> = if host_network {
        image_regular_files(&rootfs, &["/etc/resolv.conf", "/etc/hosts"])
    } else {
        Vec::new()
    };
    let spec = rootfs_spec::make_spec(&AdhocOptions {
        rootfs: &rootfs,
        command: &command,
        env: &env,
        workdir: workdir.as_deref(),
        volumes: &volumes,
        user: user.as_ref(),
        keep_uid: args.keep_uid,
        host_network,
        host_files: &host_files,
        private_tmp: args.private_tmp,
        root_layer: layer,
    })?;
    stub_policy::protect_run(protection, Some(&spec))?;
    let id = adhoc_id(&args);
    let invoker_gpus = args.invoker_gpus();
    let launch_args = LaunchArgs {
        spec: Some(spec),
        slurm_gpus_by_default: args.gpus.is_none(),
        ..launch_args(&args, &id, &rootfs, invoker_gpus.as_ref())
    };
    if args.detach && !args.keep {
        return run_detached_and_deleted(ctx, launch_args);
    }
    finish(ctx, &args, launch_args)
}

/// `run -d --rootfs`: the id was made up here and nobody else will delete
/// the container, so a supervisor process (in a session of its own) runs it
/// as `run` would, and deletes it when it exits. The id is printed once the
/// container runs; a failure before that is this command's error.
fn run_detached_and_deleted(ctx: &Ctx, mut launch_args: LaunchArgs) -> Result<i32> {
    use nix::unistd::{fork, ForkResult};
    use std::io::{Read, Write};
    let id = launch_args.id.to_owned();
    let (reader, writer) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    // SAFETY: gpurun runs no other threads here; the child runs the
    // container and leaves with _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(reader);
            let _ = nix::unistd::setsid();
            // Nothing of the caller's stays open: `id=$(gpurun run -d ...)`
            // returns once the id is printed, as with docker run -d.
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                use std::os::fd::AsRawFd;
                for fd in 0..3 {
                    // SAFETY: dup2 onto the standard descriptors only.
                    unsafe { libc::dup2(null.as_raw_fd(), fd) };
                }
            }
            let mut writer = std::fs::File::from(writer);
            launch_args.detach = false;
            launch_args.relay_terminal = false;
            let code =
                match launch::run_foreground(ctx, launch_args, true, false, Some(&mut writer)) {
                    Ok(code) => code,
                    Err(e) => {
                        let _ = writer.write_all(
                            format!("{}\n", crate::runtime::context::one_line(&e)).as_bytes(),
                        );
                        1
                    }
                };
            drop(writer);
            // A `run --image -d`'s image, left serving the container.
            squashfs::release(&ctx.root, &id);
            // SAFETY: ends the supervisor without the parent's exit path.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { .. } => {
            drop(writer);
            // One line: "started", or the reason it did not (the pipe stays
            // open while the container runs).
            let mut text = Vec::new();
            let mut reader = std::fs::File::from(reader);
            let mut byte = [0u8; 1];
            while reader.read(&mut byte).unwrap_or(0) == 1 {
                text.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            let text = String::from_utf8_lossy(&text).into_owned();
            if text.as_bytes().starts_with(launch::STARTED) {
                println!("{id}");
                return Ok(0);
            }
            let reason = text
                .lines()
                .next()
                .unwrap_or("the container ended before it started");
            anyhow::bail!("{reason}");
        }
    }
}

/// Which of `paths` are regular files in the image (not symlinks), so that
/// the host's copies can be bound over them without following anything the
/// image controls.
fn image_regular_files<'a>(rootfs: &Path, paths: &[&'a str]) -> Vec<&'a str> {
    let Ok(root) = Rootfs::open(rootfs) else {
        return Vec::new();
    };
    paths
        .iter()
        .copied()
        .filter(|p| Path::new(p).is_file())
        .filter(|p| {
            // No symlink on the way: the mount follows the same path.
            let parent = Path::new(p).parent().unwrap_or(Path::new("/"));
            root.real_dir(parent).as_deref() == Some(parent)
                && root
                    .open_in(Path::new(p), libc::O_PATH | libc::O_NOFOLLOW)
                    .and_then(|f| f.metadata())
                    .is_ok_and(|m| m.is_file())
        })
        .collect()
}
