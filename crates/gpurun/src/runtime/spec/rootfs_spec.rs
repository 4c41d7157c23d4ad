//! The spec `run --rootfs` makes on the fly, for HPC users who have a root
//! filesystem and no config.json: rootless for a non-root user, the host's
//! network and hostname (as batch jobs and MPI expect), and the command,
//! environment, working directory and binds from the command line.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::Spec;
use serde_json::{json, Value};

use crate::runtime::spec::idmap::UserIds;

/// A `-v SRC:DST[:ro|rw]` bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub source: PathBuf,
    pub destination: String,
    pub read_only: bool,
}

/// Parses `-v`; the source must exist on the host.
pub fn parse_volume(arg: &str) -> Result<Volume> {
    let mut parts = arg.splitn(3, ':');
    let (Some(src), Some(dst)) = (parts.next(), parts.next()) else {
        bail!("-v {arg:?}: give SRC:DST, for example -v /scratch:/scratch");
    };
    let read_only = match parts.next() {
        None | Some("rw") => false,
        Some("ro") => true,
        Some(other) => bail!("-v {arg:?}: unknown option {other:?}; use ro or rw"),
    };
    if !dst.starts_with('/') || dst.split('/').any(|c| c == "..") {
        bail!("-v {arg:?}: the destination must be an absolute path without \"..\"");
    }
    let source = std::fs::canonicalize(src)
        .with_context(|| format!("-v {arg:?}: source {src} does not exist on the host"))?;
    Ok(Volume {
        source,
        destination: dst.to_owned(),
        read_only,
    })
}

/// Resolves `-e` entries: `K=V` as given, `K` copied from `lookup` (and left
/// out if unset there), as in `docker run -e`.
pub fn resolve_env(
    args: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for arg in args {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k, Some(v.to_owned())),
            None => (arg.as_str(), lookup(arg)),
        };
        if key.is_empty()
            || key.contains('\0')
            || value.as_deref().is_some_and(|v| v.contains('\0'))
        {
            bail!("-e {arg:?}: give NAME=VALUE with a non-empty NAME");
        }
        if let Some(value) = value {
            out.push(format!("{key}={value}"));
        }
    }
    Ok(out)
}

/// The job's variables that a task's container gets under the SPANK
/// plugin (`run --job-env`, as pyxis gives them): each of `vars` that the
/// image's own environment does not set, leaving out gpurun's hand-over
/// variables, NVIDIA_* (the image's and the step's GPUs decide those), and
/// the step's GPU numbering: the container's GPUs are numbered from 0, so
/// the host's CUDA_VISIBLE_DEVICES would name the wrong ones.
pub fn job_env(image_env: &[String], vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let image_sets = |key: &str| image_env.iter().any(|e| e.split('=').next() == Some(key));
    vars.filter(|(key, _)| {
        !key.starts_with("GPURUN_SPANK_")
            && !key.starts_with("NVIDIA_")
            && !matches!(key.as_str(), "CUDA_VISIBLE_DEVICES" | "GPU_DEVICE_ORDINAL")
            && !image_sets(key)
    })
    .map(|(key, value)| format!("{key}={value}"))
    .collect()
}

/// Everything the spec is made from.
pub struct AdhocOptions<'a> {
    pub rootfs: &'a Path,
    pub command: &'a [String],
    /// Resolved `-e` entries; they override the defaults.
    pub env: &'a [String],
    pub workdir: Option<&'a str>,
    pub volumes: &'a [Volume],
    /// `None` when running as root: no user namespace.
    pub user: Option<&'a UserIds>,
    pub keep_uid: bool,
    pub host_network: bool,
    /// `/etc/resolv.conf` and `/etc/hosts` of the host are bound over the
    /// image's regular files of those names (host network only).
    pub host_files: &'a [&'a str],
    /// A tmpfs of the container's own at /tmp (a read-only image's).
    pub private_tmp: bool,
    pub root_layer: RootLayer,
}

/// What the container's init lays over the root before any other mount.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RootLayer {
    None,
    /// A writable overlayfs layer on a tmpfs of the container's own
    /// (`squashfs::user_layer_in_container`).
    InContainer,
}

