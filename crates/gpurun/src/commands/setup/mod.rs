//! `gpurun setup containerd|docker|podman|lxc|slurm|crio`: registers gpurun in
//! the engine's own config file, in the spirit of `nvidia-ctk runtime
//! configure` (for LXC: gpurun's hooks in the default container config;
//! for Slurm: the runtime lines of oci.conf). Every other setting is kept, a second run changes nothing,
//! and a changed file is backed up first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cli::{Engine, SetupArgs};

mod containerd;
mod crio;
mod docker;
mod lxc;
mod podman;
mod slurm;

use containerd::{edit_containerd, edit_gpurun_config, installed_containerd_major};
use docker::{edit_docker, install_hook_link};
use lxc::{edit_lxc, lxc_hook_command, lxc_v2_device_majors};
use podman::edit_podman;
use slurm::{edit_slurm, slurm_command};

fn default_config(engine: Engine, spank: bool) -> PathBuf {
    let root = nix::unistd::geteuid().is_root();
    match engine {
        Engine::Containerd => "/etc/containerd/config.toml".into(),
        Engine::Docker => "/etc/docker/daemon.json".into(),
        Engine::Podman if root => "/etc/containers/containers.conf".into(),
        Engine::Podman => user_config_dir().join("containers/containers.conf"),
        Engine::Lxc if root => "/etc/lxc/default.conf".into(),
        Engine::Lxc => user_config_dir().join("lxc/default.conf"),
        Engine::Slurm if spank => slurm::default_plugstack(),
        Engine::Slurm => slurm::default_oci_conf(),
        Engine::Crio => crio::DROP_IN.into(),
    }
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
fn user_config_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| ".config".into())
}

/// A line-based config with the lines `is_old` picks taken out and `ours`
/// appended after one blank line, so that a second run changes nothing.
fn replace_lines(text: &str, is_old: impl Fn(&str) -> bool, ours: &[String]) -> String {
    let mut kept: Vec<&str> = text.lines().filter(|l| !is_old(l)).collect();
    while kept.last().is_some_and(|l| l.trim().is_empty()) {
        kept.pop();
    }
    let mut out = String::new();
    for line in kept {
        out.push_str(line);
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    for line in ours {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A config file's text ("" where it is missing) and whether it exists.
fn read_or_empty(path: &Path) -> Result<(String, bool)> {
    match fs::read_to_string(path) {
        Ok(text) => Ok((text, true)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), false)),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// What `write_edit` did.
enum Edit {
    Unchanged,
    /// Printed, for --dry-run.
    Shown,
    /// Written; the old file's backup, if there was one.
    Written(Option<PathBuf>),
}

/// Replaces `path`'s text `old` with `new` (see `replace_file`), or with
/// `dry_run` prints what it would become; nothing when they are the same.
fn write_edit(path: &Path, old: &str, new: &str, existed: bool, dry_run: bool) -> Result<Edit> {
    if new == old {
        Ok(Edit::Unchanged)
    } else if dry_run {
        println!("# {} would become:", path.display());
        print!("{new}");
        Ok(Edit::Shown)
    } else {
        replace_file(path, new, existed).map(Edit::Written)
    }
}

/// Writes `text` to `path` through a temporary file and a rename, with the
/// old file's permissions, after copying the old file to a backup.
fn replace_file(path: &Path, text: &str, existed: bool) -> Result<Option<PathBuf>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut backup = None;
    let mode = if existed {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let to = PathBuf::from(format!("{}.{stamp}.bak", path.display()));
        fs::copy(path, &to)
            .with_context(|| format!("back up {} to {}", path.display(), to.display()))?;
        backup = Some(to);
        fs::metadata(path)?.permissions().mode()
    } else {
        0o644
    };
    let tmp = PathBuf::from(format!("{}.gpurun-tmp", path.display()));
    fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, path).with_context(|| format!("replace {}", path.display()))?;
    Ok(backup)
}

pub fn setup(args: SetupArgs, settings: &crate::runtime::context::Settings) -> Result<i32> {
    let binary = match &args.binary {
        Some(b) => fs::canonicalize(b).with_context(|| format!("--binary {}", b.display()))?,
        None => fs::canonicalize(std::env::current_exe()?)?,
    };
    let binary_str = binary.to_str().context("the binary's path is not UTF-8")?;
    let name = &args.runtime_name;
    check_flags(&args)?;
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| default_config(args.engine, args.spank.is_some()));
    let plugin = match &args.spank {
        Some(p) => Some(fs::canonicalize(p).with_context(|| {
            format!(
                "--spank {}: build it with cargo build -p gpurun-spank",
                p.display()
            )
        })?),
        None => None,
    };
    let (old, existed) = read_or_empty(&path)?;
    let containerd_major = match args.engine {
        Engine::Containerd => installed_containerd_major(),
        _ => None,
    };
    let edit = |old: &str| -> Result<String> {
        match args.engine {
            Engine::Containerd => {
                edit_containerd(old, name, binary_str, args.default, containerd_major)
            }
            Engine::Docker => edit_docker(old, name, binary_str, args.default),
            Engine::Podman => edit_podman(old, name, binary_str, args.default),
            Engine::Lxc => lxc_hook_command(binary_str, settings)
                .map(|hook| edit_lxc(old, &hook, &lxc_v2_device_majors())),
            Engine::Slurm => match &plugin {
                Some(plugin) => {
                    slurm::plugstack_line(plugin, binary_str, &slurm_driver_flags(settings)?)
                        .map(|line| slurm::edit_plugstack(old, &line))
                }
                None => slurm_command(binary_str, &slurm_driver_flags(settings)?)
                    .map(|command| edit_slurm(old, &command)),
            },
            Engine::Crio => crio_spec_dirs().and_then(|dirs| {
                crio::edit_crio(
                    old,
                    &crio::CrioRuntime::here(name, binary_str, dirs, args.default),
                )
            }),
        }
        .with_context(|| format!("{}", path.display()))
    };
    if args.undo {
        undo(&args, &path, &old, existed, &binary, &edit)?;
        return Ok(0);
    }
    let new = edit(&old)?;

    let what = match args.engine {
        Engine::Lxc => "gpurun's LXC hooks".to_owned(),
        Engine::Slurm if plugin.is_some() => {
            "gpurun's SPANK plugin (srun --container-image)".to_owned()
        }
        Engine::Slurm => "gpurun as the runtime of srun --container".to_owned(),
        _ => format!("runtime {name:?}"),
    };
    match write_edit(&path, &old, &new, existed, args.dry_run)? {
        Edit::Unchanged => println!(
            "{} already registers {what}: nothing to change",
            path.display()
        ),
        Edit::Shown => {}
        Edit::Written(backup) => println!(
            "registered {what} ({binary_str}) in {}{}",
            path.display(),
            backup
                .map(|b| format!("; the old file is in {}", b.display()))
                .unwrap_or_default()
        ),
    }
    next_steps(&args, &binary)?;
    Ok(0)
}

