//! A library folder as the container will see it (the image's files,
//! the spec's binds over them, the planned links), and ldconfig's reading
//! of it.

use super::*;
use crate::formats::platform::Platform;

/// What a name in a library folder is, as the container will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// A regular file: its SONAME, if it is a shared library.
    File { soname: Option<String> },
    /// A symlink, with its target as written.
    Symlink(PathBuf),
}

/// The spec's bind mounts of files (not directories), as (destination,
/// source).
pub(super) fn file_binds(spec: &Spec) -> Vec<(PathBuf, PathBuf)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| is_bind(m))
        .filter_map(|m| Some((m.destination().clone(), m.source().clone()?)))
        .filter(|(_, source)| fs::metadata(source).is_ok_and(|m| !m.is_dir()))
        .collect()
}

pub(super) fn is_bind(m: &Mount) -> bool {
    m.typ().as_deref() == Some("bind")
        || m.options()
            .iter()
            .flatten()
            .any(|o| o == "bind" || o == "rbind")
}

/// The names in `folder` (symlink-free, inside the rootfs) as the
/// container will see them: the image's entries, then the spec's bind
/// mounts over them, then the planned links.
pub(super) fn folder_view(
    root: &Rootfs,
    folder: &Path,
    binds: &[(PathBuf, PathBuf)],
    links: &[Link],
) -> BTreeMap<String, Seen> {
    let mut view = BTreeMap::new();
    if root.real_dir(folder).as_deref() == Some(folder) {
        let host_dir = root
            .host_path()
            .join(folder.strip_prefix("/").unwrap_or(folder));
        for entry in fs::read_dir(host_dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.contains(".so") {
                continue;
            }
            let path = folder.join(&name);
            let seen = match root.read_link(&path) {
                Ok(Some(target)) => Seen::Symlink(target),
                Ok(None) => Seen::File {
                    soname: root
                        .open_in(&path, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                        .ok()
                        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
                        .and_then(|mut f| {
                            crate::formats::elf::soname_of(&mut f, Platform::native())
                        }),
                },
                Err(_) => continue,
            };
            view.insert(name, seen);
        }
    }
    for (dest, source) in binds {
        if dest.parent() == Some(folder) {
            if let Some(name) = dest.file_name() {
                view.insert(
                    name.to_string_lossy().into_owned(),
                    Seen::File {
                        soname: crate::formats::elf::soname(source, Platform::native()),
                    },
                );
            }
        }
    }
    for l in links {
        if l.link.parent() == Some(folder) {
            if let Some(name) = l.link.file_name() {
                view.insert(
                    name.to_string_lossy().into_owned(),
                    Seen::Symlink(l.target.clone()),
                );
            }
        }
    }
    view
}

/// ldconfig's reading of one folder: an entry for each library's SONAME
/// (and the SONAME link it would make where none is there), and one for
/// each symlink that names its target's SONAME or is its `.so` name
/// (glibc's `search_dir`).
pub(super) fn scan_folder(folder: &Path, view: &BTreeMap<String, Seen>) -> (Vec<Entry>, Vec<Link>) {
    let entry = |name: &str| Entry {
        name: name.to_owned(),
        path: folder.join(name).to_string_lossy().into_owned(),
        flags: Platform::native().cache_flags,
        hwcap: 0,
    };
    let (mut entries, mut links) = (Vec::new(), Vec::new());
    let mut with_links = view.clone();
    for (name, seen) in view {
        if let Seen::File {
            soname: Some(soname),
        } = seen
        {
            if !view.contains_key(soname) {
                links.push(Link {
                    target: name.into(),
                    link: folder.join(soname),
                });
                with_links.insert(soname.clone(), Seen::Symlink(name.into()));
            }
        }
    }
    let view = &with_links;
    let soname_of = |name: &str| -> Option<String> {
        let mut name = name.to_owned();
        for _ in 0..8 {
            match view.get(&name)? {
                Seen::File { soname } => return soname.clone(),
                Seen::Symlink(target) => {
                    // Only a link within the folder is followed here.
                    let t = target.file_name()?.to_string_lossy().into_owned();
                    if target
                        .parent()
                        .is_some_and(|p| !p.as_os_str().is_empty() && in_container(p) != folder)
                    {
                        return None;
                    }
                    name = t;
                }
            }
        }
        None
    };
    for (name, seen) in view {
        match seen {
            Seen::File {
                soname: Some(soname),
            } => entries.push(entry(soname)),
            Seen::File { soname: None } => {}
            Seen::Symlink(target) => {
                let Some(soname) = soname_of(name) else {
                    continue;
                };
                let target_name = target.file_name().unwrap_or_default().to_string_lossy();
                if *target_name == soname
                    || (name.ends_with(".so") && soname.starts_with(name.as_str()))
                    || *name == soname
                {
                    entries.push(entry(name));
                } else {
                    entries.push(entry(&soname));
                }
            }
        }
    }
    (entries, links)
}
