use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::mount::MsFlags;
use oci_spec::runtime::{Linux, Spec};

use super::device::Device;
use super::in_root::{dir_in_root, open_root, readlink_in_root};
use super::mount::{Mount, MountOptions};
use super::symlink::Symlink;
use super::utils::default_devices;
use super::{Result, RootfsError};
use crate::error::MissingSpecError;
use crate::syscall::Syscall;
use crate::syscall::syscall::create_syscall;

/// Holds information about rootfs
pub struct RootFS {
    syscall: Box<dyn Syscall>,
    /// gpurun patch: see `Mount::with_premade_mounts`.
    premade_mounts: Vec<std::os::fd::RawFd>,
}

impl Default for RootFS {
    fn default() -> Self {
        Self::new()
    }
}

/// The container's `/dev`, made if missing (gpurun patch). Where the
/// image's `/dev` is a symlink to a directory not there yet, the symlink
/// is followed inside the root (as the kernel would in the container) and
/// its target made.
fn container_dev(root: BorrowedFd) -> std::io::Result<OwnedFd> {
    let dev = Path::new("/dev");
    match dir_in_root(root, dev, 0o755) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let target = readlink_in_root(root, dev)?;
            dir_in_root(root, &clamped_in_root(Path::new("/"), &target), 0o755)
        }
        other => other,
    }
}

