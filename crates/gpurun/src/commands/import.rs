//! `gpurun import IMAGE -o DIR`: an OCI layout, OCI archive or docker-save
//! archive into a ready bundle (DIR/rootfs and DIR/config.json).
//!
//! A non-root user unpacks inside a user namespace that maps them to root
//! and their subordinate ids to 1.., the same mapping `run --rootfs` and
//! the written config.json use: files owned by other users in the image
//! keep those owners inside the container.

use std::fs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_image::defaults::{ImageDefaults, IMAGE_CONFIG};
use gpurun_image::{Progress, Stats};
use safe_fs::Rootfs;

use crate::runtime::idmap::UserIds;
use crate::runtime::rootfs_spec::{self, AdhocOptions};

/// Where an import reads from.
enum ImageSource {
    /// A registry's image, pulled into the local cache first.
    Registry(String),
    /// A path, and the tag of one image in an OCI layout.
    Path(PathBuf, Option<String>),
}

fn image_source(text: &str) -> Result<ImageSource> {
    if let Some(reference) = text.strip_prefix("docker://") {
        return Ok(ImageSource::Registry(reference.to_owned()));
    }
    if let Some(rest) = text.strip_prefix("oci://") {
        // oci://DIR:TAG; a tag has no '/'.
        return Ok(match rest.rsplit_once(':') {
            Some((dir, tag)) if !tag.is_empty() && !tag.contains('/') => {
                ImageSource::Path(dir.into(), Some(tag.to_owned()))
            }
            _ => ImageSource::Path(rest.into(), None),
        });
    }
    if let Some((scheme, _)) = text.split_once("://") {
        bail!("{text:?}: unknown source {scheme}://; use docker://HOST/NAME:TAG, oci://DIR[:TAG] or a path");
    }
    Ok(ImageSource::Path(text.into(), None))
}

pub fn import(image: &str, output: &Path) -> Result<i32> {
    let made_dir = match fs::create_dir(output) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let empty = fs::read_dir(output)
                .with_context(|| format!("-o {}", output.display()))?
                .next()
                .is_none();
            if !empty {
                bail!(
                    "-o {}: the directory is not empty; give a new or empty directory",
                    output.display()
                );
            }
            false
        }
        Err(e) => return Err(e).with_context(|| format!("create {}", output.display())),
    };
    let result = image_source(image).and_then(|source| import_into(&source, image, output));
    if result.is_err() {
        // Only what this import made goes.
        let _ = remove_tree(&output.join("rootfs"));
        let _ = fs::remove_file(output.join("config.json"));
        let _ = fs::remove_file(output.join(IMAGE_CONFIG));
        if made_dir {
            let _ = fs::remove_dir(output);
        }
    }
    result.map(|_| 0)
}

fn import_into(source: &ImageSource, image: &str, output: &Path) -> Result<()> {
    let started = std::time::Instant::now();
    let (store, resolved) = match source {
        ImageSource::Path(path, tag) => gpurun_image::open(path, tag.as_deref())?,
        ImageSource::Registry(reference) => {
            let cache = gpurun_image::registry::default_cache();
            let name = pull_reporting(reference, &cache)?;
            gpurun_image::open(&cache, Some(&name))?
        }
    };
    let rootfs = output.join("rootfs");
    fs::create_dir(&rootfs).with_context(|| format!("create {}", rootfs.display()))?;
    let root = nix::unistd::geteuid().is_root();
    let user = (!root).then(UserIds::current);
    eprintln!(
        "importing {} ({}, {} layers) into {}",
        image,
        resolved.format,
        resolved.layers.len(),
        output.display()
    );
    let stats = match &user {
        None => unpack_reporting(&store, &resolved, &rootfs)?,
        Some(user) => gpurun_image::in_user_namespace(
            |pid| user.map_as_root(pid),
            || {
                let unpacked = unpack_reporting(&store, &resolved, &rootfs);
                if unpacked.is_err() {
                    // Files owned by subordinate ids can only go from in here.
                    let _ = remove_tree(&rootfs);
                }
                unpacked
            },
        )?,
    };
    write_config(&resolved.config, output, &rootfs, user.as_ref())?;
    // The image's own config, for `run --rootfs DIR/rootfs` without a
    // command: its entrypoint, environment and working directory.
    let image_config = output.join(IMAGE_CONFIG);
    fs::write(&image_config, serde_json::to_vec_pretty(&resolved.config)?)
        .with_context(|| format!("write {}", image_config.display()))?;
    eprintln!(
        "imported in {:.1}s: {} files, {} dirs, {} symlinks, {} hard links, {} whiteouts{}{}",
        started.elapsed().as_secs_f64(),
        stats.files,
        stats.dirs,
        stats.symlinks,
        stats.hardlinks,
        stats.whiteouts,
        counted(
            stats.skipped_devices,
            "device nodes skipped (no mknod without root)"
        ),
        counted(
            stats.unmapped_owners,
            "files keep your ownership (their owners are outside your subordinate ids)"
        ),
    );
    Ok(())
}

