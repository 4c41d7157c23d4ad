//! Whether a rootless container of this user could write the runtime's
//! binary (CVE-2019-5736): when none could, the re-exec protects nothing
//! and is skipped.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The ids a rootless container's processes can hold: the caller's own
/// and its subordinate ranges (the most newuidmap/newgidmap will map), as
/// inclusive ranges.
#[derive(Debug, Default)]
pub struct ContainerIds {
    pub uids: Vec<(u32, u32)>,
    pub gids: Vec<(u32, u32)>,
}

impl ContainerIds {
    pub fn of_caller() -> ContainerIds {
        use nix::unistd::{getegid, geteuid, getgroups};
        let user = crate::runtime::spec::idmap::UserIds::current();
        let one = |id: u32| (id, id);
        let range = |r: &crate::runtime::spec::idmap::SubRange| {
            (r.start, r.start.saturating_add(r.count - 1))
        };
        let mut uids = vec![one(user.uid), one(geteuid().as_raw())];
        uids.extend(user.subuids.iter().map(range));
        let mut gids: Vec<_> = [user.gid, getegid().as_raw()]
            .into_iter()
            .chain(getgroups().unwrap_or_default().iter().map(|g| g.as_raw()))
            .map(one)
            .collect();
        gids.extend(user.subgids.iter().map(range));
        ContainerIds { uids, gids }
    }

    fn holds(ranges: &[(u32, u32)], id: u32) -> bool {
        ranges
            .iter()
            .any(|&(first, last)| (first..=last).contains(&id))
    }
}

/// Owner, group and mode of a file, as the permission check sees them.
#[derive(Debug, Clone, Copy)]
pub struct Perms {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

impl From<&std::fs::Metadata> for Perms {
    fn from(meta: &std::fs::Metadata) -> Perms {
        use std::os::unix::fs::MetadataExt;
        Perms {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode(),
        }
    }
}

/// Why `ids` could write (or, for a directory, replace entries in) a file
/// with these permissions; `None` if they cannot. An owner can always
/// chmod, so ownership alone counts. Capabilities do not help a container:
/// inside its user namespace they cover only files whose owner is mapped
/// there, and those are ours anyway.
pub fn writable_by(perms: Perms, ids: &ContainerIds) -> Option<&'static str> {
    if ContainerIds::holds(&ids.uids, perms.uid) {
        Some("owned by an id a container of ours holds")
    } else if perms.mode & 0o020 != 0 && ContainerIds::holds(&ids.gids, perms.gid) {
        Some("writable by a group a container of ours holds")
    } else if perms.mode & 0o002 != 0 {
        Some("writable by everyone")
    } else {
        None
    }
}

const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Why a rootless container of ours could change the binary, or `None`
/// when it cannot: then re-exec'ing from it protects nothing, and the
/// copy (7.6 MB per start) is skipped.
///
/// CVE-2019-5736 is a container process opening `/proc/<runtime>/exe` for
/// writing. That open is checked against the process's ids, which for a
/// rootless container are only the caller's uid and gids and the
/// subordinate ranges it may map. So the binary must be neither owned by
/// nor group- or world-writable to any of them, carry no ACL (which could
/// grant a named id write), and not be on FUSE (whose server may be the
/// user). Every directory above it is held to the same rule, so nobody of
/// ours can put another file in its place; a sticky directory (`/tmp`)
/// writable by all still protects entries that are not ours.
pub fn container_could_write(exe: &File, path: &Path, ids: &ContainerIds) -> Option<String> {
    // SAFETY: fstatfs fills a zeroed struct for a valid descriptor.
    let on_fuse = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        libc::fstatfs(exe.as_raw_fd(), &mut fs) != 0 || fs.f_type as i64 == FUSE_SUPER_MAGIC
    };
    if on_fuse {
        return Some("on FUSE (or its filesystem is unknown)".into());
    }
    let Ok(meta) = exe.metadata() else {
        return Some("cannot stat it".into());
    };
    if let Some(why) = writable_by(Perms::from(&meta), ids) {
        return Some(why.into());
    }
    if !path.is_absolute() {
        return Some("its path is not absolute".into());
    }
    let mut child = Perms::from(&meta);
    for dir in path.ancestors().skip(1) {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            return Some(format!("cannot stat {}", dir.display()));
        };
        let perms = Perms::from(&meta);
        // A sticky directory that is not ours lets nobody of ours replace
        // an entry that is not ours either.
        let sticky_shields_child = perms.mode & libc::S_ISVTX != 0
            && !ContainerIds::holds(&ids.uids, child.uid)
            && !ContainerIds::holds(&ids.uids, perms.uid);
        if let Some(why) = writable_by(perms, ids).filter(|_| !sticky_shields_child) {
            return Some(format!("{}: {why}", dir.display()));
        }
        if has_acl(dir) {
            return Some(format!("{} has an ACL", dir.display()));
        }
        child = perms;
    }
    if has_acl(path) {
        return Some("it has an ACL".into());
    }
    None
}

