//! NVIDIA's CDI hooks (`nvidia-cdi-hook SUB …`, `nvidia-ctk hook SUB …`,
//! or `gpurun cdi-hook SUB …`) carried out by gpurun itself: no hook
//! process, no toolkit on the host.
//!
//! An engine that applied NVIDIA's CDI spec hands over a config with the
//! driver files bind-mounted at their driver-root paths and createContainer
//! hooks that finish the job inside the rootfs (SONAME and `.so` links, the
//! linker cache, CUDA compat, a `params` copy). Here each hook is parsed
//! into an [`Op`] (pure, fuzzed), the ops are planned against the
//! container's view of its folders ([`plan`]: the image's files plus the
//! spec's bind mounts, resolved inside the rootfs), and the plan becomes
//! spec edits ([`apply`]) that libcontainer carries out in the container's
//! init before pivot_root: links in the private mount-point layer (or the
//! engine's own container layer), the linker cache bound over
//! `/etc/ld.so.cache`. `gpurun cdi-hook` runs the same plan in place, for
//! runc and crun ([`run_in_place`]).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use oci_spec::runtime::{Hook, Mount, Spec};
use serde::Serialize;

use crate::apply::{self, Applied};
use crate::ldcache::{self, Entry};
use crate::mount_points::{Entry as LayerEntry, Needed};
use crate::plan;
use safe_fs::Rootfs;

/// The hook programs carried out natively, by file name.
pub const NVIDIA_CDI_HOOK: &str = "nvidia-cdi-hook";
pub const NVIDIA_CTK: &str = "nvidia-ctk";
/// gpurun's own hook subcommand (`gpurun cdi-hook SUB …`).
pub const GPURUN_SUBCOMMAND: &str = "cdi-hook";
/// The variable NVIDIA's CDI spec sets beside its edits.
pub const LIBCUDA_DIR_ENV: &str = "NVIDIA_CTK_LIBCUDA_DIR";
const APPLICATION_PROFILE: &str = "/etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf";
const PARAMS: &str = "/proc/driver/nvidia/params";
/// Largest image ld.so.cache read; real ones are well under 1 MiB.
const MAX_IMAGE_LDCACHE: u64 = 16 << 20;

/// One hook's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "hook")]
pub enum Op {
    /// `--link TARGET::LINK`, repeatable.
    CreateSymlinks {
        links: Vec<Link>,
    },
    EnableCudaCompat {
        host_driver_version: String,
    },
    /// `--folder DIR`, repeatable.
    UpdateLdcache {
        folders: Vec<PathBuf>,
    },
    DisableDeviceNodeModification,
    UpdateApplicationProfile,
    Chmod {
        mode: u32,
        paths: Vec<PathBuf>,
    },
    /// A subcommand gpurun does not know: skipped with a warning, as the
    /// toolkit's own hook does.
    Unknown {
        name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// What the link points to, as written (inside the container).
    pub target: PathBuf,
    /// Where it stands, as written (inside the container).
    pub link: PathBuf,
}

impl Op {
    pub fn name(&self) -> &str {
        match self {
            Op::CreateSymlinks { .. } => "create-symlinks",
            Op::EnableCudaCompat { .. } => "enable-cuda-compat",
            Op::UpdateLdcache { .. } => "update-ldcache",
            Op::DisableDeviceNodeModification => "disable-device-node-modification",
            Op::UpdateApplicationProfile => "update-application-profile",
            Op::Chmod { .. } => "chmod",
            Op::Unknown { name } => name,
        }
    }
}

/// The hook's arguments after the program (and `hook` / `cdi-hook`) if
/// `path` and `args` name one of NVIDIA's CDI hooks or gpurun's own;
/// `None` for any other hook.
pub fn nvidia_hook_args<'a>(path: &Path, args: &'a [String]) -> Option<&'a [String]> {
    let program = path.file_name()?.to_str()?;
    let rest = args.get(1..).unwrap_or_default();
    match program {
        NVIDIA_CDI_HOOK => Some(rest),
        NVIDIA_CTK if rest.first().map(String::as_str) == Some("hook") => Some(&rest[1..]),
        "gpurun" if rest.first().map(String::as_str) == Some(GPURUN_SUBCOMMAND) => Some(&rest[1..]),
        _ => None,
    }
}

