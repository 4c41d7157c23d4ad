//! GPU facts from NVML, loaded at run time with `nvml-wrapper`, so gpurun
//! runs on hosts without a driver. Any failure means "no NVML": the caller
//! falls back to procfs.
//!
//! NVML is loaded in a child process, never in gpurun itself: as root,
//! `nvmlInit` creates missing device nodes (`/dev/nvidiactl`) on the host,
//! which a read-only command such as `gpu info` or `doctor` must never do.
//! The child has a private mount namespace with `/dev` read-only, so the
//! library can read what is there and create nothing; its answer comes
//! back as JSON over a pipe.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use nvml_wrapper::enum_wrappers::device::Brand;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

use crate::inventory::gpus::{Gpu, MigDevice};

#[derive(Serialize, Deserialize)]
pub struct NvmlFacts {
    pub driver_version: String,
    pub cuda_version: Option<String>,
    pub gpus: Vec<Gpu>,
}

/// Largest answer read back from the child.
const MAX_ANSWER: u64 = 4 << 20;

/// `query_library` in a child that cannot change the host's `/dev`.
pub fn query_isolated(lib: &Path) -> Option<NvmlFacts> {
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: both descriptors were just made and are owned here.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: gpurun is single-threaded when it takes inventory; the child
    // only sets up its namespace, loads the library and exits.
    match unsafe { libc::fork() } {
        -1 => None,
        0 => {
            drop(reader);
            let code = match isolate_dev() {
                Ok(()) => {
                    let answer = query_library(lib);
                    let mut out = std::fs::File::from(writer);
                    match answer.and_then(|f| serde_json::to_vec(&f).ok()) {
                        Some(bytes) => i32::from(out.write_all(&bytes).is_err()),
                        None => 1,
                    }
                }
                Err(e) => {
                    tracing::debug!("NVML not queried: {e}");
                    1
                }
            };
            // SAFETY: leave at once, without running our atexit handlers.
            unsafe { libc::_exit(code) }
        }
        child => {
            drop(writer);
            let mut bytes = Vec::new();
            let _ = std::fs::File::from(reader)
                .take(MAX_ANSWER)
                .read_to_end(&mut bytes);
            let mut status = 0;
            // SAFETY: waiting for our own child.
            while unsafe { libc::waitpid(child, &mut status, 0) } < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
            serde_json::from_slice(&bytes).ok()
        }
    }
}

/// In the child: a private mount namespace whose `/dev` is read-only. Only
/// root can create nodes, and only root needs this.
fn isolate_dev() -> std::io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: unshare and mount with NUL-terminated literals or NULL, in a
    // child that owns its (new) mount namespace.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        check(libc::mount(
            c"/dev".as_ptr(),
            c"/dev".as_ptr(),
            none,
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ))?;
        check(libc::mount(
            none,
            c"/dev".as_ptr(),
            none,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
            std::ptr::null(),
        ))
    }
}

fn brand_name(brand: Brand) -> String {
    format!("{brand:?}").to_ascii_lowercase()
}

/// Loads `lib` and asks it everything the inventory needs.
pub fn query_library(lib: &Path) -> Option<NvmlFacts> {
    let nvml = match Nvml::builder().lib_path(lib.as_os_str()).init() {
        Ok(nvml) => nvml,
        Err(e) => {
            tracing::debug!("NVML from {} did not initialise: {e}", lib.display());
            return None;
        }
    };
    let facts = (|| {
        let driver_version = nvml.sys_driver_version().ok()?;
        let cuda_version = nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        let count = nvml.device_count().ok()?;
        let mut gpus = Vec::new();
        for index in 0..count {
            let device = nvml.device_by_index(index).ok()?;
            let mut migs = Vec::new();
            if let Ok(n) = device.mig_device_count() {
                for m in 0..n {
                    if let Ok(mig) = device.mig_device_by_index(m) {
                        migs.push(MigDevice {
                            index: m,
                            uuid: mig.uuid().unwrap_or_default(),
                            gpu_instance: None,
                            compute_instance: None,
                            nodes: Vec::new(),
                            profile: mig.name().ok().as_deref().and_then(mig_profile),
                        });
                    }
                }
            }
            gpus.push(Gpu {
                index,
                minor: device.minor_number().ok()?,
                uuid: device.uuid().ok()?,
                pci_bus_id: device.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                model: device.name().unwrap_or_default(),
                arch: device
                    .cuda_compute_capability()
                    .ok()
                    .map(|c| format!("{}.{}", c.major, c.minor)),
                brand: device.brand().ok().map(brand_name),
                node: None,
                drm_nodes: Vec::new(),
                migs,
            });
        }
        Some(NvmlFacts {
            driver_version,
            cuda_version,
            gpus,
        })
    })();
    let _ = nvml.shutdown();
    facts
}

/// A MIG device's profile from its NVML name, "<GPU> MIG <profile>"
/// ("NVIDIA RTX PRO 6000 Blackwell MIG 1g.24gb+gfx" → "1g.24gb+gfx").
pub(crate) fn mig_profile(name: &str) -> Option<String> {
    name.rsplit_once(" MIG ")
        .map(|(_, p)| p.trim().to_owned())
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::mig_profile;

    #[test]
    fn a_mig_devices_profile_is_the_end_of_its_nvml_name() {
        assert_eq!(
            mig_profile("NVIDIA RTX PRO 6000 Blackwell MIG 1g.24gb+gfx").as_deref(),
            Some("1g.24gb+gfx")
        );
        assert_eq!(
            mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb").as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3"), None);
    }
}
