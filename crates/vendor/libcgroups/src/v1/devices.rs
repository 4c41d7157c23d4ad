use std::fs::File;
use std::io::Write;
use std::path::Path;

use oci_spec::runtime::LinuxDeviceCgroup;

use super::controller::Controller;
use crate::common::{self, ControllerOpt, WrappedIoError};

pub struct Devices {}

impl Controller for Devices {
    type Error = WrappedIoError;
    type Resource = ();

    fn apply(controller_opt: &ControllerOpt, cgroup_root: &Path) -> Result<(), Self::Error> {
        tracing::debug!("Apply Devices cgroup config");

        let spec_rules = controller_opt
            .resources
            .devices()
            .clone()
            .unwrap_or_default();
        let mut files = RuleFiles::new(cgroup_root);
        for d in common::ordered_device_rules(&spec_rules) {
            match files.write(&d) {
                // gpurun patch: a parent that refuses some of these devices
                // (a Slurm step with ConstrainDevices denies the GPUs it
                // did not allocate) refuses an allow rule that covers them,
                // such as the default "c *:* m", with EPERM. The cgroup can
                // never have more than its parent, so such a rule is
                // skipped rather than failing the container.
                Err(err) if d.allow() && err.inner().raw_os_error() == Some(nix::libc::EPERM) => {
                    tracing::debug!("device rule {d} refused by the parent cgroup: skipped");
                }
                result => result?,
            }
        }

        Ok(())
    }

    // always needs to be called due to default devices
    fn needs_to_handle<'a>(_controller_opt: &'a ControllerOpt) -> Option<&'a Self::Resource> {
        Some(&())
    }
}

impl Devices {
    #[cfg(test)]
    fn apply_device(device: &LinuxDeviceCgroup, cgroup_root: &Path) -> Result<(), WrappedIoError> {
        RuleFiles::new(cgroup_root).write(device)
    }
}

/// `devices.allow` and `devices.deny` of one cgroup, each opened once for
/// all the rules (gpurun patch): an open per rule walked the cgroup's path
/// again each time, a dozen kernfs lookups per container contending with
/// every cgroup made or removed on the host. Each rule is still one
/// write(2), which is how the kernel reads them.
struct RuleFiles<'a> {
    cgroup_root: &'a Path,
    allow: Option<File>,
    deny: Option<File>,
}

impl<'a> RuleFiles<'a> {
    fn new(cgroup_root: &'a Path) -> Self {
        Self {
            cgroup_root,
            allow: None,
            deny: None,
        }
    }

    fn write(&mut self, device: &LinuxDeviceCgroup) -> Result<(), WrappedIoError> {
        let (slot, name) = if device.allow() {
            (&mut self.allow, "devices.allow")
        } else {
            (&mut self.deny, "devices.deny")
        };
        let path = || self.cgroup_root.join(name);
        let file = match slot {
            Some(file) => file,
            None => slot.insert(
                crate::cgroupfs::open(&path(), nix::fcntl::OFlag::O_WRONLY)
                    .map_err(|err| WrappedIoError::Open { err, path: path() })?,
            ),
        };
        let rule = device.to_string();
        file.write_all(rule.as_bytes())
            .map_err(|err| WrappedIoError::Write {
                err,
                path: path(),
                data: rule,
            })
    }
}

#[cfg(test)]
mod tests {
    use std::fs::read_to_string;

    use oci_spec::runtime::{LinuxDeviceCgroupBuilder, LinuxDeviceType};

    use super::*;
    use crate::common::default_allow_devices;
    use crate::test::set_fixture;

    #[test]
    fn test_set_default_devices() {
        let tmp = tempfile::tempdir().unwrap();

        default_allow_devices().iter().for_each(|d| {
            // NOTE: We reset the fixtures every iteration because files aren't appended
            // so what happens in the tests is you get strange overwrites which can contain
            // remaining bytes from the last iteration. Resetting the files more appropriately
            // mocks the behavior of cgroup files.
            set_fixture(tmp.path(), "devices.allow", "").expect("create allowed devices list");
            set_fixture(tmp.path(), "devices.deny", "").expect("create denied devices list");

            Devices::apply_device(d, tmp.path()).expect("Apply default device");
            println!("Device: {}", d);
            if d.allow() {
                let allowed_content =
                    read_to_string(tmp.path().join("devices.allow")).expect("read to string");
                assert_eq!(allowed_content, d.to_string());
            } else {
                let denied_content =
                    read_to_string(tmp.path().join("devices.deny")).expect("read to string");
                assert_eq!(denied_content, d.to_string());
            }
        });
    }

    #[test]
    fn test_set_mock_devices() {
        let tmp = tempfile::tempdir().unwrap();
        [
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(LinuxDeviceType::C)
                .major(10)
                .access("rwm")
                .build()
                .unwrap(),
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(LinuxDeviceType::A)
                .minor(200)
                .access("rwm")
                .build()
                .unwrap(),
            LinuxDeviceCgroupBuilder::default()
                .allow(false)
                .typ(LinuxDeviceType::P)
                .major(10)
                .minor(200)
                .access("m")
                .build()
                .unwrap(),
            LinuxDeviceCgroupBuilder::default()
                .allow(false)
                .typ(LinuxDeviceType::U)
                .access("rw")
                .build()
                .unwrap(),
        ]
        .iter()
        .for_each(|d| {
            set_fixture(tmp.path(), "devices.allow", "").expect("create allowed devices list");
            set_fixture(tmp.path(), "devices.deny", "").expect("create denied devices list");

            Devices::apply_device(d, tmp.path()).expect("Apply default device");
            println!("Device: {}", d);
            if d.allow() {
                let allowed_content =
                    read_to_string(tmp.path().join("devices.allow")).expect("read to string");
                assert_eq!(allowed_content, d.to_string());
            } else {
                let denied_content =
                    read_to_string(tmp.path().join("devices.deny")).expect("read to string");
                assert_eq!(denied_content, d.to_string());
            }
        });
    }

    quickcheck! {
        fn property_test_apply_device(device: LinuxDeviceCgroup) -> bool {
            let tmp = tempfile::tempdir().unwrap();
            set_fixture(tmp.path(), "devices.allow", "").expect("create allowed devices list");
            set_fixture(tmp.path(), "devices.deny", "").expect("create denied devices list");
            Devices::apply_device(&device, tmp.path()).expect("Apply default device");
            if device.allow() {
                let allowed_content =
                    read_to_string(tmp.path().join("devices.allow")).expect("read to string");
                allowed_content == device.to_string()
            } else {
                let denied_content =
                    read_to_string(tmp.path().join("devices.deny")).expect("read to string");
                denied_content == device.to_string()
            }
        }

        fn property_test_apply_multiple_devices(devices: Vec<LinuxDeviceCgroup>) -> bool {
            let tmp = tempfile::tempdir().unwrap();
            devices.iter()
                .all(|device| {
                    set_fixture(tmp.path(), "devices.allow", "").expect("create allowed devices list");
                    set_fixture(tmp.path(), "devices.deny", "").expect("create denied devices list");
                    Devices::apply_device(device, tmp.path()).expect("Apply default device");
                    if device.allow() {
                        let allowed_content =
                            read_to_string(tmp.path().join("devices.allow")).expect("read to string");
                        allowed_content == device.to_string()
                    } else {
                        let denied_content =
                            read_to_string(tmp.path().join("devices.deny")).expect("read to string");
                        denied_content == device.to_string()
                    }
                })
        }
    }
}
