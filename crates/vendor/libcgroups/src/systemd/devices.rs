//! The spec's device rules under the systemd driver (gpurun patch).
//!
//! 0.7.0's systemd manager sent nothing for devices: no `DevicePolicy`, no
//! `DeviceAllow`, no program, so every device was open to a container with
//! CAP_MKNOD. Two layers now hold the rules, as under runc and crun:
//!
//! - the unit's `DevicePolicy=strict` and a `DeviceAllow=` list, sent in
//!   the order runc 1.2 sends them (an empty `DeviceAllow` that clears what
//!   the unit had, the policy, then the list). systemd builds its own
//!   program from them and re-applies it at every `daemon-reload`;
//! - gpurun's own device program (`v2::devices`), which holds the rules
//!   exactly, attached beside systemd's and never detaching it.
//!
//! A device opens only if both programs let it through, so the list given
//! to systemd must let through everything the rules allow; where systemd's
//! syntax cannot say a rule exactly it gets a wider entry, never a
//! narrower one, and gpurun's program narrows it. A list narrower than the
//! rules is what loses a container's GPU at the next reload (runc 1.1
//! dropped `/dev/char/195:N` entries whose path did not exist).

use std::fs;

use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType};

use super::dbus_native::serialize::{Structure, Variant};
use crate::common;

pub const DEVICE_POLICY: &str = "DevicePolicy";
pub const DEVICE_ALLOW: &str = "DeviceAllow";

/// systemd parses `/dev/char/M:m` and `char-M` itself from this version on;
/// older ones stat the path and look names up in /proc/devices.
const PARSES_NUMBERS_SINCE: u32 = 240;

/// The unit's device properties for the spec's rules (the runtime's
/// defaults included, as every manager applies them), in the order they
/// must be sent.
pub fn properties(
    spec_rules: &[LinuxDeviceCgroup],
    systemd_version: u32,
) -> Vec<(&'static str, Variant)> {
    let proc_devices = || fs::read_to_string("/proc/devices").unwrap_or_default();
    properties_with(spec_rules, systemd_version, proc_devices)
}

