//! Network devices, user-namespace binds, time namespaces and every mount option features lists.

use super::*;

/// Beyond runc 1.1 (runtime-spec 1.3, runc 1.3): `linux.netDevices` moves
/// a host interface into the container's network namespace under its new
/// name. One that the host does not have is named before anything is made.
#[test]
fn net_devices_move_a_host_interface_into_the_container() {
    require_root!();
    let host = format!("gpv{}", std::process::id() % 100_000);
    let peer = format!("{host}p");
    let made = run_cmd(
        Command::new("ip").args(["link", "add", &host, "type", "veth", "peer", "name", &peer]),
        TIMEOUT,
    );
    assert_eq!(made.code, 0, "ip link add: {}", made.stderr);
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&[
        "sh",
        "-c",
        "cat /sys/class/net/eth9/ifindex && ls /sys/class/net",
    ]);
    bundle.edit(|c| c["linux"]["netDevices"] = json!({ host.as_str(): {"name": "eth9"} }));
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("netdev"),
    ]);
    // The veth pair goes with the container's namespace; remove what is left.
    let _ = run_cmd(Command::new("ip").args(["link", "del", &peer]), TIMEOUT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.lines().any(|l| l == "eth9"), "{}", out.stdout);
    assert!(!out.stdout.lines().any(|l| l == host), "{}", out.stdout);

    bundle.edit(|c| c["linux"]["netDevices"] = json!({"gpurun-none0": {"name": "eth9"}}));
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("netdev"),
    ]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("\"gpurun-none0\""), "{}", out.stderr);
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// In a user namespace, a bind mount's source under a directory the
/// container's root cannot search (0700, the host's root's) still mounts:
/// runc opens the sources as the host's root, inside the container's mount
/// namespace, and mounts from the descriptors (Kubernetes `hostUsers:
/// false`, Docker userns-remap and Podman `--userns` volumes).
#[test]
fn userns_bind_mounts_from_a_directory_only_host_root_can_search() {
    require_root!();
    let private = Scratch::new("userns-private");
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let data = private.path().join("data");
    fs::create_dir(&data).unwrap();
    fs::set_permissions(&data, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(data.join("hello"), "from a dir\n").unwrap();
    let file = private.path().join("file.txt");
    fs::write(&file, "from a file\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    for (program, root) in each_runtime() {
        let bundle = Bundle::busybox();
        bundle.map_root_to(300000);
        bundle.edit(|c| {
            c["mounts"].as_array_mut().unwrap().extend([
                json!({"destination": "/mnt/data", "type": "bind",
                       "source": data, "options": ["rbind", "ro"]}),
                json!({"destination": "/mnt/file.txt", "type": "bind",
                       "source": file, "options": ["bind", "ro"]}),
            ]);
        });
        bundle.set_args(&["cat", "/mnt/data/hello", "/mnt/file.txt"]);
        // The mount points exist: the container's root could not make them.
        fs::create_dir_all(bundle.rootfs().join("mnt/data")).unwrap();
        fs::write(bundle.rootfs().join("mnt/file.txt"), "").unwrap();
        let out = run_bundle(&program, &root, &bundle, "userns-bind");
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, "from a dir\nfrom a file\n"),
            "{}: {}",
            program.display(),
            out.stderr
        );
    }
}

