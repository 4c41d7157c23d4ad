//! config-linux.md: namespaces, devices, cgroups, sysctl, masked and
//! read-only paths, rootfs mount propagation.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use gpurun_tests::{cgroup_dirs, require_root, unique, Bundle, Runtime};

use super::*;

fn ns_inode(pid: &str, kind: &str) -> String {
    fs::read_link(format!("/proc/{pid}/ns/{kind}"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn namespaces_listed_are_new_and_the_others_are_the_runtimes() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    // The default spec (runc's) has pid, network, ipc, uts, mount: add
    // cgroup, as runc users do, and drop network, so the container must
    // share the runtime's.
    bundle.edit(|c| {
        let namespaces = c["linux"]["namespaces"].as_array_mut().unwrap();
        namespaces.retain(|n| n["type"] != "network");
        namespaces.push(serde_json::json!({"type": "cgroup"}));
    });
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id).to_string();
    for kind in ["pid_for_children", "ipc", "uts", "mnt", "cgroup"] {
        let kind = if kind == "pid_for_children" {
            "pid"
        } else {
            kind
        };
        assert_ne!(
            ns_inode(&pid, kind),
            ns_inode("self", kind),
            "{kind} is not new"
        );
    }
    assert_eq!(
        ns_inode(&pid, "net"),
        ns_inode("self", "net"),
        "net was not inherited"
    );
    assert_eq!(
        ns_inode(&pid, "user"),
        ns_inode("self", "user"),
        "user was not inherited"
    );
    rt.run(["delete", &id]).ok();
}

#[test]
fn namespaces_path_joins_an_existing_namespace() {
    require_root!();
    let rt = Runtime::new();
    let first = bundle_sleeping();
    let first_id = create(&rt, &first);
    let first_pid = init_pid(&rt, &first_id);
    let second = bundle_sleeping();
    second.edit(|c| {
        for ns in c["linux"]["namespaces"].as_array_mut().unwrap() {
            if ns["type"] == "network" || ns["type"] == "ipc" {
                let kind = if ns["type"] == "network" {
                    "net"
                } else {
                    "ipc"
                };
                ns["path"] = format!("/proc/{first_pid}/ns/{kind}").into();
            }
        }
    });
    let second_id = create(&rt, &second);
    let second_pid = init_pid(&rt, &second_id).to_string();
    let first_pid = first_pid.to_string();
    assert_eq!(ns_inode(&second_pid, "net"), ns_inode(&first_pid, "net"));
    assert_eq!(ns_inode(&second_pid, "ipc"), ns_inode(&first_pid, "ipc"));
    assert_ne!(ns_inode(&second_pid, "uts"), ns_inode(&first_pid, "uts"));
    rt.run(["delete", &second_id]).ok();
    rt.run(["delete", &first_id]).ok();
}

#[test]
fn namespaces_duplicated_type_is_an_error() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "pid"}))
    });
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("pid namespace twice"), "{}", out.stderr);
    assert!(rt.leftovers().is_empty());
}

#[test]
fn user_namespace_mappings_as_root() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running("cat /proc/self/uid_map /proc/self/gid_map; id -u");
    bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        c["linux"]["uidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
        c["linux"]["gidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 300000, "size": 65536}]);
        c["root"]["readonly"] = true.into();
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let fields: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(fields[0], ["0", "200000", "65536"]);
    assert_eq!(fields[1], ["0", "300000", "65536"]);
    assert_eq!(fields[2], ["0"]);
}

#[test]
fn devices_are_made_with_their_type_numbers_mode_and_owner() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    bundle.edit(|c| {
        c["linux"]["devices"] = serde_json::json!([
            {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229, "fileMode": 0o640, "uid": 12, "gid": 34},
            {"path": "/dev/loop-test", "type": "b", "major": 7, "minor": 200, "fileMode": 0o600, "uid": 0, "gid": 0}
        ]);
    });
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id);
    let fuse = fs::metadata(format!("/proc/{pid}/root/dev/fuse")).unwrap();
    assert!(fuse.file_type().is_char_device());
    assert_eq!(
        (libc::major(fuse.rdev()), libc::minor(fuse.rdev())),
        (10, 229)
    );
    assert_eq!(fuse.mode() & 0o777, 0o640);
    assert_eq!((fuse.uid(), fuse.gid()), (12, 34));
    let block = fs::metadata(format!("/proc/{pid}/root/dev/loop-test")).unwrap();
    assert!(block.file_type().is_block_device());
    assert_eq!(
        (libc::major(block.rdev()), libc::minor(block.rdev())),
        (7, 200)
    );
    rt.run(["delete", &id]).ok();
}

#[test]
fn default_devices_and_dev_symlinks() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id);
    for (name, major, minor) in [
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ] {
        let meta = fs::metadata(format!("/proc/{pid}/root/dev/{name}")).unwrap();
        assert!(meta.file_type().is_char_device(), "{name}");
        assert_eq!(
            (libc::major(meta.rdev()), libc::minor(meta.rdev())),
            (major, minor),
            "{name}"
        );
    }
    assert!(fs::symlink_metadata(format!("/proc/{pid}/root/dev/ptmx")).is_ok());
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        assert_eq!(
            fs::read_link(format!("/proc/{pid}/root/dev/{link}")).unwrap(),
            Path::new(target),
            "/dev/{link}"
        );
    }
    rt.run(["delete", &id]).ok();
}

