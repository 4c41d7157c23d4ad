//! Apply: the plan turned into edits of the OCI spec, which libcontainer
//! carries out inside the container's init, between clone and pivot_root.
//! No helper process runs: the linker cache is written here, natively.

pub mod spec_env;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use oci_spec::runtime::{
    LinuxDeviceBuilder, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxResources, Mount,
    MountBuilder, Spec,
};
use serde::Serialize;

use crate::formats::ldcache;
use crate::plan::mount_points;
use crate::plan::Plan;
use safe_fs::Rootfs;

/// Largest image ld.so.cache read; real ones are well under 1 MiB.
const MAX_IMAGE_LDCACHE: u64 = 16 << 20;

/// What applying did, for the numbered --debug steps.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// "node" (mknod by the runtime) or "bind" (host nodes bind-mounted).
    pub device_mode: &'static str,
    pub device_nodes: usize,
    pub cgroup_rules: usize,
    pub file_mounts: usize,
    /// Entries added to the image's linker cache.
    pub ldcache_entries: usize,
    /// Why the image's own cache was not used, if it was not.
    pub image_ldcache_problem: Option<String>,
    pub hooks_dropped: usize,
    /// How the mount points the image lacks were provided.
    pub mount_points: &'static str,
    /// Private overlays laid over image directories.
    pub overlays: usize,
    /// The node groups given to the process, as container gids.
    pub device_groups: Vec<u32>,
}

pub(crate) fn bind(source: &Path, destination: &Path, options: &[String]) -> Result<Mount> {
    Ok(MountBuilder::default()
        .destination(destination)
        .typ("bind")
        .source(source)
        .options(options.to_vec())
        .build()?)
}

/// Options for the files gpurun writes for the container (the linker cache,
/// the /proc/driver/nvidia copies): read-only data, nothing to run.
pub(crate) fn read_only_file_bind() -> Vec<String> {
    ["bind", "ro", "nosuid", "nodev", "noexec"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

pub fn has_user_namespace(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| {
            ns.iter()
                .any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::User)
        })
}

/// Where the spec already mounts something at an injected mount's
/// destination, the spec's wins: the engine's allocation says what is
/// there (the DRA driver's per-claim MPS pipe directory at
/// `/tmp/nvidia-mps`, a device plugin's own mounts), and an injected mount
/// after it would cover it.
fn keep_the_engines_mounts(spec_mounts: &[Mount], injected: &mut Vec<Mount>) {
    injected.retain(|m| {
        let taken = spec_mounts
            .iter()
            .any(|s| s.destination() == m.destination());
        if taken {
            tracing::debug!(
                "{} left to the spec's own mount there",
                m.destination().display()
            );
        }
        !taken
    });
}

/// The phases of `apply`, in order, each reported once it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    DeviceNodes,
    CgroupRules,
    DriverFiles,
    LinkerCache,
}

/// Edits `spec` to carry out `plan`. The files the container needs (the
/// layers that hold mount points the image lacks, the merged linker cache,
/// /proc/driver/nvidia copies) are kept in `shared`, named by their
/// contents, made once (see `mount_points`), and bind-mounted file by file.
/// None is secret, and none is in the container's own state directory, so
/// a container in a user namespace started by root reaches them too.
/// `on_step` is called after each phase, for the --debug steps (which the
/// caller numbers).
pub fn apply(
    spec: &mut Spec,
    plan: &Plan,
    rootfs: &Path,
    shared: &Path,
    on_step: &mut dyn FnMut(Phase, &Applied),
) -> Result<Applied> {
    let delivery = if has_user_namespace(spec) {
        NodeDelivery::Bind
    } else {
        NodeDelivery::Mknod
    };
    apply_delivering(spec, plan, rootfs, shared, delivery, on_step)
}

/// How device nodes reach the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeDelivery {
    /// The host's nodes bind-mounted: in a user namespace, where mknod is
    /// not allowed, and for an LXC mount hook, whose /dev may be the
    /// image's own.
    Bind,
    /// Made by the runtime with mknod from the spec's `linux.devices`.
    Mknod,
}

