use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::mount::MsFlags;
use oci_spec::runtime::{Linux, Spec};

use super::device::Device;
use super::in_root::{dir_in_root, open_root};
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
fn container_dev(rootfs: &Path, root: BorrowedFd) -> std::io::Result<OwnedFd> {
    let dev = Path::new("/dev");
    match dir_in_root(root, dev, 0o755) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let (resolved, _) = safe_fs::Rootfs::open(rootfs)?.resolve(dev)?;
            dir_in_root(root, &resolved, 0o755)
        }
        other => other,
    }
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
                        "mount {:?} ({}) at {}: {}",
                        mount.source().as_deref().unwrap_or(Path::new("")),
                        mount.typ().as_deref().unwrap_or("bind"),
                        mount.destination().display(),
                        crate::utils::error_chain(&err)
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
        let dev = container_dev(rootfs, root.as_fd()).map_err(in_root)?;

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
