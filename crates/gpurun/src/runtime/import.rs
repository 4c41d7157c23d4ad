//! `gpurun import IMAGE -o DIR`'s work: an OCI layout, OCI archive,
//! docker-save archive or registry image into a ready bundle (DIR/rootfs
//! and DIR/config.json). What it does is told to the caller as events.
//!
//! A non-root user unpacks inside a user namespace that maps them to root
//! and their subordinate ids to 1.., the same mapping `run --rootfs` and
//! the written config.json use: files owned by other users in the image
//! keep those owners inside the container.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_image::defaults::{ImageDefaults, IMAGE_CONFIG};
use gpurun_image::registry::PullProgress;
use gpurun_image::{Progress, Stats};
use safe_fs::Rootfs;

use crate::runtime::spec::idmap::UserIds;
use crate::runtime::spec::rootfs_spec::{self, AdhocOptions};

/// Where an import reads from.
enum ImageSource {
    /// A registry's image, pulled into the local cache first.
    Registry(String),
    /// A path, and the tag of one image in an OCI layout.
    Path(PathBuf, Option<String>),
}

/// What an import tells its caller, in order.
pub enum ImportEvent<'a> {
    Pulling {
        reference: &'a str,
        cache: &'a Path,
    },
    Pull(PullProgress<'a>),
    Pulled {
        name: &'a str,
    },
    Importing {
        format: &'a str,
        layers: usize,
    },
    Unpack(Progress<'a>),
    Unpacked,
    Imported {
        stats: &'a Stats,
        elapsed: std::time::Duration,
    },
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

/// Imports `image` into `output` (new or empty); a failed import removes
/// only what it made.
pub fn import(image: &str, output: &Path, report: &mut dyn FnMut(ImportEvent)) -> Result<()> {
    if is_squashfs_file(output) {
        return import_squashfs(image, output, report);
    }
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
    let result = image_source(image).and_then(|source| import_into(&source, output, report));
    if result.is_err() {
        // Only what this import made goes.
        let _ = remove_tree(&output.join("rootfs"));
        let _ = fs::remove_file(output.join("config.json"));
        let _ = fs::remove_file(output.join(IMAGE_CONFIG));
        if made_dir {
            let _ = fs::remove_dir(output);
        }
    }
    result
}

/// Whether `-o` names a squashfs image file (`.sqsh`, enroot's, or
/// `.squashfs`) rather than a bundle directory.
fn is_squashfs_file(output: &Path) -> bool {
    matches!(
        output.extension().and_then(|e| e.to_str()),
        Some("sqsh" | "squashfs")
    )
}

/// `import IMAGE -o FILE.sqsh`, as `enroot import` makes one: the image
/// unpacked beside FILE, packed into FILE by mksquashfs (inside the user
/// namespace for a non-root user, so the image's owners are kept as they
/// are inside it), the unpacked tree removed. A failed import leaves no
/// FILE. `run --image FILE` runs it in place.
fn import_squashfs(image: &str, output: &Path, report: &mut dyn FnMut(ImportEvent)) -> Result<()> {
    if output.symlink_metadata().is_ok() {
        bail!(
            "-o {}: the file exists; give a new file name",
            output.display()
        );
    }
    let mksquashfs = program_on_path("mksquashfs").with_context(|| {
        format!(
            "-o {}: writing a squashfs image needs mksquashfs: install squashfs-tools",
            output.display()
        )
    })?;
    let name = output.file_name().unwrap_or_default().to_string_lossy();
    let work = output.with_file_name(format!(".{name}.import-{}", std::process::id()));
    let result = import(image, &work, report)
        .and_then(|()| keep_config_inside(&work))
        .and_then(|()| pack(&mksquashfs, &work.join("rootfs"), output));
    if work.join("config.json").is_file() {
        let _ = remove(&work);
    }
    if result.is_err() {
        let _ = fs::remove_file(output);
    }
    result
}

/// The image's config (entrypoint, environment, working directory) inside
/// the tree to pack, at `squashfs::IMAGE_CONFIG_INSIDE`, where `run
/// --image` finds it: a squashfs file has nowhere beside it to keep it.
/// Written from inside the user namespace for a user (root owns the tree).
fn keep_config_inside(work: &Path) -> Result<()> {
    let config = fs::read(work.join(IMAGE_CONFIG))?;
    let rootfs = work.join("rootfs");
    let write = move || -> Result<()> {
        let root = Rootfs::open(&rootfs)?;
        let inside = Path::new(crate::runtime::squashfs::IMAGE_CONFIG_INSIDE);
        root.create_dir_all_in(inside.parent().unwrap_or(Path::new("/")), 0o755)?;
        root.write_in(inside, &config, 0o644)?;
        Ok(())
    };
    as_image_owner(write)
}

/// `name`'s absolute path in the invoker's PATH (the program then runs
/// with a fixed one).
pub fn program_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain(["/usr/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// mksquashfs of `rootfs` into `output`, in the import's user namespace
/// for a non-root user.
fn pack(mksquashfs: &Path, rootfs: &Path, output: &Path) -> Result<()> {
    let mksquashfs = mksquashfs.to_owned();
    let (rootfs, output) = (rootfs.to_owned(), output.to_owned());
    as_image_owner(move || run_mksquashfs(&mksquashfs, &rootfs, &output, &[]))
}

/// mksquashfs of `tree` into `output` (with `extra` flags), with a clean
/// environment, from `/`; its last line of complaint as the error.
pub fn run_mksquashfs(mksquashfs: &Path, tree: &Path, output: &Path, extra: &[&str]) -> Result<()> {
    let out = std::process::Command::new(mksquashfs)
        .arg(tree)
        .arg(output)
        .args(["-noappend", "-quiet", "-no-progress"])
        .args(extra)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .output()
        .context("run mksquashfs")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        bail!("mksquashfs {}: {last}", output.display());
    }
    Ok(())
}

/// `work` with the ids that own an import's files: as it is for root; for
/// a user, inside the import's user namespace (the user as root, the
/// subordinate ids after), where files of other owners in the image can
/// be written, read and removed.
fn as_image_owner<T: serde::Serialize + serde::de::DeserializeOwned>(
    work: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if nix::unistd::geteuid().is_root() {
        work()
    } else {
        gpurun_image::in_user_namespace(|pid| UserIds::current().map_as_root(pid), work)
    }
}

fn import_into(
    source: &ImageSource,
    output: &Path,
    report: &mut dyn FnMut(ImportEvent),
) -> Result<()> {
    let started = std::time::Instant::now();
    let (store, resolved) = match source {
        ImageSource::Path(path, tag) => gpurun_image::open(path, tag.as_deref())?,
        ImageSource::Registry(reference) => {
            gpurun_image::registry::parse_reference(reference)?;
            let cache = gpurun_image::registry::default_cache();
            report(ImportEvent::Pulling {
                reference,
                cache: &cache,
            });
            let name = gpurun_image::registry::pull(reference, &cache, &mut |p| {
                report(ImportEvent::Pull(p))
            })?;
            report(ImportEvent::Pulled { name: &name });
            gpurun_image::open(&cache, Some(&name))?
        }
    };
    let rootfs = output.join("rootfs");
    fs::create_dir(&rootfs).with_context(|| format!("create {}", rootfs.display()))?;
    let root = nix::unistd::geteuid().is_root();
    let user = (!root).then(UserIds::current);
    report(ImportEvent::Importing {
        format: resolved.format,
        layers: resolved.layers.len(),
    });
    let mut unpack = || {
        let stats = gpurun_image::unpack(&store, &resolved, &rootfs, true, &mut |p| {
            report(ImportEvent::Unpack(p))
        });
        report(ImportEvent::Unpacked);
        stats
    };
    let stats = match &user {
        None => unpack()?,
        Some(user) => gpurun_image::in_user_namespace(
            |pid| user.map_as_root(pid),
            || {
                let unpacked = unpack();
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
    report(ImportEvent::Imported {
        stats: &stats,
        elapsed: started.elapsed(),
    });
    Ok(())
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
        private_tmp: false,
        root_layer: rootfs_spec::RootLayer::None,
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
pub fn remove(dir: &Path) -> Result<()> {
    if !dir.join("rootfs").is_dir() || !dir.join("config.json").is_file() {
        bail!(
            "{} is no bundle (no rootfs/ and config.json): not removing it",
            dir.display()
        );
    }
    as_image_owner(|| remove_tree(dir).with_context(|| format!("remove {}", dir.display())))
}

/// Removes what an import wrote, read-only directories included.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
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
