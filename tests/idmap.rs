//! Idmapped mounts (runtime-spec 1.2: `uidMappings`/`gidMappings` on a
//! bind mount, the `idmap` and `ridmap` options), as runc >= 1.2 makes them
//! and containerd 2.x sends them for `hostUsers: false` pods. Each test
//! below is one case of runc's tests/integration/idmap.bats, named after
//! it, with the same sources, owners, mappings and expected owners; then
//! the refusals, `features`, and containerd's volume form with a GPU.
//!
//! Run as root. The sources live in the bundle directory under the test's
//! temporary directory: ext4 on the build host, tmpfs in the guests (where
//! Linux >= 6.3 is needed, which is what kubelet's projected volumes need).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use gpurun_tests::*;
use serde_json::json;

/// What an unmapped id reads as in a user namespace.
fn overflow_id() -> String {
    fs::read_to_string("/proc/sys/kernel/overflowuid")
        .unwrap()
        .trim()
        .to_string()
}

/// A bundle laid out as idmap.bats' setup: sources with files of several
/// owners, and a tree with two host bind mounts inside it.
struct Case {
    bundle: Bundle,
    rt: Runtime,
    /// Unmounted (in reverse) when the case ends.
    host_binds: Vec<Unmount>,
}

impl Case {
    fn new(userns: bool) -> Case {
        let bundle = Bundle::busybox();
        let dir = bundle.dir.clone();
        let sh = |script: &str| {
            let out = run_cmd(
                std::process::Command::new("sh")
                    .arg("-c")
                    .arg(script)
                    .current_dir(&dir),
                Duration::from_secs(60),
            );
            assert_eq!(out.code, 0, "{script}: {}", out.stderr);
        };
        sh("mkdir -p source-1 source-2 source-multi1 source-multi2 source-multi3 \
              mnt-subtree/multi1 mnt-subtree/multi2 && \
            for d in source-1 source-2 source-multi1 source-multi2 source-multi3; do touch $d/foo.txt; done && \
            for d in source-multi1 source-multi2 source-multi3; do touch $d/bar.txt $d/baz.txt; done && \
            chown 1:1 source-2/foo.txt && \
            chown 100:211 source-multi1/foo.txt && chown 101:222 source-multi1/bar.txt && \
            chown 102:233 source-multi1/baz.txt && \
            chown 200:211 source-multi2/foo.txt && chown 201:222 source-multi2/bar.txt && \
            chown 202:233 source-multi2/baz.txt && \
            chown 5000528:6000491 source-multi3/foo.txt && chown 5000133:6000337 source-multi3/bar.txt && \
            chown 5000999:6000444 source-multi3/baz.txt && \
            ln -s source-multi1 source-multi1-symlink && \
            touch mnt-subtree/foo.txt mnt-subtree/bar.txt mnt-subtree/baz.txt && \
            chown 100:211 mnt-subtree/foo.txt && chown 200:222 mnt-subtree/bar.txt && \
            chown 300:233 mnt-subtree/baz.txt");
        if userns {
            bundle.map_root_to(100000);
            // remap_rootfs: the image as an engine unpacks it for the mapping.
            sh("chown -R 100000:100000 rootfs");
        }
        Case {
            bundle,
            rt: Runtime::new(),
            host_binds: Vec::new(),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.bundle.dir.join(relative)
    }

    /// idmap.bats' setup_host_bind_mount: a mount inside a source tree.
    fn host_bind(&mut self, source: &str, target: &str) {
        let out = run_cmd(
            std::process::Command::new("mount")
                .arg("--bind")
                .arg(self.path(source))
                .arg(self.path(target)),
            TIMEOUT,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        self.host_binds.push(Unmount(self.path(target)));
    }

    /// A mount of `source` (relative to the bundle, as idmap.bats gives
    /// them) at `destination`; `uids`/`gids` as "ctr:host:size,...".
    fn mount(&self, source: &str, destination: &str, options: &[&str], ids: Option<(&str, &str)>) {
        let mappings = |spec: &str| -> serde_json::Value {
            spec.split(',')
                .map(|m| {
                    let n: Vec<u64> = m.split(':').map(|x| x.parse().unwrap()).collect();
                    json!({"containerID": n[0], "hostID": n[1], "size": n[2]})
                })
                .collect()
        };
        let mut mount = json!({"source": source, "destination": destination, "options": options});
        if let Some((uids, gids)) = ids {
            mount["uidMappings"] = mappings(uids);
            mount["gidMappings"] = mappings(gids);
        }
        self.bundle
            .edit(|c| c["mounts"].as_array_mut().unwrap().push(mount));
    }

    /// idmap.bats' setup_idmap_single_mount.
    fn idmap(&self, uids: &str, gids: &str, name: &str, dest: &str) {
        self.mount(
            &format!("source-{name}/"),
            &format!("/tmp/mount-{dest}"),
            &["bind"],
            Some((uids, gids)),
        );
    }

    /// idmap.bats' setup_idmap_basic_mount.
    fn basic(&self, name: &str) {
        self.idmap("0:100000:65536", "0:100000:65536", name, name);
    }

    /// idmap.bats' setup_bind_mount.
    fn plain_bind(&self, name: &str) {
        self.mount(
            &format!("source-{name}/"),
            &format!("/tmp/bind-mount-{name}"),
            &["bind"],
            None,
        );
    }

    /// Runs `script` in the container (from the bundle's directory, as
    /// `runc run` in bats); its exit code and output.
    fn run(&self, script: &str) -> Ran {
        self.bundle.set_args(&["sh", "-c", script]);
        let mut cmd = self.rt.command([
            "run",
            "--bundle",
            self.bundle.dir.to_str().unwrap(),
            &unique("idmap"),
        ]);
        cmd.current_dir(&self.bundle.dir);
        run_cmd(&mut cmd, TIMEOUT)
    }

    /// `stat -c =%n:%u=%g=` of each path, which must all succeed.
    fn stat(&self, paths: &[String]) -> String {
        let out = self.run(&format!("stat -c =%n:%u=%g= {}", paths.join(" ")));
        assert_eq!(out.code, 0, "stdout {} stderr {}", out.stdout, out.stderr);
        assert!(self.rt.leftovers().is_empty(), "{:?}", self.rt.leftovers());
        out.stdout
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        // Inner mounts first.
        while self.host_binds.pop().is_some() {}
    }
}

/// Every `=path:uid=gid=` in `want` is in `out`.
#[track_caller]
fn assert_owners(out: &str, want: &[&str]) {
    for w in want {
        assert!(out.contains(&format!("={w}=")), "{w:?} not in:\n{out}");
    }
}

fn files(dirs: &[&str]) -> Vec<String> {
    dirs.iter()
        .flat_map(|d| ["foo", "bar", "baz"].map(|f| format!("{d}/{f}.txt")))
        .collect()
}

#[test]
fn simple_idmap_mount_userns() {
    require_root!();
    let case = Case::new(true);
    case.basic("1");
    let out = case.stat(&["/tmp/mount-1/foo.txt".into()]);
    assert_owners(&out, &["/tmp/mount-1/foo.txt:0=0"]);
}

#[test]
fn simple_idmap_mount_no_userns() {
    require_root!();
    let case = Case::new(false);
    case.basic("1");
    let out = case.stat(&["/tmp/mount-1/foo.txt".into()]);
    assert_owners(&out, &["/tmp/mount-1/foo.txt:100000=100000"]);
}

#[test]
fn write_to_an_idmap_mount_userns() {
    require_root!();
    let case = Case::new(true);
    case.basic("1");
    let out = case.stat(&["/tmp/mount-1/foo.txt".into()]);
    assert_owners(&out, &["/tmp/mount-1/foo.txt:0=0"]);
    let out = case.run("touch /tmp/mount-1/bar && stat -c =%u=%g= /tmp/mount-1/bar");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("=0=0="), "{}", out.stdout);
    // On the host the file is the host root's: the mount mapped it back.
    let meta = fs::metadata(case.path("source-1/bar")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
}

#[test]
fn write_to_an_idmap_mount_no_userns() {
    require_root!();
    let case = Case::new(false);
    case.basic("1");
    let out = case.run("touch /tmp/mount-1/bar && stat -c =%u=%g= /tmp/mount-1/bar");
    // Root (uid 0) has no id in the mount's mapping: EOVERFLOW.
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("Value too large for defined data type"),
        "{}",
        out.stderr
    );
    assert!(!case.path("source-1/bar").exists());
}

#[test]
fn idmap_mount_with_propagation_flag_userns() {
    require_root!();
    let case = Case::new(true);
    case.mount(
        "source-1/",
        "/tmp/mount-1",
        &["bind", "shared"],
        Some(("0:100000:65536", "0:100000:65536")),
    );
    let out = case.run("grep ' /tmp/mount-1 ' /proc/self/mountinfo");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(" shared:"), "{}", out.stdout);
}

