//! GPUs for LXC containers (`gpurun lxc-hook`), as an `lxc.hook.mount`, in
//! place of `/usr/share/lxc/hooks/nvidia` and libnvidia-container.
//!
//! LXC runs a mount hook in the container's mount namespace (and, for an
//! unprivileged container, its user namespace) once the rootfs is mounted
//! at `LXC_ROOTFS_MOUNT` with /dev, /proc and the mount entries on it, and
//! before pivot_root. The request is read from the hook's environment,
//! which holds the container's `lxc.environment` (NVIDIA_VISIBLE_DEVICES,
//! NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*). The plan is the one every
//! gpurun container gets; its spec edits are carried out here with
//! libcontainer's own mount code, every destination resolved inside the
//! rootfs. Device nodes are the host's, bind-mounted (no mknod, so an image
//! /dev gets nothing); for a privileged container on cgroup v1 their allow
//! rules go into the container's devices cgroup from the start-host hook
//! (LXC resets that cgroup after the mount hooks). The files gpurun writes
//! (linker cache, mount-point layers) live on a tmpfs attached nowhere, so
//! everything goes away with the container's mount namespace: the rootfs
//! and the host keep nothing.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_gpu::{apply, flow, request, RootFlags, Roots};
use libcontainer::oci_spec::runtime::{
    LinuxDeviceType, LinuxNamespaceBuilder, LinuxNamespaceType, Mount, MountBuilder, Spec,
};
use libcontainer::rootfs::MountOptions;

use crate::runtime::logging::LxcStep;
use crate::runtime::{cgroups, context::Ctx, logging, protect::privilege, state::state_dir};
use safe_fs::detached_mount::{detached_mount, FsOption};

/// The spec mount type that stands for a mount LXC has already made.
const ALREADY_MOUNTED: &str = "x-gpurun-lxc-mounted";

/// The hook LXC runs (`lxc_args`: LXC's arguments, for hook version 0).
pub fn hook(ctx: &Ctx, lxc_args: &[String]) -> Result<i32> {
    let (section, kind) = match std::env::var("LXC_HOOK_VERSION").as_deref() {
        Ok("1") => (
            std::env::var("LXC_HOOK_SECTION").unwrap_or_default(),
            std::env::var("LXC_HOOK_TYPE").unwrap_or_default(),
        ),
        Ok("0") | Err(_) => (
            lxc_args.get(1).cloned().unwrap_or_default(),
            lxc_args.get(2).cloned().unwrap_or_default(),
        ),
        Ok(v) => bail!("LXC hook version {v:?} is not supported (0 and 1 are)"),
    };
    if section != "lxc" {
        bail!("lxc-hook runs from LXC only: set lxc.hook.mount = gpurun lxc-hook in the container's config (gpurun setup lxc)");
    }
    match kind.as_str() {
        "mount" => mount_hook(ctx),
        "start-host" => allow_devices(ctx),
        _ => bail!(
            "lxc-hook is a mount and start-host hook, not a {kind:?} hook: set lxc.hook.mount and lxc.hook.start-host (gpurun setup lxc)"
        ),
    }
}

/// Under the state root; `@` keeps it apart from every container id.
const LXC_DEVICES_DIR: &str = "@lxc-devices";

/// Where the mount hook leaves a privileged container's device rules for
/// its start-host hook: LXC writes the container's device cgroup after the
/// mount hooks (`devices.deny = a` clears what was allowed before), and
/// the start-host hook, which runs after that, does not see
/// lxc.environment. Named by the container's config file and name.
fn device_rules_file(ctx: &Ctx) -> Result<PathBuf> {
    let name = std::env::var("LXC_NAME").unwrap_or_default();
    let config = std::env::var("LXC_CONFIG_FILE").unwrap_or_default();
    let key = gpurun_gpu::plan::mount_points::content_name(&[name.as_bytes(), config.as_bytes()]);
    Ok(state_dir::resolve(ctx.settings.root.as_deref(), true)?
        .join(LXC_DEVICES_DIR)
        .join(format!("{}.devices", &key[..32])))
}

