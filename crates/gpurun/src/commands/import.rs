//! `gpurun import IMAGE -o DIR`: an OCI layout, OCI archive or docker-save
//! archive into a ready bundle (DIR/rootfs and DIR/config.json).
//!
//! A non-root user unpacks inside a user namespace that maps them to root
//! and their subordinate ids to 1.., the same mapping `run --rootfs` and
//! the written config.json use: files owned by other users in the image
//! keep those owners inside the container.

use std::fs;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_gpu::in_root::Rootfs;
use gpurun_image::{Progress, Stats};

use crate::adhoc::{self, AdhocOptions};
use crate::idmap::{map_helpers, UserIds};

pub fn import(image: &Path, output: &Path) -> Result<i32> {
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
    let result = import_into(image, output);
    if result.is_err() {
        // Only what this import made goes.
        let _ = remove_tree(&output.join("rootfs"));
        let _ = fs::remove_file(output.join("config.json"));
        if made_dir {
            let _ = fs::remove_dir(output);
        }
    }
    result.map(|_| 0)
}

fn import_into(image: &Path, output: &Path) -> Result<()> {
    let started = std::time::Instant::now();
    let (store, resolved) = gpurun_image::open(image)?;
    let rootfs = output.join("rootfs");
    fs::create_dir(&rootfs).with_context(|| format!("create {}", rootfs.display()))?;
    let root = nix::unistd::geteuid().is_root();
    let user = (!root).then(UserIds::current);
    eprintln!(
        "importing {} ({}, {} layers) into {}",
        image.display(),
        resolved.format,
        resolved.layers.len(),
        output.display()
    );
    let stats = match &user {
        None => unpack_reporting(&store, &resolved, &rootfs)?,
        Some(user) => unpack_in_user_namespace(user, || {
            let unpacked = unpack_reporting(&store, &resolved, &rootfs);
            if unpacked.is_err() {
                // Files owned by subordinate ids can only go from in here.
                let _ = remove_tree(&rootfs);
            }
            unpacked
        })?,
    };
    write_config(&resolved.config, output, &rootfs, user.as_ref())?;
    eprintln!(
        "imported in {:.1}s: {} files, {} dirs, {} symlinks, {} hard links, {} whiteouts{}{}",
        started.elapsed().as_secs_f64(),
        stats.files,
        stats.dirs,
        stats.symlinks,
        stats.hardlinks,
        stats.whiteouts,
        if stats.skipped_devices > 0 {
            format!(
                ", {} device nodes skipped (no mknod without root)",
                stats.skipped_devices
            )
        } else {
            String::new()
        },
        if stats.unmapped_owners > 0 {
            format!(
                ", {} files keep your ownership (their owners are outside your subordinate ids)",
                stats.unmapped_owners
            )
        } else {
            String::new()
        },
    );
    Ok(())
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

/// Runs `work` in a child process inside a new user namespace where we are
/// root, with our subordinate ids mapped after us; returns what it returned.
fn unpack_in_user_namespace(user: &UserIds, work: impl FnOnce() -> Result<Stats>) -> Result<Stats> {
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};

    let (ready_r, ready_w) = nix::unistd::pipe()?;
    let (go_r, go_w) = nix::unistd::pipe()?;
    let (result_r, result_w) = nix::unistd::pipe()?;
    // SAFETY: import runs no other threads; the child does its work and
    // leaves with _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop((ready_r, go_w, result_r));
            let outcome = (|| -> Result<Stats> {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
                    .context("create a user namespace (see gpurun doctor)")?;
                fs::File::from(ready_w).write_all(b"1")?;
                let mut go = [0u8; 1];
                if fs::File::from(go_r).read(&mut go)? != 1 || go[0] != b'1' {
                    bail!("the id mappings could not be written");
                }
                nix::unistd::setresgid(0.into(), 0.into(), 0.into())
                    .context("become root in the user namespace")?;
                nix::unistd::setresuid(0.into(), 0.into(), 0.into())
                    .context("become root in the user namespace")?;
                work()
            })();
            let (code, text) = match outcome {
                Ok(stats) => (0, serde_json::to_string(&stats).unwrap_or_default()),
                Err(e) => (1, crate::one_line(&e)),
            };
            let _ = fs::File::from(result_w).write_all(text.as_bytes());
            // SAFETY: ends the child without running the parent's exit path.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop((ready_w, go_r, result_w));
            let mut ready = [0u8; 1];
            let unshared = fs::File::from(ready_r).read(&mut ready).unwrap_or(0) == 1;
            let mapped = if unshared {
                write_mappings(child.as_raw() as u32, user)
            } else {
                Ok(())
            };
            let _ = fs::File::from(go_w).write_all(if mapped.is_ok() { b"1" } else { b"0" });
            let mut text = String::new();
            let _ = fs::File::from(result_r).read_to_string(&mut text);
            let status = waitpid(child, None)?;
            mapped?;
            match status {
                WaitStatus::Exited(_, 0) => Ok(serde_json::from_str(&text)?),
                _ if !text.is_empty() => bail!("{text}"),
                other => bail!("the unpacking process ended with {other:?}"),
            }
        }
    }
}

fn write_mappings(pid: u32, user: &UserIds) -> Result<()> {
    let (uids, gids) = user.root_mappings();
    if uids.len() > 1 {
        let (newuidmap, newgidmap) = map_helpers().context("newuidmap is missing")?;
        for (helper, maps) in [(newuidmap, &uids), (newgidmap, &gids)] {
            let mut cmd = std::process::Command::new(&helper);
            cmd.arg(pid.to_string()).env_clear();
            for (c, h, n) in maps.iter() {
                cmd.args([c.to_string(), h.to_string(), n.to_string()]);
            }
            let out = cmd
                .output()
                .with_context(|| format!("run {}", helper.display()))?;
            if !out.status.success() {
                bail!(
                    "{} failed: {}",
                    helper.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
    } else {
        // Our own id alone needs no helper, but setgroups must be denied.
        fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
        fs::write(
            format!("/proc/{pid}/uid_map"),
            format!("0 {} 1\n", user.uid),
        )?;
        fs::write(
            format!("/proc/{pid}/gid_map"),
            format!("0 {} 1\n", user.gid),
        )?;
    }
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
    let c = &config["config"];
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut command = strings(&c["Entrypoint"]);
    command.extend(strings(&c["Cmd"]));
    if command.is_empty() {
        command.push("sh".to_owned());
    }
    let env = strings(&c["Env"]);
    let workdir = c["WorkingDir"].as_str().filter(|w| w.starts_with('/'));
    let spec = adhoc::make_spec(&AdhocOptions {
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
        unpack_in_user_namespace(&UserIds::current(), || {
            remove_tree(&dir).with_context(|| format!("remove {}", dir.display()))?;
            Ok(Stats::default())
        })?;
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
