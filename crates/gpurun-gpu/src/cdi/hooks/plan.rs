//! The plan for a set of hooks against one container's rootfs: a plain
//! value, printed by `--debug` and tested without root.

use super::*;

/// The plan for a set of hooks, against one container's rootfs: a plain
/// value, printed by `--debug` and tested without root.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookPlan {
    /// Links to make: `create-symlinks`' own (parents resolved inside the
    /// rootfs), then the SONAME links ldconfig would make.
    pub links: Vec<Link>,
    /// Linker-cache entries, highest priority first.
    pub ldcache: Vec<Entry>,
    /// The folders the cache was built from, in priority order.
    pub folders: Vec<PathBuf>,
    /// A musl image's loader path file, where it would miss a folder.
    pub musl_path: Option<crate::plan::musl::MuslPath>,
    /// The image's CUDA compat library: used or not, and why.
    pub cuda_compat: Option<String>,
    /// The `params` copy with `ModifyDeviceFiles: 0`, where the host has one.
    pub params: Option<String>,
    /// The application profile's text, where GPUs are given.
    pub application_profile: Option<String>,
    /// Device nodes whose mode `chmod` sets.
    pub device_modes: Vec<(PathBuf, u32)>,
    /// What each hook did, one line each, for `--debug`.
    pub done: Vec<String>,
    /// Hooks or parts of hooks passed over, and why.
    pub skipped: Vec<String>,
}

/// Host facts the hooks read: the real host's `/proc/driver/nvidia`.
pub struct HostFacts {
    pub params: Option<String>,
}

impl HostFacts {
    pub fn read() -> HostFacts {
        HostFacts {
            params: fs::read_to_string(PARAMS).ok(),
        }
    }
}

