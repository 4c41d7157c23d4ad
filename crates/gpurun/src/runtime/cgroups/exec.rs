//! `exec --cgroup`: the sub-cgroups an exec'd process joins, as runc
//! reads the flags.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

use super::host::{hierarchy_dirs, is_unified, CGROUP_ROOT};

/// Where `exec --cgroup` puts a process, besides the container's cgroup.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecCgroups {
    /// A sub-cgroup path joined in every hierarchy (`--cgroup PATH`).
    pub everywhere: Option<String>,
    /// Sub-cgroup directories joined in the hierarchies named
    /// (`--cgroup CTRL[,CTRL]:PATH` on cgroup v1), one per controller.
    pub per_controller: Vec<PathBuf>,
}

/// The `--cgroup` flags as runc reads them: `CTRL[,CTRL]:PATH`, repeatable
/// (a controller named twice takes the later path); or one `PATH` alone
/// (key ""), for every hierarchy.
pub fn parse_exec_cgroups(flags: &[String]) -> Result<Vec<(String, String)>> {
    let mut paths: Vec<(String, String)> = Vec::new();
    for flag in flags {
        match flag.split_once(':') {
            Some((controllers, path)) => {
                for controller in controllers.split(',') {
                    if controller.is_empty() {
                        bail!("invalid --cgroup argument: {flag} (empty <controller> prefix)");
                    }
                    // A controller named again takes the later path, as
                    // in runc 1.1.
                    paths.retain(|(c, _)| c != controller);
                    paths.push((controller.to_owned(), path.to_owned()));
                }
            }
            None if flags.len() != 1 => {
                bail!("invalid --cgroup argument: {flag} (missing <controller>: prefix)")
            }
            None => paths.push((String::new(), flag.clone())),
        }
    }
    Ok(paths)
}

/// The sub-cgroup `sub` (a path below the container's cgroup, `/` or empty
/// for the cgroup itself) as a clean relative path, or runc's refusal.
fn sub_cgroup_path(flag: &str, sub: &str) -> Result<PathBuf> {
    let path = Path::new(sub.trim_start_matches('/'));
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("exec --cgroup {flag:?}: {sub} is not a sub cgroup path: give a path below the container's cgroup");
    }
    Ok(path.to_owned())
}

/// Checks the `--cgroup` flags of an exec into the container whose cgroup
/// is `cgroup`: the sub-cgroups must exist (exec joins, never makes them),
/// and a controller must be one of the container's hierarchies.
pub fn exec_cgroups(cgroup: &Path, flags: &[String]) -> Result<ExecCgroups> {
    let mut out = ExecCgroups::default();
    let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
    for (controller, sub) in parse_exec_cgroups(flags)? {
        let flag = if controller.is_empty() {
            sub.clone()
        } else {
            format!("{controller}:{sub}")
        };
        let path = sub_cgroup_path(&flag, &sub)?;
        if controller.is_empty() {
            if path.as_os_str().is_empty() {
                continue;
            }
            // In each hierarchy the container has a cgroup in.
            let dirs: Vec<PathBuf> = hierarchy_dirs(cgroup)
                .into_iter()
                .filter(|d| d.is_dir())
                .map(|d| d.join(&path))
                .collect();
            if dirs.is_empty() {
                bail!("exec --cgroup {flag:?}: the container has no such cgroup");
            }
            if let Some(missing) = dirs.iter().find(|d| !d.is_dir()) {
                return Err(missing_sub_cgroup(&flag, missing));
            }
            out.everywhere = Some(path.to_string_lossy().into_owned());
            continue;
        }
        // cgroup v2 has one hierarchy, whose key is "" in runc.
        let hierarchy = Path::new(CGROUP_ROOT)
            .join(controller.strip_prefix("name=").unwrap_or(&controller))
            .join(relative);
        let unified = is_unified();
        if unified || !hierarchy.is_dir() {
            bail!(
                "exec --cgroup {flag:?}: unknown controller {controller} in SubCgroupPaths: name a controller the container has a cgroup in{}",
                if unified { " (cgroup v2 has one hierarchy: give the path alone)" } else { "" }
            );
        }
        let dir = hierarchy.join(&path);
        if !dir.is_dir() {
            return Err(missing_sub_cgroup(&flag, &dir));
        }
        if !path.as_os_str().is_empty() {
            out.per_controller.push(dir);
        }
    }
    Ok(out)
}

/// exec never makes a sub-cgroup, only joins one. runc's words first,
/// which scripts match; the pid is the exec's own, whose process would
/// have joined.
fn missing_sub_cgroup(flag: &str, dir: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "exec --cgroup {flag:?}: adding pid {} to cgroups: open {}: no such file or directory; create the sub-cgroup first (exec joins it, never makes it)",
        std::process::id(),
        dir.join("cgroup.procs").display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_cgroup_flags_as_runc_reads_them() {
        let flags =
            |f: &[&str]| parse_exec_cgroups(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(flags(&["sub"]).unwrap(), [("".into(), "sub".into())]);
        assert_eq!(
            flags(&["memory,pids:a", "memory:b"]).unwrap(),
            [
                ("pids".to_string(), "a".to_string()),
                ("memory".into(), "b".into())
            ]
        );
        let err = flags(&["a", "b"]).unwrap_err().to_string();
        assert!(err.contains("(missing <controller>: prefix)"), "{err}");
        let err = flags(&[":a"]).unwrap_err().to_string();
        assert!(err.contains("(empty <controller> prefix)"), "{err}");
    }
}