/// `apply`, with the device nodes delivered as `delivery` says, whatever
/// the spec's namespaces.
pub fn apply_delivering(
    spec: &mut Spec,
    plan: &Plan,
    rootfs: &Path,
    shared: &Path,
    delivery: NodeDelivery,
    on_step: &mut dyn FnMut(Phase, &Applied),
) -> Result<Applied> {
    let mut applied = Applied::default();
    // SAFETY: geteuid has no preconditions.
    let rootless = unsafe { libc::geteuid() } != 0;
    applied.device_groups = device_group_gids(spec, &plan.device_groups, rootless);
    give_groups(spec, &applied.device_groups);
    let spec_mounts: Vec<Mount> = spec.mounts().clone().unwrap_or_default();
    // The injected mounts, after the spec's own.
    let mut mounts: Vec<Mount> = Vec::new();

    let linux = spec.linux_mut().get_or_insert_with(Default::default);
    let mut left_out = Vec::new();
    match delivery {
        NodeDelivery::Bind => {
            let (binds, out) = node_binds(plan)?;
            mounts.extend(binds);
            left_out = out;
        }
        NodeDelivery::Mknod => add_node_devices(linux, plan)?,
    }
    applied.device_mode = match delivery {
        NodeDelivery::Bind => "bind",
        NodeDelivery::Mknod => "node",
    };
    applied.device_nodes = plan.device_nodes.len();
    on_step(Phase::DeviceNodes, &applied);
    applied.cgroup_rules = allow_nodes_in_cgroup(linux, plan)?;
    on_step(Phase::CgroupRules, &applied);

    // Driver files, read-only.
    for m in &plan.mounts {
        mounts.push(bind(&m.source, &m.destination, &m.options)?);
    }
    applied.file_mounts = plan.mounts.len();
    on_step(Phase::DriverFiles, &applied);

    mounts.extend(proc_driver_nvidia_mounts(plan, shared)?);

    if let Some(cache) = linker_cache_mount(plan, rootfs, shared, &mut applied)? {
        mounts.push(cache);
    }
    if let Some(musl) = &plan.musl_path {
        mounts.push(shared_file_bind(shared, &musl.text(), &musl.file)?);
    }
    on_step(Phase::LinkerCache, &applied);

    keep_the_engines_mounts(&spec_mounts, &mut mounts);
    let all = with_mount_points(spec, spec_mounts, mounts, rootfs, shared, &mut applied)?;
    spec.set_mounts(Some(all));

    // Environment: the plan's values win.
    spec_env::set_env(spec, &plan.env);
    set_dev_links(spec, &plan.dev_links, &left_out)?;
    // Docker's toolkit hook: gpurun has done its work; it must not run.
    applied.hooks_dropped = drop_prestart_hooks(spec, &plan.drop_prestart_hooks);
    Ok(applied)
}

/// The annotation libcontainer (gpurun's patch 53) makes /dev links from.
pub const DEV_LINKS_ANNOTATION: &str = "org.gpurun.dev-links";

/// The plan's /dev links, for libcontainer to make once /dev is there;
/// none to a node left out (`left_out`, container paths).
fn set_dev_links(spec: &mut Spec, links: &[(String, String)], left_out: &[String]) -> Result<()> {
    // The links are /dev/dri/by-path's, each to ../NODE in /dev/dri.
    let to_node = |(_, target): &&(String, String)| {
        let node = format!("/dev/dri/{}", target.trim_start_matches("../"));
        !left_out.contains(&node)
    };
    let links: Vec<&(String, String)> = links.iter().filter(to_node).collect();
    if links.is_empty() {
        return Ok(());
    }
    let mut annotations = spec.annotations().clone().unwrap_or_default();
    annotations.insert(
        DEV_LINKS_ANNOTATION.to_owned(),
        serde_json::to_string(&links)?,
    );
    spec.set_annotations(Some(annotations));
    Ok(())
}

/// The host's device nodes as bind mounts, and the nodes left out.
fn node_binds(plan: &Plan) -> Result<(Vec<Mount>, Vec<String>)> {
    let mut mounts = Vec::new();
    let mut left_out = Vec::new();
    for node in &plan.device_nodes {
        // A DRM card node is often the video group's alone, while its
        // render node is open to all: one this user cannot open is left
        // out (graphics work through the render node). Any other node
        // the user cannot open is an error the runtime names.
        if node.path.starts_with("/dev/dri/") && !can_open(&node.host_path) {
            tracing::debug!("{} left out: this user cannot open it", node.path);
            left_out.push(node.path.clone());
            continue;
        }
        mounts.push(bind(
            &node.host_path,
            Path::new(&node.path),
            &["bind".into(), "nosuid".into(), "noexec".into()],
        )?);
    }
    Ok((mounts, left_out))
}