/// The flags every engine checks: a runtime name an engine's config can
/// hold, and --multi-tenant for containerd only.
fn check_flags(args: &SetupArgs) -> Result<()> {
    let name = &args.runtime_name;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("--runtime-name {name:?}: use letters, digits, '-' and '_'");
    }
    if args.spank.is_some() && args.engine != Engine::Slurm {
        bail!("--spank is for Slurm: gpurun setup slurm --spank PLUGIN");
    }
    if args.multi_tenant && args.engine != Engine::Containerd {
        bail!(
            "--multi-tenant is for containerd (a Kubernetes node): leave it out for {:?}",
            args.engine
        );
    }
    Ok(())
}

/// What the engine needs beside its config (Docker's hook link, the
/// multi-tenant config, Slurm's state directory), and what to do next.
fn next_steps(args: &SetupArgs, binary: &Path) -> Result<()> {
    let name = &args.runtime_name;
    match args.engine {
        Engine::Docker => {
            let dir = docker::hook_dir(args.hook_dir.as_deref(), binary)?;
            install_hook_link(&dir, binary, args.dry_run)?;
            println!("restart dockerd to load it; then: docker run --runtime={name} --gpus all IMAGE nvidia-smi");
        }
        Engine::Containerd => {
            if args.multi_tenant {
                write_multi_tenant(args)?;
            }
            println!(
                "restart containerd to load it. For Kubernetes, this RuntimeClass selects it:"
            );
            println!("---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: {name}\nhandler: {name}");
        }
        Engine::Podman => println!("then: podman --runtime {name} run ..."),
        Engine::Crio => {
            println!("restart CRI-O to load it (systemctl restart crio). For Kubernetes, this RuntimeClass selects it:");
            println!("---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: {name}\nhandler: {name}");
        }
        Engine::Lxc => println!(
            "containers made from it get gpurun's hooks (for an existing one, run this with --config /var/lib/lxc/NAME/config); \
             then: lxc.environment = NVIDIA_VISIBLE_DEVICES=0 in its config"
        ),
        Engine::Slurm if args.spank.is_some() => println!(
            "srun and slurmstepd read it at each step; then: srun --container-image=./app.sqsh --gres=gpu:1 nvidia-smi"
        ),
        Engine::Slurm => {
            if !args.dry_run {
                make_slurm_state_parent()?;
            }
            println!("slurmd reads it for each step; then: srun --container=BUNDLE --gres=gpu:1 nvidia-smi");
        }
    }
    Ok(())
}