/// The GPU device minors (`/dev/nvidiaN`) the container is given, as device
/// entries or bind mounts.
pub fn gpu_minors(spec: &Spec) -> Vec<u32> {
    let is_gpu_node = |p: &Path| {
        p.to_str()
            .and_then(|s| s.strip_prefix("/dev/nvidia"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut minors: Vec<u32> = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().clone())
        .unwrap_or_default()
        .iter()
        .filter(|d| is_gpu_node(d.path()))
        .map(|d| d.minor() as u32)
        .collect();
    for m in spec.mounts().iter().flatten().filter(|m| is_bind(m)) {
        if is_gpu_node(m.destination()) {
            use std::os::unix::fs::MetadataExt;
            if let Some(meta) = m.source().as_ref().and_then(|s| fs::metadata(s).ok()) {
                minors.push(libc::minor(meta.rdev()));
            }
        }
    }
    minors.sort();
    minors.dedup();
    minors
}

/// The plan for `ops` in the container `spec` describes, whose rootfs is
/// `root`. `in_place` means the folders are already as the container sees
/// them (under `gpurun cdi-hook`, the mounts are made): the spec's binds
/// are not added to the view.
pub fn plan(ops: &[Op], spec: &Spec, root: &Rootfs, host: &HostFacts, in_place: bool) -> HookPlan {
    let mut p = HookPlan::default();
    // Paths as the container resolves them: parents through the image's
    // symlinks, inside the root.
    let resolve = |path: &Path| -> PathBuf {
        let clean = in_container(path);
        let (Some(parent), Some(name)) = (clean.parent(), clean.file_name()) else {
            return clean;
        };
        root.resolve(parent)
            .map_or_else(|_| parent.to_path_buf(), |(p, _)| p)
            .join(name)
    };
    let mut compat_folder = None;
    let mut folders: Vec<PathBuf> = Vec::new();
    for op in ops {
        match op {
            Op::CreateSymlinks { links } => {
                for l in links {
                    p.links.push(Link {
                        target: l.target.clone(),
                        link: resolve(&l.link),
                    });
                }
                p.done
                    .push(format!("create-symlinks: {} links", links.len()));
            }
            Op::EnableCudaCompat {
                host_driver_version,
                host_cuda_version,
                compat_root,
            } => {
                let host = HostVersions {
                    driver: host_driver_version,
                    cuda: Some(host_cuda_version.as_str()).filter(|v| !v.is_empty()),
                    compat_root: Some(compat_root.as_str()).filter(|v| !v.is_empty()),
                };
                compat_folder = plan_cuda_compat(&mut p, root, &host)
            }
            Op::UpdateLdcache { folders: f } => folders.extend(f.iter().map(|d| {
                let clean = in_container(d);
                root.resolve(&clean).map_or(clean, |(p, _)| p)
            })),
            Op::DisableDeviceNodeModification => plan_driver_params(&mut p, host),
            Op::UpdateApplicationProfile => plan_application_profile(&mut p, spec),
            Op::Chmod { mode, paths } => plan_chmod(&mut p, spec, *mode, paths, in_place),
            Op::Unknown { name } => p.skipped.push(format!(
                "{NVIDIA_CDI_HOOK} {name}: a hook gpurun does not know, skipped"
            )),
        }
    }
    if folders.is_empty() && compat_folder.is_none() {
        return p;
    }
    let binds = if in_place {
        Vec::new()
    } else {
        file_binds(spec)
    };
    plan_ldcache(&mut p, root, &binds, compat_folder, folders);
    p
}

/// What enable-cuda-compat is told of the host, and where the image's
/// compat folder is.
pub(super) struct HostVersions<'a> {
    pub driver: &'a str,
    pub cuda: Option<&'a str>,
    pub compat_root: Option<&'a str>,
}

/// enable-cuda-compat: the image's compat library, and its folder when used.
pub(super) fn plan_cuda_compat(
    p: &mut HookPlan,
    root: &Rootfs,
    host: &HostVersions,
) -> Option<PathBuf> {
    let mut folder = None;
    let dir = Path::new(
        host.compat_root
            .unwrap_or(crate::plan::cuda_compat::COMPAT_DIR),
    );
    match gpu_plan::find_cuda_compat(root, dir, host.driver, host.cuda) {
        Some(c) if c.used => {
            p.cuda_compat = Some(format!("{} used: {}", c.library.display(), c.why));
            folder = Some(c.dir);
        }
        Some(c) => p.cuda_compat = Some(format!("{} not used: {}", c.library.display(), c.why)),
        None => {}
    }
    p.done.push(format!(
        "enable-cuda-compat: {}",
        p.cuda_compat
            .as_deref()
            .unwrap_or("the image has no CUDA compat library")
    ));
    folder
}

/// disable-device-node-modification: the host's driver params with
/// ModifyDeviceFiles off.
pub(super) fn plan_driver_params(p: &mut HookPlan, host: &HostFacts) {
    match &host.params {
        Some(text) => {
            p.params = Some(gpu_plan::params_without_device_modification(text));
            p.done.push(format!(
                "disable-device-node-modification: {PARAMS} with ModifyDeviceFiles: 0"
            ));
        }
        None => p.done.push(format!(
            "disable-device-node-modification: the host has no {PARAMS}, nothing to do"
        )),
    }
}

/// update-application-profile: EGL sees only the GPUs the spec gives.
pub(super) fn plan_application_profile(p: &mut HookPlan, spec: &Spec) {
    let mask = gpu_minors(spec)
        .into_iter()
        .filter(|m| *m < 64)
        .fold(0u64, |mask, m| mask | (1 << m));
    if mask != 0 {
        p.application_profile = Some(format!(
            r#"{{"profiles":[{{"name":"_container_","settings":["EGLVisibleDGPUDevices",0x{mask:x}]}}],"rules":[{{"pattern":[],"profile":"_container_"}}]}}"#
        ));
    }
    p.done.push(format!(
        "update-application-profile: EGLVisibleDGPUDevices 0x{mask:x}"
    ));
}

/// chmod: device nodes the spec gives only (in place, any path).
pub(super) fn plan_chmod(
    p: &mut HookPlan,
    spec: &Spec,
    mode: u32,
    paths: &[PathBuf],
    in_place: bool,
) {
    let devices = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().clone())
        .unwrap_or_default();
    for path in paths {
        let path = in_container(path);
        if devices.iter().any(|d| d.path() == &path) {
            p.device_modes.push((path, mode));
        } else if !in_place && mode == 0o755 && devices.iter().any(|d| d.path().starts_with(&path))
        {
            // The runtime makes a device's directories 0755.
        } else if !in_place {
            p.skipped.push(format!(
                "chmod {:o} {}: not a device node the spec gives",
                mode,
                path.display()
            ));
        } else {
            p.device_modes.push((path, mode));
        }
    }
    p.done.push(format!("chmod: {} paths", paths.len()));
}

/// update-ldcache: the compat folder first, then the hooks' folders in
/// order (ldconfig reads 00-compat before 00-nvcr), each library once.
pub(super) fn plan_ldcache(
    p: &mut HookPlan,
    root: &Rootfs,
    binds: &[(PathBuf, PathBuf)],
    compat_folder: Option<PathBuf>,
    folders: Vec<PathBuf>,
) {
    let mut ordered: Vec<PathBuf> = compat_folder.into_iter().collect();
    for f in folders {
        if !ordered.contains(&f) {
            ordered.push(f);
        }
    }
    let mut entries: Vec<Entry> = Vec::new();
    for folder in &ordered {
        let view = folder_view(root, folder, binds, &p.links);
        let (found, soname_links) = scan_folder(folder, &view);
        for e in found {
            if !entries
                .iter()
                .any(|x| x.name == e.name && x.flags == e.flags)
            {
                entries.push(e);
            }
        }
        p.links.extend(soname_links);
    }
    p.done.push(format!(
        "update-ldcache: {} entries from {} folders",
        entries.len(),
        ordered.len()
    ));
    p.musl_path = crate::plan::musl::plan(root, &entries, crate::Platform::native());
    if let Some(musl) = &p.musl_path {
        p.done.push(format!(
            "update-ldcache: {} for the musl loader",
            musl.file.display()
        ));
    }
    p.ldcache = entries;
    p.folders = ordered;
}
