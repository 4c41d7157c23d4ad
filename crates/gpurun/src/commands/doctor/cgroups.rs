//! Cgroups: the version, whether limits apply for this user, and which driver each engine uses.

use std::fs;
use std::path::Path;

use super::{which, Level, Report};
use crate::runtime::cgroups;
use crate::runtime::spec::idmap::UserIds;

pub(super) fn cgroup_version() -> &'static str {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let fs_at = |dir: &str| {
        mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(dir))
            .and_then(|l| l.split(' ').nth(2))
            .map(str::to_owned)
    };
    match fs_at("/sys/fs/cgroup").as_deref() {
        Some("cgroup2") => "v2",
        _ if fs_at("/sys/fs/cgroup/unified").is_some() => "v1 (hybrid)",
        _ => "v1",
    }
}

/// Cgroups.
pub(super) fn check_cgroups(r: &mut Report, root: bool, user: &UserIds) {
    let version = cgroup_version();
    if root {
        r.line(
            Level::Ok,
            false,
            "cgroups",
            format!("{version}, limits applied (root)"),
        );
    } else if cgroups::host::writable_for_current_user(Path::new("/gpurun")) {
        r.line(
            Level::Ok,
            false,
            "cgroups",
            format!("{version}, delegated: limits applied"),
        );
    } else {
        r.line(
            Level::Warn,
            false,
            "cgroups",
            format!("{version}, no delegation to uid {}: containers run without cgroup limits (as with runc); on cgroup v2 use systemd-run --user --scope -p Delegate=yes", user.uid),
        );
    }
}

/// Which cgroup driver each engine on this host hands gpurun (read from
/// their own configuration, their defaults otherwise), and, where that is
/// systemd, whether the spec's device rules hold there: systemd gets
/// `DevicePolicy=strict` and a `DeviceAllow` list, and gpurun attaches its
/// own device program beside systemd's, which needs the kernel to load one.
pub(super) fn check_cgroup_drivers(r: &mut Report, root: bool) {
    let systemd = Path::new("/run/systemd/system").is_dir();
    let v2 = cgroup_version() == "v2";
    let default = if systemd && v2 { "systemd" } else { "cgroupfs" };
    let engines = engine_cgroup_drivers(default);
    let listed: Vec<String> = engines.iter().map(|(e, d)| format!("{e}: {d}")).collect();
    r.line(
        Level::Info,
        false,
        "cgroup drivers",
        if listed.is_empty() {
            format!(
                "no engine configured; systemd {}",
                if systemd { "is init" } else { "is not init" }
            )
        } else {
            listed.join(", ")
        },
    );
    if systemd && v2 && root {
        check_device_program(r);
    }
}

/// Each installed engine and the cgroup driver its configuration names
/// (`default` where it names none and follows the host).
fn engine_cgroup_drivers(default: &'static str) -> Vec<(&'static str, &'static str)> {
    let read = |path: &str| fs::read_to_string(path).ok();
    let mut engines = Vec::new();
    if let Some(text) =
        read("/etc/docker/daemon.json").or_else(|| which("dockerd").then(String::new))
    {
        let driver = if text.contains("native.cgroupdriver=systemd") {
            "systemd"
        } else if text.contains("native.cgroupdriver=cgroupfs") {
            "cgroupfs"
        } else {
            default // Docker's own default since 20.10
        };
        engines.push(("Docker", driver));
    }
    if let Some(text) =
        read("/etc/containerd/config.toml").or_else(|| which("containerd").then(String::new))
    {
        let systemd_cgroup = text
            .lines()
            .any(|l| l.split('#').next().unwrap_or("").replace(' ', "") == "SystemdCgroup=true");
        engines.push((
            "containerd",
            if systemd_cgroup {
                "systemd"
            } else {
                "cgroupfs"
            },
        ));
    }
    if which("podman") {
        let conf = read("/etc/containers/containers.conf")
            .or_else(|| read("/usr/share/containers/containers.conf"))
            .unwrap_or_default();
        let driver = conf
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cgroup_manager"))
            .find_map(|rest| rest.split('"').nth(1).map(str::to_owned));
        let cgroupfs = driver.as_deref() == Some("cgroupfs");
        engines.push(("Podman", if cgroupfs { "cgroupfs" } else { default }));
    }
    if let Some(text) = read("/var/lib/kubelet/config.yaml") {
        let cgroupfs = text.contains("cgroupDriver: cgroupfs");
        engines.push(("kubelet", if cgroupfs { "cgroupfs" } else { "systemd" }));
    }
    engines
}

/// What `--systemd-cgroup` needs beyond systemd's own list: a device
/// program gpurun can load.
fn check_device_program(r: &mut Report) {
    let loaded = libcgroups::v2::devices::program::Program::from_rules(&[], false)
        .map_err(|e| e.to_string())
        .and_then(|program| {
            libcgroups::v2::devices::bpf::prog::load("Apache", program.bytecodes())
                .map_err(|e| e.to_string())
        });
    match loaded {
        Ok(fd) => {
            let _ = nix::unistd::close(fd);
            r.line(
                Level::Ok,
                false,
                "device rules under systemd",
                "enforced: the unit gets DevicePolicy=strict and the spec's DeviceAllow list, and gpurun's own device program holds the rules exactly through daemon-reload and update",
            );
        }
        Err(e) => r.line(
            Level::Fail,
            false,
            "device rules under systemd",
            format!("gpurun cannot load a device program ({e}): --systemd-cgroup containers would fail to start; check that the kernel has CONFIG_CGROUP_BPF and that no seccomp or LSM policy refuses bpf(2) to root"),
        ),
    }
}
