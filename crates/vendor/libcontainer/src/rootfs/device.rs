use std::ffi::OsString;
use std::os::fd::BorrowedFd;
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libc;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::mount::MsFlags;
use nix::sys::stat::{FileStat, Mode, fstat, mknodat, umask};
use nix::unistd::{Gid, Uid, close, fchownat};
use oci_spec::runtime::LinuxDevice;

use super::in_root::{dir_in_root, resolve_in_root};
use super::utils::to_sflag;
use crate::syscall::Syscall;
use crate::syscall::syscall::create_syscall;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{0:?} is not a valid device path")]
    InvalidDevicePath(std::path::PathBuf),
    #[error("failed syscall to create device")]
    Syscall(#[from] crate::syscall::SyscallError),
    #[error(transparent)]
    Nix(#[from] nix::Error),
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
    #[error("{0}")]
    Custom(String),
}

type Result<T> = std::result::Result<T, DeviceError>;

pub(crate) fn open_device_fd(dev_path: &Path) -> nix::Result<(OwnedFd, FileStat)> {
    let fd = open(
        dev_path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o000),
    )?;
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let stat = fstat(owned.as_raw_fd())?;
    Ok((owned, stat))
}

pub(crate) fn verify_dev_null(stat: &FileStat) -> Result<()> {
    if stat.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return Err(DeviceError::Custom(
            "device is not a character device".to_string(),
        ));
    }

    let actual_major = libc::major(stat.st_rdev) as i64;
    let actual_minor = libc::minor(stat.st_rdev) as i64;
    if actual_major != 1 || actual_minor != 3 {
        return Err(DeviceError::Custom(format!(
            "device dev null major/minor mismatch: expected 1/3, actual {}/{}",
            actual_major, actual_minor
        )));
    }
    Ok(())
}

pub struct Device {
    syscall: Box<dyn Syscall>,
}

impl Default for Device {
    fn default() -> Self {
        Self::new()
    }
}

impl Device {
    pub fn new() -> Device {
        Device {
            syscall: create_syscall(),
        }
    }

    pub fn new_with_syscall(syscall: Box<dyn Syscall>) -> Device {
        Device { syscall }
    }

    /// Makes each device node under `root` (the container's root,
    /// `in_root::open_root`). gpurun patch: every node is made through its
    /// parent directory's descriptor, resolved inside the root, so a
    /// symlink in the image (`/dev` itself among them) cannot send a node
    /// or a bind mount onto the host.
    pub fn create_devices<'a, I>(&self, root: BorrowedFd, devices: I, bind: bool) -> Result<()>
    where
        I: IntoIterator<Item = &'a LinuxDevice>,
    {
        let old_mode = umask(Mode::from_bits_truncate(0o000));
        // Most nodes share a directory: it is resolved once for a run of them.
        let mut last: Option<NodePlace> = None;
        let made = devices.into_iter().try_for_each(|dev| {
            if !dev.path().starts_with("/dev") {
                tracing::error!(
                    "{:?} is not a valid device path starting with /dev",
                    dev.path()
                );
                return Err(DeviceError::InvalidDevicePath(dev.path().to_path_buf()));
            }
            let place = NodePlace::for_device(root, dev, last.take())?;
            let made = if bind {
                self.bind_dev(&place, dev)
            } else {
                self.mknod_or_bind_dev(&place, dev)
            };
            last = Some(place);
            made
        });
        umask(old_mode);
        made
    }

    fn bind_dev(&self, place: &NodePlace, dev: &LinuxDevice) -> Result<()> {
        // O_EXCL: an entry already there (a node, a fifo) is never opened.
        match openat(
            Some(place.parent.as_raw_fd()),
            place.name.as_os_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => close(fd)?,
            Err(nix::Error::EEXIST) => {}
            Err(err) => {
                tracing::error!("failed to create bind dev {:?}: {}", dev.path(), err);
                return Err(err.into());
            }
        }
        let target = resolve_in_root(place.root, dev.path())
            .map_err(|err| DeviceError::Other(err.into()))?;
        // The mount lands on the file resolved above, whatever the path
        // names by now.
        let target_path = PathBuf::from(format!("/proc/self/fd/{}", target.as_raw_fd()));
        tracing::debug!("bind_dev {:?} onto {:?}", dev.path(), target_path);
        self.syscall
            .mount(
                Some(dev.path()),
                &target_path,
                Some("bind"),
                MsFlags::MS_BIND,
                None,
            )
            .map_err(|err| {
                tracing::error!(?err, path = ?dev.path(), "failed to mount bind dev");
                err
            })?;

        Ok(())
    }