/// `target`, a link's in the directory `dir`, as a path from the root
/// with no `..` climbing above it, as RESOLVE_IN_ROOT would clamp it.
fn clamped_in_root(dir: &Path, target: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = if target.is_absolute() {
        std::path::PathBuf::from("/")
    } else {
        dir.to_path_buf()
    };
    for part in target.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

impl RootFS {
    pub fn new() -> RootFS {
        RootFS {
            syscall: create_syscall(),
            premade_mounts: Vec::new(),
        }
    }

    /// gpurun patch: detached mounts made by the main process (idmapped
    /// mounts), each named as its mount's source by `/proc/self/fd/N`.
    pub fn with_premade_mounts(mut self, fds: Vec<std::os::fd::RawFd>) -> Self {
        self.premade_mounts = fds;
        self
    }

    pub fn mount_to_rootfs(
        &self,
        linux: &Linux,
        spec: &Spec,
        rootfs: &Path,
        cgroup_ns: bool,
    ) -> Result<()> {
        let mut flags = MsFlags::MS_REC;
        match linux.rootfs_propagation().as_deref() {
            Some("shared") => flags |= MsFlags::MS_SHARED,
            Some("private") => flags |= MsFlags::MS_PRIVATE,
            Some("slave" | "unbindable") | None => flags |= MsFlags::MS_SLAVE,
            Some(unknown) => {
                return Err(RootfsError::UnknownRootfsPropagation(unknown.to_string()));
            }
        }

        self.syscall
            .mount(None, Path::new("/"), None, flags, None)
            .map_err(|err| {
                tracing::error!(
                    ?err,
                    ?flags,
                    "failed to change the mount propagation type of the root"
                );

                err
            })?;

        let mounter = Mount::new().with_premade_mounts(self.premade_mounts.clone());

        mounter.make_parent_mount_private(rootfs)?;

        tracing::debug!("mount root fs {:?}", rootfs);
        self.syscall
            .mount(
                Some(rootfs),
                rootfs,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )
            .map_err(|err| {
                tracing::error!(?rootfs, ?err, "failed to bind mount rootfs");
                err
            })?;

        let global_options = MountOptions {
            root: rootfs,
            label: linux.mount_label().as_deref(),
            cgroup_ns,
        };

        if let Some(mounts) = spec.mounts() {
            for mount in mounts {
                // gpurun patch: the error names the mount, as runc's does.
                mounter.setup_mount(mount, &global_options).map_err(|err| {
                    super::mount::MountError::Custom(format!(
                        "mount {:?} ({}) at {}: {}{}",
                        mount.source().as_deref().unwrap_or(Path::new("")),
                        mount.typ().as_deref().unwrap_or("bind"),
                        mount.destination().display(),
                        crate::utils::error_chain(&err),
                        kind_mismatch(rootfs, mount)
                    ))
                })?;
            }
        }
        Ok(())
    }

    pub fn prepare_rootfs(
        &self,
        spec: &Spec,
        rootfs: &Path,
        bind_devices: bool,
        cgroup_ns: bool,
    ) -> Result<()> {
        tracing::debug!(?rootfs, "prepare rootfs");
        let linux = spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;

        self.mount_to_rootfs(linux, spec, rootfs, cgroup_ns)?;

        // gpurun patch: /dev and every node and link in it are resolved
        // inside the root (see `in_root`).
        let in_root = |err: std::io::Error| {
            RootfsError::Device(super::device::DeviceError::Other(err.into()))
        };
        let root = open_root(rootfs).map_err(in_root)?;
        let dev = container_dev(root.as_fd()).map_err(in_root)?;

        let symlinker = Symlink::new();
        symlinker.setup_kcore_symlink(dev.as_fd())?;
        symlinker.setup_default_symlinks(dev.as_fd())?;

        let devicer = Device::new();
        if let Some(added_devices) = linux.devices() {
            let mut path_set = HashSet::new();
            let devices = default_devices();
            added_devices.iter().for_each(|d| {
                path_set.insert(d.path());
            });
            let default = devices.iter().filter(|d| !path_set.contains(d.path()));
            devicer.create_devices(
                root.as_fd(),
                added_devices.iter().chain(default),
                bind_devices,
            )
        } else {
            devicer.create_devices(root.as_fd(), &default_devices(), bind_devices)
        }?;

        // gpurun patch 53: the links the spec asks for, once the nodes
        // they point at are there.
        for (link, target) in super::symlink::dev_links(spec)? {
            super::symlink::link_in_dev(root.as_fd(), &link, &target)?;
        }
        symlinker.setup_ptmx(dev.as_fd())?;
        Ok(())
    }

    /// Change propagation type of rootfs as specified in spec.
    pub fn adjust_root_mount_propagation(&self, linux: &Linux) -> Result<()> {
        let rootfs_propagation = linux.rootfs_propagation().as_deref();
        let flags = match rootfs_propagation {
            Some("shared") => Some(MsFlags::MS_SHARED),
            Some("unbindable") => Some(MsFlags::MS_UNBINDABLE),
            _ => None,
        };

        if let Some(flags) = flags {
            self.syscall
                .mount(None, Path::new("/"), None, flags, None)
                .map_err(|err| {
                    tracing::error!(
                        ?err,
                        ?flags,
                        "failed to adjust the mount propagation type of the root"
                    );
                    err
                })?;
        }

        Ok(())
    }
}

/// gpurun patch 51: a bind mount of a file over a directory the image has
/// (or of a directory over a file) fails as a bare EINVAL or ENOTDIR; this
/// says which side is which, and the fix. Empty when the kinds agree.
fn kind_mismatch(rootfs: &Path, mount: &oci_spec::runtime::Mount) -> String {
    use std::os::fd::AsFd;
    let kind = |is_dir: bool| {
        if is_dir {
            "a directory"
        } else {
            "not a directory"
        }
    };
    let is_bind = mount.typ().as_deref().is_none_or(|t| t == "bind")
        || mount
            .options()
            .iter()
            .flatten()
            .any(|o| o == "bind" || o == "rbind");
    let Some(source) = mount.source().as_deref().filter(|_| is_bind) else {
        return String::new();
    };
    let Ok(source_is_dir) = std::fs::metadata(source).map(|m| m.is_dir()) else {
        return String::new();
    };
    let destination = super::in_root::open_root(rootfs).and_then(|root| {
        let fd = super::in_root::resolve_in_root(root.as_fd(), mount.destination())?;
        nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)).map_err(std::io::Error::from)
    });
    match destination {
        Ok(st) if (st.st_mode & libc::S_IFMT == libc::S_IFDIR) != source_is_dir => format!(
            ": the image's {} is {} and the source is {}: remove it from the image, or mount elsewhere",
            mount.destination().display(),
            kind(!source_is_dir),
            kind(source_is_dir)
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::MountBuilder;

    use super::*;

    #[test]
    fn a_file_bound_over_an_image_directory_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let rootfs = tmp.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("etc/ld.so.cache")).unwrap();
        std::fs::write(rootfs.join("etc/hosts"), "").unwrap();
        let source = tmp.path().join("cache");
        std::fs::write(&source, "").unwrap();
        let bind = |dest: &str| {
            MountBuilder::default()
                .destination(dest)
                .source(&source)
                .typ("bind")
                .options(vec!["rbind".to_owned()])
                .build()
                .unwrap()
        };
        let hint = kind_mismatch(&rootfs, &bind("/etc/ld.so.cache"));
        assert!(
            hint.contains(
                "the image's /etc/ld.so.cache is a directory and the source is not a directory"
            ),
            "{hint}"
        );
        assert_eq!(kind_mismatch(&rootfs, &bind("/etc/hosts")), "");
        // Resolved inside the root: a link out is not followed to the host.
        std::os::unix::fs::symlink(tmp.path(), rootfs.join("out")).unwrap();
        assert_eq!(kind_mismatch(&rootfs, &bind("/out/rootfs")), "");
    }
}
