//! Re-exec from a copy of our own binary that nothing can write to
//! (CVE-2019-5736).
//!
//! A process inside the container can open `/proc/<pid>/exe` of a runtime
//! that joined its namespaces, and, once the runtime is gone, write
//! through it to the host binary. So `create`, `run` and `exec` first
//! re-exec from a view of the binary that cannot be written:
//!
//! - as root, the binary opened through a read-only overlayfs made with
//!   fsopen/fsmount and attached nowhere (runc 1.2's method): no copy, no
//!   memory, no mount in any namespace, and no way to make it writable;
//! - as an unprivileged user, nothing at all when no id a container of
//!   this user can hold could write the binary (see `container_could_write`:
//!   the normal root-owned install), a sealed memfd copy otherwise;
//! - for a root `run` whose container can reach neither the binary nor a
//!   process running it (see `stub_protects`), no re-exec: the program is
//!   exec'd through a sealed stub instead (`exec_stub`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result};
use libcontainer::oci_spec::runtime::{
    Capability, Hook, LinuxNamespaceType, LinuxSeccomp, LinuxSeccompAction, Spec,
};
use safe_fs::detached_mount::{detached_mount, FsOption};
use safe_fs::syscall_result as check;

/// The copy can neither change size nor get new seals...
const FIXED: libc::c_int = crate::runtime::protect::exec_stub::SEALS_FIXED;
/// ...nor be written: F_SEAL_WRITE, or F_SEAL_FUTURE_WRITE (see
/// `exec_stub::seal_memfd`).
const NO_WRITES: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_FUTURE_WRITE;
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

fn is_sealed_memfd(file: &File) -> bool {
    // SAFETY: fcntl on a valid fd; F_GET_SEALS takes no argument.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & FIXED == FIXED && seals & NO_WRITES != 0
}

/// Whether the file is on a read-only overlayfs: the private mount made
/// below (an overlay with no upper layer cannot be written, and one that
/// is mounted nowhere cannot be remounted).
fn is_on_read_only_overlay(file: &File) -> bool {
    // SAFETY: fstatfs and fstatvfs fill zeroed structs for a valid fd.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut vfs: libc::statvfs = std::mem::zeroed();
        libc::fstatfs(file.as_raw_fd(), &mut fs) == 0
            && fs.f_type as i64 == OVERLAYFS_SUPER_MAGIC
            && libc::fstatvfs(file.as_raw_fd(), &mut vfs) == 0
            && vfs.f_flag & libc::ST_RDONLY != 0
    }
}