/// Parses a hook's subcommand and flags (`--flag VALUE`, `--flag=VALUE`,
/// `-flag VALUE`, as the toolkit's CLI takes them). Global flags before
/// the subcommand (`--debug`) are passed over. A flag the subcommand does
/// not know is passed over too (newer toolkits add testing flags); a
/// malformed value is an error, as it is for the toolkit's hook.
pub fn parse(args: &[String]) -> Result<Op> {
    let mut rest = args.iter().skip_while(|a| a.starts_with('-'));
    let Some(sub) = rest.next() else {
        bail!("no hook subcommand given");
    };
    let mut flags: Vec<(String, String)> = Vec::new();
    let mut rest = rest.peekable();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), v.to_owned()),
            None => {
                let value = match rest.peek() {
                    Some(v) if !v.starts_with('-') => rest.next().cloned().unwrap_or_default(),
                    _ => String::new(),
                };
                (flag.to_owned(), value)
            }
        };
        flags.push((name, value));
    }
    let all = |name: &str| -> Vec<String> {
        flags
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    Ok(match sub.as_str() {
        "create-symlinks" => {
            let mut links = Vec::new();
            for spec in all("link") {
                let Some((target, link)) = spec.split_once("::") else {
                    bail!("create-symlinks: invalid symlink specification {spec:?} (want TARGET::LINK)");
                };
                if target.is_empty() || link.is_empty() || link.contains("::") {
                    bail!("create-symlinks: invalid symlink specification {spec:?} (want TARGET::LINK)");
                }
                let link = Link {
                    target: target.into(),
                    link: link.into(),
                };
                if !links.contains(&link) {
                    links.push(link);
                }
            }
            Op::CreateSymlinks { links }
        }
        "enable-cuda-compat" => Op::EnableCudaCompat {
            host_driver_version: all("host-driver-version").pop().unwrap_or_default(),
        },
        "update-ldcache" => Op::UpdateLdcache {
            folders: all("folder").into_iter().map(PathBuf::from).collect(),
        },
        "disable-device-node-modification" => Op::DisableDeviceNodeModification,
        "update-application-profile" => Op::UpdateApplicationProfile,
        "chmod" => {
            let text = all("mode").pop().unwrap_or_default();
            let mode = u32::from_str_radix(text.trim(), 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .with_context(|| format!("chmod: the mode {text:?} is not an octal file mode"))?;
            let paths: Vec<PathBuf> = all("path").into_iter().map(PathBuf::from).collect();
            if paths.iter().any(|p| p.as_os_str().is_empty()) {
                bail!("chmod: paths must not be empty");
            }
            Op::Chmod { mode, paths }
        }
        other => Op::Unknown {
            name: other.to_owned(),
        },
    })
}

/// A path as the container names it, made absolute and clean: `..` stops
/// at `/`, as it does for a process whose root it is.
pub fn in_container(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// Removes the NVIDIA CDI hooks from every stage that may hold them and
/// parses each; the other hooks stay as they are.
pub fn take(spec: &mut Spec) -> Result<Vec<Op>> {
    let Some(hooks) = spec.hooks_mut().as_mut() else {
        return Ok(Vec::new());
    };
    let mut ops = Vec::new();
    let mut take_from = |list: Option<Vec<Hook>>| -> Result<Option<Vec<Hook>>> {
        let Some(list) = list else { return Ok(None) };
        let mut kept = Vec::new();
        for hook in list {
            let args = hook.args().clone().unwrap_or_default();
            match nvidia_hook_args(hook.path(), &args) {
                Some(rest) => ops
                    .push(parse(rest).with_context(|| format!("hook {}", hook.path().display()))?),
                None => kept.push(hook),
            }
        }
        Ok((!kept.is_empty()).then_some(kept))
    };
    let create_runtime = take_from(hooks.create_runtime().clone())?;
    let create_container = take_from(hooks.create_container().clone())?;
    #[allow(deprecated)]
    let prestart = take_from(hooks.prestart().clone())?;
    hooks.set_create_runtime(create_runtime);
    hooks.set_create_container(create_container);
    #[allow(deprecated)]
    hooks.set_prestart(prestart);
    Ok(ops)
}

/// Whether the engine applied NVIDIA's CDI edits to `spec` (its hooks, or
/// the variable the spec sets): then gpurun's own request path adds
/// nothing, so nothing is injected twice and the image's own
/// `NVIDIA_VISIBLE_DEVICES=all` never widens what CDI gave.
pub fn carries_nvidia_cdi_edits(spec: &Spec) -> bool {
    let hooks = spec.hooks().as_ref();
    #[allow(deprecated)]
    let lists = hooks
        .map(|h| {
            [h.create_runtime(), h.create_container(), h.prestart()]
                .into_iter()
                .flatten()
                .flatten()
                .cloned()
                .collect::<Vec<Hook>>()
        })
        .unwrap_or_default();
    lists
        .iter()
        .any(|h| nvidia_hook_args(h.path(), h.args().as_deref().unwrap_or_default()).is_some())
        || crate::request::environment(spec).contains_key(LIBCUDA_DIR_ENV)
}

/// What a name in a library folder is, as the container will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A regular file: its SONAME, if it is a shared library.
    File { soname: Option<String> },
    /// A symlink, with its target as written.
    Symlink(PathBuf),
}

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

/// The spec's bind mounts of files (not directories), as (destination,
/// source).
fn file_binds(spec: &Spec) -> Vec<(PathBuf, PathBuf)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| is_bind(m))
        .filter_map(|m| Some((m.destination().clone(), m.source().clone()?)))
        .filter(|(_, source)| fs::metadata(source).is_ok_and(|m| !m.is_dir()))
        .collect()
}