/// ", N what" when there are any.
fn counted(n: u64, what: &str) -> String {
    if n > 0 {
        format!(", {n} {what}")
    } else {
        String::new()
    }
}

/// Pulls from a registry into the cache, with a progress bar per blob on a
/// terminal and plain lines otherwise. Returns the image's name in the cache.
fn pull_reporting(reference: &str, cache: &Path) -> Result<String> {
    use gpurun_image::registry::PullProgress;
    let tty = std::io::stderr().is_terminal();
    let mut current = String::new();
    let (mut got, mut size) = (0u64, 0u64);
    let mut fetched = 0usize;
    let mut report = |p: PullProgress| match p {
        PullProgress::Blob {
            index,
            count,
            digest,
            size: s,
            have,
        } => {
            let short: String = digest.chars().take(19).collect();
            current = format!("blob {}/{count} {short}", index + 1);
            size = s;
            got = have;
            if have >= s && s > 0 {
                current.push_str(" cached");
            } else {
                fetched += 1;
                if have > 0 {
                    current.push_str(&format!(" resuming at {:.1} MiB", have as f64 / 1048576.0));
                }
            }
            if tty {
                eprint!("\r\x1b[K{current} ...");
            }
        }
        PullProgress::Bytes(n) => {
            got += n;
            if tty {
                let bar = 24u64;
                let filled = (got * bar).checked_div(size).unwrap_or(0).min(bar) as usize;
                eprint!(
                    "\r\x1b[K{current} [{}{}] {:.1}/{:.1} MiB",
                    "#".repeat(filled),
                    " ".repeat(24 - filled),
                    got as f64 / 1048576.0,
                    size as f64 / 1048576.0
                );
            }
        }
        PullProgress::Done { .. } => {
            let line = format!("{current} done, {:.1} MiB", got as f64 / 1048576.0);
            if tty {
                eprintln!("\r\x1b[K{line}");
            } else {
                eprintln!("{line}");
            }
        }
    };
    eprintln!("pulling docker://{reference} into {}", cache.display());
    let name = gpurun_image::registry::pull(reference, cache, &mut report)?;
    eprintln!("pulled {name} ({fetched} blobs fetched, the rest cached)");
    Ok(name)
}

/// Unpacks with a progress bar on a terminal and plain lines otherwise.
fn unpack_reporting(
    store: &gpurun_image::source::Store,
    image: &gpurun_image::Image,
    rootfs: &Path,
) -> Result<Stats> {
    let tty = std::io::stderr().is_terminal();
    let mut layer_bytes = 0u64;
    let mut layer_size = None;
    let mut current = String::new();
    let mut total = 0usize;
    let mut report = |p: Progress| match p {
        Progress::Layer {
            index,
            count,
            layer,
        } => {
            layer_bytes = 0;
            layer_size = layer.size.filter(|&s| s > 0);
            total = count;
            let short: String = layer.digest.chars().take(19).collect();
            current = format!("layer {}/{count} {short}", index + 1);
            if tty {
                eprint!("\r\x1b[K{current} ...");
            }
        }
        Progress::Bytes(n) => {
            layer_bytes += n;
            if tty {
                let bar_len = 24;
                // Compressed bytes read of the blob's size; docker-save
                // layers have no size up front, so the bar just turns.
                let filled = match layer_size {
                    Some(size) => {
                        ((layer_bytes * bar_len as u64) / size).min(bar_len as u64) as usize
                    }
                    None => ((layer_bytes >> 20) as usize) % (bar_len + 1),
                };
                eprint!(
                    "\r\x1b[K{current} [{}{}] {:.1} MiB",
                    "#".repeat(filled),
                    " ".repeat(bar_len - filled),
                    layer_bytes as f64 / 1048576.0
                );
            }
        }
        Progress::Done { index } => {
            let line = format!("{current} done, {:.1} MiB", layer_bytes as f64 / 1048576.0);
            if tty {
                eprint!("\r\x1b[K{line}");
                if index + 1 == total {
                    eprintln!();
                }
            } else {
                eprintln!("{line}");
            }
        }
    };
    let stats = gpurun_image::unpack(store, image, rootfs, true, &mut report);
    if tty {
        eprintln!();
    }
    stats
}