/// Overlay's escapes for a path in `lowerdir`.
fn escape_layer(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        if b == b':' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// An empty directory for the overlay's second layer, removed when
/// dropped (the mount keeps what it needs).
struct EmptyLayer(std::path::PathBuf);

impl EmptyLayer {
    fn new() -> io::Result<EmptyLayer> {
        let path = std::env::temp_dir().join(format!("gpurun-seal-{}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(EmptyLayer(path))
    }
}

impl Drop for EmptyLayer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The binary, opened (O_PATH) through a read-only overlayfs whose top
/// layer is the binary's directory. Overlayfs needs two layers to have no
/// upper one; the second holds no file of our name that could matter (the
/// binary's layer is on top) and never overlaps it: `/dev`, or, inside a
/// user namespace, where the kernel refuses a layer with mounts below it
/// that the namespace may not see under (`/dev/pts`: "failed to clone
/// lowerpath"), an empty directory of our own.
fn through_private_overlay(exe: &Path) -> io::Result<OwnedFd> {
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let empty = if crate::runtime::protect::privilege::in_user_namespace() {
        Some(EmptyLayer::new()?)
    } else {
        None
    };
    let mut lower = escape_layer(dir);
    lower.push(b':');
    match &empty {
        Some(layer) => lower.extend_from_slice(&escape_layer(&layer.0)),
        None => lower.extend_from_slice(b"/dev"),
    }
    let lower = CString::new(lower)?;
    let name = CString::new(name.as_bytes())?;
    let mnt = detached_mount(
        c"overlay",
        &[
            FsOption {
                key: c"lowerdir",
                value: &lower,
                required: true,
            },
            // Only to keep xino's notes out of dmesg; older kernels may refuse.
            FsOption {
                key: c"xino",
                value: c"off",
                required: false,
            },
        ],
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOSUID,
    )?;
    // SAFETY: a NUL-terminated name below the mount's root; the result is
    // a new descriptor owned here.
    unsafe {
        let fd = check(libc::openat(
            mnt.as_raw_fd(),
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        ) as libc::c_long)?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// A sealed memfd copy of the binary.
fn sealed_copy(exe: &mut File) -> Result<OwnedFd> {
    // SAFETY: the name is a valid C string; flags are valid.
    let fd = unsafe {
        libc::memfd_create(
            c"gpurun-sealed".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: fd was just returned by memfd_create and is owned here.
    let mut memfd = unsafe { File::from_raw_fd(fd) };
    io::copy(exe, &mut memfd).context("copy the binary into a memfd")?;
    crate::runtime::protect::exec_stub::seal_memfd(fd).context("seal the memfd")?;
    Ok(memfd.into())
}

/// Whether `exe` (this process's) is a sealed copy or on the overlay.
fn runs_protected(exe: &File) -> bool {
    is_sealed_memfd(exe) || is_on_read_only_overlay(exe)
}

/// Returns if we already run from a protected binary, or from one no
/// container of ours could write; otherwise execs a protected one and does
/// not return.
pub fn ensure_sealed() -> Result<()> {
    let mut exe = File::open("/proc/self/exe").context("open /proc/self/exe")?;
    if runs_protected(&exe) {
        return Ok(());
    }
    let path = std::fs::read_link("/proc/self/exe").context("read /proc/self/exe")?;
    if !nix::unistd::geteuid().is_root() {
        let ids = ContainerIds::of_caller();
        match container_could_write(&exe, &path, &ids) {
            None => {
                tracing::debug!(
                    "{}: no id of ours can write it, no copy needed",
                    path.display()
                );
                return Ok(());
            }
            Some(why) => tracing::debug!("{}: {why}: sealed copy", path.display()),
        }
    }
    let fd = match through_private_overlay(&path) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::debug!(
                "no private overlay for {} ({e}): sealed copy",
                path.display()
            );
            sealed_copy(&mut exe)?
        }
    };

    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.as_bytes()).context("argument holds a NUL byte"))
        .collect::<Result<_>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).context("environment holds a NUL byte")
        })
        .collect::<Result<_>>()?;
    let errno = crate::runtime::protect::exec_stub::exec_fd(fd.as_raw_fd(), &args, &env);
    Err(io::Error::from(errno)).context("re-exec from the protected binary")
}

/// Where main left this process's protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Done: re-exec'd already, or never needed (no container is entered,
    /// or the caller is not root).
    Done,
    /// A root `run`, which chooses once its spec is read (`protect_run`):
    /// `create` and `exec` re-exec before anything else.
    ChosenByRun,
}

/// A root `run`'s protection, chosen from its spec before anything is
/// made (a re-exec starts the command over): the exec stub where it is
/// enough, the protected re-exec otherwise. Does nothing where main
/// already protected this process (or left `run` to nobody: not root).
pub fn protect_run(protection: Protection, spec: Option<&Spec>) -> Result<()> {
    if protection != Protection::ChosenByRun {
        return Ok(());
    }
    let verdict = spec
        .ok_or_else(|| "the spec could not be read here".to_owned())
        .and_then(stub_protects)
        .and_then(|()| {
            crate::runtime::protect::exec_stub::load().map_err(|e| format!("no exec stub ({e})"))
        });
    match verdict {
        Ok(()) => {
            // The init and intermediate are clones of this process: no
            // container process may open their /proc/<pid>/exe (see
            // exec_stub). SAFETY: a prctl on this process only.
            if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error()).context("make gpurun non-dumpable");
            }
            tracing::debug!(target: "gpurun", "protection: the program is exec'd through a sealed stub, no re-exec");
            Ok(())
        }
        Err(why) => {
            // Said once: not again by the re-exec'd `run`, which comes here
            // with the same spec.
            if !File::open("/proc/self/exe").is_ok_and(|exe| runs_protected(&exe)) {
                tracing::debug!(target: "gpurun", "protection: protected re-exec ({why})");
            }
            ensure_sealed()
        }
    }
}

