use std::os::unix::io::AsRawFd;
use std::path::Path;

#[cfg(test)]
use bpf::mock_prog as bpf_prog;
#[cfg(not(test))]
use bpf::prog as bpf_prog;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use oci_spec::runtime::LinuxDeviceCgroup;

use super::bpf::BpfError;
use super::program::ProgramError;
use super::*;
use crate::common::ControllerOpt;
use crate::v2::controller::Controller;

const LICENSE: &str = "Apache";

pub struct Devices {}

#[derive(thiserror::Error, Debug)]
pub enum DevicesControllerError {
    #[error("bpf error: {0}")]
    Bpf(#[from] BpfError),
    #[error("nix error: {0}")]
    Nix(#[from] nix::Error),
    #[error("program error: {0}")]
    Program(#[from] ProgramError),
}

impl Controller for Devices {
    type Error = DevicesControllerError;

    fn apply(
        controller_opt: &ControllerOpt,
        cgroup_root: &Path,
    ) -> Result<(), DevicesControllerError> {
        #[cfg(not(feature = "cgroupsv2_devices"))]
        return Ok(());

        #[cfg(feature = "cgroupsv2_devices")]
        return Self::apply_devices(cgroup_root, controller_opt.resources.devices());
    }
}

impl Devices {
    pub fn apply_devices(
        cgroup_root: &Path,
        linux_devices: &Option<Vec<LinuxDeviceCgroup>>,
    ) -> Result<(), DevicesControllerError> {
        tracing::debug!("Apply Devices cgroup config");

        // FIXME: should we start as "deny all"?
        let mut emulator = emulator::Emulator::with_default_allow(false);

        let spec_rules = linux_devices.clone().unwrap_or_default();
        for d in crate::common::ordered_device_rules(&spec_rules) {
            tracing::debug!("apply device rule: {:?}", d);
            emulator.add_rule(&d);
        }

        let prog = program::Program::from_rules(&emulator.rules, emulator.default_allow)?;

        // Increase `ulimit -l` limit to avoid BPF_PROG_LOAD error (#2167).
        // This limit is not inherited into the container.
        // gpurun patch: best effort. Raising the hard limit needs
        // CAP_SYS_RESOURCE, which some hosts withhold even from root (VMs,
        // nested containers), and kernels since 5.11 charge BPF programs
        // to the memory cgroup instead; where the limit still matters, the
        // load below fails with its own error.
        if let Err(err) = bpf_prog::bump_memlock_rlimit() {
            tracing::debug!("cannot raise RLIMIT_MEMLOCK for the device program: {err}");
        }
        let prog_fd = bpf_prog::load(LICENSE, prog.bytecodes())?;

        // gpurun patch: attach the new program beside the old ones, then
        // detach only the programs gpurun attached before (by name). Under
        // the systemd driver systemd attaches its own program (sd_devices,
        // built from DeviceAllow) to the same cgroup; a device opens only
        // if every program lets it through, so detaching systemd's would
        // be undone, with the spec's devices missing from it, at the next
        // `systemctl daemon-reload` (runc's "NVML: Unknown Error").
        let fd = nix::dir::Dir::open(
            cgroup_root.as_os_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::from_bits(0o600).unwrap(),
        )?;
        let old_progs = bpf_prog::query(fd.as_raw_fd())?;
        bpf_prog::attach(prog_fd, fd.as_raw_fd())?;
        for old_prog in old_progs {
            if bpf_prog::name(old_prog.fd).as_bytes() == bpf::prog::PROGRAM_NAME.to_bytes() {
                bpf_prog::detach2(old_prog.fd, fd.as_raw_fd())?;
            }
        }

        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::io::RawFd;

    use bpf::mock_prog;
    use oci_spec::runtime::{LinuxDeviceCgroupBuilder, LinuxDeviceType};
    use serial_test::serial;

    use super::*;
    use crate::test::setup;

    #[test]
    #[serial(bpf)] // mock contexts are shared
    fn test_apply_devices() {
        // arrange
        let (tmp, _) = setup("some.value");
        let a_type = LinuxDeviceCgroupBuilder::default()
            .typ(LinuxDeviceType::A)
            .build()
            .unwrap();
        let file_descriptor: RawFd = 6;

        // expect
        let bump_memlock_rlimit = mock_prog::bump_memlock_rlimit_context();
        let load = mock_prog::load_context();
        let query = mock_prog::query_context();
        let attach = mock_prog::attach_context();
        let detach2 = mock_prog::detach2_context();
        bump_memlock_rlimit.expect().once().returning(|| Ok(()));
        load.expect()
            .once()
            .returning(move |_, _| Ok(file_descriptor));
        query.expect().once().returning(|_| Ok(vec![]));
        attach.expect().once().returning(|_, _| Ok(()));
        detach2.expect().never();

        // act
        Devices::apply_devices(tmp.path(), &Some(vec![a_type])).expect("Could not apply devices");
    }

    #[test]
    #[serial(bpf)] // mock contexts are shared
    fn test_existing_programs() {
        // arrange
        let (tmp, _) = setup("some.value");
        let a_type = LinuxDeviceCgroupBuilder::default()
            .typ(LinuxDeviceType::A)
            .build()
            .unwrap();
        let file_descriptor: RawFd = 6;
        let existing_program_1 = bpf::ProgramInfo {
            id: u32::default(),
            fd: i32::default(),
        };

        // expect
        let bump_memlock_rlimit = mock_prog::bump_memlock_rlimit_context();
        let load = mock_prog::load_context();
        let query = mock_prog::query_context();
        let attach = mock_prog::attach_context();
        let detach2 = mock_prog::detach2_context();
        let name = mock_prog::name_context();
        bump_memlock_rlimit.expect().once().returning(|| Ok(()));
        load.expect()
            .once()
            .returning(move |_, _| Ok(file_descriptor));
        query
            .expect()
            .once()
            .returning(move |_| Ok(vec![existing_program_1.clone()]));
        attach.expect().once().returning(|_, _| Ok(()));
        name.expect()
            .once()
            .returning(|_| "gpurun_devices".to_string());
        detach2.expect().once().returning(|_, _| Ok(()));

        // act
        Devices::apply_devices(tmp.path(), &Some(vec![a_type])).expect("Could not apply devices");
    }

    #[test]
    #[serial(bpf)] // mock contexts are shared
    fn programs_of_others_stay_attached() {
        // systemd's own device program (sd_devices) on the same cgroup.
        let (tmp, _) = setup("some.value");
        let systemds = bpf::ProgramInfo { id: 7, fd: 9 };
        let bump_memlock_rlimit = mock_prog::bump_memlock_rlimit_context();
        let load = mock_prog::load_context();
        let query = mock_prog::query_context();
        let attach = mock_prog::attach_context();
        let detach2 = mock_prog::detach2_context();
        let name = mock_prog::name_context();
        bump_memlock_rlimit.expect().once().returning(|| Ok(()));
        load.expect().once().returning(|_, _| Ok(6));
        query
            .expect()
            .once()
            .returning(move |_| Ok(vec![systemds.clone()]));
        attach.expect().once().returning(|_, _| Ok(()));
        name.expect().once().returning(|_| "sd_devices".to_string());
        detach2.expect().never();

        Devices::apply_devices(tmp.path(), &Some(vec![])).expect("apply devices");
    }
}