/// The device nodes as `linux.devices`, made by the runtime with mknod;
/// the device cgroup must then allow them, or they open with EPERM.
fn add_node_devices(linux: &mut oci_spec::runtime::Linux, plan: &Plan) -> Result<()> {
    let mut devices = linux.devices().clone().unwrap_or_default();
    for node in &plan.device_nodes {
        devices.retain(|d| d.path() != Path::new(&node.path));
        devices.push(
            LinuxDeviceBuilder::default()
                .path(&node.path)
                .typ(LinuxDeviceType::C)
                .major(node.major as i64)
                .minor(node.minor as i64)
                .file_mode(node.file_mode)
                .uid(0u32)
                .gid(node.gid)
                .build()?,
        );
    }
    linux.set_devices(Some(devices));
    Ok(())
}

/// The container gids that stand for `host_gids`, the groups the plan's
/// nodes need. Without a user namespace a host gid is the container's. In
/// one that root started, each is translated through `linux.gidMappings`;
/// one not mapped there cannot be held inside, and is left out. Rootless,
/// setgroups is denied: none is given, and the process keeps the invoking
/// user's own groups (those that let it open the nodes on the host).
pub fn device_group_gids(spec: &Spec, host_gids: &[u32], rootless: bool) -> Vec<u32> {
    if !has_user_namespace(spec) {
        return host_gids.to_vec();
    }
    if rootless {
        if !host_gids.is_empty() {
            tracing::debug!(
                "device node groups {host_gids:?} not given: rootless, the process keeps the user's own groups"
            );
        }
        return Vec::new();
    }
    let mappings = spec
        .linux()
        .as_ref()
        .and_then(|l| l.gid_mappings().clone())
        .unwrap_or_default();
    host_gids
        .iter()
        .filter_map(|&host| {
            let inside = mappings.iter().find_map(|m| {
                let offset = host.checked_sub(m.host_id())?;
                (offset < m.size()).then(|| m.container_id() + offset)
            });
            if inside.is_none() {
                tracing::debug!(
                    "device node group {host} not given: the user namespace does not map it"
                );
            }
            inside
        })
        .collect()
}

/// Adds `gids` to `process.user.additionalGids`, each once.
fn give_groups(spec: &mut Spec, gids: &[u32]) {
    if gids.is_empty() {
        return;
    }
    let Some(process) = spec.process_mut() else {
        return;
    };
    let mut user = process.user().clone();
    let mut additional = user.additional_gids().clone().unwrap_or_default();
    for gid in gids {
        if !additional.contains(gid) {
            additional.push(*gid);
        }
    }
    user.set_additional_gids(Some(additional));
    process.set_user(user);
}

/// Allow rules for the nodes. They live in the spec, so they are part of
/// the container's cgroup from the start (and survive a systemd
/// daemon-reload). Returns how many were added.
fn allow_nodes_in_cgroup(linux: &mut oci_spec::runtime::Linux, plan: &Plan) -> Result<usize> {
    let mut resources: LinuxResources = linux.resources().clone().unwrap_or_default();
    let mut rules = resources.devices().clone().unwrap_or_default();
    for node in &plan.device_nodes {
        rules.push(
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(LinuxDeviceType::C)
                .major(node.major as i64)
                .minor(node.minor as i64)
                .access("rwm")
                .build()?,
        );
    }
    resources.set_devices(Some(rules));
    linux.set_resources(Some(resources));
    Ok(plan.device_nodes.len())
}

