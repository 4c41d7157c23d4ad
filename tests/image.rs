//! GPU containers never change the image: the mount points the injected
//! files need are made in a private overlay layer, not in the rootfs. A
//! rootfs used by many GPU runs stays byte-for-byte the same, later runs
//! with fewer capabilities find nothing of the earlier ones, and a
//! read-only rootfs works. An engine's per-container layer is the
//! exception that proves it: there the mount points go into that layer,
//! as with runc, and the image below it is still untouched.

use std::fs;
use std::path::Path;
use std::process::Command;

use gpurun_tests::*;

const CAPS: &[&str] = &[
    "utility",
    "compute",
    "graphics",
    "video",
    "all",
    "compute,utility",
    "display",
];

#[test]
fn twenty_gpu_runs_leave_the_image_byte_for_byte_unchanged() {
    require_root!();
    let fixtures = GpuFixtures::get();
    for who in As::both() {
        let bundle = Bundle::glibc(who.user());
        let rootfs = bundle.rootfs();
        let before = tree_fingerprint(&rootfs);
        let rt = Runtime::as_who(who.clone());
        let dir = bundle.dir.to_string_lossy().into_owned();
        let root = rootfs.to_string_lossy().into_owned();
        for i in 0..20 {
            let caps = CAPS[i % CAPS.len()];
            // With programs injected, /usr/bin is overlaid: a write there
            // lasts as long as the container.
            let script = if ["utility", "compute", "all", "compute,utility"].contains(&caps) {
                "echo x > /usr/bin/written-by-the-container && nvidia-smi >/dev/null 2>&1; true"
            } else {
                "nvidia-smi >/dev/null 2>&1; true"
            };
            let out = if i % 2 == 0 {
                rt.run(fixtures.args(&[
                    "run",
                    "--rootfs",
                    &root,
                    "--gpus",
                    "all",
                    "--gpu-capabilities",
                    caps,
                    "--",
                    "sh",
                    "-c",
                    script,
                ]))
            } else {
                bundle.set_process(
                    &["sh", "-c", script],
                    &[
                        "NVIDIA_VISIBLE_DEVICES=0",
                        &format!("NVIDIA_DRIVER_CAPABILITIES={caps}"),
                    ],
                );
                rt.run(fixtures.args(&["run", "--bundle", &dir, &unique("image")]))
            };
            assert_eq!(out.code, 0, "run {i} ({caps}) as {who:?}: {}", out.stderr);
        }
        // The bundle's config.json was rewritten; the rootfs must not be.
        let changes = tree_changes(&before, &tree_fingerprint(&rootfs));
        assert!(
            changes.is_empty(),
            "{who:?}: the image changed: {changes:#?}"
        );
        assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());

        // Later containers see only what they asked for.
        let utility = rt.run(fixtures.args(&[
            "run", "--rootfs", &root, "--gpus", "0", "--gpu-capabilities", "utility", "--",
            "sh", "-c", "ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>&1; nvidia-smi >/dev/null 2>&1; echo smi=$?",
        ]));
        assert!(
            utility.stdout.contains("No such file") && utility.stdout.contains("smi=9"),
            "{who:?}: {}",
            utility.stdout
        );
        let compute = rt.run(fixtures.args(&[
            "run",
            "--rootfs",
            &root,
            "--gpus",
            "0",
            "--gpu-capabilities",
            "compute",
            "--",
            "sh",
            "-c",
            "nvidia-smi >/dev/null 2>&1; echo smi=$?; ls /usr/bin/written-by-the-container 2>&1",
        ]));
        assert!(
            compute.stdout.contains("smi=127") && compute.stdout.contains("No such file"),
            "{who:?}: {}",
            compute.stdout
        );
    }
}

/// A bind mount that is removed again however the test ends.
struct ReadOnlyBind(std::path::PathBuf);

impl Drop for ReadOnlyBind {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_read_only_rootfs_works_with_gpus() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let check = "nvidia-smi >/dev/null 2>&1; echo smi=$?; ldconfig -p | grep -c 'libcuda.so.1 '; touch /usr/bin/x 2>/dev/null && echo usr-bin-writable";