    /// As runc's createDeviceNode: where the device cgroup forbids the
    /// mknod (rules without `c *:* m`, or a parent cgroup that denies it)
    /// the host's node is bind-mounted instead, but only if it is the
    /// device the spec names.
    fn mknod_or_bind_dev(&self, place: &NodePlace, dev: &LinuxDevice) -> Result<()> {
        match self.mknod_dev(place, dev) {
            // As runc: a node already there (a `/dev` kept from an earlier
            // run) is left as it is.
            Err(DeviceError::Nix(nix::Error::EEXIST)) => Ok(()),
            Err(DeviceError::Nix(nix::Error::EPERM)) => {
                host_node_matches(dev)?;
                tracing::debug!(path = ?dev.path(), "mknod refused (EPERM): bind-mounting the host's node");
                self.bind_dev(place, dev)
            }
            other => other,
        }
    }

    fn mknod_dev(&self, place: &NodePlace, dev: &LinuxDevice) -> Result<()> {
        fn makedev(major: i64, minor: i64) -> u64 {
            ((minor & 0xff)
                | ((major & 0xfff) << 8)
                | ((minor & !0xff) << 12)
                | ((major & !0xfff) << 32)) as u64
        }

        let parent = Some(place.parent.as_raw_fd());
        mknodat(
            parent,
            place.name.as_os_str(),
            to_sflag(dev.typ()),
            Mode::from_bits_truncate(dev.file_mode().unwrap_or(0o666)),
            makedev(dev.major(), dev.minor()),
        )
        .inspect_err(|err| {
            tracing::error!(
                ?err,
                path = ?dev.path(),
                major = ?dev.major(),
                minor = ?dev.minor(),
                "failed to mknod device"
            );
        })?;
        fchownat(
            parent,
            place.name.as_os_str(),
            dev.uid().map(Uid::from_raw),
            dev.gid().map(Gid::from_raw),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .inspect_err(|err| {
            tracing::error!(
                path = ?dev.path(),
                ?err,
                uid = ?dev.uid(),
                gid = ?dev.gid(),
                "failed to chown device"
            );
        })?;

        Ok(())
    }
}

/// Where a device node goes: its parent directory, resolved (and made if
/// missing) inside the container's root, and its name there.
struct NodePlace<'r> {
    root: BorrowedFd<'r>,
    parent_path: PathBuf,
    parent: OwnedFd,
    name: OsString,
}

impl<'r> NodePlace<'r> {
    /// `dev`'s place, reusing `previous`'s directory where it is the same.
    fn for_device(root: BorrowedFd<'r>, dev: &LinuxDevice, previous: Option<Self>) -> Result<Self> {
        let path = dev.path();
        let (Some(parent_path), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(DeviceError::InvalidDevicePath(path.to_path_buf()));
        };
        let parent = match previous {
            Some(p) if p.parent_path == parent_path => p.parent,
            _ => dir_in_root(root, parent_path, 0o755).map_err(|err| {
                tracing::error!("failed to make the parent dir of {:?}: {}", path, err);
                DeviceError::Other(err.into())
            })?,
        };
        Ok(NodePlace {
            root,
            parent_path: parent_path.to_path_buf(),
            parent,
            name: name.to_owned(),
        })
    }
}