/// `setup ENGINE --undo`: the newest backup setup made of `path` goes back
/// in its place; with none, a file that holds exactly what setup writes
/// into an empty one was created by setup and is removed. Anything else
/// is left alone, with the reason.
fn undo(
    args: &SetupArgs,
    path: &Path,
    current: &str,
    existed: bool,
    binary: &Path,
    edit: &dyn Fn(&str) -> Result<String>,
) -> Result<()> {
    let backup = newest_backup(path)?;
    match (&backup, existed) {
        (Some(backup), _) => {
            if args.dry_run {
                println!("would put {} back as {}", backup.display(), path.display());
            } else {
                fs::rename(backup, path).with_context(|| {
                    format!("put {} back as {}", backup.display(), path.display())
                })?;
                println!("put {} back as {}", backup.display(), path.display());
            }
        }
        (None, true) if edit("")? == current => {
            if args.dry_run {
                println!("would remove {} (setup created it)", path.display());
            } else {
                fs::remove_file(path).with_context(|| format!("remove {}", path.display()))?;
                println!("removed {} (setup created it)", path.display());
            }
        }
        (None, true) => bail!(
            "{}: no backup from gpurun setup ({}.<time>.bak) and the file holds more than setup wrote: edit it by hand",
            path.display(),
            path.display()
        ),
        (None, false) => println!("{} does not exist: nothing to undo", path.display()),
    }
    let mut changed = backup.is_some() || existed;
    if args.engine == Engine::Docker {
        let dir = docker::hook_dir(args.hook_dir.as_deref(), binary)?;
        changed |= docker::remove_hook_link(&dir, binary, args.dry_run)?;
    }
    // Nothing put back, nothing for the engine to load again.
    if changed && !args.dry_run {
        println!("restart the engine to load it");
    }
    Ok(())
}

/// The newest `PATH.<stamp>.bak` that `replace_file` made.
fn newest_backup(path: &Path) -> Result<Option<PathBuf>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(None);
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut found: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .is_some_and(|n| {
                        n.strip_prefix(&prefix)
                            .and_then(|rest| rest.strip_suffix(".bak"))
                            .is_some_and(|stamp| stamp.len() == 15 && stamp.as_bytes()[8] == b'T')
                    })
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    // The stamps sort as times.
    found.sort();
    Ok(found.pop())
}

/// gpurun's config file with the settings of a shared node (read at each
/// container's create: nothing to restart).
fn write_multi_tenant(args: &SetupArgs) -> Result<()> {
    let path = args
        .gpurun_config
        .clone()
        .or_else(|| std::env::var_os("GPURUN_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/gpurun/config.toml"));
    let (old, existed) = read_or_empty(&path)?;
    let new = edit_gpurun_config(&old).with_context(|| format!("{}", path.display()))?;
    match write_edit(&path, &old, &new, existed, args.dry_run)? {
        Edit::Unchanged => println!(
            "{} already has the multi-tenant settings: nothing to change",
            path.display()
        ),
        Edit::Shown => {}
        Edit::Written(backup) => println!(
            "wrote the multi-tenant settings in {}{}: a container's own NVIDIA_VISIBLE_DEVICES counts only if it is privileged; the device plugin's volume mounts and CDI annotations count",
            path.display(),
            backup
                .map(|b| format!(" (the old file is in {})", b.display()))
                .unwrap_or_default()
        ),
    }
    Ok(())
}

/// The CDI spec directories gpurun reads, for CRI-O's `cdi_spec_dirs`.
fn crio_spec_dirs() -> Result<Vec<String>> {
    let policy = crate::runtime::spec::driver_paths::request_policy()?;
    Ok(policy
        .spec_dirs
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect())
}

/// The driver locations gpurun's flags, environment or config files give
/// that are not the defaults, for the runtime line.
fn slurm_driver_flags(
    settings: &crate::runtime::context::Settings,
) -> Result<Vec<(&'static str, PathBuf)>> {
    let roots = crate::runtime::spec::driver_paths::resolve(settings)?;
    let defaults = gpurun_gpu::roots::Roots::default();
    Ok([
        ("--driver-root", roots.driver_root, defaults.driver_root),
        ("--dev-root", roots.dev_root, defaults.dev_root),
        ("--proc-root", roots.proc_root, defaults.proc_root),
    ]
    .into_iter()
    .filter(|(_, path, default)| path != default)
    .map(|(flag, path, _)| (flag, path))
    .collect())
}

/// The sticky, world-writable parent of the per-user state directories
/// (each user's own is made 0700 by the runtime and must be theirs), and
/// a tmpfiles.d line that makes it again at boot (/run is a tmpfs).
fn make_slurm_state_parent() -> Result<()> {
    let parent = Path::new(slurm::STATE_PARENT);
    fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    fs::set_permissions(parent, fs::Permissions::from_mode(0o1777))?;
    let tmpfiles = Path::new("/etc/tmpfiles.d");
    if tmpfiles.is_dir() {
        let line = format!("d {} 1777 root root -\n", slurm::STATE_PARENT);
        let file = tmpfiles.join("gpurun-slurm.conf");
        if fs::read_to_string(&file).ok().as_deref() != Some(&line) {
            fs::write(&file, line).with_context(|| format!("write {}", file.display()))?;
        }
    }
    println!(
        "state: {}/USER, each made 0700 for its user ({} is sticky and world-writable, kept at boot by /etc/tmpfiles.d/gpurun-slurm.conf)",
        slurm::STATE_PARENT,
        slurm::STATE_PARENT
    );
    Ok(())
}
