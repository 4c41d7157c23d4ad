//! Mount points for the injected files without changing the image.
//!
//! A bind mount needs a file or directory to land on. Where the image has
//! none (`/usr/lib/x86_64-linux-gnu/libcuda.so.1`, `/usr/bin/nvidia-smi`),
//! runc and the NVIDIA toolkit create an empty one in the image, and it
//! stays: a later container with other capabilities then finds an empty
//! `libcuda.so.1` ("file too short") or a `nvidia-smi` that is not there,
//! and a read-only image (squashfs, NFS, a shared directory) cannot take
//! one at all.
//!
//! gpurun instead lays a private overlay over the image directory that
//! holds them: the lowest layer is the directory itself, above it a small
//! layer of empty mount points (and SONAME symlinks, which need no mount
//! at all), and, unless the root is read-only, an upper layer on a tmpfs
//! that is mounted nowhere else, so the container can still write to that
//! directory: what it writes is charged to its memory cgroup and goes away
//! with it. The image itself gets nothing. A mount-point layer depends only
//! on what it holds, so it is made once, named by its contents, kept with
//! the driver cache and shared by every container that needs the same.
//!
//! An engine's rootfs is different: Docker, containerd and Podman give each
//! container its own writable overlay (or FUSE overlay) mount, which is not
//! the image. There the mount points go into that layer, as runc does, so
//! writes to those directories stay with the container as everywhere else
//! in it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use oci_spec::runtime::{Mount, MountBuilder};

use safe_fs::Rootfs;

/// The overlay layer libcontainer (gpurun's patch) replaces with the
/// destination directory itself, resolved inside the rootfs.
pub const DESTINATION_LAYER: &str = "x-gpurun-destination";
/// The `upperdir` libcontainer (gpurun's patch) replaces with a tmpfs of
/// the overlay's own that is mounted nowhere.
pub const PRIVATE_UPPER: &str = "x-gpurun-private";

const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// How the mount points were provided, for `--debug` and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Provided {
    /// Overlay mounts to put into the spec: (index before which it goes,
    /// the mount).
    pub overlays: Vec<(usize, Mount)>,
    /// Destinations that are symlinks in a mount-point layer: their bind
    /// mounts are not needed.
    pub linked: Vec<PathBuf>,
    /// "none needed", "overlay" or "container layer".
    pub how: &'static str,
    /// Destinations whose mount points the image gets after all (only
    /// where no overlay can hold them: right under `/`).
    pub in_image: Vec<PathBuf>,
}

/// Whether `rootfs` is the root of an overlay or FUSE mount: an engine's
/// per-container layer, not an image.
pub fn is_container_layer(rootfs: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(rootfs.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut fs_info: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c_path.as_ptr(), &mut fs_info) } != 0 {
        return false;
    }
    let magic = fs_info.f_type as i64;
    if magic != OVERLAYFS_SUPER_MAGIC && magic != FUSE_SUPER_MAGIC {
        return false;
    }
    // A read-only FUSE mount is an image served in place (squashfuse under
    // a user's `run --image`), not a layer of the container's own.
    // SAFETY: statvfs fills the zeroed struct; the path is NUL-terminated.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut vfs) } != 0 || vfs.f_flag & libc::ST_RDONLY != 0
    {
        return false;
    }
    let parent = rootfs.parent().unwrap_or(Path::new("/"));
    match (mount_id(rootfs), mount_id(parent)) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    }
}

fn mount_id(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            0,
            libc::STATX_MNT_ID,
            &mut st,
        )
    };
    (rc == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
}

/// Overlay's own escapes for a path in `lowerdir`.
fn escape_layer(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ':' | '\\' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What stands at a destination in a mount-point layer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    /// An empty file to bind a file on.
    File,
    /// An empty directory to bind a directory on.
    Dir,
    /// A symlink to this name in the same directory: a SONAME for a
    /// library that is bound under its file name there.
    Link(PathBuf),
}

/// A destination that needs a mount point.
pub struct Needed {
    pub destination: PathBuf,
    pub entry: Entry,
}

