//! Checks of config.json that the runtime spec requires and that would
//! otherwise fail late, deep in the container's init, with an unclear
//! message (or not at all). Each error names the field and the fix.

use std::collections::HashSet;

use anyhow::{bail, Result};
use libcontainer::oci_spec::runtime::{Hook, Spec};

/// The values config-linux.md allows for `linux.rootfsPropagation`.
const ROOTFS_PROPAGATIONS: [&str; 4] = ["shared", "slave", "private", "unbindable"];

/// Docker sets "rshared" or "rslave" (runc accepts the recursive forms).
/// libcontainer applies the propagation to the whole tree either way, so
/// the recursive forms are taken as the plain ones.
pub fn normalize_rootfs_propagation(spec: &mut Spec) {
    if let Some(linux) = spec.linux_mut().as_mut() {
        let plain = linux
            .rootfs_propagation()
            .as_deref()
            .and_then(|v| v.strip_prefix('r'))
            .filter(|v| ROOTFS_PROPAGATIONS.contains(v))
            .map(str::to_owned);
        if let Some(plain) = plain {
            linux.set_rootfs_propagation(Some(plain));
        }
    }
}

/// runc reads a device rule's access as the set of the letters r, w and m
/// it holds and ignores any other (the cgroup v1 kernel refuses "rwa"
/// outright, and failed the create). A rule that grants or denies none of
/// them changes nothing and is left out.
pub fn normalize_device_access(spec: &mut Spec) {
    let Some(devices) = spec
        .linux_mut()
        .as_mut()
        .and_then(|l| l.resources_mut().as_mut())
        .and_then(|r| r.devices_mut().as_mut())
    else {
        return;
    };
    devices.retain_mut(|rule| {
        let Some(access) = rule.access().as_deref() else {
            return true;
        };
        let kept: String = "rwm".chars().filter(|c| access.contains(*c)).collect();
        if kept.is_empty() {
            return false;
        }
        rule.set_access(Some(kept));
        true
    });
}

pub fn check(spec: &Spec) -> Result<()> {
    check_kernel(&libcontainer::utils::kernel_release())?;
    check_unified_resources(spec, crate::runtime::cgroups::host::is_unified)?;
    check_cwd(spec)?;
    check_user(spec)?;
    check_rlimits(spec)?;
    check_capabilities(spec)?;
    check_hooks(spec)?;
    check_namespaces(spec)?;
    check_net_devices(spec, |name| {
        std::ffi::CString::new(name)
            // SAFETY: a NUL-terminated name; if_nametoindex only reads it.
            .is_ok_and(|c| unsafe { libc::if_nametoindex(c.as_ptr()) } != 0)
    })?;
    check_rootfs_propagation(spec)
}

/// Every mount is made with the new mount API (open_tree, fsmount,
/// mount_setattr), which is whole from Linux 5.12: older kernels are
/// refused up front instead of failing in the container's init with
/// ENOSYS. A release that does not parse is let through.
fn check_kernel(release: &str) -> Result<()> {
    if libcontainer::utils::release_at_least(release, (5, 12)) == Some(false) {
        bail!(
            "kernel {release} lacks mount_setattr (Linux 5.12), which gpurun mounts with: run it on Linux 5.12 or later"
        );
    }
    Ok(())
}

/// process.cwd "MUST be an absolute path".
fn check_cwd(spec: &Spec) -> Result<()> {
    if let Some(process) = spec.process() {
        if !process.cwd().is_absolute() {
            bail!(
                "process.cwd {:?} is not an absolute path: give the full path, such as \"/\"",
                process.cwd()
            );
        }
    }
    Ok(())
}

/// 4294967295 is (uid_t)-1, which setresuid and setresgid take as "leave
/// unchanged": a process configured with it stayed root.
fn check_user(spec: &Spec) -> Result<()> {
    let Some(process) = spec.process() else {
        return Ok(());
    };
    let user = process.user();
    let ids = [("uid", user.uid()), ("gid", user.gid())]
        .into_iter()
        .chain(
            user.additional_gids()
                .iter()
                .flatten()
                .map(|&g| ("additionalGids", g)),
        );
    for (field, id) in ids {
        if id == u32::MAX {
            bail!(
                "process.user.{field} {id} is (uid_t)-1, which the kernel reads as \"leave unchanged\" (the process would stay root): give a real id"
            );
        }
    }
    Ok(())
}

