use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn nvidia_hooks_are_recognised_by_program_and_subcommand() {
    let a = args("nvidia-cdi-hook update-ldcache --folder /x");
    assert_eq!(
        nvidia_hook_args(Path::new("/usr/bin/nvidia-cdi-hook"), &a).unwrap(),
        &a[1..]
    );
    let a = args("nvidia-ctk hook create-symlinks --link a::b");
    assert_eq!(
        nvidia_hook_args(Path::new("/opt/x/nvidia-ctk"), &a).unwrap(),
        &a[2..]
    );
    let a = args("gpurun cdi-hook chmod --mode 755 --path /dev/dri");
    assert_eq!(
        nvidia_hook_args(Path::new("/usr/local/bin/gpurun"), &a).unwrap(),
        &a[2..]
    );
    assert!(nvidia_hook_args(
        Path::new("/usr/bin/nvidia-ctk"),
        &args("nvidia-ctk cdi list")
    )
    .is_none());
    assert!(nvidia_hook_args(Path::new("/bin/sh"), &args("sh -c true")).is_none());
}

#[test]
fn subcommands_and_flags_parse_as_the_toolkit_takes_them() {
    assert_eq!(
        parse(&args(
            "--debug create-symlinks --link libcuda.so.1::/usr/lib/libcuda.so --link=a::/b"
        ))
        .unwrap(),
        Op::CreateSymlinks {
            links: vec![
                Link {
                    target: "libcuda.so.1".into(),
                    link: "/usr/lib/libcuda.so".into()
                },
                Link {
                    target: "a".into(),
                    link: "/b".into()
                },
            ]
        }
    );
    assert_eq!(
        parse(&args(
            "update-ldcache --folder /a --folder=/b --ldconfig-path /sbin/ldconfig"
        ))
        .unwrap(),
        Op::UpdateLdcache {
            folders: vec!["/a".into(), "/b".into()]
        }
    );
    assert_eq!(
        parse(&args("enable-cuda-compat --host-driver-version=535.104.05")).unwrap(),
        Op::EnableCudaCompat {
            host_driver_version: "535.104.05".into(),
            host_cuda_version: String::new(),
            compat_root: String::new(),
        }
    );
    // Toolkit 1.19's CSV mode on an Orin.
    assert_eq!(
        parse(&args(
            "enable-cuda-compat --host-cuda-version=12.6 --cuda-compat-container-root=/usr/local/cuda/compat_orin"
        ))
        .unwrap(),
        Op::EnableCudaCompat {
            host_driver_version: String::new(),
            host_cuda_version: "12.6".into(),
            compat_root: "/usr/local/cuda/compat_orin".into(),
        }
    );
    assert_eq!(
        parse(&args("chmod --mode 755 --path /dev/dri")).unwrap(),
        Op::Chmod {
            mode: 0o755,
            paths: vec!["/dev/dri".into()]
        }
    );
    assert_eq!(
        parse(&args("some-new-hook --x 1")).unwrap(),
        Op::Unknown {
            name: "some-new-hook".into()
        }
    );
    for bad in [
        "create-symlinks --link nocolons",
        "create-symlinks --link ::/x",
        "chmod --mode 9z9 --path /x",
        "chmod --path /x",
        "",
    ] {
        assert!(parse(&args(bad)).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn container_paths_never_climb_above_the_root() {
    assert_eq!(
        in_container(Path::new("../../../../etc/x")),
        Path::new("/etc/x")
    );
    assert_eq!(
        in_container(Path::new("/../../etc/passwd")),
        Path::new("/etc/passwd")
    );
    assert_eq!(in_container(Path::new("/a/./b/../c")), Path::new("/a/c"));
}

#[test]
fn ldconfig_reading_of_a_folder() {
    let folder = Path::new("/usr/lib/nv");
    let mut view = BTreeMap::new();
    view.insert(
        "libcuda.so.535.1".to_owned(),
        Seen::File {
            soname: Some("libcuda.so.1".into()),
        },
    );
    view.insert(
        "libcuda.so".to_owned(),
        Seen::Symlink("libcuda.so.1".into()),
    );
    view.insert(
        "libnvidia-ml.so.535.1".to_owned(),
        Seen::File {
            soname: Some("libnvidia-ml.so.1".into()),
        },
    );
    view.insert(
        "libnvidia-ml.so.1".to_owned(),
        Seen::Symlink("libnvidia-ml.so.535.1".into()),
    );
    view.insert("notes.so.txt".to_owned(), Seen::File { soname: None });
    let (entries, links) = scan_folder(folder, &view);
    let names: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.path.as_str()))
        .collect();
    assert!(
        names.contains(&("libcuda.so.1", "/usr/lib/nv/libcuda.so.1")),
        "{names:?}"
    );
    assert!(
        names.contains(&("libcuda.so", "/usr/lib/nv/libcuda.so")),
        "{names:?}"
    );
    assert!(
        names.contains(&("libnvidia-ml.so.1", "/usr/lib/nv/libnvidia-ml.so.1")),
        "{names:?}"
    );
    // The SONAME link ldconfig makes, only where none is there.
    assert_eq!(
        links,
        [Link {
            target: "libcuda.so.535.1".into(),
            link: "/usr/lib/nv/libcuda.so.1".into()
        }]
    );
}

#[test]
fn params_copy_turns_device_modification_off() {
    assert_eq!(
        gpu_plan::params_without_device_modification(
            "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n"
        ),
        "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\n"
    );
}