#[test]
fn idmap_mount_with_relative_path_userns() {
    require_root!();
    let case = Case::new(true);
    case.idmap("0:100000:65536", "0:100000:65536", "1", "1");
    case.bundle.edit(|c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.last_mut().unwrap()["destination"] = json!("tmp/mount-1");
    });
    let out = case.stat(&["/tmp/mount-1/foo.txt".into()]);
    assert_owners(&out, &["/tmp/mount-1/foo.txt:0=0"]);
}

#[test]
fn idmap_mount_with_bind_mount_userns() {
    require_root!();
    let case = Case::new(true);
    case.basic("1");
    case.plain_bind("1");
    let out = case.stat(&[
        "/tmp/mount-1/foo.txt".into(),
        "/tmp/bind-mount-1/foo.txt".into(),
    ]);
    let overflow = overflow_id();
    assert_owners(
        &out,
        &[
            "/tmp/mount-1/foo.txt:0=0",
            &format!("/tmp/bind-mount-1/foo.txt:{overflow}={overflow}"),
        ],
    );
}

#[test]
fn idmap_mount_with_bind_mount_no_userns() {
    require_root!();
    let case = Case::new(false);
    case.basic("1");
    case.plain_bind("1");
    let out = case.stat(&[
        "/tmp/mount-1/foo.txt".into(),
        "/tmp/bind-mount-1/foo.txt".into(),
    ]);
    assert_owners(
        &out,
        &[
            "/tmp/mount-1/foo.txt:100000=100000",
            "/tmp/bind-mount-1/foo.txt:0=0",
        ],
    );
}