/// Why the exec stub would not keep this container's processes away from
/// the host's binary (the reasoning is in `exec_stub`), or `Ok` when it
/// does.
pub fn stub_protects(spec: &Spec) -> Result<(), String> {
    if !crate::runtime::protect::exec_stub::built() {
        return Err("this build has no exec stub".into());
    }
    let linux = spec.linux().as_ref().ok_or("no linux section")?;
    let namespaces = linux.namespaces().as_deref().unwrap_or_default();
    if !namespaces
        .iter()
        .any(|n| n.typ() == LinuxNamespaceType::Pid && n.path().is_none())
    {
        return Err("the container does not get a pid namespace of its own".into());
    }
    if namespaces
        .iter()
        .any(|n| n.typ() == LinuxNamespaceType::User)
    {
        return Err("a user namespace".into());
    }
    if let Some(process) = spec.process() {
        let bounding = process
            .capabilities()
            .as_ref()
            .and_then(|c| c.bounding().as_ref());
        if bounding.is_some_and(|b| b.contains(&Capability::SysPtrace)) {
            return Err("CAP_SYS_PTRACE in the bounding set".into());
        }
        if process
            .selinux_label()
            .as_deref()
            .is_some_and(|l| !l.is_empty())
        {
            return Err("an SELinux label (its transition would apply to the stub)".into());
        }
        if process
            .apparmor_profile()
            .as_deref()
            .is_some_and(|p| !p.is_empty())
        {
            return Err("an AppArmor profile (its transition would apply to the stub)".into());
        }
    }
    if let Some(hooks) = spec.hooks() {
        // NVIDIA's CDI hooks in these lists are carried out by gpurun
        // itself and never run as processes (cdi::hooks::take).
        let runs = |h: &Hook| {
            let args = h.args().clone().unwrap_or_default();
            gpurun_gpu::cdi::hooks::nvidia_hook_args(h.path(), &args).is_none()
        };
        #[allow(deprecated)]
        let done_natively = [
            hooks.prestart(),
            hooks.create_runtime(),
            hooks.create_container(),
        ];
        if done_natively
            .iter()
            .any(|list| list.as_ref().is_some_and(|l| l.iter().any(runs)))
            || hooks
                .start_container()
                .as_ref()
                .is_some_and(|l| !l.is_empty())
        {
            return Err("hooks that run before the program starts".into());
        }
    }
    // CDI names a spec file may answer with hooks of its own, added after
    // this choice is made.
    if names_cdi_devices(spec) {
        return Err("CDI device names, which a CDI spec may answer with hooks".into());
    }
    if let Some(seccomp) = linux.seccomp() {
        for name in ["execve", "execveat"] {
            if !seccomp_allows(seccomp, name) {
                return Err(format!("the seccomp profile may refuse {name}"));
            }
        }
    }
    Ok(())
}

/// Whether the spec names CDI devices (`vendor.com/class=name`) in its
/// annotations or in NVIDIA_VISIBLE_DEVICES, for the spec directories to
/// resolve.
fn names_cdi_devices(spec: &Spec) -> bool {
    use gpurun_gpu::request::{self, names_a_cdi_device};
    spec.annotations()
        .iter()
        .flatten()
        .any(|(_, v)| names_a_cdi_device(v))
        || request::environment(spec)
            .get("NVIDIA_VISIBLE_DEVICES")
            .is_some_and(|v| names_a_cdi_device(v))
        || spec.mounts().iter().flatten().any(|m| {
            m.destination()
                .starts_with(Path::new(request::VOLUME_REQUEST_DIR).join("cdi"))
        })
}