/// /proc/driver/nvidia: a read-only tmpfs with copies of three files, so
/// the container sees neither the other GPUs nor ModifyDeviceFiles=1.
/// Only where the kernel module is loaded: otherwise there is nothing
/// under the container's /proc to mask.
fn proc_driver_nvidia_mounts(plan: &Plan, shared: &Path) -> Result<Vec<Mount>> {
    let mut mounts = Vec::new();
    if let Some(copy) = &plan.proc_driver_nvidia {
        if Path::new("/proc/driver/nvidia").is_dir() {
            mounts.push(
                MountBuilder::default()
                    .destination("/proc/driver/nvidia")
                    .typ("tmpfs")
                    .source("tmpfs")
                    .options(vec![
                        "nosuid".into(),
                        "nodev".into(),
                        "noexec".into(),
                        "mode=0555".into(),
                    ])
                    .build()?,
            );
            for (name, text) in [
                ("params", &copy.params),
                ("version", &copy.version),
                ("registry", &copy.registry),
            ] {
                mounts.push(shared_file_bind(
                    shared,
                    text,
                    &Path::new("/proc/driver/nvidia").join(name),
                )?);
            }
            for bus in &copy.gpus {
                let gpu_dir = Path::new("/proc/driver/nvidia/gpus").join(bus);
                if gpu_dir.is_dir() {
                    mounts.push(bind(&gpu_dir, &gpu_dir, &read_only_file_bind())?);
                }
            }
        }
    }

    Ok(mounts)
}

/// The linker cache: the image's own (read inside the rootfs, never
/// following a symlink out; a missing or corrupt one is fine) plus the
/// injected libraries, written in glibc's format and bind-mounted
/// read-only over /etc/ld.so.cache. The image's file is not touched.
fn linker_cache_mount(
    plan: &Plan,
    rootfs: &Path,
    shared: &Path,
    applied: &mut Applied,
) -> Result<Option<Mount>> {
    if plan.ldcache.is_empty() {
        return Ok(None);
    }
    linker_cache_bind(&plan.ldcache, rootfs, shared, applied).map(Some)
}

/// The image's cache with `entries` on top, kept in `shared` by content,
/// as a read-only bind over /etc/ld.so.cache.
pub(crate) fn linker_cache_bind(
    entries: &[ldcache::Entry],
    rootfs: &Path,
    shared: &Path,
    applied: &mut Applied,
) -> Result<Mount> {
    let mut problem = None;
    let image_bytes = Rootfs::open(rootfs)
        .and_then(|r| r.read(Path::new("/etc/ld.so.cache"), MAX_IMAGE_LDCACHE))
        .unwrap_or_else(|e| {
            problem = Some(format!("image has no usable /etc/ld.so.cache: {e}"));
            Vec::new()
        });
    let file = shared_file(
        &shared.join("ldcache"),
        &[&image_bytes, &entries_key(entries)],
        || {
            let image = match ldcache::parse(&image_bytes) {
                Ok(entries) => entries,
                Err(e) => {
                    problem.get_or_insert_with(|| e.to_string());
                    Vec::new()
                }
            };
            ldcache::write(&ldcache::merge(image, entries))
        },
    )
    .context("write the container's ld.so.cache")?;
    applied.image_ldcache_problem = problem;
    applied.ldcache_entries = entries.len();
    bind(&file, Path::new("/etc/ld.so.cache"), &read_only_file_bind())
}

/// The spec's mounts, then the injected ones, with the mount points the
/// image lacks provided without changing the image (overlays placed before
/// the spec mount they must come after). A second name for a library in
/// the same directory (its SONAME) can be a symlink there instead of
/// another mount.
fn with_mount_points(
    spec: &Spec,
    spec_mounts: Vec<Mount>,
    mounts: Vec<Mount>,
    rootfs: &Path,
    shared: &Path,
    applied: &mut Applied,
) -> Result<Vec<Mount>> {
    with_mount_points_and(
        spec,
        spec_mounts,
        mounts,
        Vec::new(),
        rootfs,
        shared,
        applied,
    )
    .map(|(all, _)| all)
}

