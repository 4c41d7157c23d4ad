use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use crate::syscall::Syscall;
use crate::syscall::syscall::create_syscall;

#[derive(Debug, thiserror::Error)]
pub enum SymlinkError {
    #[error("syscall failed")]
    Syscall {
        source: crate::syscall::SyscallError,
    },
    #[error("failed symlink: {msg}")]
    Other { msg: String },
}

type Result<T> = std::result::Result<T, SymlinkError>;

pub struct Symlink {
    syscall: Box<dyn Syscall>,
}

impl Default for Symlink {
    fn default() -> Self {
        Self::new()
    }
}

impl Symlink {
    pub fn new() -> Symlink {
        Symlink::with_syscall(create_syscall())
    }

    fn with_syscall(syscall: Box<dyn Syscall>) -> Symlink {
        Symlink { syscall }
    }

    // Create symlinks for subsystems that have been comounted e.g. cpu -> cpu,cpuacct, cpuacct -> cpu,cpuacct
    #[cfg(feature = "v1")]
    pub fn setup_comount_symlinks(&self, cgroup_root: &Path, subsystem_name: &str) -> Result<()> {
        if !subsystem_name.contains(',') {
            return Ok(());
        }

        for comount in subsystem_name.split_terminator(',') {
            let link = cgroup_root.join(comount);
            self.syscall
                .symlink(Path::new(subsystem_name), &link)
                .map_err(|err| {
                    tracing::error!("failed to symlink {link:?} to {subsystem_name:?}");
                    SymlinkError::Syscall { source: err }
                })?;
        }

        Ok(())
    }

    // gpurun patch: the links below are made in the container's `/dev`
    // through its descriptor (`in_root::dir_in_root`), never through a host
    // path: the image's `/dev` may be a symlink to anywhere on the host.

    pub fn setup_ptmx(&self, dev: BorrowedFd) -> Result<()> {
        // gpurun patch 51: an empty directory goes too, as runc's
        // os.Remove takes it; the error names the errno.
        let removed = match unlinkat(Some(dev.as_raw_fd()), "ptmx", UnlinkatFlags::NoRemoveDir) {
            Err(Errno::EISDIR) => unlinkat(Some(dev.as_raw_fd()), "ptmx", UnlinkatFlags::RemoveDir),
            other => other,
        };
        match removed {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(errno) => {
                return Err(SymlinkError::Other {
                    msg: format!(
                        "could not remove the image's /dev/ptmx for the link to pts/ptmx: {}",
                        errno.desc()
                    ),
                });
            }
        }
        link_in(dev, "pts/ptmx", "ptmx").inspect_err(|_| tracing::error!("failed to symlink ptmx"))
    }

    // separating kcore symlink out from setup_default_symlinks for a better way to do the unit test,
    // since not every architecture has /proc/kcore file.
    pub fn setup_kcore_symlink(&self, dev: BorrowedFd) -> Result<()> {
        if Path::new("/proc/kcore").exists() {
            link_in(dev, "/proc/kcore", "kcore")
                .inspect_err(|_| tracing::error!("failed to symlink kcore"))?;
        }
        Ok(())
    }

    pub fn setup_default_symlinks(&self, dev: BorrowedFd) -> Result<()> {
        let defaults = [
            ("/proc/self/fd", "fd"),
            ("/proc/self/fd/0", "stdin"),
            ("/proc/self/fd/1", "stdout"),
            ("/proc/self/fd/2", "stderr"),
        ];
        for (src, name) in defaults {
            link_in(dev, src, name)
                .inspect_err(|_| tracing::error!("failed to symlink defaults"))?;
        }

        Ok(())
    }
}

/// gpurun patch 53: the links in /dev a spec asks for, as a JSON array of
/// `[LINK, TARGET]` with LINK relative to /dev (the DRM nodes'
/// `dri/by-path/pci-<bus>-card -> ../card1`, which udev makes on a host).
pub const DEV_LINKS_ANNOTATION: &str = "org.gpurun.dev-links";