#[test]
fn two_idmap_mounts_same_mapping_with_two_bind_mounts_userns() {
    require_root!();
    let case = Case::new(true);
    case.basic("1");
    case.plain_bind("1");
    case.plain_bind("2");
    case.basic("2");
    let out = case.stat(&["/tmp/mount-1/foo.txt".into(), "/tmp/mount-2/foo.txt".into()]);
    assert_owners(
        &out,
        &["/tmp/mount-1/foo.txt:0=0", "/tmp/mount-2/foo.txt:1=1"],
    );
}

fn same_source_different_mappings(userns: bool, want: &[&str]) {
    let case = Case::new(userns);
    case.idmap("100:100000:100", "200:100000:100", "multi1", "multi1");
    case.idmap("100:101000:100", "200:102000:100", "multi1", "multi1-alt");
    case.idmap(
        "100:102000:100",
        "200:103000:100",
        "multi1-symlink",
        "multi1-alt-sym",
    );
    let out = case.stat(&files(&[
        "/tmp/mount-multi1",
        "/tmp/mount-multi1-alt",
        "/tmp/mount-multi1-alt-sym",
    ]));
    assert_owners(&out, want);
}

#[test]
fn same_idmap_mount_different_mappings_userns() {
    require_root!();
    same_source_different_mappings(
        true,
        &[
            "/tmp/mount-multi1/foo.txt:0=11",
            "/tmp/mount-multi1/bar.txt:1=22",
            "/tmp/mount-multi1/baz.txt:2=33",
            "/tmp/mount-multi1-alt/foo.txt:1000=2011",
            "/tmp/mount-multi1-alt/bar.txt:1001=2022",
            "/tmp/mount-multi1-alt/baz.txt:1002=2033",
            "/tmp/mount-multi1-alt-sym/foo.txt:2000=3011",
            "/tmp/mount-multi1-alt-sym/bar.txt:2001=3022",
            "/tmp/mount-multi1-alt-sym/baz.txt:2002=3033",
        ],
    );
}