/// `with_mount_points`, with `extra` entries for the layers beside the
/// injected mounts' (links, the spec's own binds); returns what was
/// provided too.
pub(crate) fn with_mount_points_and(
    spec: &Spec,
    spec_mounts: Vec<Mount>,
    mut mounts: Vec<Mount>,
    extra: Vec<mount_points::Needed>,
    rootfs: &Path,
    shared: &Path,
    applied: &mut Applied,
) -> Result<(Vec<Mount>, mount_points::Provided)> {
    let mut needed = needed_by_binds(&mounts);
    needed.extend(extra);
    let read_only_root = spec
        .root()
        .as_ref()
        .and_then(|r| r.readonly())
        .unwrap_or(false);
    let provided = mount_points::provide(
        rootfs,
        &spec_mounts,
        &needed,
        read_only_root,
        has_user_namespace(spec),
        &shared.join("mountpoints"),
    )?;
    mounts.retain(|m| !provided.linked.contains(m.destination()));
    applied.mount_points = provided.how;
    applied.overlays = provided.overlays.len();
    if !provided.in_image.is_empty() {
        tracing::debug!(
            "mount points made in the image (no overlay can hold them): {:?}",
            provided.in_image
        );
    }
    let mut all = spec_mounts;
    let mut overlays = provided.overlays.clone();
    overlays.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, overlay) in overlays {
        all.insert(at, overlay);
    }
    all.extend(mounts);
    Ok((all, provided))
}

/// What the injected bind mounts need in the image: a file or directory
/// to mount over, or (for a second name of a file bound in the same
/// directory) a link to the name the file keeps there.
fn needed_by_binds(mounts: &[Mount]) -> Vec<mount_points::Needed> {
    let binds: Vec<&Mount> = mounts
        .iter()
        .filter(|m| m.typ().as_deref() == Some("bind"))
        .collect();
    let kept_name = kept_names(&binds);
    binds
        .iter()
        .map(|m| {
            let source = m.source().as_deref().unwrap_or(Path::new(""));
            let dest = m.destination();
            let parent = dest.parent().unwrap_or(Path::new("/"));
            let kept = kept_name
                .iter()
                .find(|(s, p, _)| *s == source && *p == parent)
                .map(|(_, _, name)| *name);
            let entry = match kept {
                Some(name) if Some(name) != dest.file_name() => {
                    mount_points::Entry::Link(PathBuf::from(name))
                }
                _ if source.is_dir() => mount_points::Entry::Dir,
                _ => mount_points::Entry::File,
            };
            mount_points::Needed {
                destination: dest.clone(),
                entry,
            }
        })
        .collect()
}

/// The name each bound file keeps in each directory: its own file name
/// where it is bound under it (`libcuda.so.535.104.05`), else the first.
fn kept_names<'a>(binds: &[&'a Mount]) -> Vec<(&'a Path, &'a Path, &'a std::ffi::OsStr)> {
    let mut kept_name: Vec<(&Path, &Path, &std::ffi::OsStr)> = Vec::new();
    for own_name_first in [true, false] {
        for m in binds {
            let source = m.source().as_deref().unwrap_or(Path::new(""));
            let dest = m.destination();
            let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
                continue;
            };
            let known = kept_name
                .iter()
                .any(|(s, p, _)| *s == source && *p == parent);
            if !known && (!own_name_first || source.file_name() == Some(name)) {
                kept_name.push((source, parent, name));
            }
        }
    }
    kept_name
}

/// The bytes that identify the injected cache entries.
fn entries_key(entries: &[ldcache::Entry]) -> Vec<u8> {
    let mut key = Vec::new();
    for e in entries {
        for part in [
            e.name.as_bytes(),
            e.path.as_bytes(),
            &e.flags.to_le_bytes(),
            &e.hwcap.to_le_bytes(),
        ] {
            key.extend_from_slice(&(part.len() as u32).to_le_bytes());
            key.extend_from_slice(part);
        }
    }
    key
}

/// `text` kept in `shared` by content, bind-mounted read-only at
/// `destination`.
pub fn shared_file_bind(shared: &Path, text: &str, destination: &Path) -> Result<Mount> {
    let file = shared_file(shared, &[b"file", text.as_bytes()], || {
        text.as_bytes().to_vec()
    })
    .with_context(|| {
        format!(
            "keep a copy for {} in {}",
            destination.display(),
            shared.display()
        )
    })?;
    bind(&file, destination, &read_only_file_bind())
}