/// The annotation's links: each LINK a plain relative path (no `..`, not
/// absolute), so that it stays in /dev.
pub fn dev_links(spec: &oci_spec::runtime::Spec) -> Result<Vec<(std::path::PathBuf, String)>> {
    use std::path::Component;
    let Some(text) = spec
        .annotations()
        .as_ref()
        .and_then(|a| a.get(DEV_LINKS_ANNOTATION))
    else {
        return Ok(Vec::new());
    };
    let links: Vec<(String, String)> =
        serde_json::from_str(text).map_err(|e| SymlinkError::Other {
            msg: format!("annotation {DEV_LINKS_ANNOTATION}: {e}"),
        })?;
    links
        .into_iter()
        .map(|(link, target)| {
            let path = std::path::PathBuf::from(&link);
            let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
            if !plain || path.file_name().is_none() {
                return Err(SymlinkError::Other {
                    msg: format!(
                        "annotation {DEV_LINKS_ANNOTATION}: {link:?} is not a path in /dev"
                    ),
                });
            }
            Ok((path, target))
        })
        .collect()
}

/// Makes `/dev/LINK -> TARGET` in the container's root (`root`), its
/// folders made inside the root as /dev is.
pub fn link_in_dev(root: BorrowedFd, link: &Path, target: &str) -> Result<()> {
    let parent = Path::new("/dev").join(link.parent().unwrap_or(Path::new("")));
    let dir = crate::rootfs::in_root::dir_in_root(root, &parent, 0o755).map_err(|e| {
        SymlinkError::Other {
            msg: format!("{}: {e}", parent.display()),
        }
    })?;
    let name = link
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    link_in(std::os::fd::AsFd::as_fd(&dir), target, name)
}