/// Whether the profile lets every call of `name` through.
fn seccomp_allows(seccomp: &LinuxSeccomp, name: &str) -> bool {
    let allows = |action: LinuxSeccompAction| {
        matches!(
            action,
            LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActLog
        )
    };
    let rules: Vec<_> = seccomp
        .syscalls()
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|r| r.names().iter().any(|n| n == name))
        .collect();
    if rules.is_empty() {
        return allows(seccomp.default_action());
    }
    let unconditional = rules
        .iter()
        .any(|r| r.args().as_ref().is_none_or(|a| a.is_empty()));
    rules.iter().all(|r| allows(r.action())) && (unconditional || allows(seccomp.default_action()))
}

/// The ids a rootless container's processes can hold: the caller's own
/// and its subordinate ranges (the most newuidmap/newgidmap will map), as
/// inclusive ranges.
#[derive(Debug, Default)]
pub struct ContainerIds {
    pub uids: Vec<(u32, u32)>,
    pub gids: Vec<(u32, u32)>,
}

impl ContainerIds {
    fn of_caller() -> ContainerIds {
        use nix::unistd::{getegid, geteuid, getgroups};
        let user = crate::runtime::spec::idmap::UserIds::current();
        let one = |id: u32| (id, id);
        let range = |r: &crate::runtime::spec::idmap::SubRange| {
            (r.start, r.start.saturating_add(r.count - 1))
        };
        let mut uids = vec![one(user.uid), one(geteuid().as_raw())];
        uids.extend(user.subuids.iter().map(range));
        let mut gids: Vec<_> = [user.gid, getegid().as_raw()]
            .into_iter()
            .chain(getgroups().unwrap_or_default().iter().map(|g| g.as_raw()))
            .map(one)
            .collect();
        gids.extend(user.subgids.iter().map(range));
        ContainerIds { uids, gids }
    }

    fn holds(ranges: &[(u32, u32)], id: u32) -> bool {
        ranges
            .iter()
            .any(|&(first, last)| (first..=last).contains(&id))
    }
}

/// Owner, group and mode of a file, as the permission check sees them.
#[derive(Debug, Clone, Copy)]
pub struct Perms {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

impl From<&std::fs::Metadata> for Perms {
    fn from(meta: &std::fs::Metadata) -> Perms {
        use std::os::unix::fs::MetadataExt;
        Perms {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode(),
        }
    }
}

/// Why `ids` could write (or, for a directory, replace entries in) a file
/// with these permissions; `None` if they cannot. An owner can always
/// chmod, so ownership alone counts. Capabilities do not help a container:
/// inside its user namespace they cover only files whose owner is mapped
/// there, and those are ours anyway.
pub fn writable_by(perms: Perms, ids: &ContainerIds) -> Option<&'static str> {
    if ContainerIds::holds(&ids.uids, perms.uid) {
        Some("owned by an id a container of ours holds")
    } else if perms.mode & 0o020 != 0 && ContainerIds::holds(&ids.gids, perms.gid) {
        Some("writable by a group a container of ours holds")
    } else if perms.mode & 0o002 != 0 {
        Some("writable by everyone")
    } else {
        None
    }
}