fn properties_with(
    spec_rules: &[LinuxDeviceCgroup],
    systemd_version: u32,
    proc_devices: impl Fn() -> String,
) -> Vec<(&'static str, Variant)> {
    // Replayed as the device program replays them: a type-a rule resets
    // the list and sets the default; the other rules stack on it.
    let mut default_allow = false;
    let mut allowed: Vec<&LinuxDeviceCgroup> = Vec::new();
    let rules = common::ordered_device_rules(spec_rules);
    for rule in &rules {
        if rule.typ().unwrap_or_default() == LinuxDeviceType::A {
            default_allow = rule.allow();
            allowed.clear();
        } else if rule.allow() {
            allowed.push(rule);
        }
    }
    let clear = (DEVICE_ALLOW, Variant::ArrayStructString(Vec::new()));
    if default_allow {
        // A deny list: systemd has none. Let it allow everything (no
        // program of its own); gpurun's program holds the denials.
        return vec![(DEVICE_POLICY, Variant::String("auto".into())), clear];
    }

    let mut entries: Vec<(String, String)> = Vec::new();
    for rule in allowed {
        let access: String = rule
            .access()
            .as_deref()
            .unwrap_or_default()
            .chars()
            .filter(|c| matches!(c, 'r' | 'w' | 'm'))
            .collect();
        if access.is_empty() {
            continue;
        }
        let path = allow_path(rule, systemd_version, &proc_devices);
        let entry = (path, access);
        if !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    let list = entries
        .into_iter()
        .map(|(path, access)| Structure::new(path, access))
        .collect();
    vec![
        clear,
        (DEVICE_POLICY, Variant::String("strict".into())),
        (DEVICE_ALLOW, Variant::ArrayStructString(list)),
    ]
}

/// The `DeviceAllow` path for one allow rule: exact where systemd can say
/// it, else the smallest wider set it can.
fn allow_path(
    rule: &LinuxDeviceCgroup,
    systemd_version: u32,
    proc_devices: &impl Fn() -> String,
) -> String {
    let (class, dir) = match rule.typ().unwrap_or_default() {
        LinuxDeviceType::B => ("block", "block"),
        _ => ("char", "char"),
    };
    let everything = format!("{class}-*");
    let Some(major) = rule.major() else {
        // "c *:N": systemd has no wildcard major with a fixed minor.
        return everything;
    };
    if systemd_version >= PARSES_NUMBERS_SINCE {
        return match rule.minor() {
            Some(minor) => format!("/dev/{dir}/{major}:{minor}"),
            None => format!("{class}-{major}"),
        };
    }
    // An old systemd: a path must exist to be stat'ed, so name the whole
    // major by its /proc/devices group, or everything of the class.
    match device_group(&proc_devices(), class, major) {
        Some(group) => format!("{class}-{group}"),
        None => everything,
    }
}

/// The name /proc/devices gives a major of a class ("char" or "block").
fn device_group(proc_devices: &str, class: &str, major: i64) -> Option<String> {
    let heading = if class == "block" {
        "Block devices:"
    } else {
        "Character devices:"
    };
    proc_devices
        .lines()
        .skip_while(|line| line.trim() != heading)
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let number = fields.next()?.parse::<i64>().ok()?;
            let name = fields.next()?;
            (number == major).then(|| name.to_string())
        })
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::LinuxDeviceCgroupBuilder;

    use super::*;

    fn rule(
        allow: bool,
        typ: LinuxDeviceType,
        major: Option<i64>,
        minor: Option<i64>,
        access: &str,
    ) -> LinuxDeviceCgroup {
        let mut builder = LinuxDeviceCgroupBuilder::default()
            .allow(allow)
            .typ(typ)
            .access(access);
        if let Some(major) = major {
            builder = builder.major(major);
        }
        if let Some(minor) = minor {
            builder = builder.minor(minor);
        }
        builder.build().unwrap()
    }

    fn deny_all() -> LinuxDeviceCgroup {
        rule(false, LinuxDeviceType::A, None, None, "rwm")
    }

    fn allow_list(properties: &[(&str, Variant)]) -> Vec<Structure<String>> {
        match properties.last() {
            Some((DEVICE_ALLOW, Variant::ArrayStructString(list))) => list.clone(),
            other => panic!("no DeviceAllow list last: {other:?}"),
        }
    }

    fn entry(path: &str, access: &str) -> Structure<String> {
        Structure::new(path.into(), access.into())
    }

    const PROC_DEVICES: &str =
        "Character devices:\n  1 mem\n136 pts\n195 nvidia-frontend\n\nBlock devices:\n  8 sd\n";

    #[test]
    fn a_gpu_container_gets_a_strict_list_in_runcs_order() {
        let rules = vec![
            deny_all(),
            rule(true, LinuxDeviceType::C, Some(195), Some(0), "rw"),
            rule(true, LinuxDeviceType::C, Some(195), Some(255), "rwm"),
        ];
        let props = properties_with(&rules, 252, || PROC_DEVICES.into());
        assert_eq!(props.len(), 3);
        assert_eq!(props[0], (DEVICE_ALLOW, Variant::ArrayStructString(vec![])));
        assert_eq!(props[1], (DEVICE_POLICY, Variant::String("strict".into())));
        let list = allow_list(&props);
        // The spec's rules first, then the runtime's defaults (null, zero,
        // full, tty, random, urandom, mknod of anything, console, pts,
        // ptmx), as runc appends them.
        assert_eq!(list[0], entry("/dev/char/195:0", "rw"));
        assert_eq!(list[1], entry("/dev/char/195:255", "rwm"));
        assert!(
            list[2..].contains(&entry("/dev/char/1:3", "rwm")),
            "{list:?}"
        );
        assert!(list.contains(&entry("char-*", "m")), "{list:?}");
        assert!(list.contains(&entry("block-*", "m")), "{list:?}");
        assert!(list.contains(&entry("char-136", "rwm")), "{list:?}");
        // Nothing that reads or writes every device.
        for wide in ["char-*", "block-*"] {
            for access in ["r", "w", "rw", "rm", "wm", "rwm"] {
                assert!(!list.contains(&entry(wide, access)), "{list:?}");
            }
        }
    }

    #[test]
    fn rules_before_a_type_a_rule_are_gone() {
        let rules = vec![
            rule(true, LinuxDeviceType::C, Some(195), Some(1), "rwm"),
            deny_all(),
            rule(true, LinuxDeviceType::C, Some(195), Some(0), "rwm"),
        ];
        let list = allow_list(&properties_with(&rules, 252, String::new));
        assert!(!list.contains(&entry("/dev/char/195:1", "rwm")), "{list:?}");
        assert!(list.contains(&entry("/dev/char/195:0", "rwm")), "{list:?}");
    }

    #[test]
    fn a_deny_list_leaves_systemd_allowing_everything() {
        let rules = vec![
            rule(true, LinuxDeviceType::A, None, None, "rwm"),
            rule(false, LinuxDeviceType::C, Some(195), Some(1), "rwm"),
        ];
        let props = properties_with(&rules, 252, String::new);
        assert_eq!(
            props,
            vec![
                (DEVICE_POLICY, Variant::String("auto".into())),
                (DEVICE_ALLOW, Variant::ArrayStructString(vec![])),
            ]
        );
    }

    #[test]
    fn what_systemd_cannot_say_exactly_gets_a_wider_entry() {
        let rules = vec![
            deny_all(),
            rule(true, LinuxDeviceType::C, None, Some(3), "r"),
            rule(true, LinuxDeviceType::B, Some(8), None, "r"),
            rule(true, LinuxDeviceType::C, Some(195), Some(0), "rx"),
        ];
        let list = allow_list(&properties_with(&rules, 252, String::new));
        assert!(list.contains(&entry("char-*", "r")), "{list:?}");
        assert!(list.contains(&entry("block-8", "r")), "{list:?}");
        // Access letters systemd does not know are dropped, not the rule.
        assert!(list.contains(&entry("/dev/char/195:0", "r")), "{list:?}");
    }

    #[test]
    fn an_old_systemd_gets_device_groups() {
        let rules = vec![
            deny_all(),
            rule(true, LinuxDeviceType::C, Some(195), Some(0), "rw"),
            rule(true, LinuxDeviceType::C, Some(42), Some(0), "rw"),
        ];
        let list = allow_list(&properties_with(&rules, 239, || PROC_DEVICES.into()));
        assert!(
            list.contains(&entry("char-nvidia-frontend", "rw")),
            "{list:?}"
        );
        assert!(list.contains(&entry("char-pts", "rwm")), "{list:?}");
        // No group for major 42: everything of the class, never nothing.
        assert!(list.contains(&entry("char-*", "rw")), "{list:?}");
    }

    #[test]
    fn device_groups_come_from_their_own_section() {
        assert_eq!(device_group(PROC_DEVICES, "char", 8), None);
        assert_eq!(
            device_group(PROC_DEVICES, "block", 8).as_deref(),
            Some("sd")
        );
        assert_eq!(
            device_group(PROC_DEVICES, "char", 195).as_deref(),
            Some("nvidia-frontend")
        );
    }
}