    // As root: the rootfs on a read-only mount (as squashfs or a read-only
    // NFS export would be).
    let bundle = Bundle::glibc(None);
    let scratch = Scratch::new("ro-mount");
    let ro = scratch.path().join("rootfs");
    fs::create_dir(&ro).unwrap();
    let mounted = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "mount --bind {src} {ro} && mount -o remount,bind,ro {ro}",
            src = bundle.rootfs().display(),
            ro = ro.display()
        ))
        .status()
        .unwrap();
    assert!(mounted.success());
    let _guard = ReadOnlyBind(ro.clone());
    assert!(
        fs::write(ro.join("probe"), "").is_err(),
        "the mount is writable"
    );
    let rt = Runtime::new();
    let out = rt.run(fixtures.args(&[
        "run",
        "--rootfs",
        ro.to_str().unwrap(),
        "--gpus",
        "0",
        "--",
        "sh",
        "-c",
        check,
    ]));
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["smi=9", "1", "usr-bin-writable"],
        "{}",
        out.stderr
    );

    // Rootless: an image the user cannot write to (chmod -R a-w).
    let user = TestUser::get();
    let bundle = Bundle::glibc(Some(&user));
    let rootfs = bundle.rootfs();
    assert!(Command::new("chmod")
        .args(["-R", "a-w"])
        .arg(&rootfs)
        .status()
        .unwrap()
        .success());
    let before = tree_fingerprint(&rootfs);
    let rt = Runtime::as_who(As::User(user));
    let out = rt.run(fixtures.args(&[
        "run",
        "--rootfs",
        rootfs.to_str().unwrap(),
        "--gpus",
        "0",
        "--",
        "sh",
        "-c",
        check,
    ]));
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["smi=9", "1", "usr-bin-writable"],
        "{}",
        out.stderr
    );
    assert_eq!(
        tree_changes(&before, &tree_fingerprint(&rootfs)),
        Vec::<String>::new()
    );
    let _ = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&rootfs)
        .status();
}

/// An overlay mount of its own, as containerd's and Docker's snapshotters
/// give each container: the mount points go into its upper layer, where
/// the container's other writes go too, and the image stays as it was.
#[test]
fn an_engine_container_layer_keeps_the_mount_points_and_the_image() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let bundle = Bundle::glibc(None);
    let image = bundle.rootfs();
    let before = tree_fingerprint(&image);
    let scratch = Scratch::new("layer");
    let (upper, work, merged) = (
        scratch.path().join("upper"),
        scratch.path().join("work"),
        scratch.path().join("merged"),
    );
    for d in [&upper, &work, &merged] {
        fs::create_dir(d).unwrap();
    }
    let mounted = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!(
            "lowerdir={},upperdir={},workdir={}",
            image.display(),
            upper.display(),
            work.display()
        ))
        .arg(&merged)
        .status()
        .unwrap();
    assert!(mounted.success());
    let _guard = ReadOnlyBind(merged.clone());
    let rt = Runtime::new();
    let out = rt.run(fixtures.args(&[
        "run",
        "--rootfs",
        merged.to_str().unwrap(),
        "--gpus",
        "0",
        "--",
        "sh",
        "-c",
        "nvidia-smi >/dev/null 2>&1; echo smi=$?; echo kept > /usr/bin/written-by-the-container",
    ]));
    assert_eq!(out.stdout.trim(), "smi=9", "{}", out.stderr);
    // The container's layer holds its write and the mount points...
    assert_eq!(
        fs::read_to_string(upper.join("usr/bin/written-by-the-container")).unwrap(),
        "kept\n"
    );
    assert!(Path::new(&upper.join("usr/bin/nvidia-smi")).is_file());
    // ...and the image below it is unchanged.
    assert_eq!(
        tree_changes(&before, &tree_fingerprint(&image)),
        Vec::<String>::new()
    );
}

/// An image with a stale `libcuda.so.1` (a symlink to a library it no
/// longer has, as a removed CUDA compat package leaves): the container
/// finds the injected library under that name, and the image keeps its
/// own link.
#[test]
fn a_stale_soname_link_in_the_image_is_shadowed_not_followed() {
    require_root!();
    let fixtures = GpuFixtures::get();
    let bundle = Bundle::glibc(None);
    let lib = bundle.rootfs().join("usr/lib/x86_64-linux-gnu");
    std::os::unix::fs::symlink("libcuda.so.470.57.02", lib.join("libcuda.so.1")).unwrap();
    let before = tree_fingerprint(&bundle.rootfs());
    let rt = Runtime::new();
    let out = rt.run(fixtures.args(&[
        "run",
        "--rootfs",
        bundle.rootfs().to_str().unwrap(),
        "--gpus",
        "0",
        "--",
        "sh",
        "-c",
        "readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; cuda_probe >/dev/null; echo cuda=$?",
    ]));
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["libcuda.so.535.309.01", "cuda=100"],
        "{}",
        out.stderr
    );
    assert_eq!(
        tree_changes(&before, &tree_fingerprint(&bundle.rootfs())),
        Vec::<String>::new()
    );
}
