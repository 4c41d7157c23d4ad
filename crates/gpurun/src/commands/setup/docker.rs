//! Docker's daemon.json and the toolkit hook's name on dockerd's PATH.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gpurun_gpu::request::DOCKER_HOOK;

/// Docker's daemon.json: `runtimes.<name>.path`.
pub fn edit_docker(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut config: serde_json::Value = if text.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(text).context("daemon.json is not valid JSON")?
    };
    let object = config
        .as_object_mut()
        .context("daemon.json is not a JSON object")?;
    let runtimes = object
        .entry("runtimes")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .context("\"runtimes\" in daemon.json is not an object")?;
    let entry = runtimes
        .entry(name)
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .with_context(|| format!("runtimes.{name} in daemon.json is not an object"))?;
    entry.insert("path".into(), binary.into());
    if default {
        object.insert("default-runtime".into(), name.into());
    }
    Ok(serde_json::to_string_pretty(&config)? + "\n")
}

/// Where the hook link goes: `--hook-dir`, else the binary's directory.
pub fn hook_dir(flag: Option<&Path>, binary: &Path) -> Result<PathBuf> {
    match flag {
        Some(dir) => Ok(dir.to_path_buf()),
        None => Ok(binary
            .parent()
            .context("the binary has no directory")?
            .to_path_buf()),
    }
}

/// Whether `link` is gpurun's hook link: a symlink to `binary`.
fn is_our_link(link: &Path, binary: &Path) -> bool {
    fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink())
        && fs::read_link(link).is_ok_and(|target| target == binary)
}

/// A link to some gpurun (another install's setup made it).
fn is_a_gpurun_link(link: &Path) -> bool {
    fs::read_link(link).is_ok_and(|target| target.file_name().is_some_and(|n| n == "gpurun"))
}

/// The NVIDIA Container Toolkit's own hook, where one is installed: an
/// executable of the hook's name on PATH or in the directories packages
/// put it in, that is not gpurun's link.
fn installed_toolkit_hook(binary: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(DOCKER_HOOK))
        .find(|hook| hook.is_file() && !is_our_link(hook, binary) && !is_a_gpurun_link(hook))
}

/// Docker's `--gpus` needs an executable of the toolkit hook's name on
/// dockerd's PATH; gpurun's is a link to itself that refuses to run as a
/// hook (see main.rs), since gpurun does the work as the runtime. Where the
/// toolkit's hook is installed no link is made: dockerd could find gpurun's
/// first, and `--gpus` under runc or the toolkit's runtime would then fail.
pub fn install_hook_link(dir: &Path, binary: &Path, dry_run: bool) -> Result<()> {
    let link = dir.join(DOCKER_HOOK);
    if is_our_link(&link, binary) {
        println!("{} already links to {}", link.display(), binary.display());
        return Ok(());
    }
    if let Some(toolkit) = installed_toolkit_hook(binary) {
        println!(
            "the NVIDIA Container Toolkit's {} is installed: no link made beside it (dockerd accepts --gpus through it; \
             under --runtime=gpurun gpurun drops that hook and injects the GPUs itself)",
            toolkit.display()
        );
        return Ok(());
    }
    match fs::symlink_metadata(&link) {
        Ok(m) if !m.file_type().is_symlink() => {
            println!(
                "{} exists and is not gpurun's link (the NVIDIA Container Toolkit?): left alone; gpurun drops that hook from specs it runs",
                link.display()
            );
            return Ok(());
        }
        _ => {}
    }
    if dry_run {
        println!("would link {} to {}", link.display(), binary.display());
        return Ok(());
    }
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(binary, &link)
        .with_context(|| format!("link {}", link.display()))?;
    println!(
        "linked {} to {} (dockerd must find it on its PATH to accept --gpus)",
        link.display(),
        binary.display()
    );
    Ok(())
}

/// `setup docker --undo`: removes the hook link in `dir` if it is gpurun's;
/// anything else there is left alone.
/// Whether there was a link of ours to remove.
pub fn remove_hook_link(dir: &Path, binary: &Path, dry_run: bool) -> Result<bool> {
    let link = dir.join(DOCKER_HOOK);
    if !is_our_link(&link, binary) {
        return Ok(false);
    }
    if !dry_run {
        fs::remove_file(&link).with_context(|| format!("remove {}", link.display()))?;
        println!("removed the hook link {}", link.display());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/usr/local/bin/gpurun";

    #[test]
    fn docker_keeps_other_settings_and_is_idempotent() {
        let old = r#"{"data-root": "/srv/docker", "runtimes": {"other": {"path": "/bin/other"}}}"#;
        let new = edit_docker(old, "gpurun", BIN, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&new).unwrap();
        assert_eq!(v["data-root"], "/srv/docker");
        assert_eq!(v["runtimes"]["other"]["path"], "/bin/other");
        assert_eq!(v["runtimes"]["gpurun"]["path"], BIN);
        assert_eq!(v["default-runtime"], "gpurun");
        // Keys keep their order.
        assert!(new.find("data-root").unwrap() < new.find("runtimes").unwrap());
        assert_eq!(edit_docker(&new, "gpurun", BIN, true).unwrap(), new);
        assert!(edit_docker("[1]", "gpurun", BIN, false).is_err());
        assert!(edit_docker("{", "gpurun", BIN, false).is_err());
    }
}