#[test]
fn device_allowlist_applies_in_the_listed_order() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_running(
        "cat /dev/null && echo null-read; echo x > /dev/null && echo null-write; echo x > /dev/zero && echo zero-write; cat /dev/fuse-test; echo",
    );
    bundle.edit(|c| {
        c["linux"]["devices"] = serde_json::json!([
            {"path": "/dev/fuse-test", "type": "c", "major": 10, "minor": 229, "fileMode": 0o666}
        ]);
        c["linux"]["resources"]["devices"] = serde_json::json!([
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"},
            // Later rules win: this one takes writes to /dev/null away.
            {"allow": false, "type": "c", "major": 1, "minor": 3, "access": "w"}
        ]);
    });
    let (_, out) = run(&rt, &bundle);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines.contains(&"null-read"), "{}", out.stdout);
    assert!(
        !lines.contains(&"null-write"),
        "a later deny rule was ignored: {}",
        out.stdout
    );
    assert!(
        lines.contains(&"zero-write"),
        "a default device was denied: {}",
        out.stdout
    );
    // Made as a node but not allowed by the list: opening it fails.
    assert!(out.stderr.contains("fuse-test") || !out.stdout.is_empty());
}

#[test]
fn control_groups_path_is_the_containers_cgroup() {
    require_root!();
    let rt = Runtime::new();
    let bundle = bundle_sleeping();
    let path = format!("gpurun-oci-test/{}", unique("cg"));
    bundle.edit(|c| c["linux"]["cgroupsPath"] = format!("/{path}").into());
    let id = create(&rt, &bundle);
    let pid = init_pid(&rt, &id);
    let dirs = cgroup_dirs(&path);
    assert!(!dirs.is_empty(), "no cgroup at {path}");
    let procs: Vec<String> = dirs
        .iter()
        .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
        .collect();
    assert!(procs
        .iter()
        .any(|p| p.lines().any(|l| l == pid.to_string())));
    rt.run(["delete", &id]).ok();
    assert!(
        cgroup_dirs(&path).is_empty(),
        "the cgroup outlived the container"
    );
}

#[test]
fn sysctl_is_set_in_the_container() {
    require_root!();
    let host = fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl").unwrap();
    let rt = Runtime::new();
    let bundle = bundle_running("cat /proc/sys/net/ipv4/ip_default_ttl /proc/sys/kernel/msgmax");
    bundle.edit(|c| {
        c["linux"]["sysctl"] =
            serde_json::json!({"net.ipv4.ip_default_ttl": "42", "kernel.msgmax": "9000"});
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().collect::<Vec<_>>(), ["42", "9000"]);
    assert_eq!(
        fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl").unwrap(),
        host
    );
}

#[test]
fn masked_paths_and_readonly_paths() {
    require_root!();
    let rt = Runtime::new();
    // Masked paths that exist on this host (kernels differ): a file reads
    // as empty, a directory lists nothing.
    let masked: Vec<&str> = [
        "/proc/keys",
        "/proc/timer_list",
        "/proc/kcore",
        "/sys/firmware",
        "/proc/acpi",
    ]
    .into_iter()
    .filter(|p| Path::new(p).exists())
    .collect();
    assert!(!masked.is_empty());
    let script: String = masked
        .iter()
        .map(|p| format!("if [ -d {p} ]; then ls -A {p} | wc -l; else wc -c < {p}; fi; "))
        .collect::<String>()
        + "echo 1 > /proc/sys/kernel/domainname 2>/dev/null && echo wrote || echo refused";
    let bundle = bundle_running(&script);
    bundle.edit(|c| {
        c["linux"]["maskedPaths"] = serde_json::json!(masked);
        c["linux"]["readonlyPaths"] = serde_json::json!(["/proc/sys"]);
        // CAP_SYS_ADMIN so that only the read-only mount stops the write.
        for set in ["bounding", "effective", "permitted"] {
            c["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push("CAP_SYS_ADMIN".into());
        }
    });
    let (_, out) = run(&rt, &bundle);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let mut want = vec!["0"; masked.len()];
    want.push("refused");
    assert_eq!(lines, want, "masked: {masked:?}\n{}", out.stdout);
}

#[test]
fn rootfs_mount_propagation() {
    require_root!();
    let rt = Runtime::new();
    for (propagation, tag) in [
        ("shared", Some("shared:")),
        ("unbindable", Some("unbindable")),
        ("private", None),
        ("slave", None),
        ("rslave", None),
    ] {
        let bundle = bundle_running("awk '$5 == \"/\"' /proc/self/mountinfo");
        bundle.edit(|c| c["linux"]["rootfsPropagation"] = propagation.into());
        let (_, out) = run(&rt, &bundle);
        assert_eq!(out.code, 0, "{propagation}: {}", out.stderr);
        // mountinfo: id parent dev root mountpoint options [optional...] - ...
        let optional: Vec<&str> = out
            .stdout
            .split(" - ")
            .next()
            .unwrap()
            .split_whitespace()
            .skip(6)
            .collect();
        match tag {
            Some(tag) => assert!(
                optional.iter().any(|f| f.starts_with(tag)),
                "{propagation}: {}",
                out.stdout
            ),
            None => assert!(
                !optional.iter().any(|f| f.starts_with("shared:")),
                "{propagation} propagates mounts back to the host: {}",
                out.stdout
            ),
        }
    }
    let bundle = Bundle::busybox();
    bundle.edit(|c| c["linux"]["rootfsPropagation"] = "bogus".into());
    let (_, out) = run(&rt, &bundle);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("rootfsPropagation"), "{}", out.stderr);
    assert!(rt.leftovers().is_empty());
}