/// Provides mount points for `needed` (the injected mounts' destinations,
/// symlink-free paths in the rootfs) below the rootfs at `rootfs_path`,
/// whose spec already holds `spec_mounts`. Mount-point layers are kept in
/// `store` (a directory of the caller's alone), one per distinct content.
pub fn provide(
    rootfs_path: &Path,
    spec_mounts: &[Mount],
    needed: &[Needed],
    read_only_root: bool,
    user_namespace: bool,
    store: &Path,
) -> Result<Provided> {
    let rootfs = Rootfs::open(rootfs_path)
        .with_context(|| format!("open rootfs {}", rootfs_path.display()))?;
    let missing = missing_destinations(&rootfs, spec_mounts, needed);
    if missing.is_empty() {
        return Ok(Provided {
            how: "none needed",
            ..Provided::default()
        });
    }
    if is_container_layer(rootfs_path) {
        return Ok(Provided {
            how: "container layer",
            ..Provided::default()
        });
    }
    let mut provided = Provided {
        how: "overlay",
        ..Provided::default()
    };
    for (dir, mut entries) in group_by_image_dir(&rootfs, missing) {
        // Overlaying the whole root would hide every earlier mount; and a
        // directory the spec mounts something on is not the image's: leave
        // those to be made in place.
        let spec_mounts_on_it = spec_mounts.iter().any(|m| dir.starts_with(m.destination()));
        if dir == Path::new("/") || spec_mounts_on_it {
            provided.in_image.extend(
                entries
                    .into_iter()
                    .filter(|(_, e)| !matches!(e, Entry::Link(_)))
                    .map(|(rel, _)| dir.join(rel)),
            );
            continue;
        }
        entries.sort();
        entries.dedup();
        provided.linked.extend(
            entries
                .iter()
                .filter(|(_, e)| matches!(e, Entry::Link(_)))
                .map(|(rel, _)| dir.join(rel)),
        );
        let stub = mount_point_layer(store, &entries)?;
        let mount = overlay_mount(&dir, &stub, read_only_root, user_namespace)?;
        // Before any spec mount inside the directory: the overlay would
        // hide it.
        let at = spec_mounts
            .iter()
            .position(|m| m.destination().starts_with(&dir))
            .unwrap_or(spec_mounts.len());
        provided.overlays.push((at, mount));
    }
    Ok(provided)
}

/// The destinations that need a mount point. Those on a filesystem the
/// spec mounts (/dev, /proc) are not in the image, and those that exist
/// need nothing. A symlink in the image's place (a stale `libcuda.so.1 ->
/// libcuda.so.470...`) gets a mount point that hides it, so the container
/// finds the injected file under its own name. A spec mount exactly at a
/// destination is what needs the mount point.
fn missing_destinations<'a>(
    rootfs: &Rootfs,
    spec_mounts: &[Mount],
    needed: &'a [Needed],
) -> Vec<&'a Needed> {
    let covered = |dest: &Path| {
        spec_mounts
            .iter()
            .any(|m| dest.starts_with(m.destination()) && dest != m.destination())
    };
    needed
        .iter()
        .filter(|n| !covered(&n.destination))
        .filter(|n| {
            rootfs
                .file_type(&n.destination)
                .map_or(true, |t| t.is_symlink())
        })
        .collect()
}

/// Each missing destination under the nearest directory the image has, as
/// a path relative to it; a directory inside another group's joins that
/// group (not "/", which gets no overlay).
fn group_by_image_dir(
    rootfs: &Rootfs,
    missing: Vec<&Needed>,
) -> BTreeMap<PathBuf, Vec<(PathBuf, Entry)>> {
    let mut groups: BTreeMap<PathBuf, Vec<(PathBuf, Entry)>> = BTreeMap::new();
    let mut is_real_dir: BTreeMap<PathBuf, bool> = BTreeMap::new();
    for n in missing {
        let mut dir = n
            .destination
            .parent()
            .unwrap_or(Path::new("/"))
            .to_path_buf();
        loop {
            let real = *is_real_dir
                .entry(dir.clone())
                .or_insert_with(|| rootfs.real_dir(&dir).as_deref() == Some(dir.as_path()));
            if real || !dir.pop() {
                break;
            }
        }
        let rel = n.destination.strip_prefix(&dir).unwrap_or(&n.destination);
        groups
            .entry(dir.clone())
            .or_default()
            .push((rel.to_path_buf(), n.entry.clone()));
    }
    let dirs: Vec<PathBuf> = groups.keys().cloned().collect();
    for dir in &dirs {
        let outer = dirs
            .iter()
            .find(|o| *o != dir && o.as_os_str() != "/" && dir.starts_with(o));
        if let Some(outer) = outer {
            let entries = groups.remove(dir).unwrap_or_default();
            let prefix = dir.strip_prefix(outer).unwrap_or(dir).to_path_buf();
            let target = groups.entry(outer.clone()).or_default();
            target.extend(entries.into_iter().map(|(rel, d)| (prefix.join(rel), d)));
        }
    }
    groups
}