pub fn make_spec(opts: &AdhocOptions) -> Result<Spec> {
    if opts.command.is_empty() {
        bail!(
            "run --rootfs needs a command after \"--\": gpurun run --rootfs DIR -- sh -c 'echo hi'"
        );
    }
    let workdir = opts.workdir.unwrap_or("/");
    if !workdir.starts_with('/') {
        bail!("-w {workdir:?}: the working directory must be an absolute path");
    }
    let mut spec = match opts.user {
        Some(user) => Spec::rootless(user.uid, user.gid),
        None => Spec::default(),
    };
    let mut value = serde_json::to_value(&spec)?;

    // Container root is the user (or keeps the user's ids with --keep-uid).
    let (mut in_uid, mut in_gid, mut home) = (0, 0, "/root");
    if let Some(user) = opts.user {
        let (uids, gids) = if opts.keep_uid {
            user.keep_mappings()?
        } else {
            user.root_mappings()
        };
        let as_json = |maps: &[(u32, u32, u32)]| -> Value {
            maps.iter()
                .map(|(c, h, n)| json!({"containerID": c, "hostID": h, "size": n}))
                .collect()
        };
        value["linux"]["uidMappings"] = as_json(&uids);
        value["linux"]["gidMappings"] = as_json(&gids);
        if opts.keep_uid {
            (in_uid, in_gid, home) = (user.uid, user.gid, "/");
        }
    } else {
        // Deny every device but the defaults, as `gpurun spec` does.
        value["linux"]["resources"] = json!({"devices": [{"allow": false, "access": "rwm"}]});
    }

    let mut env = vec![
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
        format!("HOME={home}"),
    ];
    for entry in opts.env {
        let key = entry.split('=').next().unwrap_or_default();
        env.retain(|e| e.split('=').next() != Some(key));
        env.push(entry.clone());
    }
    value["process"]["terminal"] = false.into();
    value["process"]["args"] = json!(opts.command);
    value["process"]["env"] = json!(env);
    value["process"]["cwd"] = workdir.into();
    value["process"]["user"] = json!({"uid": in_uid, "gid": in_gid});
    value["root"] = json!({"path": opts.rootfs, "readonly": false});

    set_network(&mut value, opts.host_network)?;
    add_bind_mounts(&mut value, opts)?;
    spec = serde_json::from_value(value).context("the spec made for --rootfs")?;
    Ok(spec)
}

/// The host's network and hostname (no network or UTS namespace), or a
/// private network even where the rootless default shares the host's.
fn set_network(value: &mut Value, host_network: bool) -> Result<()> {
    let namespaces = value["linux"]["namespaces"]
        .as_array_mut()
        .context("default namespaces")?;
    if host_network {
        namespaces.retain(|ns| !matches!(ns["type"].as_str(), Some("network" | "uts")));
        if let Some(map) = value.as_object_mut() {
            map.remove("hostname");
        }
    } else if !namespaces.iter().any(|ns| ns["type"] == "network") {
        namespaces.push(json!({"type": "network"}));
    }
    Ok(())
}

/// The root's layer (first: every other mount goes on top of it), the
/// host files (read-only) and the `-v` volumes.
fn add_bind_mounts(value: &mut Value, opts: &AdhocOptions) -> Result<()> {
    let mounts = value["mounts"].as_array_mut().context("default mounts")?;
    if opts.root_layer == RootLayer::InContainer {
        mounts.insert(0, root_overlay(opts.user.is_some()));
    }
    if opts.private_tmp {
        mounts.push(json!({
            "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"]
        }));
    }
    for file in opts.host_files {
        mounts.push(json!({
            "destination": file, "type": "bind", "source": file,
            "options": ["bind", "ro", "nosuid", "nodev", "noexec"]
        }));
    }
    for volume in opts.volumes {
        let mut options = vec!["rbind"];
        if volume.read_only {
            options.push("ro");
        }
        mounts.push(json!({
            "destination": volume.destination, "type": "bind",
            "source": volume.source, "options": options
        }));
    }
    Ok(())
}