const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Why a rootless container of ours could change the binary, or `None`
/// when it cannot: then re-exec'ing from it protects nothing, and the
/// copy (7.6 MB per start) is skipped.
///
/// CVE-2019-5736 is a container process opening `/proc/<runtime>/exe` for
/// writing. That open is checked against the process's ids, which for a
/// rootless container are only the caller's uid and gids and the
/// subordinate ranges it may map. So the binary must be neither owned by
/// nor group- or world-writable to any of them, carry no ACL (which could
/// grant a named id write), and not be on FUSE (whose server may be the
/// user). Every directory above it is held to the same rule, so nobody of
/// ours can put another file in its place; a sticky directory (`/tmp`)
/// writable by all still protects entries that are not ours.
pub fn container_could_write(exe: &File, path: &Path, ids: &ContainerIds) -> Option<String> {
    // SAFETY: fstatfs fills a zeroed struct for a valid descriptor.
    let on_fuse = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        libc::fstatfs(exe.as_raw_fd(), &mut fs) != 0 || fs.f_type as i64 == FUSE_SUPER_MAGIC
    };
    if on_fuse {
        return Some("on FUSE (or its filesystem is unknown)".into());
    }
    let Ok(meta) = exe.metadata() else {
        return Some("cannot stat it".into());
    };
    if let Some(why) = writable_by(Perms::from(&meta), ids) {
        return Some(why.into());
    }
    if !path.is_absolute() {
        return Some("its path is not absolute".into());
    }
    let mut child = Perms::from(&meta);
    for dir in path.ancestors().skip(1) {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            return Some(format!("cannot stat {}", dir.display()));
        };
        let perms = Perms::from(&meta);
        // A sticky directory that is not ours lets nobody of ours replace
        // an entry that is not ours either.
        let sticky_shields_child = perms.mode & libc::S_ISVTX != 0
            && !ContainerIds::holds(&ids.uids, child.uid)
            && !ContainerIds::holds(&ids.uids, perms.uid);
        if let Some(why) = writable_by(perms, ids).filter(|_| !sticky_shields_child) {
            return Some(format!("{}: {why}", dir.display()));
        }
        if has_acl(dir) {
            return Some(format!("{} has an ACL", dir.display()));
        }
        child = perms;
    }
    if has_acl(path) {
        return Some("it has an ACL".into());
    }
    None
}