/// A file in `store` named by the SHA-256 of `inputs`, holding what `make`
/// returns, made only if no container made it before: written under a
/// temporary name and renamed into place, so a concurrent create finds it
/// whole or makes its own.
fn shared_file(
    store: &Path,
    inputs: &[&[u8]],
    make: impl FnOnce() -> Vec<u8>,
) -> std::io::Result<PathBuf> {
    let name = mount_points::content_name(inputs);
    let file = store.join(&name);
    if file.is_file() {
        return Ok(file);
    }
    let bytes = make();
    fs::create_dir_all(store)?;
    let tmp = store.join(format!(".new-{}-{name}", std::process::id()));
    let written = fs::write(&tmp, &bytes).and_then(|()| fs::rename(&tmp, &file));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map(|()| file)
}

/// Whether this process may open `path` for reading and writing.
fn can_open(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        // SAFETY: a NUL-terminated path; access touches nothing.
        .is_ok_and(|p| unsafe { libc::access(p.as_ptr(), libc::R_OK | libc::W_OK) } == 0)
}

/// Removes the prestart hooks at `indexes`; returns how many went.
pub fn drop_prestart_hooks(spec: &mut Spec, indexes: &[usize]) -> usize {
    let Some(hooks) = spec.hooks_mut() else {
        return 0;
    };
    let Some(prestart) = hooks.prestart().clone() else {
        return 0;
    };
    let before = prestart.len();
    let kept: Vec<_> = prestart
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !indexes.contains(i))
        .map(|(_, h)| h)
        .collect();
    let dropped = before - kept.len();
    hooks.set_prestart((!kept.is_empty()).then_some(kept));
    dropped
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::{
        LinuxBuilder, LinuxIdMappingBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
        ProcessBuilder, UserBuilder,
    };

    use super::*;

    /// A spec whose process has `groups`, in a user namespace mapping
    /// container gids 0..65536 to host 100000.. and container 44 to host
    /// 44 when `userns`, else in none.
    fn spec(userns: bool, groups: Vec<u32>) -> Spec {
        let mut linux = LinuxBuilder::default();
        if userns {
            let map = |inside: u32, host: u32, size: u32| {
                LinuxIdMappingBuilder::default()
                    .container_id(inside)
                    .host_id(host)
                    .size(size)
                    .build()
                    .unwrap()
            };
            linux = linux
                .namespaces(vec![LinuxNamespaceBuilder::default()
                    .typ(LinuxNamespaceType::User)
                    .build()
                    .unwrap()])
                .gid_mappings(vec![map(0, 100_000, 44), map(44, 44, 1)]);
        }
        let mut spec = Spec::default();
        spec.set_linux(Some(linux.build().unwrap()));
        let user = UserBuilder::default()
            .uid(1000u32)
            .gid(1000u32)
            .additional_gids(groups)
            .build()
            .unwrap();
        spec.set_process(Some(ProcessBuilder::default().user(user).build().unwrap()));
        spec
    }

    #[test]
    fn without_a_user_namespace_the_host_groups_are_given_as_they_are() {
        assert_eq!(
            device_group_gids(&spec(false, vec![]), &[44, 109], false),
            [44, 109]
        );
    }

    #[test]
    fn in_a_user_namespace_root_started_only_mapped_groups_are_given() {
        // 44 maps to 44; 109 (host) is in no mapping; 100_005 is
        // container gid 5.
        let gids = device_group_gids(&spec(true, vec![]), &[44, 109, 100_005], false);
        assert_eq!(gids, [44, 5]);
    }

    #[test]
    fn rootless_no_group_is_given() {
        assert!(device_group_gids(&spec(true, vec![]), &[44], true).is_empty());
    }

    #[test]
    fn the_groups_join_the_spec_s_own_each_once() {
        let mut s = spec(false, vec![27, 44]);
        give_groups(&mut s, &[44, 109]);
        let user = s.process().as_ref().unwrap().user().clone();
        assert_eq!(user.additional_gids().clone().unwrap(), [27, 44, 109]);
    }

    /// The whole apply of a one-GPU compute plan over the fixed inventory
    /// (two GPUs, libcuda): the spec's edits, in a scratch directory.
    fn applied_spec(userns: bool) -> (Spec, Applied, Vec<Phase>, PathBuf) {
        let base =
            std::env::temp_dir().join(format!("gpurun-apply-{}-{userns}", std::process::id()));
        let rootfs = base.join("rootfs");
        fs::create_dir_all(rootfs.join("etc")).unwrap();
        fs::write(base.join("libcuda.so.535.309.01"), b"").unwrap();
        let inventory = crate::fuzzing::spec::inventory(&base);
        let mut spec = spec(userns, vec![]);
        spec_env::set_env(
            &mut spec,
            &[
                "NVIDIA_VISIBLE_DEVICES=1".into(),
                "NVIDIA_DRIVER_CAPABILITIES=compute".into(),
            ],
        );
        let request = crate::request::from_spec(&spec, || Ok(Default::default())).unwrap();
        let plan = crate::plan::make(&inventory, &request, Some(&rootfs)).unwrap();
        let mut phases = Vec::new();
        let applied = apply(
            &mut spec,
            &plan,
            &rootfs,
            &base.join("shared"),
            &mut |p, _| phases.push(p),
        )
        .unwrap();
        (spec, applied, phases, base)
    }

    fn mount_at<'a>(spec: &'a Spec, destination: &str) -> Option<&'a Mount> {
        spec.mounts()
            .iter()
            .flatten()
            .find(|m| m.destination() == Path::new(destination))
    }

    #[test]
    fn a_plan_becomes_nodes_rules_read_only_binds_and_a_linker_cache() {
        let (spec, applied, phases, base) = applied_spec(false);
        use Phase::*;
        assert_eq!(phases, [DeviceNodes, CgroupRules, DriverFiles, LinkerCache]);
        assert_eq!(applied.device_mode, "node");
        let linux = spec.linux().as_ref().unwrap();
        let nodes: Vec<_> = linux
            .devices()
            .iter()
            .flatten()
            .map(|d| d.path().clone())
            .collect();
        assert!(nodes.contains(&PathBuf::from("/dev/nvidia1")), "{nodes:?}");
        assert!(
            nodes.contains(&PathBuf::from("/dev/nvidiactl")),
            "{nodes:?}"
        );
        assert!(!nodes.contains(&PathBuf::from("/dev/nvidia0")), "{nodes:?}");
        // The device cgroup lets exactly the planned nodes through.
        let rules = linux.resources().as_ref().and_then(|r| r.devices().clone());
        let allowed: Vec<_> = rules
            .into_iter()
            .flatten()
            .filter(|r| r.allow())
            .map(|r| (r.major(), r.minor()))
            .collect();
        assert!(allowed.contains(&(Some(195), Some(1))), "{allowed:?}");
        assert!(allowed.contains(&(Some(195), Some(255))), "{allowed:?}");
        assert!(!allowed.contains(&(Some(195), Some(0))), "{allowed:?}");
        // libcuda bound read-only, nosuid, nodev from the driver root.
        let libcuda = spec
            .mounts()
            .iter()
            .flatten()
            .find(|m| m.destination().ends_with("libcuda.so.535.309.01"))
            .expect("libcuda is bound");
        let options = libcuda.options().clone().unwrap_or_default();
        for needed in ["ro", "nosuid", "nodev"] {
            assert!(options.iter().any(|o| o == needed), "{options:?}");
        }
        assert_eq!(
            libcuda.source().as_deref(),
            Some(base.join("libcuda.so.535.309.01").as_path())
        );
        // The linker cache: a file of the shared store over the image's,
        // naming libcuda.so.1.
        let cache = mount_at(&spec, "/etc/ld.so.cache").expect("a linker cache is bound");
        let source = cache.source().clone().unwrap();
        assert!(source.starts_with(base.join("shared")), "{source:?}");
        let entries = ldcache::parse(&fs::read(&source).unwrap()).unwrap();
        assert!(
            entries.iter().any(|e| e.name == "libcuda.so.1"),
            "{entries:?}"
        );
        assert_eq!(applied.ldcache_entries, entries.len());
        fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn in_a_user_namespace_the_nodes_are_bound_not_made() {
        let (spec, applied, _, base) = applied_spec(true);
        assert_eq!(applied.device_mode, "bind");
        let linux = spec.linux().as_ref().unwrap();
        assert!(linux.devices().iter().flatten().next().is_none());
        let node = mount_at(&spec, "/dev/nvidia1").expect("the GPU's node is bound");
        assert_eq!(node.source().as_deref(), Some(Path::new("/dev/nvidia1")));
        assert!(mount_at(&spec, "/dev/nvidia0").is_none());
        fs::remove_dir_all(base).unwrap();
    }
}