/// start-host: the GPU nodes' allow rules into the privileged container's
/// cgroup v1 devices controller, found from LXC_PID in the host's view.
fn allow_devices(ctx: &Ctx) -> Result<i32> {
    if !privilege::is_host_root() {
        return Ok(0);
    }
    let file = device_rules_file(ctx)?;
    let rules = match fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("read {}", file.display())),
    };
    let _ = fs::remove_file(&file);
    let pid = std::env::var("LXC_PID")
        .context("LXC_PID is not set: lxc-hook must run as LXC's start-host hook")?;
    let Some(dir) = devices_cgroup_of(&pid) else {
        tracing::debug!("no cgroup v1 devices controller: the container's config allows the GPU nodes (lxc.cgroup2.devices.allow, written by gpurun setup lxc)");
        return Ok(0);
    };
    let allow = dir.join("devices.allow");
    for rule in rules.lines().filter(|l| is_device_rule(l)) {
        fs::write(&allow, rule).with_context(|| format!("allow {rule} in {}", allow.display()))?;
    }
    tracing::debug!(target: "gpurun::steps", "{} GPU nodes allowed in {}", LxcStep::NodesAllowed.number(), dir.display());
    Ok(0)
}

/// "c MAJOR:MINOR rwm", nothing else.
fn is_device_rule(line: &str) -> bool {
    let Some(numbers) = line.strip_prefix("c ").and_then(|l| l.strip_suffix(" rwm")) else {
        return false;
    };
    numbers
        .split_once(':')
        .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
}

/// The v1 devices cgroup directory of `pid`, read in the host's views.
fn devices_cgroup_of(pid: &str) -> Option<PathBuf> {
    let mount_point = devices_mount_point()?;
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = cgroups::host::in_proc_cgroup(&cgroups, |controllers| {
        controllers.split(',').any(|c| c == "devices")
    })?;
    let dir = mount_point.join(path.trim_start_matches('/'));
    dir.join("devices.allow").exists().then_some(dir)
}

fn devices_mount_point() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        let mut rest = rest.split(' ');
        let (fstype, _, super_options) = (rest.next()?, rest.next()?, rest.next()?);
        let point = fields.split(' ').nth(4)?;
        (fstype == "cgroup" && super_options.split(',').any(|o| o == "devices"))
            .then(|| PathBuf::from(unescape_mountinfo(point)))
    })
}

fn mount_hook(ctx: &Ctx) -> Result<i32> {
    // The container's request: the NVIDIA variables of lxc.environment (and
    // a legacy image's CUDA_VERSION). Nothing else of the caller's.
    let env: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("NVIDIA_") || k == "CUDA_VERSION")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let env_refs: Vec<&str> = env.iter().map(String::as_str).collect();
    let req = request::from_env(&env_refs)?;
    if !req.wants_gpu() {
        return Ok(0);
    }
    let rootfs = lxc_rootfs()?;
    logging::start_steps();
    let privileged = privilege::is_host_root();
    let Some(plan) = plan_for(ctx, req, &rootfs, privileged)? else {
        return Ok(0);
    };
    let scratch = detached_tmpfs().context("make a private tmpfs for the hook's files")?;
    let scratch_dir = PathBuf::from(format!("/proc/self/fd/{}", scratch.as_raw_fd()));
    let existing = mounts_under(&rootfs)?;
    let mut spec = spec_of_existing(&existing, privileged)?;
    // Bound even for a privileged container: its /dev may be the image's.
    let applied = apply::apply_delivering(
        &mut spec,
        &plan,
        &rootfs,
        &scratch_dir.join("shared"),
        apply::NodeDelivery::Bind,
        &mut |_, _| {},
    )?;
    mount_all(&spec, &existing, &rootfs)?;
    tracing::debug!(
        target: "gpurun::steps",
        "{} {} device nodes bound, {} {} driver files, {} linker cache with {} entries, {} private overlays",
        LxcStep::DeviceNodes.number(),
        applied.device_nodes,
        LxcStep::DriverFiles.number(),
        applied.file_mounts,
        LxcStep::LinkerCache.number(),
        applied.ldcache_entries,
        applied.overlays
    );
    // Device access: a privileged container's devices cgroup allows only
    // what its config lists. LXC writes it after this hook, so the rules
    // are left for the start-host hook. An unprivileged container has no
    // device rules of its own (the host's node permissions apply).
    if privileged {
        write_device_rules(ctx, &spec)?;
    }
    Ok(0)
}