/// Whether `path` carries a POSIX access ACL (any entry beyond the mode).
fn has_acl(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: valid C strings; a null buffer of size 0 asks for the size.
    let size = unsafe {
        libc::lgetxattr(
            c_path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    size > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    fn ids() -> ContainerIds {
        ContainerIds {
            uids: vec![(1000, 1000), (100_000, 165_535)],
            gids: vec![(1000, 1000), (27, 27), (100_000, 165_535)],
        }
    }

    fn perms(uid: u32, gid: u32, mode: u32) -> Perms {
        Perms { uid, gid, mode }
    }

    #[test]
    fn a_root_owned_install_is_safe() {
        assert_eq!(writable_by(perms(0, 0, 0o100755), &ids()), None);
        assert_eq!(writable_by(perms(0, 0, 0o040755), &ids()), None);
    }

    #[test]
    fn our_own_or_our_subordinate_ids_can_write() {
        assert!(writable_by(perms(1000, 0, 0o100555), &ids()).is_some());
        assert!(writable_by(perms(100_001, 0, 0o100555), &ids()).is_some());
        assert!(writable_by(perms(165_535, 0, 0o100555), &ids()).is_some());
        assert_eq!(writable_by(perms(165_536, 0, 0o100755), &ids()), None);
    }

    /// Files made here belong to whoever runs the test; the ids of a
    /// container that is not theirs are far away from any real one.
    fn far_ids() -> ContainerIds {
        ContainerIds {
            uids: vec![(4_000_000_000, 4_000_065_535)],
            gids: vec![(4_000_000_000, 4_000_065_535)],
        }
    }

    #[test]
    fn a_sticky_world_writable_directory_shields_entries_not_ours() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("seal-test-{}", std::process::id()));
        let open_dir = base.join("open");
        let sticky_dir = base.join("sticky");
        for (dir, mode) in [(&base, 0o755), (&open_dir, 0o777), (&sticky_dir, 0o1777)] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let verdict = |dir: &Path| {
            let bin = dir.join("bin");
            std::fs::write(&bin, b"").unwrap();
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
            container_could_write(&File::open(&bin).unwrap(), &bin, &far_ids())
        };
        let sticky = verdict(&sticky_dir);
        let open = verdict(&open_dir);
        let _ = std::fs::remove_dir_all(&base);
        // Whatever is above temp_dir is the host's; only our two differ.
        if std::env::temp_dir().ancestors().all(|d| {
            std::fs::metadata(d).is_ok_and(|m| {
                m.permissions().mode() & 0o002 == 0 || m.permissions().mode() & 0o1000 != 0
            })
        }) {
            assert_eq!(sticky, None);
        }
        assert!(open.is_some_and(|why| why.contains("writable by everyone")));
    }

    #[test]
    fn group_write_counts_only_for_our_groups() {
        assert!(writable_by(perms(0, 27, 0o100775), &ids()).is_some());
        assert!(writable_by(perms(0, 100_000, 0o100775), &ids()).is_some());
        assert_eq!(writable_by(perms(0, 50, 0o100775), &ids()), None);
        assert!(writable_by(perms(0, 50, 0o100757), &ids()).is_some());
    }
}