/// The host's node at the spec's path must be the spec's device (type and
/// number), or binding it would give the container some other file.
fn host_node_matches(dev: &LinuxDevice) -> Result<()> {
    let (_fd, stat) = open_device_fd(dev.path()).map_err(|err| {
        DeviceError::Custom(format!(
            "mknod {}: permission denied (EPERM), and the host has no node there to bind instead: {err}",
            dev.path().display()
        ))
    })?;
    let want_kind = to_sflag(dev.typ()).bits();
    let same = (stat.st_mode & libc::S_IFMT) == want_kind
        && libc::major(stat.st_rdev) as i64 == dev.major()
        && libc::minor(stat.st_rdev) as i64 == dev.minor();
    if !same {
        return Err(DeviceError::Custom(format!(
            "mknod {}: permission denied (EPERM), and the host's node there is not device {}:{}, so it is not bound instead",
            dev.path().display(),
            dev.major(),
            dev.minor()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;

    use anyhow::Result;
    use oci_spec::runtime::{LinuxDeviceBuilder, LinuxDeviceType};

    use super::*;
    use crate::rootfs::in_root::open_root;
    use crate::syscall::test::TestHelperSyscall;

    fn null() -> LinuxDevice {
        LinuxDeviceBuilder::default()
            .path(PathBuf::from("/dev/null"))
            .major(1)
            .minor(3)
            .typ(LinuxDeviceType::C)
            .build()
            .unwrap()
    }

    fn mount_targets(device: &Device) -> Vec<(Option<PathBuf>, PathBuf)> {
        let helper = device
            .syscall
            .as_any()
            .downcast_ref::<TestHelperSyscall>()
            .unwrap();
        helper
            .get_mount_args()
            .into_iter()
            .map(|m| (m.source, m.target))
            .collect()
    }

    #[test]
    fn bind_makes_the_mount_point_and_binds_onto_its_descriptor() -> Result<()> {
        let rootfs = tempfile::tempdir()?;
        let root = open_root(rootfs.path())?;
        let device = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        device.create_devices(root.as_fd(), &[null()], true)?;
        assert!(rootfs.path().join("dev/null").metadata()?.is_file());
        let mounts = mount_targets(&device);
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].0, Some(PathBuf::from("/dev/null")));
        // The test syscall records where the descriptor's path leads.
        assert_eq!(mounts[0].1, rootfs.path().join("dev/null"));
        Ok(())
    }

    #[test]
    fn a_fifo_is_made_in_place_and_one_already_there_is_kept() -> Result<()> {
        // A FIFO needs no privilege to make, and takes the mknod path.
        let fifo = LinuxDeviceBuilder::default()
            .path(PathBuf::from("/dev/sub/fifo"))
            .typ(LinuxDeviceType::P)
            .file_mode(0o600u32)
            .build()
            .unwrap();
        let rootfs = tempfile::tempdir()?;
        let root = open_root(rootfs.path())?;
        let device = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        device.create_devices(root.as_fd(), std::slice::from_ref(&fifo), false)?;
        let made = rootfs.path().join("dev/sub/fifo").symlink_metadata()?;
        assert!(made.file_type().is_fifo());
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&made.permissions()) & 0o777,
            0o600
        );
        device.create_devices(root.as_fd(), &[fifo], false)?;
        assert!(mount_targets(&device).is_empty());
        Ok(())
    }

    #[test]
    fn nodes_under_a_symlinked_dev_stay_in_the_root() -> Result<()> {
        let host = tempfile::tempdir()?;
        let rootfs = tempfile::tempdir()?;
        let inside = rootfs.path().join(host.path().strip_prefix("/")?);
        std::fs::create_dir_all(&inside)?;
        std::os::unix::fs::symlink(host.path(), rootfs.path().join("dev"))?;
        let root = open_root(rootfs.path())?;
        let device = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        device.create_devices(root.as_fd(), &[null()], true)?;
        assert!(inside.join("null").metadata()?.is_file());
        assert_eq!(mount_targets(&device)[0].1, inside.join("null"));
        assert_eq!(std::fs::read_dir(host.path())?.count(), 0);
        Ok(())
    }

    #[test]
    fn a_path_outside_dev_is_refused() -> Result<()> {
        let rootfs = tempfile::tempdir()?;
        let root = open_root(rootfs.path())?;
        let mut dev = null();
        dev.set_path(PathBuf::from("/etc/null"));
        let device = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        assert!(matches!(
            device.create_devices(root.as_fd(), &[dev], true),
            Err(DeviceError::InvalidDevicePath(_))
        ));
        Ok(())
    }
}