/// A symlink `name` -> `target` in the directory `dir`; as runc, an entry
/// already there (a `/dev` kept from an earlier run) is left as it is.
fn link_in(dir: BorrowedFd, target: &str, name: &str) -> Result<()> {
    match symlinkat(target, Some(dir.as_raw_fd()), name) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(err) => Err(SymlinkError::Syscall {
            source: crate::syscall::SyscallError::Nix(err),
        }),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "v1")]
    use std::fs;
    use std::path::PathBuf;

    use super::*;
    #[cfg(feature = "v1")]
    use crate::syscall::linux::LinuxSyscall;
    #[cfg(feature = "v1")]
    use anyhow::{Context, Result};

    /// gpurun patch 53: the annotation's links, each to stay in /dev.
    #[test]
    fn dev_links_are_plain_paths_in_dev() {
        let spec = |links: &str| {
            let mut spec = oci_spec::runtime::Spec::default();
            spec.set_annotations(Some(
                [(DEV_LINKS_ANNOTATION.to_owned(), links.to_owned())].into(),
            ));
            spec
        };
        let links = dev_links(&spec(
            r#"[["dri/by-path/pci-0000:1a:00.0-card","../card1"]]"#,
        ))
        .unwrap();
        assert_eq!(
            links,
            [(
                PathBuf::from("dri/by-path/pci-0000:1a:00.0-card"),
                "../card1".to_owned()
            )]
        );
        for bad in [
            r#"[["../etc/x","y"]]"#,
            r#"[["/etc/x","y"]]"#,
            r#"[["a/../b","y"]]"#,
            "not json",
        ] {
            assert!(dev_links(&spec(bad)).is_err(), "{bad}");
        }
        assert!(
            dev_links(&oci_spec::runtime::Spec::default())
                .unwrap()
                .is_empty()
        );
    }

    fn dev_of(rootfs: &Path) -> std::os::fd::OwnedFd {
        let root = crate::rootfs::in_root::open_root(rootfs).unwrap();
        crate::rootfs::in_root::dir_in_root(
            std::os::fd::AsFd::as_fd(&root),
            Path::new("/dev"),
            0o755,
        )
        .unwrap()
    }

    #[test]
    fn test_setup_ptmx() {
        let tmp_dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp_dir.path().join("dev")).unwrap();
        std::fs::write(tmp_dir.path().join("dev/ptmx"), b"").unwrap();
        let dev = dev_of(tmp_dir.path());
        let symlink = Symlink::new();
        assert!(symlink.setup_ptmx(std::os::fd::AsFd::as_fd(&dev)).is_ok());
        assert_eq!(
            std::fs::read_link(tmp_dir.path().join("dev/ptmx")).unwrap(),
            PathBuf::from("pts/ptmx")
        );
        // An empty directory there goes, as runc's os.Remove takes it.
        std::fs::remove_file(tmp_dir.path().join("dev/ptmx")).unwrap();
        std::fs::create_dir(tmp_dir.path().join("dev/ptmx")).unwrap();
        assert!(symlink.setup_ptmx(std::os::fd::AsFd::as_fd(&dev)).is_ok());
        assert!(tmp_dir.path().join("dev/ptmx").is_symlink());
        // One with files in it cannot be removed: the error names why.
        std::fs::remove_file(tmp_dir.path().join("dev/ptmx")).unwrap();
        std::fs::create_dir_all(tmp_dir.path().join("dev/ptmx/x")).unwrap();
        let err = symlink
            .setup_ptmx(std::os::fd::AsFd::as_fd(&dev))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Directory not empty"), "{err}");
    }

    #[test]
    fn test_setup_default_symlinks() {
        let tmp_dir = tempfile::tempdir().unwrap();
        let dev = dev_of(tmp_dir.path());
        let symlink = Symlink::new();
        for _ in 0..2 {
            // The second time, as runc, the links already there are kept.
            assert!(
                symlink
                    .setup_default_symlinks(std::os::fd::AsFd::as_fd(&dev))
                    .is_ok()
            );
        }
        for (want, name) in [
            ("/proc/self/fd", "fd"),
            ("/proc/self/fd/0", "stdin"),
            ("/proc/self/fd/1", "stdout"),
            ("/proc/self/fd/2", "stderr"),
        ] {
            let got = std::fs::read_link(tmp_dir.path().join("dev").join(name)).unwrap();
            assert_eq!(got, PathBuf::from(want));
        }
    }

    #[test]
    #[cfg(feature = "v1")]
    fn setup_comounted_symlinks_success() -> Result<()> {
        // arrange
        let tmp = tempfile::tempdir().unwrap();
        let cpu = tmp.path().join("cpu");
        let cpuacct = tmp.path().join("cpuacct");
        let cpu_cpuacct = tmp.path().join("cpu,cpuacct");
        fs::create_dir_all(cpu_cpuacct)?;
        let symlink = Symlink::with_syscall(Box::new(LinuxSyscall));

        // act
        symlink
            .setup_comount_symlinks(tmp.path(), "cpu,cpuacct")
            .context("failed to setup symlinks")?;

        // assert
        assert!(cpu.exists(), "cpu symlink does not exist");
        assert!(cpuacct.exists(), "cpuacct symlink does not exist");

        assert!(
            fs::symlink_metadata(&cpu)?.file_type().is_symlink(),
            "cpu is not a symlink"
        );
        assert!(
            fs::symlink_metadata(&cpuacct)?.file_type().is_symlink(),
            "cpuacct is not a symlink"
        );

        assert_eq!(
            fs::read_link(cpu)?,
            PathBuf::from("cpu,cpuacct"),
            "cpu does not link to cpu,cpuacct"
        );
        assert_eq!(
            fs::read_link(cpuacct)?,
            PathBuf::from("cpu,cpuacct"),
            "cpuacct does not link to cpu,cpuacct"
        );

        Ok(())
    }

    #[test]
    #[cfg(feature = "v1")]
    fn setup_comounted_symlinks_no_comounts() -> Result<()> {
        // arrange
        let tmp = tempfile::tempdir().unwrap();
        let symlink = Symlink::with_syscall(Box::new(LinuxSyscall));

        // act
        let result = symlink
            .setup_comount_symlinks(tmp.path(), "memory,task")
            .context("failed to setup symlinks");

        // assert
        assert!(result.is_ok());
        Ok(())
    }
}