#[test]
fn same_idmap_mount_different_mappings_no_userns() {
    require_root!();
    same_source_different_mappings(
        false,
        &[
            "/tmp/mount-multi1/foo.txt:100000=100011",
            "/tmp/mount-multi1/bar.txt:100001=100022",
            "/tmp/mount-multi1/baz.txt:100002=100033",
            "/tmp/mount-multi1-alt/foo.txt:101000=102011",
            "/tmp/mount-multi1-alt/bar.txt:101001=102022",
            "/tmp/mount-multi1-alt/baz.txt:101002=102033",
            "/tmp/mount-multi1-alt-sym/foo.txt:102000=103011",
            "/tmp/mount-multi1-alt-sym/bar.txt:102001=103022",
            "/tmp/mount-multi1-alt-sym/baz.txt:102002=103033",
        ],
    );
}

const MULTIPLE_WANT: &[&str] = &[
    "/tmp/mount-multi1/foo.txt:1100=1911",
    "/tmp/mount-multi1/bar.txt:1101=1922",
    "/tmp/mount-multi1/baz.txt:1102=1933",
    "/tmp/mount-multi2/foo.txt:2200=2911",
    "/tmp/mount-multi2/bar.txt:2201=2922",
    "/tmp/mount-multi2/baz.txt:2202=2933",
    "/tmp/mount-multi3/foo.txt:3528=3491",
    "/tmp/mount-multi3/bar.txt:3133=3337",
    "/tmp/mount-multi3/baz.txt:3999=3444",
];

#[test]
fn multiple_idmap_mounts_different_mappings_userns() {
    require_root!();
    let case = Case::new(true);
    case.idmap("100:101100:3", "200:101900:50", "multi1", "multi1");
    case.idmap("200:102200:3", "200:102900:100", "multi2", "multi2");
    case.idmap(
        "5000000:103000:1000",
        "6000000:103000:500",
        "multi3",
        "multi3",
    );
    let out = case.stat(&files(&[
        "/tmp/mount-multi1",
        "/tmp/mount-multi2",
        "/tmp/mount-multi3",
    ]));
    assert_owners(&out, MULTIPLE_WANT);
}

#[test]
fn multiple_idmap_mounts_different_mappings_no_userns() {
    require_root!();
    let case = Case::new(false);
    case.idmap("100:1100:3", "200:1900:50", "multi1", "multi1");
    case.idmap("200:2200:3", "200:2900:100", "multi2", "multi2");
    case.idmap("5000000:3000:1000", "6000000:3000:500", "multi3", "multi3");
    let out = case.stat(&files(&[
        "/tmp/mount-multi1",
        "/tmp/mount-multi2",
        "/tmp/mount-multi3",
    ]));
    assert_owners(&out, MULTIPLE_WANT);
}

fn complicated_mapping(userns: bool, host_base: u64) {
    let case = Case::new(userns);
    let uids = format!(
        "100:{}:1,101:{}:1,102:{}:1",
        host_base + 1000,
        host_base + 2000,
        host_base + 3000
    );
    let gids = format!(
        "210:{}:10,220:{}:10,230:{}:10",
        host_base + 1100,
        host_base + 2200,
        host_base + 3300
    );
    case.mount(
        "source-multi1/",
        "/tmp/mount-multi1",
        &["bind"],
        Some((&uids, &gids)),
    );
    let out = case.stat(&files(&["/tmp/mount-multi1"]));
    assert_owners(
        &out,
        &[
            "/tmp/mount-multi1/foo.txt:1000=1101",
            "/tmp/mount-multi1/bar.txt:2000=2202",
            "/tmp/mount-multi1/baz.txt:3000=3303",
        ],
    );
}

#[test]
fn idmap_mount_complicated_mapping_userns() {
    require_root!();
    complicated_mapping(true, 100000);
}

#[test]
fn idmap_mount_complicated_mapping_no_userns() {
    require_root!();
    complicated_mapping(false, 0);
}

const TREE_UIDS: &str = "100:101000:3,200:102000:3,300:103000:3";
const TREE_GIDS: &str = "210:101100:10,220:102200:10,230:103300:10";

