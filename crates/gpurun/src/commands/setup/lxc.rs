//! LXC's config: gpurun's hooks in place of NVIDIA's.

use std::fs;

use anyhow::{bail, Result};

use crate::runtime::context::Settings;

/// The comment that opens gpurun's lines in an LXC config.
const LXC_MARK: &str = "# GPUs through gpurun (gpurun setup lxc): set NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES with lxc.environment";

/// An LXC config (`default.conf` or a container's own): gpurun's mount and
/// start-host hooks, in place of NVIDIA's `hooks/nvidia`. On cgroup v2 a
/// hook cannot widen LXC's device program, so `v2_majors` (the NVIDIA
/// device majors) get allow lines; on v1 the start-host hook allows the
/// container's own GPU nodes only.
pub fn edit_lxc(text: &str, command: &str, v2_majors: &[u32]) -> String {
    let hook = format!("{command} lxc-hook");
    let ours: Vec<String> = std::iter::once(LXC_MARK.to_owned())
        .chain(["mount", "start-host"].map(|t| format!("lxc.hook.{t} = {hook}")))
        .chain(
            v2_majors
                .iter()
                .map(|m| format!("lxc.cgroup2.devices.allow = c {m}:* rwm")),
        )
        .collect();
    // Earlier gpurun lines (any binary) and NVIDIA's hook make way.
    let is_old = |line: &str| {
        let trimmed = line.trim();
        let value = trimmed.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
        trimmed == LXC_MARK
            || (trimmed.starts_with("lxc.hook.")
                && (value.ends_with(" lxc-hook") || value.ends_with("/hooks/nvidia")))
            || ours.iter().any(|o| o == trimmed)
    };
    super::replace_lines(text, is_old, &ours)
}

/// The hook's command line: the binary and the driver-location flags
/// given to setup (the hook takes no GPURUN_* variables). LXC runs it
/// through sh, so only plain paths are taken.
pub fn lxc_hook_command(binary: &str, settings: &Settings) -> Result<String> {
    let mut command = binary.to_owned();
    for (flag, value) in [
        ("--driver-root", &settings.driver_root),
        ("--dev-root", &settings.dev_root),
        ("--proc-root", &settings.proc_root),
    ] {
        if let Some(path) = value {
            command.push_str(&format!(" {flag} {}", path.display()));
        }
    }
    if !command
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" /-_.+@:,".contains(&b))
    {
        bail!("{command}: LXC runs hooks through sh; use paths without spaces, quotes or shell characters");
    }
    Ok(command)
}

/// The majors of NVIDIA's character devices, where cgroup v2 is the only
/// hierarchy with a devices controller (no v1 `devices` mount).
pub fn lxc_v2_device_majors() -> Vec<u32> {
    let v1_devices = fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines().any(|l| {
            l.split_once(" - ").is_some_and(|(_, rest)| {
                let mut f = rest.split(' ');
                f.next() == Some("cgroup")
                    && f.nth(1)
                        .is_some_and(|o| o.split(',').any(|o| o == "devices"))
            })
        })
    });
    if v1_devices {
        return Vec::new();
    }
    let mut majors = vec![195];
    let devices = fs::read_to_string("/proc/devices").unwrap_or_default();
    for line in devices.lines() {
        if let Some((major, name)) = line.trim().split_once(' ') {
            if name.starts_with("nvidia") {
                if let Ok(m) = major.parse::<u32>() {
                    if !majors.contains(&m) {
                        majors.push(m);
                    }
                }
            }
        }
    }
    majors
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/usr/local/bin/gpurun";

    #[test]
    fn lxc_hooks_replace_nvidias_and_setup_is_idempotent() {
        let old = "lxc.include = /usr/share/lxc/config/common.conf\nlxc.hook.mount = /usr/share/lxc/hooks/nvidia\nlxc.net.0.type = empty\n";
        let new = edit_lxc(old, BIN, &[]);
        assert!(!new.contains("hooks/nvidia"), "{new}");
        assert!(new.contains("lxc.net.0.type = empty\n"), "{new}");
        assert!(
            new.contains(&format!("lxc.hook.mount = {BIN} lxc-hook\n")),
            "{new}"
        );
        assert!(
            new.contains(&format!("lxc.hook.start-host = {BIN} lxc-hook\n")),
            "{new}"
        );
        assert!(!new.contains("cgroup2"), "{new}");
        assert_eq!(edit_lxc(&new, BIN, &[]), new);
        // Another binary replaces the old one's lines; v2 majors are added once.
        let moved = edit_lxc(&new, "/opt/gpurun", &[195, 508]);
        assert!(!moved.contains(BIN), "{moved}");
        assert_eq!(moved.matches("lxc-hook").count(), 2, "{moved}");
        assert!(
            moved.contains("lxc.cgroup2.devices.allow = c 508:* rwm\n"),
            "{moved}"
        );
        assert_eq!(edit_lxc(&moved, "/opt/gpurun", &[195, 508]), moved);
    }
}