/// `USER` of the image config as numeric ids, names looked up in the
/// image's own /etc/passwd and /etc/group (inside the rootfs only).
fn image_user(spec_user: &str, rootfs: &Path) -> Result<(u32, u32)> {
    let (u, g) = match spec_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec_user, None),
    };
    let root = Rootfs::open(rootfs)?;
    let lookup = |file: &str, name: &str| -> Option<(u32, u32)> {
        let text = String::from_utf8(root.read(Path::new(file), 1 << 20).ok()?).ok()?;
        text.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[0] == name)
                .then(|| Some((f[2].parse().ok()?, f.get(3)?.parse().unwrap_or(0))))?
        })
    };
    let (uid, mut gid) = match u.parse::<u32>() {
        Ok(uid) => (uid, lookup_uid_gid(&root, uid).unwrap_or(0)),
        Err(_) => lookup("/etc/passwd", u)
            .with_context(|| format!("the image's USER {u:?} is not in its /etc/passwd"))?,
    };
    if let Some(g) = g {
        gid = match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => {
                let text = String::from_utf8(
                    root.read(Path::new("/etc/group"), 1 << 20)
                        .unwrap_or_default(),
                )
                .unwrap_or_default();
                text.lines()
                    .find_map(|l| {
                        let f: Vec<&str> = l.split(':').collect();
                        (f.len() >= 3 && f[0] == g).then(|| f[2].parse().ok())?
                    })
                    .with_context(|| {
                        format!("the image's USER group {g:?} is not in its /etc/group")
                    })?
            }
        };
    }
    Ok((uid, gid))
}

fn lookup_uid_gid(root: &Rootfs, uid: u32) -> Option<u32> {
    let text = String::from_utf8(root.read(Path::new("/etc/passwd"), 1 << 20).ok()?).ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[2] == uid.to_string()).then(|| f[3].parse().ok())?
    })
}

fn write_config(
    config: &serde_json::Value,
    output: &Path,
    rootfs: &Path,
    user: Option<&UserIds>,
) -> Result<()> {
    let defaults = ImageDefaults::from_config(config);
    let mut command = defaults.command;
    if command.is_empty() {
        command.push("sh".to_owned());
    }
    let env = defaults.env;
    let workdir = defaults.workdir.as_deref();
    let c = &config["config"];
    let spec = rootfs_spec::make_spec(&AdhocOptions {
        rootfs: Path::new("rootfs"),
        command: &command,
        env: &env,
        workdir,
        volumes: &[],
        user,
        keep_uid: false,
        host_network: true,
        host_files: &[],
    })?;
    let mut value = serde_json::to_value(&spec)?;
    if let Some(u) = c["User"].as_str().filter(|u| !u.is_empty()) {
        let (uid, gid) = image_user(u, rootfs)?;
        value["process"]["user"] = serde_json::json!({"uid": uid, "gid": gid});
    }
    let path = output.join("config.json");
    fs::write(&path, serde_json::to_string_pretty(&value)? + "\n")
        .with_context(|| format!("write {}", path.display()))
}

/// `import --remove -o DIR`: deletes a bundle import made, from inside the
/// same user namespace for a non-root user.
pub fn remove(dir: &Path) -> Result<i32> {
    if !dir.join("rootfs").is_dir() || !dir.join("config.json").is_file() {
        bail!(
            "{} is no bundle (no rootfs/ and config.json): not removing it",
            dir.display()
        );
    }
    let dir = dir.to_path_buf();
    if nix::unistd::geteuid().is_root() {
        remove_tree(&dir)?;
    } else {
        gpurun_image::in_user_namespace(
            |pid| UserIds::current().map_as_root(pid),
            || {
                remove_tree(&dir).with_context(|| format!("remove {}", dir.display()))?;
                Ok(Stats::default())
            },
        )?;
    }
    Ok(0)
}

/// Removes what an import wrote, read-only directories included.
fn remove_tree(dir: &PathBuf) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn writable(dir: &Path) {
        if let Ok(m) = fs::symlink_metadata(dir) {
            if m.is_dir() {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
                for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                    writable(&e.path());
                }
            }
        }
    }
    writable(dir);
    fs::remove_dir_all(dir)
}