/// Whether `path` carries a POSIX access ACL (any entry beyond the mode).
fn has_acl(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: valid C strings; a null buffer of size 0 asks for the size.
    let size = unsafe {
        libc::lgetxattr(
            c_path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    size > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> ContainerIds {
        ContainerIds {
            uids: vec![(1000, 1000), (100_000, 165_535)],
            gids: vec![(1000, 1000), (27, 27), (100_000, 165_535)],
        }
    }

    fn perms(uid: u32, gid: u32, mode: u32) -> Perms {
        Perms { uid, gid, mode }
    }

    #[test]
    fn a_root_owned_install_is_safe() {
        assert_eq!(writable_by(perms(0, 0, 0o100755), &ids()), None);
        assert_eq!(writable_by(perms(0, 0, 0o040755), &ids()), None);
    }

    #[test]
    fn our_own_or_our_subordinate_ids_can_write() {
        assert!(writable_by(perms(1000, 0, 0o100555), &ids()).is_some());
        assert!(writable_by(perms(100_001, 0, 0o100555), &ids()).is_some());
        assert!(writable_by(perms(165_535, 0, 0o100555), &ids()).is_some());
        assert_eq!(writable_by(perms(165_536, 0, 0o100755), &ids()), None);
    }

    /// Files made here belong to whoever runs the test; the ids of a
    /// container that is not theirs are far away from any real one.
    fn far_ids() -> ContainerIds {
        ContainerIds {
            uids: vec![(4_000_000_000, 4_000_065_535)],
            gids: vec![(4_000_000_000, 4_000_065_535)],
        }
    }

    #[test]
    fn a_sticky_world_writable_directory_shields_entries_not_ours() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("seal-test-{}", std::process::id()));
        let open_dir = base.join("open");
        let sticky_dir = base.join("sticky");
        for (dir, mode) in [(&base, 0o755), (&open_dir, 0o777), (&sticky_dir, 0o1777)] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let verdict = |dir: &Path| {
            let bin = dir.join("bin");
            std::fs::write(&bin, b"").unwrap();
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
            container_could_write(&File::open(&bin).unwrap(), &bin, &far_ids())
        };
        let sticky = verdict(&sticky_dir);
        let open = verdict(&open_dir);
        let _ = std::fs::remove_dir_all(&base);
        // Whatever is above temp_dir is the host's; only our two differ.
        if std::env::temp_dir().ancestors().all(|d| {
            std::fs::metadata(d).is_ok_and(|m| {
                m.permissions().mode() & 0o002 == 0 || m.permissions().mode() & 0o1000 != 0
            })
        }) {
            assert_eq!(sticky, None);
        }
        assert!(open.is_some_and(|why| why.contains("writable by everyone")));
    }

    fn spec_with(edit: impl FnOnce(&mut serde_json::Value)) -> Spec {
        let mut value = serde_json::to_value(Spec::default()).unwrap();
        edit(&mut value);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_default_spec_needs_no_re_exec() {
        if crate::runtime::protect::exec_stub::built() {
            assert_eq!(stub_protects(&Spec::default()), Ok(()));
        }
    }

    #[test]
    fn anything_that_could_reach_the_init_keeps_the_re_exec() {
        let refused = |edit: fn(&mut serde_json::Value)| stub_protects(&spec_with(edit)).is_err();
        assert!(refused(|c| c["process"]["capabilities"]["bounding"]
            .as_array_mut()
            .unwrap()
            .push("CAP_SYS_PTRACE".into())));
        assert!(refused(|c| c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "pid")));
        assert!(refused(|c| {
            for n in c["linux"]["namespaces"].as_array_mut().unwrap() {
                if n["type"] == "pid" {
                    n["path"] = "/proc/1/ns/pid".into();
                }
            }
        }));
        assert!(refused(|c| c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}))));
        assert!(refused(
            |c| c["hooks"] = serde_json::json!({"startContainer": [{"path": "/x"}]})
        ));
        assert!(refused(
            |c| c["hooks"] = serde_json::json!({"prestart": [{"path": "/x"}]})
        ));
        assert!(refused(
            |c| c["process"]["apparmorProfile"] = "docker-default".into()
        ));
        assert!(refused(
            |c| c["process"]["selinuxLabel"] = "system_u:system_r:container_t:s0".into()
        ));
        // After start, hooks cannot reach a clone of ours.
        assert!(
            !refused(|c| c["hooks"] = serde_json::json!({"poststart": [{"path": "/x"}]}))
                || !crate::runtime::protect::exec_stub::built()
        );
        // CDI names a spec file may answer with hooks added later.
        assert!(refused(
            |c| c["annotations"] = serde_json::json!({"cdi.k8s.io/x": "example.com/net=a"})
        ));
        assert!(refused(|c| c["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push("NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0".into())));
        // NVIDIA's CDI hooks, done by gpurun itself, are no hooks at all;
        // a startContainer one is not taken, and runs.
        assert!(
            stub_protects(&spec_with(|c| {
                c["hooks"] = serde_json::json!({"createContainer": [{"path": "/usr/bin/nvidia-cdi-hook",
                    "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib"]}]})
            }))
            .is_ok()
                || !crate::runtime::protect::exec_stub::built()
        );
        assert!(refused(|c| {
            c["hooks"] = serde_json::json!({"startContainer": [{"path": "/usr/bin/nvidia-cdi-hook",
                "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib"]}]})
        }));
    }

    #[test]
    fn seccomp_must_let_both_execs_through_whatever_their_arguments() {
        let profile = |v: serde_json::Value| -> LinuxSeccomp { serde_json::from_value(v).unwrap() };
        let docker_like = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execve", "execveat", "read"], "action": "SCMP_ACT_ALLOW"}]
        }));
        assert!(seccomp_allows(&docker_like, "execve") && seccomp_allows(&docker_like, "execveat"));
        let no_execveat = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execve"], "action": "SCMP_ACT_ALLOW"}]
        }));
        assert!(!seccomp_allows(&no_execveat, "execveat"));
        let denied = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["execveat"], "action": "SCMP_ACT_ERRNO"}]
        }));
        assert!(seccomp_allows(&denied, "execve") && !seccomp_allows(&denied, "execveat"));
        let by_argument = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execveat"], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": 4, "value": 0, "op": "SCMP_CMP_EQ"}]}]
        }));
        assert!(!seccomp_allows(&by_argument, "execveat"));
    }

    #[test]
    fn group_write_counts_only_for_our_groups() {
        assert!(writable_by(perms(0, 27, 0o100775), &ids()).is_some());
        assert!(writable_by(perms(0, 100_000, 0o100775), &ids()).is_some());
        assert_eq!(writable_by(perms(0, 50, 0o100775), &ids()), None);
        assert!(writable_by(perms(0, 50, 0o100757), &ids()).is_some());
    }
}