/// The mount-tree cases: `mnt-subtree` with source-multi1 and -multi2
/// bind-mounted inside it, mounted with `options` and `ids`.
fn tree(userns: bool, options: &[&str], ids: Option<(&str, &str)>) -> String {
    let mut case = Case::new(userns);
    case.host_bind("source-multi1", "mnt-subtree/multi1");
    case.host_bind("source-multi2", "mnt-subtree/multi2");
    case.mount("mnt-subtree/", "/tmp/mount-tree", options, ids);
    case.stat(&files(&[
        "/tmp/mount-tree",
        "/tmp/mount-tree/multi1",
        "/tmp/mount-tree/multi2",
    ]))
}

/// The submounts were left unmapped (`idmap`, or mappings alone).
fn assert_children_unmapped(out: &str) {
    let o = overflow_id();
    for f in files(&["/tmp/mount-tree/multi1", "/tmp/mount-tree/multi2"]) {
        assert_owners(out, &[&format!("{f}:{o}={o}")]);
    }
}

const TREE_TOP_MAPPED: &[&str] = &[
    "/tmp/mount-tree/foo.txt:1000=1101",
    "/tmp/mount-tree/bar.txt:2000=2202",
    "/tmp/mount-tree/baz.txt:3000=3303",
];

#[test]
fn idmap_mount_non_recursive_idmap_userns() {
    require_root!();
    let out = tree(true, &["rbind"], Some((TREE_UIDS, TREE_GIDS)));
    assert_owners(&out, TREE_TOP_MAPPED);
    assert_children_unmapped(&out);
}

#[test]
fn idmap_mount_non_recursive_idmap_no_userns() {
    require_root!();
    let out = tree(false, &["rbind"], Some((TREE_UIDS, TREE_GIDS)));
    assert_owners(
        &out,
        &[
            "/tmp/mount-tree/foo.txt:101000=101101",
            "/tmp/mount-tree/bar.txt:102000=102202",
            "/tmp/mount-tree/baz.txt:103000=103303",
            // Not remapped: the host's own ids.
            "/tmp/mount-tree/multi1/foo.txt:100=211",
            "/tmp/mount-tree/multi1/bar.txt:101=222",
            "/tmp/mount-tree/multi1/baz.txt:102=233",
            "/tmp/mount-tree/multi2/foo.txt:200=211",
            "/tmp/mount-tree/multi2/bar.txt:201=222",
            "/tmp/mount-tree/multi2/baz.txt:202=233",
        ],
    );
}

#[test]
fn idmap_mount_idmap_flag_userns() {
    require_root!();
    let out = tree(true, &["rbind", "idmap"], Some((TREE_UIDS, TREE_GIDS)));
    assert_owners(&out, TREE_TOP_MAPPED);
    assert_children_unmapped(&out);
}

#[test]
fn idmap_mount_ridmap_flag_userns() {
    require_root!();
    let out = tree(true, &["rbind", "ridmap"], Some((TREE_UIDS, TREE_GIDS)));
    assert_owners(&out, TREE_TOP_MAPPED);
    // The submounts have the same mapping applied.
    assert_owners(
        &out,
        &[
            "/tmp/mount-tree/multi1/foo.txt:1000=1101",
            "/tmp/mount-tree/multi1/bar.txt:1001=2202",
            "/tmp/mount-tree/multi1/baz.txt:1002=3303",
            "/tmp/mount-tree/multi2/foo.txt:2000=1101",
            "/tmp/mount-tree/multi2/bar.txt:2001=2202",
            "/tmp/mount-tree/multi2/baz.txt:2002=3303",
        ],
    );
}

/// With the implied mapping (the container's, 0 -> 100000) the files
/// read as their on-disk owners.
const TREE_TOP_AS_ON_DISK: &[&str] = &[
    "/tmp/mount-tree/foo.txt:100=211",
    "/tmp/mount-tree/bar.txt:200=222",
    "/tmp/mount-tree/baz.txt:300=233",
];

#[test]
fn idmap_mount_idmap_flag_implied_mapping_userns() {
    require_root!();
    let out = tree(true, &["rbind", "idmap"], None);
    assert_owners(&out, TREE_TOP_AS_ON_DISK);
    assert_children_unmapped(&out);
}

