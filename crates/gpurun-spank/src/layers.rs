//! The node's directories of named containers' layers (`flags::LAYERS`),
//! made and removed by the plugin as root. Each user's directory is the
//! user's own, in a directory only root writes, so the user cannot put a
//! link where root will look; removal never follows a link
//! (`remove_dir_all` opens each directory without following one).

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

use crate::flags::{is_layer_of_job, user_layers, LAYERS};

/// Makes `LAYERS` (root's, 0755) and the user's directory in it (0700,
/// `uid:gid`), or checks the ones there.
pub fn make_user_dir(uid: u32, gid: u32) -> Result<(), String> {
    make_dir_of(Path::new(LAYERS), 0o755, 0, 0)?;
    make_dir_of(Path::new(&user_layers(uid)), 0o700, uid, gid)
}

fn make_dir_of(dir: &Path, mode: u32, uid: u32, gid: u32) -> Result<(), String> {
    match fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => std::os::unix::fs::lchown(dir, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {}: {e}", dir.display())),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid {
        return Err(format!(
            "{} is not a directory of uid {uid}: remove it",
            dir.display()
        ));
    }
    Ok(())
}

/// Removes job `job`'s layers from the user's directory.
pub fn remove_job(uid: u32, job: u32) {
    remove_job_in(Path::new(&user_layers(uid)), job);
}

fn remove_job_in(dir: &Path, job: u32) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_str().is_some_and(|n| is_layer_of_job(n, job)) {
            let path = entry.path();
            let _ = match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
                _ => fs::remove_file(&path),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_layers_go_and_nothing_a_link_points_at() {
        let dir = std::env::temp_dir().join(format!("spank-layers-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let outside = dir.with_extension("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), "").unwrap();
        for layer in ["42.a/upper/x", "42.b", "43.a"] {
            fs::create_dir_all(dir.join(layer)).unwrap();
        }
        std::os::unix::fs::symlink(&outside, dir.join("42.link")).unwrap();
        remove_job_in(&dir, 42);
        let mut left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["43.a"]);
        assert!(outside.join("keep").exists(), "a link was followed");
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }
}