/// The overlay at `dir`: the mount-point layer `stub` over the image's
/// directory, with a private upper layer unless the root is read-only.
fn overlay_mount(
    dir: &Path,
    stub: &Path,
    read_only_root: bool,
    user_namespace: bool,
) -> Result<Mount> {
    let mut options = vec![format!(
        "lowerdir={}:{DESTINATION_LAYER}",
        escape_layer(stub)
    )];
    if !read_only_root {
        options.push(format!("upperdir={PRIVATE_UPPER}"));
        if user_namespace {
            // Whiteouts and opaque directories as user.* xattrs, which
            // a user namespace may set.
            options.push("userxattr".into());
        }
    }
    Ok(MountBuilder::default()
        .destination(dir)
        .typ("overlay")
        .source("overlay")
        .options(options)
        .build()?)
}

/// A name for contents made of `parts`: their SHA-256, in hex.
pub fn content_name(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The layer holding `entries` in `store`, made if no container made it
/// before: built under a temporary name and renamed into place, so a
/// concurrent create either finds it whole or makes its own.
fn mount_point_layer(store: &Path, entries: &[(PathBuf, Entry)]) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut described: Vec<Vec<u8>> = Vec::new();
    for (rel, entry) in entries {
        described.push(rel.as_os_str().as_bytes().to_vec());
        described.push(match entry {
            Entry::File => b"f".to_vec(),
            Entry::Dir => b"d".to_vec(),
            Entry::Link(target) => [b"l".as_slice(), target.as_os_str().as_bytes()].concat(),
        });
    }
    let parts: Vec<&[u8]> = described.iter().map(Vec::as_slice).collect();
    let name = content_name(&parts);
    let layer = store.join(&name);
    if layer.is_dir() {
        return Ok(layer);
    }
    fs::create_dir_all(store).with_context(|| format!("create {}", store.display()))?;
    let tmp = store.join(format!(".new-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let built = (|| -> std::io::Result<()> {
        fs::create_dir(&tmp)?;
        for (rel, entry) in entries {
            let path = tmp.join(rel);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            match entry {
                Entry::Dir => fs::create_dir_all(&path)?,
                Entry::File => fs::write(&path, b"")?,
                Entry::Link(target) => std::os::unix::fs::symlink(target, &path)?,
            }
        }
        Ok(())
    })();
    let placed = built.and_then(|()| fs::rename(&tmp, &layer));
    if let Err(e) = placed {
        let _ = fs::remove_dir_all(&tmp);
        if !layer.is_dir() {
            return Err(e)
                .with_context(|| format!("make the mount-point layer {}", layer.display()));
        }
    }
    Ok(layer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(dest: &str) -> Mount {
        MountBuilder::default()
            .destination(dest)
            .typ("bind")
            .source("/dev/null")
            .build()
            .unwrap()
    }

    /// An image with /usr/lib/x86_64-linux-gnu, /usr/bin, /etc and /dev,
    /// and what the driver needs in it (some of it there already).
    fn image_and_needs(base: &Path) -> (PathBuf, Vec<Needed>) {
        let rootfs = base.join("rootfs");
        for d in ["usr/lib/x86_64-linux-gnu", "usr/bin", "etc", "dev"] {
            fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        fs::write(rootfs.join("etc/ld.so.cache"), b"").unwrap();
        fs::write(rootfs.join("usr/bin/existing"), b"").unwrap();
        let needed: Vec<Needed> = [
            ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", false),
            ("/usr/lib/firmware/nvidia/535/gsp.bin", false),
            ("/usr/bin/nvidia-smi", false),
            ("/usr/bin/existing", false),
            ("/etc/ld.so.cache", false),
            ("/dev/nvidia0", false),
            ("/tmp/nvidia-mps", true),
        ]
        .into_iter()
        .map(|(d, is_dir)| Needed {
            destination: d.into(),
            entry: if is_dir { Entry::Dir } else { Entry::File },
        })
        .collect();
        (rootfs, needed)
    }

    #[test]
    fn missing_destinations_get_one_overlay_per_image_directory() {
        let base = std::env::temp_dir().join(format!("mount-points-{}", std::process::id()));
        let (rootfs, needed) = image_and_needs(&base);
        let spec_mounts = vec![bind("/dev"), bind("/usr/bin/inside")];
        let store = base.join("store");
        let p = provide(&rootfs, &spec_mounts, &needed, false, false, &store).unwrap();
        assert_eq!(p.how, "overlay");
        let dirs: Vec<(usize, String)> = p
            .overlays
            .iter()
            .map(|(at, m)| (*at, m.destination().to_string_lossy().into_owned()))
            .collect();
        // /usr/bin before the spec's mount inside it; /usr/lib holds both
        // the library directory and the firmware; /tmp is missing, so "/"
        // would be the overlay: left to the image.
        assert_eq!(
            dirs,
            [(1, "/usr/bin".to_owned()), (2, "/usr/lib".to_owned())],
            "{:?}",
            p.in_image
        );
        assert_eq!(p.in_image, [PathBuf::from("/tmp/nvidia-mps")]);
        let lib = &p.overlays[1].1;
        let options = lib.options().clone().unwrap();
        assert!(
            options[0].ends_with(&format!(":{DESTINATION_LAYER}")),
            "{options:?}"
        );
        let stub = PathBuf::from(
            options[0]
                .strip_prefix("lowerdir=")
                .unwrap()
                .split(':')
                .next()
                .unwrap(),
        );
        assert!(stub.join("x86_64-linux-gnu/libcuda.so.1").is_file());
        assert!(stub.join("firmware/nvidia/535/gsp.bin").is_file());
        assert!(
            options.contains(&format!("upperdir={PRIVATE_UPPER}")),
            "{options:?}"
        );
        // The image got nothing.
        assert!(!rootfs
            .join("usr/lib/x86_64-linux-gnu/libcuda.so.1")
            .exists());
        assert!(!rootfs.join("usr/lib/firmware").exists());

        // The same contents, the same layer.
        let again = provide(&rootfs, &spec_mounts, &needed, false, false, &store).unwrap();
        assert_eq!(again, p);
        // A SONAME link needs no mount: it is in the layer.
        let mut linked = needed.clone_entries();
        linked.push(Needed {
            destination: "/usr/lib/x86_64-linux-gnu/libcuda.so.535".into(),
            entry: Entry::Link("libcuda.so.1".into()),
        });
        let l = provide(&rootfs, &spec_mounts, &linked, false, false, &store).unwrap();
        assert_eq!(
            l.linked,
            [PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.535")]
        );
        assert_ne!(l.overlays, p.overlays, "another layer for other contents");

        // A read-only root gets read-only overlays: no upper layer.
        let p = provide(&rootfs, &spec_mounts, &needed[..1], true, false, &store).unwrap();
        let options = p.overlays[0].1.options().clone().unwrap();
        assert_eq!(options.len(), 1, "{options:?}");

        // Nothing missing, nothing to do.
        let p = provide(&rootfs, &spec_mounts, &needed[3..5], false, false, &store).unwrap();
        assert_eq!(p.how, "none needed");
        assert!(p.overlays.is_empty());
        let _ = fs::remove_dir_all(base);
    }

    trait CloneEntries {
        fn clone_entries(&self) -> Vec<Needed>;
    }

    impl CloneEntries for Vec<Needed> {
        fn clone_entries(&self) -> Vec<Needed> {
            self.iter()
                .map(|n| Needed {
                    destination: n.destination.clone(),
                    entry: n.entry.clone(),
                })
                .collect()
        }
    }

    #[test]
    fn layer_paths_are_escaped() {
        assert_eq!(
            escape_layer(Path::new("/run/a:b,c\\d")),
            "/run/a\\:b\\,c\\\\d"
        );
    }
}