#[test]
fn idmap_mount_ridmap_flag_implied_mapping_userns() {
    require_root!();
    let out = tree(true, &["rbind", "ridmap"], None);
    assert_owners(&out, TREE_TOP_AS_ON_DISK);
    assert_owners(
        &out,
        &[
            "/tmp/mount-tree/multi1/foo.txt:100=211",
            "/tmp/mount-tree/multi1/bar.txt:101=222",
            "/tmp/mount-tree/multi1/baz.txt:102=233",
            "/tmp/mount-tree/multi2/foo.txt:200=211",
            "/tmp/mount-tree/multi2/bar.txt:201=222",
            "/tmp/mount-tree/multi2/baz.txt:202=233",
        ],
    );
}

#[test]
fn idmap_mount_idmap_flag_implied_mapping_userns_join() {
    require_root!();
    // A detached container with the mapping wanted, whose user namespace
    // the second joins by path (no mappings of its own).
    let target = Case::new(true);
    target.bundle.set_args(&["sleep", "300"]);
    let target_id = unique("idmap-target");
    target
        .rt
        .run([
            "run",
            "-d",
            "--bundle",
            target.bundle.dir.to_str().unwrap(),
            &target_id,
        ])
        .ok();
    let pid = target.rt.state(&target_id)["pid"].as_i64().unwrap();

    let mut case = Case::new(false);
    let out = run_cmd(
        std::process::Command::new("chown")
            .args(["-R", "100000:100000"])
            .arg(case.bundle.rootfs()),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    case.bundle.edit(|c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user", "path": format!("/proc/{pid}/ns/user")}));
    });
    case.host_bind("source-multi1", "mnt-subtree/multi1");
    case.host_bind("source-multi2", "mnt-subtree/multi2");
    case.mount("mnt-subtree/", "/tmp/mount-tree", &["rbind", "idmap"], None);
    let out = case.stat(&files(&[
        "/tmp/mount-tree",
        "/tmp/mount-tree/multi1",
        "/tmp/mount-tree/multi2",
    ]));
    target.rt.run(["delete", "--force", &target_id]).ok();
    assert_owners(&out, TREE_TOP_AS_ON_DISK);
    assert_children_unmapped(&out);
}

// ---- Beyond idmap.bats: what cannot work is one clear line, and nothing is
// left behind; `features` says idmap is supported.

#[test]
fn an_unsupported_filesystem_is_refused_by_name() {
    require_root!();
    // sysfs has no idmapped mounts on any kernel.
    let case = Case::new(true);
    case.mount(
        "/sys/kernel",
        "/mnt",
        &["rbind"],
        Some(("0:100000:65536", "0:100000:65536")),
    );
    let id = unique("idmap-sysfs");
    assert_clean_failure(
        &case.rt,
        &["create", "--bundle", case.bundle.dir.to_str().unwrap(), &id],
        &id,
        "idmapped mount of /sys/kernel at /mnt: its filesystem (sysfs) cannot be idmapped on this kernel",
    );
}

#[test]
fn idmap_without_mappings_or_user_namespace_is_refused() {
    require_root!();
    let case = Case::new(false);
    case.mount("source-1/", "/mnt", &["bind", "idmap"], None);
    let id = unique("idmap-none");
    assert_clean_failure(
        &case.rt,
        &["create", "--bundle", case.bundle.dir.to_str().unwrap(), &id],
        &id,
        "idmapped mount at /mnt: give it both uidMappings and gidMappings, or use the idmap option in a container with a user namespace",
    );
}

#[test]
fn idmap_of_a_non_bind_mount_is_refused() {
    require_root!();
    let case = Case::new(true);
    case.bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "type": "tmpfs", "source": "tmpfs", "destination": "/mnt", "options": ["idmap"]
        }))
    });
    let id = unique("idmap-tmpfs");
    assert_clean_failure(
        &case.rt,
        &["create", "--bundle", case.bundle.dir.to_str().unwrap(), &id],
        &id,
        "idmapped mount at /mnt: only bind mounts can be idmapped",
    );
}