/// "If rlimits contains duplicated entries with same type, the runtime
/// MUST generate an error"; a soft limit above its hard one cannot be set.
fn check_rlimits(spec: &Spec) -> Result<()> {
    let rlimits = spec.process().as_ref().and_then(|p| p.rlimits().as_ref());
    let mut seen = HashSet::new();
    for rlimit in rlimits.into_iter().flatten() {
        let name = serde_json::to_value(rlimit.typ())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{:?}", rlimit.typ()));
        if !seen.insert(name.clone()) {
            bail!("process.rlimits lists {name} twice: keep one entry per type");
        }
        if rlimit.soft() > rlimit.hard() {
            bail!(
                "process.rlimits {name}: soft limit {} is above hard limit {}: lower soft or raise hard",
                rlimit.soft(),
                rlimit.hard()
            );
        }
        // The number the container's init hands setrlimit (libcontainer's
        // `set_rlimit` casts the type the same way).
        check_raisable(
            &name,
            rlimit.typ() as libc::__rlimit_resource_t,
            rlimit.hard(),
        )?;
    }
    Ok(())
}

/// The container's init inherits gpurun's limits and can raise a hard
/// limit only with CAP_SYS_RESOURCE (never in a rootless container, and
/// RLIMIT_NOFILE never above fs.nr_open). Without this the create failed
/// in the init with a bare EPERM (podman's default nofile of 1048576 on a
/// host whose root lacks CAP_SYS_RESOURCE).
fn check_raisable(name: &str, resource: libc::__rlimit_resource_t, hard: u64) -> Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return Ok(());
    }
    if hard <= current.rlim_max {
        return Ok(());
    }
    let can_raise = caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_RESOURCE,
    )
    .unwrap_or(false);
    let ceiling = if !can_raise {
        Some((current.rlim_max, "gpurun lacks CAP_SYS_RESOURCE"))
    } else if resource == libc::RLIMIT_NOFILE {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|n| n.trim().parse::<u64>().ok())
            .filter(|&nr_open| hard > nr_open)
            .map(|nr_open| (nr_open, "that is fs.nr_open"))
    } else {
        None
    };
    if let Some((ceiling, why)) = ceiling {
        let ulimit = name.trim_start_matches("RLIMIT_").to_lowercase();
        bail!(
            "process.rlimits {name}: hard limit {hard} is above {ceiling}, the most this host allows here ({why}): lower it (e.g. --ulimit {ulimit}={ceiling}:{ceiling})"
        );
    }
    Ok(())
}

/// No process can be given a capability outside its runtime's bounding set
/// (a host or outer container that withholds it, as this VM withholds
/// CAP_SYS_RESOURCE): capset failed in the init with a bare EPERM, for
/// `docker run --privileged` among others. Capabilities this kernel does not
/// know are left to the init, which skips them as runc does.
fn check_capabilities(spec: &Spec) -> Result<()> {
    let Some(wanted) = spec
        .process()
        .as_ref()
        .and_then(|p| p.capabilities().as_ref())
    else {
        return Ok(());
    };
    let sets = [
        wanted.bounding(),
        wanted.effective(),
        wanted.permitted(),
        wanted.inheritable(),
        wanted.ambient(),
    ];
    let mut checked = HashSet::new();
    for cap in sets.into_iter().flatten().flatten() {
        // oci-spec writes the name without its CAP_ prefix.
        let name = format!("CAP_{}", cap.to_string().trim_start_matches("CAP_"));
        let Ok(cap) = name.parse::<caps::Capability>() else {
            continue;
        };
        if !checked.insert(cap) {
            continue;
        }
        // One prctl per capability; what the kernel supports is read only
        // for one that is missing.
        let bounded = caps::has_cap(None, caps::CapSet::Bounding, cap).unwrap_or(true);
        if !bounded && caps::runtime::thread_all_supported().contains(&cap) {
            bail!(
                "process.capabilities asks for {cap}, which this host withholds from gpurun itself (not in its bounding set): remove it from the container's capabilities"
            );
        }
    }
    Ok(())
}

/// Hook paths "MUST be absolute"; a timeout, if set, "MUST be greater than
/// zero".
fn check_hooks(spec: &Spec) -> Result<()> {
    let Some(hooks) = spec.hooks() else {
        return Ok(());
    };
    #[allow(deprecated)] // prestart is deprecated in the spec, still run
    let lists: [(&str, &Option<Vec<Hook>>); 6] = [
        ("prestart", hooks.prestart()),
        ("createRuntime", hooks.create_runtime()),
        ("createContainer", hooks.create_container()),
        ("startContainer", hooks.start_container()),
        ("poststart", hooks.poststart()),
        ("poststop", hooks.poststop()),
    ];
    for (kind, list) in lists {
        for (index, hook) in list.iter().flatten().enumerate() {
            if !hook.path().is_absolute() {
                bail!(
                    "hooks.{kind}[{index}].path {:?} is not absolute: give the full path of the program",
                    hook.path()
                );
            }
            if let Some(timeout) = hook.timeout() {
                if timeout <= 0 {
                    bail!(
                        "hooks.{kind}[{index}].timeout is {timeout}: give a number of seconds greater than zero, or leave it out"
                    );
                }
            }
        }
    }
    Ok(())
}