/// LXC's mounted root filesystem, from its hook environment.
fn lxc_rootfs() -> Result<PathBuf> {
    let rootfs = PathBuf::from(
        std::env::var_os("LXC_ROOTFS_MOUNT")
            .context("LXC_ROOTFS_MOUNT is not set: lxc-hook must run as LXC's mount hook")?,
    );
    if !rootfs.is_absolute() || !rootfs.is_dir() {
        bail!(
            "LXC_ROOTFS_MOUNT {}: not a mounted root filesystem",
            rootfs.display()
        );
    }
    Ok(rootfs)
}

/// The plan for the request, from the hook's own driver locations; `None`
/// where the container gets no GPU after all.
fn plan_for(
    ctx: &Ctx,
    req: request::Request,
    rootfs: &Path,
    privileged: bool,
) -> Result<Option<gpurun_gpu::plan::Plan>> {
    // An unprivileged container's root cannot trust (or write) the host
    // root's driver cache; its inventory is made afresh.
    let cache = if privileged {
        Some(state_dir::resolve(ctx.settings.root.as_deref(), true)?.join(flow::CACHE_DIR))
    } else {
        None
    };
    // Driver locations from the hook's own flags and /etc/gpurun only:
    // lxc.environment reaches hooks too, and `lxc-create -t oci` fills it
    // from the image's Env, so GPURUN_* there must not steer the hook.
    let roots = Roots::resolve(
        &RootFlags {
            driver_root: ctx.settings.driver_root.clone(),
            dev_root: ctx.settings.dev_root.clone(),
            proc_root: ctx.settings.proc_root.clone(),
        },
        &|_| None,
    )?;
    // No Slurm job either: SLURM_* would come from that same environment.
    let decision = flow::decide_request(|| Ok(roots), req, None, Some(rootfs), cache.as_deref())?;
    let flow::Decision::Planned { plan, .. } = decision else {
        return Ok(None);
    };
    let plan = *plan;
    tracing::debug!(
        target: "gpurun::steps",
        "{} GPU request resolved for LXC container {}: GPUs {:?}, driver {}",
        LxcStep::GpuRequest.number(),
        std::env::var("LXC_NAME").unwrap_or_default(),
        plan.gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
        plan.driver_version
    );
    Ok(Some(plan))
}

/// A spec that holds LXC's mounts as already made, so the plan's mounts
/// are placed among them (and a user namespace where unprivileged, for the
/// overlay options it needs).
fn spec_of_existing(existing: &[PathBuf], privileged: bool) -> Result<Spec> {
    let mut spec = Spec::default();
    spec.set_mounts(Some(
        existing
            .iter()
            .map(|dest| {
                MountBuilder::default()
                    .destination(dest)
                    .typ(ALREADY_MOUNTED)
                    .build()
            })
            .collect::<Result<Vec<Mount>, _>>()?,
    ));
    if !privileged {
        let linux = spec.linux_mut().get_or_insert_with(Default::default);
        linux.set_namespaces(Some(vec![LinuxNamespaceBuilder::default()
            .typ(LinuxNamespaceType::User)
            .build()?]));
    }
    Ok(spec)
}