fn is_bind(m: &Mount) -> bool {
    m.typ().as_deref() == Some("bind")
        || m.options()
            .iter()
            .flatten()
            .any(|o| o == "bind" || o == "rbind")
}

/// The names in `folder` (symlink-free, inside the rootfs) as the
/// container will see them: the image's entries, then the spec's bind
/// mounts over them, then the planned links.
fn folder_view(
    root: &Rootfs,
    folder: &Path,
    binds: &[(PathBuf, PathBuf)],
    links: &[Link],
) -> BTreeMap<String, Seen> {
    let mut view = BTreeMap::new();
    if root.real_dir(folder).as_deref() == Some(folder) {
        let host_dir = root
            .host_path()
            .join(folder.strip_prefix("/").unwrap_or(folder));
        for entry in fs::read_dir(host_dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.contains(".so") {
                continue;
            }
            let path = folder.join(&name);
            let seen = match root.read_link(&path) {
                Ok(Some(target)) => Seen::Symlink(target),
                Ok(None) => Seen::File {
                    soname: root
                        .open_in(&path, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                        .ok()
                        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
                        .and_then(|mut f| crate::elf::soname_of(&mut f)),
                },
                Err(_) => continue,
            };
            view.insert(name, seen);
        }
    }
    for (dest, source) in binds {
        if dest.parent() == Some(folder) {
            if let Some(name) = dest.file_name() {
                view.insert(
                    name.to_string_lossy().into_owned(),
                    Seen::File {
                        soname: crate::elf::soname(source),
                    },
                );
            }
        }
    }
    for l in links {
        if l.link.parent() == Some(folder) {
            if let Some(name) = l.link.file_name() {
                view.insert(
                    name.to_string_lossy().into_owned(),
                    Seen::Symlink(l.target.clone()),
                );
            }
        }
    }
    view
}

/// ldconfig's reading of one folder: an entry for each library's SONAME
/// (and the SONAME link it would make where none is there), and one for
/// each symlink that names its target's SONAME or is its `.so` name
/// (glibc's `search_dir`).
fn scan_folder(folder: &Path, view: &BTreeMap<String, Seen>) -> (Vec<Entry>, Vec<Link>) {
    let entry = |name: &str| Entry {
        name: name.to_owned(),
        path: folder.join(name).to_string_lossy().into_owned(),
        flags: ldcache::FLAG_X86_64_LIBC6,
        hwcap: 0,
    };
    let (mut entries, mut links) = (Vec::new(), Vec::new());
    let mut with_links = view.clone();
    for (name, seen) in view {
        if let Seen::File {
            soname: Some(soname),
        } = seen
        {
            if !view.contains_key(soname) {
                links.push(Link {
                    target: name.into(),
                    link: folder.join(soname),
                });
                with_links.insert(soname.clone(), Seen::Symlink(name.into()));
            }
        }
    }
    let view = &with_links;
    let soname_of = |name: &str| -> Option<String> {
        let mut name = name.to_owned();
        for _ in 0..8 {
            match view.get(&name)? {
                Seen::File { soname } => return soname.clone(),
                Seen::Symlink(target) => {
                    // Only a link within the folder is followed here.
                    let t = target.file_name()?.to_string_lossy().into_owned();
                    if target
                        .parent()
                        .is_some_and(|p| !p.as_os_str().is_empty() && in_container(p) != folder)
                    {
                        return None;
                    }
                    name = t;
                }
            }
        }
        None
    };
    for (name, seen) in view {
        match seen {
            Seen::File {
                soname: Some(soname),
            } => entries.push(entry(soname)),
            Seen::File { soname: None } => {}
            Seen::Symlink(target) => {
                let Some(soname) = soname_of(name) else {
                    continue;
                };
                let target_name = target.file_name().unwrap_or_default().to_string_lossy();
                if *target_name == soname
                    || (name.ends_with(".so") && soname.starts_with(name.as_str()))
                    || *name == soname
                {
                    entries.push(entry(name));
                } else {
                    entries.push(entry(&soname));
                }
            }
        }
    }
    (entries, links)
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
fn gpu_minors(spec: &Spec) -> Vec<u32> {
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
            } => compat_folder = plan_cuda_compat(&mut p, root, host_driver_version),
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

/// enable-cuda-compat: the image's compat library, and its folder when used.
fn plan_cuda_compat(p: &mut HookPlan, root: &Rootfs, host_driver_version: &str) -> Option<PathBuf> {
    let mut folder = None;
    match plan::find_cuda_compat(root, host_driver_version, None) {
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
fn plan_driver_params(p: &mut HookPlan, host: &HostFacts) {
    match &host.params {
        Some(text) => {
            p.params = Some(plan::params_without_device_modification(text));
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
fn plan_application_profile(p: &mut HookPlan, spec: &Spec) {
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
fn plan_chmod(p: &mut HookPlan, spec: &Spec, mode: u32, paths: &[PathBuf], in_place: bool) {
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
fn plan_ldcache(
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
    p.ldcache = entries;
    p.folders = ordered;
}

/// What [`apply`] did, for `--debug`.
#[derive(Debug, Default, Serialize)]
pub struct Done {
    pub hooks: Vec<String>,
    pub plan: HookPlan,
}

/// chmod's modes on the spec's own device entries.
fn set_device_modes(spec: &mut Spec, modes: &[(PathBuf, u32)]) {
    let Some(devices) = spec
        .linux_mut()
        .as_mut()
        .and_then(|l| l.devices_mut().as_mut())
    else {
        return;
    };
    for (path, mode) in modes {
        for d in devices.iter_mut().filter(|d| d.path() == path) {
            d.set_file_mode(Some(*mode));
        }
    }
}

/// The planned links not made in the private layer (`linked`): none on a
/// mount the spec makes or over an image's file; the others in the
/// image's own writable layer (an engine's container layer, or a folder
/// right under /), as the toolkit makes them, resolved inside the root.
fn make_links(root: &Rootfs, spec: &Spec, linked: &[PathBuf], plan: &mut HookPlan) -> Result<()> {
    let covered = |p: &Path| {
        spec.mounts()
            .iter()
            .flatten()
            .filter(|m| m.typ().as_deref() != Some("overlay"))
            .any(|m| p.starts_with(m.destination()) && m.destination() != Path::new("/"))
    };
    for l in &plan.links {
        if linked.contains(&l.link) {
            continue;
        }
        if covered(&l.link) {
            plan.skipped.push(format!(
                "link {}: on a mount the spec makes, not in the image",
                l.link.display()
            ));
            continue;
        }
        if root.file_type(&l.link).is_ok_and(|t| !t.is_symlink()) {
            plan.skipped.push(format!(
                "link {}: the image has a file there, kept",
                l.link.display()
            ));
            continue;
        }
        root.symlink_in(&l.target, &l.link).with_context(|| {
            format!(
                "create the link {} -> {} in the container",
                l.link.display(),
                l.target.display()
            )
        })?;
    }
    Ok(())
}

/// Carries out the NVIDIA CDI hooks in `spec` natively: removes them and
/// adds the edits that do their work (see the module's text). Returns
/// `None` where the spec has none.
pub fn apply(
    spec: &mut Spec,
    rootfs: &Path,
    shared: &Path,
    host: &HostFacts,
) -> Result<Option<Done>> {
    let ops = take(spec)?;
    if ops.is_empty() {
        return Ok(None);
    }
    let root = Rootfs::open(rootfs).with_context(|| format!("open rootfs {}", rootfs.display()))?;
    let mut plan = plan(&ops, spec, &root, host, false);
    let mut mounts: Vec<Mount> = Vec::new();
    let mut applied = Applied::default();
    if !plan.ldcache.is_empty() {
        mounts.push(apply::linker_cache_bind(
            &plan.ldcache,
            rootfs,
            shared,
            &mut applied,
        )?);
    }
    for (text, destination) in [
        (&plan.params, PARAMS),
        (&plan.application_profile, APPLICATION_PROFILE),
    ] {
        if let Some(text) = text {
            mounts.push(apply::shared_file_bind(
                shared,
                text,
                Path::new(destination),
            )?);
        }
    }
    set_device_modes(spec, &plan.device_modes);

    // Links already in the image as wanted need nothing.
    plan.links
        .retain(|l| root.read_link(&l.link).ok().flatten().as_ref() != Some(&l.target));
    // The links, and mount points for the spec's driver binds in the same
    // folders (a read-only root could not take them), in the private layer.
    let mut extra: Vec<Needed> = plan
        .links
        .iter()
        .map(|l| Needed {
            destination: l.link.clone(),
            entry: LayerEntry::Link(l.target.clone()),
        })
        .collect();
    let spec_mounts: Vec<Mount> = spec.mounts().clone().unwrap_or_default();
    // The spec's own file binds (the driver's files, at paths the image
    // lacks) get their mount points there too, as gpurun's own injected
    // files do: the image is not changed, and a read-only one needs none.
    extra.extend(file_binds(spec).into_iter().map(|(dest, _)| Needed {
        destination: dest,
        entry: LayerEntry::File,
    }));
    let (all, provided) = apply::with_mount_points_and(
        spec,
        spec_mounts,
        mounts,
        extra,
        rootfs,
        shared,
        &mut applied,
    )?;
    spec.set_mounts(Some(all));
    plan.done.push(format!(
        "mount points: {} ({} overlays)",
        provided.how,
        provided.overlays.len()
    ));
    make_links(&root, spec, &provided.linked, &mut plan)?;
    Ok(Some(Done {
        hooks: ops.iter().map(|o| o.name().to_owned()).collect(),
        plan,
    }))
}

/// `gpurun cdi-hook`: the same work in place, in the rootfs whose mounts
/// are already made (runc and crun run createContainer hooks in the
/// container's mount namespace before pivot_root). Writes what the
/// toolkit's hook writes: the links, `/etc/ld.so.cache`, the
/// `ld.so.conf.d` files, the application profile; every path resolved
/// inside the root.
pub fn run_in_place(op: &Op, spec: &Spec, root: &Rootfs, host: &HostFacts) -> Result<Vec<String>> {
    const COMPAT_CONF: &str = "/etc/ld.so.conf.d/00-compat-gpurun.conf";
    const FOLDERS_CONF: &str = "/etc/ld.so.conf.d/00-nvcr-gpurun.conf";
    let mut ops = vec![op.clone()];
    if let Op::UpdateLdcache { .. } = op {
        // enable-cuda-compat ran as a process of its own before: its
        // folder is in the conf file it wrote.
        if let Ok(text) = root.read(Path::new(COMPAT_CONF), 1 << 16) {
            let compat: Vec<PathBuf> = String::from_utf8_lossy(&text)
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with('/'))
                .map(PathBuf::from)
                .collect();
            if let Op::UpdateLdcache { folders } = &mut ops[0] {
                let mut all = compat;
                all.extend(folders.iter().cloned());
                *folders = all;
            }
        }
    }
    let plan = plan(&ops, spec, root, host, true);
    let mut done = plan.done.clone();
    for l in &plan.links {
        root.symlink_in(&l.target, &l.link)
            .with_context(|| format!("create the link {}", l.link.display()))?;
    }
    match op {
        Op::EnableCudaCompat { .. } => {
            if let Some(dir) = plan.folders.first() {
                root.write_in(
                    Path::new(COMPAT_CONF),
                    format!("{}\n", dir.display()).as_bytes(),
                    0o644,
                )?;
            }
        }
        Op::UpdateLdcache { folders } if !plan.ldcache.is_empty() => {
            let image = root
                .read(Path::new("/etc/ld.so.cache"), MAX_IMAGE_LDCACHE)
                .ok()
                .and_then(|b| ldcache::parse(&b).ok())
                .unwrap_or_default();
            let text: String = folders
                .iter()
                .map(|f| format!("{}\n", in_container(f).display()))
                .collect();
            root.write_in(Path::new(FOLDERS_CONF), text.as_bytes(), 0o644)?;
            root.write_in(
                Path::new("/etc/ld.so.cache"),
                &ldcache::write(&ldcache::merge(image, &plan.ldcache)),
                0o644,
            )?;
        }
        Op::UpdateApplicationProfile => {
            if let Some(profile) = &plan.application_profile {
                root.create_dir_all_in(Path::new(APPLICATION_PROFILE).parent().unwrap(), 0o555)?;
                root.write_in(Path::new(APPLICATION_PROFILE), profile.as_bytes(), 0o444)?;
            }
        }
        Op::Chmod { .. } => {
            for (path, mode) in &plan.device_modes {
                match root.chmod_in(path, *mode) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
                    Err(e) => return Err(e).with_context(|| format!("chmod {}", path.display())),
                }
            }
        }
        Op::DisableDeviceNodeModification if plan.params.is_some() => {
            done.push("disable-device-node-modification: not done by gpurun cdi-hook (run the container with gpurun to have it)".into());
        }
        _ => {}
    }
    done.extend(plan.skipped);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn nvidia_hooks_are_recognised_by_program_and_subcommand() {
        let a = args("nvidia-cdi-hook update-ldcache --folder /x");
        assert_eq!(
            nvidia_hook_args(Path::new("/usr/bin/nvidia-cdi-hook"), &a).unwrap(),
            &a[1..]
        );
        let a = args("nvidia-ctk hook create-symlinks --link a::b");
        assert_eq!(
            nvidia_hook_args(Path::new("/opt/x/nvidia-ctk"), &a).unwrap(),
            &a[2..]
        );
        let a = args("gpurun cdi-hook chmod --mode 755 --path /dev/dri");
        assert_eq!(
            nvidia_hook_args(Path::new("/usr/local/bin/gpurun"), &a).unwrap(),
            &a[2..]
        );
        assert!(nvidia_hook_args(
            Path::new("/usr/bin/nvidia-ctk"),
            &args("nvidia-ctk cdi list")
        )
        .is_none());
        assert!(nvidia_hook_args(Path::new("/bin/sh"), &args("sh -c true")).is_none());
    }

    #[test]
    fn subcommands_and_flags_parse_as_the_toolkit_takes_them() {
        assert_eq!(
            parse(&args(
                "--debug create-symlinks --link libcuda.so.1::/usr/lib/libcuda.so --link=a::/b"
            ))
            .unwrap(),
            Op::CreateSymlinks {
                links: vec![
                    Link {
                        target: "libcuda.so.1".into(),
                        link: "/usr/lib/libcuda.so".into()
                    },
                    Link {
                        target: "a".into(),
                        link: "/b".into()
                    },
                ]
            }
        );
        assert_eq!(
            parse(&args(
                "update-ldcache --folder /a --folder=/b --ldconfig-path /sbin/ldconfig"
            ))
            .unwrap(),
            Op::UpdateLdcache {
                folders: vec!["/a".into(), "/b".into()]
            }
        );
        assert_eq!(
            parse(&args("enable-cuda-compat --host-driver-version=535.104.05")).unwrap(),
            Op::EnableCudaCompat {
                host_driver_version: "535.104.05".into()
            }
        );
        assert_eq!(
            parse(&args("chmod --mode 755 --path /dev/dri")).unwrap(),
            Op::Chmod {
                mode: 0o755,
                paths: vec!["/dev/dri".into()]
            }
        );
        assert_eq!(
            parse(&args("some-new-hook --x 1")).unwrap(),
            Op::Unknown {
                name: "some-new-hook".into()
            }
        );
        for bad in [
            "create-symlinks --link nocolons",
            "create-symlinks --link ::/x",
            "chmod --mode 9z9 --path /x",
            "chmod --path /x",
            "",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn container_paths_never_climb_above_the_root() {
        assert_eq!(
            in_container(Path::new("../../../../etc/x")),
            Path::new("/etc/x")
        );
        assert_eq!(
            in_container(Path::new("/../../etc/passwd")),
            Path::new("/etc/passwd")
        );
        assert_eq!(in_container(Path::new("/a/./b/../c")), Path::new("/a/c"));
    }

    #[test]
    fn ldconfig_reading_of_a_folder() {
        let folder = Path::new("/usr/lib/nv");
        let mut view = BTreeMap::new();
        view.insert(
            "libcuda.so.535.1".to_owned(),
            Seen::File {
                soname: Some("libcuda.so.1".into()),
            },
        );
        view.insert(
            "libcuda.so".to_owned(),
            Seen::Symlink("libcuda.so.1".into()),
        );
        view.insert(
            "libnvidia-ml.so.535.1".to_owned(),
            Seen::File {
                soname: Some("libnvidia-ml.so.1".into()),
            },
        );
        view.insert(
            "libnvidia-ml.so.1".to_owned(),
            Seen::Symlink("libnvidia-ml.so.535.1".into()),
        );
        view.insert("notes.so.txt".to_owned(), Seen::File { soname: None });
        let (entries, links) = scan_folder(folder, &view);
        let names: Vec<(&str, &str)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.path.as_str()))
            .collect();
        assert!(
            names.contains(&("libcuda.so.1", "/usr/lib/nv/libcuda.so.1")),
            "{names:?}"
        );
        assert!(
            names.contains(&("libcuda.so", "/usr/lib/nv/libcuda.so")),
            "{names:?}"
        );
        assert!(
            names.contains(&("libnvidia-ml.so.1", "/usr/lib/nv/libnvidia-ml.so.1")),
            "{names:?}"
        );
        // The SONAME link ldconfig makes, only where none is there.
        assert_eq!(
            links,
            [Link {
                target: "libcuda.so.535.1".into(),
                link: "/usr/lib/nv/libcuda.so.1".into()
            }]
        );
    }

    #[test]
    fn params_copy_turns_device_modification_off() {
        assert_eq!(
            plan::params_without_device_modification(
                "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n"
            ),
            "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\n"
        );
    }
}