/// `linux.resources.unified` names cgroup v2 files: on a v1 or hybrid host
/// runc refuses it (in these words) rather than drop it. The host is looked
/// at (`unified_host`) only for a spec that has such resources.
fn check_unified_resources(spec: &Spec, unified_host: impl Fn() -> bool) -> Result<()> {
    let unified = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.unified().as_ref())
        .filter(|u| !u.is_empty());
    if unified.is_some() && !unified_host() {
        bail!(
            "invalid configuration: cannot use unified on cgroup v1: this host's /sys/fs/cgroup is v1 or hybrid; set the limits through linux.resources' v1 fields instead"
        );
    }
    Ok(())
}

/// Each interface `linux.netDevices` moves into the container must exist
/// here, named before anything is made (libcontainer's own failure was
/// "Netlink error: -19").
fn check_net_devices(spec: &Spec, exists: impl Fn(&str) -> bool) -> Result<()> {
    let devices = spec.linux().as_ref().and_then(|l| l.net_devices().as_ref());
    let mut names: Vec<&String> = devices.into_iter().flat_map(|d| d.keys()).collect();
    names.sort();
    if let Some(missing) = names.into_iter().find(|name| !exists(name)) {
        bail!(
            "linux.netDevices names {missing:?}, which is not a network interface here (see \"ip link\"): name an existing one"
        );
    }
    Ok(())
}

/// A namespace type listed twice is ambiguous: which one would the
/// container get?
fn check_namespaces(spec: &Spec) -> Result<()> {
    let namespaces = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    let mut seen = HashSet::new();
    for ns in namespaces.into_iter().flatten() {
        if !seen.insert(ns.typ()) {
            bail!(
                "linux.namespaces lists the {} namespace twice: keep one entry per type",
                ns.typ()
            );
        }
    }
    Ok(())
}