#[test]
fn rootless_idmap_is_refused() {
    require_root!();
    let user = TestUser::get();
    let bundle = Bundle::busybox_rootless(&user);
    let scratch = Scratch::new("idmap-rootless");
    chown(scratch.path(), &user);
    bundle.edit(|c| {
        c["mounts"].as_array_mut().unwrap().push(json!({
            "source": scratch.path(), "destination": "/mnt", "options": ["bind", "idmap"]
        }))
    });
    let rt = Runtime::as_who(As::User(user));
    let id = unique("idmap-rootless");
    assert_clean_failure(
        &rt,
        &["create", "--bundle", bundle.dir.to_str().unwrap(), &id],
        &id,
        "idmapped mount at /mnt: a rootless runtime cannot make idmapped mounts",
    );
}

#[test]
fn features_promises_idmapped_mounts() {
    require_root!();
    let out = Runtime::new().run(["features"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let features: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        features["linux"]["mountExtensions"]["idmap"]["enabled"],
        true
    );
}

/// The spec containerd 2.x's CRI plugin sends for a `hostUsers: false` pod
/// (internal/cri: the pod's mappings on the user namespace and, as the
/// runtime's `features` allows, on each volume): an emptyDir volume
/// (rbind, rprivate, rw), a projected volume from a tmpfs (ro), both with
/// the pod's mappings; and a GPU by the device plugin's env.
#[test]
fn containerd_2_host_users_false_pod_with_volumes_and_a_gpu() {
    require_root!();
    let host_root = 100000u64;
    let bundle = Bundle::glibc(None);
    let scratch = Scratch::new("idmap-pod");
    let empty_dir = scratch.path().join("volumes/kubernetes.io~empty-dir/data");
    let projected = scratch.path().join("volumes/kubernetes.io~projected/token");
    fs::create_dir_all(&empty_dir).unwrap();
    fs::create_dir_all(&projected).unwrap();
    fs::write(empty_dir.join("written-by-host-root"), "x").unwrap();
    // kubelet's projected volumes are tmpfs.
    let out = run_cmd(
        std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&projected),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let _unmount = Unmount(projected.clone());
    fs::write(projected.join("token"), "secret").unwrap();

    let run = run_cmd(
        std::process::Command::new("chown")
            .args(["-R", &format!("{host_root}:{host_root}")])
            .arg(bundle.rootfs()),
        TIMEOUT,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    bundle.set_process(
        &[
            "sh",
            "-c",
            "stat -c =%n:%u=%g= /data/written-by-host-root /var/run/secrets/token; \
             echo y > /data/written-by-pod && echo wrote=$?; \
             cat /var/run/secrets/token; echo; \
             ls /dev/nvidia0; nvidia-smi >/dev/null 2>&1; echo smi=$?",
        ],
        &["NVIDIA_VISIBLE_DEVICES=0"],
    );
    bundle.map_root_to(host_root as u32);
    let mapping = json!([{"containerID": 0, "hostID": host_root, "size": 65536}]);
    bundle.edit(|c| {
        let mounts = c["mounts"].as_array_mut().unwrap();
        mounts.push(json!({
            "destination": "/data", "type": "bind", "source": empty_dir,
            "options": ["rbind", "rprivate", "rw"],
            "uidMappings": mapping, "gidMappings": mapping
        }));
        mounts.push(json!({
            "destination": "/var/run/secrets", "type": "bind", "source": projected,
            "options": ["rbind", "rprivate", "ro"],
            "uidMappings": mapping, "gidMappings": mapping
        }));
    });
    let rt = Runtime::new();
    let out = rt.run(GpuFixtures::get().args(&[
        "run",
        "--bundle",
        bundle.dir.to_str().unwrap(),
        &unique("pod"),
    ]));
    assert_eq!(out.code, 0, "stdout {} stderr {}", out.stdout, out.stderr);
    assert_owners(
        &out.stdout,
        &[
            "/data/written-by-host-root:0=0",
            "/var/run/secrets/token:0=0",
        ],
    );
    assert!(out.stdout.contains("wrote=0"), "{}", out.stdout);
    assert!(out.stdout.contains("secret"), "{}", out.stdout);
    assert!(out.stdout.contains("/dev/nvidia0"), "{}", out.stdout);
    assert!(out.stdout.contains("smi=9"), "{}", out.stdout);
    // The pod's write is the host root's on the volume, as on the node.
    let meta = fs::metadata(empty_dir.join("written-by-pod")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
}