/// `features` promises only what works: every option of its
/// `mountOptions` is accepted on a tmpfs (a bind mount for `bind` and
/// `rbind`), and each whose effect shows in mountinfo shows it; runc's
/// `tmpcopyup` seeds the tmpfs with the image's files, owners, modes and
/// symlinks (Podman's `--tmpfs` sends it).
#[test]
fn every_mount_option_features_lists_works() {
    require_root!();
    let rt = Runtime::new();
    let out = rt.run(["features"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let features: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let options: Vec<String> = features["mountOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect();
    assert!(options.len() > 50, "{options:?}");
    let bundle = Bundle::busybox();
    let source = Scratch::new("mount-options");
    let seed = bundle.rootfs().join("mnt/seed");
    fs::create_dir_all(seed.join("sticky")).unwrap();
    fs::set_permissions(seed.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(seed.join("f"), "seeded").unwrap();
    std::os::unix::fs::chown(seed.join("f"), Some(7), Some(8)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", seed.join("link")).unwrap();
    let base = bundle.config();
    // What mountinfo must show for an option, in the mount's own options
    // (before " - ") or the superblock's (after the type and source).
    let shows = |option: &str| -> Option<&str> {
        Some(match option {
            "ro" | "rro" => "own:ro",
            "nosuid" | "rnosuid" => "own:nosuid",
            "nodev" | "rnodev" => "own:nodev",
            "noexec" | "rnoexec" => "own:noexec",
            "noatime" | "rnoatime" => "own:noatime",
            "nodiratime" | "rnodiratime" => "own:nodiratime",
            "nosymfollow" | "rnosymfollow" => "own:nosymfollow",
            "strictatime" | "rstrictatime" => "own:rw",
            "shared" | "rshared" => "tag:shared:",
            "unbindable" | "runbindable" => "tag:unbindable",
            "sync" => "super:sync",
            "dirsync" => "super:dirsync",
            "lazytime" => "super:lazytime",
            "bind" | "rbind" => "type:not-tmpfs",
            _ => return None,
        })
    };
    for option in &options {
        let mount = if option == "bind" || option == "rbind" {
            json!({"type": "bind", "source": source.path(), "destination": "/mnt", "options": [option]})
        } else {
            json!({"type": "tmpfs", "source": "tmpfs", "destination": "/mnt", "options": [option]})
        };
        let mut config = base.clone();
        config["mounts"].as_array_mut().unwrap().push(mount);
        config["process"]["args"] = json!([
            "sh",
            "-c",
            "grep ' /mnt ' /proc/self/mountinfo; ls /mnt/seed 2>/dev/null | tr '\\n' ' '"
        ]);
        bundle.set_config(&config);
        let out = rt.run([
            "run",
            "--bundle",
            bundle.dir.to_str().unwrap(),
            &unique("opt"),
        ]);
        assert_eq!(out.code, 0, "option {option}: {}", out.stderr);
        let line = out.stdout.lines().next().unwrap_or_default();
        let (own_part, super_part) = line.split_once(" - ").unwrap_or((line, ""));
        let fields: Vec<&str> = own_part.split(' ').collect();
        let own: Vec<&str> = fields
            .get(5)
            .copied()
            .unwrap_or_default()
            .split(',')
            .collect();
        let tags = fields.get(6..).map(|t| t.join(" ")).unwrap_or_default();
        let mut sup = super_part.split(' ');
        let fstype = sup.next().unwrap_or_default();
        let super_opts: Vec<&str> = sup.nth(1).unwrap_or_default().split(',').collect();
        match shows(option) {
            Some(want) => {
                let (kind, token) = want.split_once(':').unwrap();
                let ok = match kind {
                    "own" if token == "rw" => own == ["rw"],
                    "own" => own.contains(&token),
                    "tag" => tags.contains(token),
                    "super" => super_opts.contains(&token),
                    _ => fstype != "tmpfs",
                };
                assert!(ok, "option {option}: want {want} in {line:?}");
            }
            None if option == "tmpcopyup" => {
                assert!(out.stdout.contains("f link sticky"), "{}", out.stdout)
            }
            None => assert_eq!(fstype, "tmpfs", "option {option}: {line:?}"),
        }
    }

    // tmpcopyup keeps owners, modes and symlinks (as links, not followed).
    let mut config = base.clone();
    config["mounts"].as_array_mut().unwrap().push(
        json!({"type": "tmpfs", "source": "tmpfs", "destination": "/mnt", "options": ["tmpcopyup"]}),
    );
    config["process"]["args"] = json!([
        "sh",
        "-c",
        "stat -c '%n %u:%g %a' /mnt/seed/f /mnt/seed/sticky; readlink /mnt/seed/link; cat /mnt/seed/f; \
         echo new > /mnt/seed/f; grep ' /mnt ' /proc/self/mountinfo | grep -c tmpfs"
    ]);
    bundle.set_config(&config);
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("tcu"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "/mnt/seed/f 7:8 644\n/mnt/seed/sticky 0:0 1777\n/etc/passwd\nseeded1\n",
    );
    // The image itself is untouched by the write to the tmpfs.
    assert_eq!(fs::read_to_string(seed.join("f")).unwrap(), "seeded");
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}

/// The `time` namespace `features` lists: `linux.timeOffsets` reach the
/// container's clocks (its uptime is boottime's offset ahead of the host's).
#[test]
fn time_namespace_offsets_reach_the_container() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "time"}));
        c["linux"]["timeOffsets"] = json!({
            "monotonic": {"secs": 86400, "nanosecs": 0},
            "boottime": {"secs": 3600, "nanosecs": 0}
        });
        c["process"]["args"] = json!([
            "sh",
            "-c",
            "cat /proc/self/timens_offsets; cut -d. -f1 /proc/uptime"
        ]);
    });
    let host_uptime = |text: String| -> u64 { text.split('.').next().unwrap().parse().unwrap() };
    let before = host_uptime(fs::read_to_string("/proc/uptime").unwrap());
    let out = rt.run([
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("timens"),
    ]);
    let after = host_uptime(fs::read_to_string("/proc/uptime").unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let offsets: Vec<Vec<&str>> = lines[..2]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        offsets,
        [["monotonic", "86400", "0"], ["boottime", "3600", "0"]]
    );
    let inside: u64 = lines[2].parse().unwrap();
    assert!(
        inside >= before + 3600 && inside <= after + 3600,
        "uptime {inside} in the container, {before}..{after} on the host"
    );
}