fn check_rootfs_propagation(spec: &Spec) -> Result<()> {
    let propagation = spec
        .linux()
        .as_ref()
        .and_then(|l| l.rootfs_propagation().as_deref());
    if let Some(value) = propagation {
        if !ROOTFS_PROPAGATIONS.contains(&value) {
            bail!(
                "linux.rootfsPropagation {value:?} is not one of {}: pick one of those, or leave it out",
                ROOTFS_PROPAGATIONS.join(", ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with_resources(resources: serde_json::Value) -> Spec {
        let mut json = serde_json::to_value(Spec::default()).unwrap();
        json["linux"]["resources"] = resources;
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn device_access_keeps_r_w_and_m_in_order() {
        let mut spec = spec_with_resources(serde_json::json!({"devices": [
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "mwra"},
            {"allow": true, "type": "c", "major": 1, "minor": 5, "access": "xyz"},
            {"allow": false, "access": "rwm"},
        ]}));
        normalize_device_access(&mut spec);
        let devices = spec
            .linux()
            .as_ref()
            .unwrap()
            .resources()
            .as_ref()
            .unwrap()
            .devices();
        let access: Vec<_> = devices
            .as_ref()
            .unwrap()
            .iter()
            .map(|d| d.access().clone().unwrap_or_default())
            .collect();
        assert_eq!(access, ["rwm", "rwm"]);
        assert_eq!(devices.as_ref().unwrap()[0].minor(), Some(3));
    }

    #[test]
    fn net_devices_must_exist_here() {
        let mut json = serde_json::to_value(Spec::default()).unwrap();
        json["linux"]["netDevices"] = serde_json::json!({"eth7": {"name": "eth0"}, "lo": {}});
        let spec: Spec = serde_json::from_value(json).unwrap();
        let err = check_net_devices(&spec, |n| n == "lo")
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"eth7\""), "{err}");
        check_net_devices(&spec, |_| true).unwrap();
        check_net_devices(&Spec::default(), |_| false).unwrap();
    }

    #[test]
    fn unified_resources_need_a_unified_host() {
        let spec = spec_with_resources(serde_json::json!({"unified": {"memory.max": "1"}}));
        let err = check_unified_resources(&spec, || false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot use unified on cgroup v1"), "{err}");
        check_unified_resources(&spec, || true).unwrap();
        let empty = spec_with_resources(serde_json::json!({"unified": {}}));
        check_unified_resources(&empty, || false).unwrap();
    }

    #[test]
    fn kernels_before_5_12_are_refused_by_name() {
        assert!(check_kernel("6.1.0-56-amd64").is_ok());
        assert!(check_kernel("5.14.0-427.el9.x86_64").is_ok());
        assert!(check_kernel("5.12.0").is_ok());
        assert!(check_kernel("not a release").is_ok());
        let err = check_kernel("5.10.0-33-amd64").unwrap_err().to_string();
        assert!(
            err.contains("5.10.0-33-amd64") && err.contains("mount_setattr"),
            "{err}"
        );
        assert!(check_kernel("4.18.0-553.el8_10.x86_64").is_err());
    }

    fn spec(edit: serde_json::Value) -> Spec {
        let mut base = serde_json::to_value(Spec::default()).unwrap();
        json_merge(&mut base, edit);
        serde_json::from_value(base).unwrap()
    }

    fn json_merge(base: &mut serde_json::Value, edit: serde_json::Value) {
        match (base, edit) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    json_merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, e) => *b = e,
        }
    }

    fn error(edit: serde_json::Value) -> String {
        check(&spec(edit)).unwrap_err().to_string()
    }

    #[test]
    fn the_default_spec_passes() {
        check(&Spec::default()).unwrap();
    }

    #[test]
    fn a_relative_cwd_is_refused() {
        let err = error(serde_json::json!({"process": {"cwd": "tmp"}}));
        assert!(
            err.contains("process.cwd \"tmp\" is not an absolute path"),
            "{err}"
        );
    }

    #[test]
    fn minus_one_ids_are_refused() {
        let err = error(serde_json::json!({"process": {"user": {"uid": 4294967295u32, "gid": 0}}}));
        assert!(err.contains("process.user.uid 4294967295"), "{err}");
        let err = error(
            serde_json::json!({"process": {"user": {"uid": 0, "gid": 0, "additionalGids": [4294967295u32]}}}),
        );
        assert!(err.contains("process.user.additionalGids"), "{err}");
    }

    #[test]
    fn duplicate_rlimits_are_refused() {
        let err = error(serde_json::json!({"process": {"rlimits": [
            {"type": "RLIMIT_NOFILE", "soft": 1, "hard": 2},
            {"type": "RLIMIT_NOFILE", "soft": 1, "hard": 2}
        ]}}));
        assert!(err.contains("RLIMIT_NOFILE twice"), "{err}");
    }

    #[test]
    fn soft_above_hard_is_refused() {
        let err = error(serde_json::json!({"process": {"rlimits": [
            {"type": "RLIMIT_CORE", "soft": 5, "hard": 2}
        ]}}));
        assert!(err.contains("soft limit 5 is above hard limit 2"), "{err}");
    }

    #[test]
    fn hooks_need_absolute_paths_and_positive_timeouts() {
        let err = error(serde_json::json!({"hooks": {"poststart": [{"path": "true"}]}}));
        assert!(err.contains("hooks.poststart[0].path"), "{err}");
        let err = error(serde_json::json!({"hooks": {"createRuntime": [
            {"path": "/bin/true", "timeout": 1},
            {"path": "/bin/true", "timeout": 0}
        ]}}));
        assert!(err.contains("hooks.createRuntime[1].timeout is 0"), "{err}");
    }

    #[test]
    fn a_namespace_listed_twice_is_refused() {
        let err = error(serde_json::json!({"linux": {"namespaces": [
            {"type": "pid"}, {"type": "mount"}, {"type": "pid"}
        ]}}));
        assert!(err.contains("pid namespace twice"), "{err}");
    }

    #[test]
    fn rootfs_propagation_takes_the_four_spec_values() {
        for ok in ROOTFS_PROPAGATIONS {
            check(&spec(
                serde_json::json!({"linux": {"rootfsPropagation": ok}}),
            ))
            .unwrap();
        }
        let err = error(serde_json::json!({"linux": {"rootfsPropagation": "bogus"}}));
        assert!(err.contains("\"bogus\" is not one of"), "{err}");
        let mut docker = spec(serde_json::json!({"linux": {"rootfsPropagation": "rslave"}}));
        normalize_rootfs_propagation(&mut docker);
        check(&docker).unwrap();
        let linux = docker.linux().as_ref().unwrap();
        assert_eq!(linux.rootfs_propagation().as_deref(), Some("slave"));
    }
}