/// Makes the plan's mounts in the container's root. An overlay would hide
/// a mount LXC made inside it: refused.
fn mount_all(spec: &Spec, existing: &[PathBuf], rootfs: &Path) -> Result<()> {
    let mounts: Vec<&Mount> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| m.typ().as_deref() != Some(ALREADY_MOUNTED))
        .collect();
    for m in &mounts {
        if m.typ().as_deref() != Some("overlay") {
            continue;
        }
        if let Some(hidden) = existing
            .iter()
            .find(|e| e.starts_with(m.destination()) && *e != m.destination())
        {
            bail!(
                "{} is mounted by LXC inside {}, where gpurun needs mount points the image lacks: add the GPU files' mount points to the image, or move that mount",
                hidden.display(),
                m.destination().display()
            );
        }
    }
    let mounter = libcontainer::rootfs::Mount::new();
    let options = MountOptions {
        root: rootfs,
        label: None,
        cgroup_ns: false,
    };
    for m in &mounts {
        mounter
            .setup_mount(m, &options)
            .with_context(|| format!("mount {} in the container", m.destination().display()))?;
    }
    Ok(())
}

/// The plan's character-device allow rules, for the start-host hook.
fn write_device_rules(ctx: &Ctx, spec: &Spec) -> Result<()> {
    let rules: String = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().as_ref())
        .into_iter()
        .flatten()
        .filter(|d| d.allow() && d.typ() == Some(LinuxDeviceType::C))
        .filter_map(|d| Some(format!("c {}:{} rwm\n", d.major()?, d.minor()?)))
        .collect();
    let file = device_rules_file(ctx)?;
    if let Some(dir) = file.parent() {
        fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let tmp = file.with_extension("new");
    fs::write(&tmp, &rules)
        .and_then(|()| fs::rename(&tmp, &file))
        .with_context(|| format!("write {}", file.display()))
}

/// A tmpfs of this process alone, attached nowhere: what is bound from it
/// lives as long as the container's mounts do.
fn detached_tmpfs() -> std::io::Result<OwnedFd> {
    detached_mount(
        c"tmpfs",
        &[FsOption::required(c"mode", c"0755")],
        libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
    )
}

/// Mount points strictly below `rootfs` (as container paths): LXC's /dev,
/// /proc, /sys and mount entries, which are not the image's.
fn mounts_under(rootfs: &Path) -> Result<Vec<PathBuf>> {
    let text = fs::read_to_string("/proc/self/mountinfo").context("read /proc/self/mountinfo")?;
    Ok(mount_points_below(&text, rootfs))
}

fn mount_points_below(mountinfo: &str, rootfs: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter_map(|point| {
            let rel = point.strip_prefix(rootfs).ok()?;
            (!rel.as_os_str().is_empty()).then(|| Path::new("/").join(rel))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// mountinfo writes space, tab, newline and backslash as \ooo.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_below_the_rootfs_as_container_paths() {
        let info = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
90 22 8:1 /tmp/c/rootfs /usr/lib/lxc/rootfs rw - ext4 /dev/sda1 rw
91 90 0:50 / /usr/lib/lxc/rootfs/dev rw - tmpfs none rw
92 90 0:51 / /usr/lib/lxc/rootfs/proc rw - proc proc rw
93 90 0:52 / /usr/lib/lxc/rootfs/mnt/with\\040space rw - tmpfs none rw
94 22 0:53 / /usr/lib/lxc/rootfsother rw - tmpfs none rw
";
        assert_eq!(
            mount_points_below(info, Path::new("/usr/lib/lxc/rootfs")),
            vec![
                PathBuf::from("/dev"),
                PathBuf::from("/mnt/with space"),
                PathBuf::from("/proc")
            ]
        );
    }

    #[test]
    fn only_plain_allow_rules_are_written() {
        assert!(is_device_rule("c 195:0 rwm"));
        assert!(!is_device_rule("a"));
        assert!(!is_device_rule("c 195:* rwm"));
        assert!(!is_device_rule("c 195:0 rwm\nb 8:0 rwm"));
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo("a\\040b\\011c\\134d"), "a b\tc\\d");
        assert_eq!(unescape_mountinfo("trailing\\04"), "trailing\\04");
    }
}