/// An overlay over the root itself, laid by the container's init: the
/// root (resolved by descriptor, `DESTINATION_LAYER`) below a private
/// upper layer, with user xattrs in a user namespace.
fn root_overlay(user_namespace: bool) -> Value {
    use gpurun_gpu::plan::mount_points::{DESTINATION_LAYER, PRIVATE_UPPER};
    let mut options = vec![
        format!("lowerdir={DESTINATION_LAYER}"),
        format!("upperdir={PRIVATE_UPPER}"),
    ];
    if user_namespace {
        options.push("userxattr".into());
    }
    json!({"destination": "/", "type": "overlay", "source": "overlay", "options": options})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> UserIds {
        UserIds {
            name: "alice".into(),
            uid: 1000,
            gid: 1000,
            subuids: vec![],
            subgids: vec![],
        }
    }

    fn opts<'a>(cmd: &'a [String], user: Option<&'a UserIds>) -> AdhocOptions<'a> {
        AdhocOptions {
            rootfs: Path::new("/srv/rootfs"),
            command: cmd,
            env: &[],
            workdir: None,
            volumes: &[],
            user,
            keep_uid: false,
            host_network: true,
            host_files: &[],
            private_tmp: false,
            root_layer: RootLayer::None,
        }
    }

    #[test]
    fn rootless_spec_maps_the_user_to_root_and_shares_the_network() {
        let cmd = vec!["true".to_owned()];
        let u = user();
        let spec = make_spec(&opts(&cmd, Some(&u))).unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v["linux"]["uidMappings"],
            json!([{"containerID": 0, "hostID": 1000, "size": 1}])
        );
        let types: Vec<&str> = v["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert!(types.contains(&"user") && types.contains(&"mount"));
        assert!(!types.contains(&"network") && !types.contains(&"uts"));
        assert_eq!(v["process"]["user"]["uid"], 0);
        assert_eq!(v["root"]["path"], "/srv/rootfs");
    }

    #[test]
    fn keep_uid_env_workdir_and_volumes() {
        let cmd = vec!["id".to_owned()];
        let mut u = user();
        u.subuids = vec![crate::runtime::spec::idmap::SubRange {
            start: 100000,
            count: 65536,
        }];
        u.subgids = u.subuids.clone();
        if crate::runtime::spec::idmap::map_helpers().is_none() {
            return; // covered by idmap's own test
        }
        let env = vec!["PATH=/opt/bin".to_owned(), "A=1".to_owned()];
        let volumes = vec![Volume {
            source: "/scratch".into(),
            destination: "/data".into(),
            read_only: true,
        }];
        let spec = make_spec(&AdhocOptions {
            env: &env,
            workdir: Some("/data"),
            volumes: &volumes,
            keep_uid: true,
            host_network: false,
            ..opts(&cmd, Some(&u))
        })
        .unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["process"]["user"]["uid"], 1000);
        assert_eq!(
            v["linux"]["uidMappings"],
            json!([
                {"containerID": 0, "hostID": 100000, "size": 1000},
                {"containerID": 1000, "hostID": 1000, "size": 1},
                {"containerID": 1001, "hostID": 101000, "size": 64536}
            ])
        );
        let env: Vec<&str> = v["process"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert!(env.contains(&"PATH=/opt/bin") && env.contains(&"A=1"));
        assert_eq!(env.iter().filter(|e| e.starts_with("PATH=")).count(), 1);
        assert_eq!(v["process"]["cwd"], "/data");
        let bind = v["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["destination"] == "/data")
            .unwrap();
        assert_eq!(bind["options"], json!(["rbind", "ro"]));
        assert!(v["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["type"] == "network"));
    }

    #[test]
    fn bad_arguments_are_refused() {
        let u = user();
        assert!(make_spec(&opts(&[], Some(&u))).is_err());
        let cmd = vec!["true".to_owned()];
        assert!(make_spec(&AdhocOptions {
            workdir: Some("rel"),
            ..opts(&cmd, None)
        })
        .is_err());
        assert!(parse_volume("/tmp").is_err());
        assert!(parse_volume("/tmp:rel").is_err());
        assert!(parse_volume("/tmp:/a/../b").is_err());
        assert!(parse_volume("/tmp:/t:rx").is_err());
        assert!(parse_volume("/no/such/dir:/t").is_err());
        assert!(parse_volume("/tmp:/t:ro").unwrap().read_only);
        assert!(resolve_env(&["=x".into()], |_| None).is_err());
    }

    #[test]
    fn a_tasks_container_gets_the_jobs_variables_the_image_leaves_unset() {
        let image = vec!["PATH=/opt/bin".to_owned(), "LANG=C.UTF-8".to_owned()];
        let job = [
            ("PATH", "/usr/bin"),
            ("MASTER_ADDR", "node1"),
            ("SLURM_PROCID", "3"),
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("GPU_DEVICE_ORDINAL", "1"),
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("GPURUN_SPANK_RUN", "[]"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            job_env(&image, job.into_iter()),
            ["MASTER_ADDR=node1", "SLURM_PROCID=3"]
        );
        assert_eq!(
            resolve_env(&["A=1".into(), "B".into(), "C".into()], |k| (k == "B")
                .then(|| "2".to_owned()))
            .unwrap(),
            ["A=1", "B=2"]
        );
    }

    #[test]
    fn a_layer_in_the_container_is_the_first_mount_over_the_root_itself() {
        let cmd = vec!["true".to_owned()];
        let u = user();
        let volumes = vec![Volume {
            source: "/scratch".into(),
            destination: "/data".into(),
            read_only: false,
        }];
        let spec = make_spec(&AdhocOptions {
            volumes: &volumes,
            root_layer: RootLayer::InContainer,
            ..opts(&cmd, Some(&u))
        })
        .unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        let mounts = v["mounts"].as_array().unwrap();
        assert_eq!(mounts[0]["destination"], "/");
        assert_eq!(mounts[0]["type"], "overlay");
        assert_eq!(
            mounts[0]["options"],
            json!([
                "lowerdir=x-gpurun-destination",
                "upperdir=x-gpurun-private",
                "userxattr"
            ])
        );
        assert_eq!(mounts.iter().filter(|m| m["type"] == "overlay").count(), 1);
        let plain = make_spec(&opts(&cmd, Some(&u))).unwrap();
        let v = serde_json::to_value(&plain).unwrap();
        assert!(!v["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["destination"] == "/"));
    }
}
