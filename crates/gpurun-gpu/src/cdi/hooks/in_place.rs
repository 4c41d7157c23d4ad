//! `gpurun cdi-hook`: the same work in place, for runc and crun.

use super::*;

/// `gpurun cdi-hook`: the same work in place, in the rootfs whose mounts
/// are already made (runc and crun run createContainer hooks in the
/// container's mount namespace before pivot_root). Writes what the
/// toolkit's hook writes: the links, `/etc/ld.so.cache`, the
/// `ld.so.conf.d` files, the application profile; every path resolved
/// inside the root.
pub fn run_in_place(op: &Op, spec: &Spec, root: &Rootfs, host: &HostFacts) -> Result<Vec<String>> {
    const COMPAT_CONF: &str = "/etc/ld.so.conf.d/00-compat-gpurun.conf";
    const FOLDERS_CONF: &str = "/etc/ld.so.conf.d/00-nvcr-gpurun.conf";
    let mut ops = vec![op.clone()];
    if let Op::UpdateLdcache { .. } = op {
        // enable-cuda-compat ran as a process of its own before: its
        // folder is in the conf file it wrote.
        if let Ok(text) = root.read(Path::new(COMPAT_CONF), 1 << 16) {
            let compat: Vec<PathBuf> = String::from_utf8_lossy(&text)
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with('/'))
                .map(PathBuf::from)
                .collect();
            if let Op::UpdateLdcache { folders } = &mut ops[0] {
                let mut all = compat;
                all.extend(folders.iter().cloned());
                *folders = all;
            }
        }
    }
    let plan = plan(&ops, spec, root, host, true);
    let mut done = plan.done.clone();
    for l in &plan.links {
        root.symlink_in(&l.target, &l.link)
            .with_context(|| format!("create the link {}", l.link.display()))?;
    }
    match op {
        Op::EnableCudaCompat { .. } => {
            if let Some(dir) = plan.folders.first() {
                root.write_in(
                    Path::new(COMPAT_CONF),
                    format!("{}\n", dir.display()).as_bytes(),
                    0o644,
                )?;
            }
        }
        Op::UpdateLdcache { folders } if !plan.ldcache.is_empty() => {
            let image = root
                .read(Path::new("/etc/ld.so.cache"), MAX_IMAGE_LDCACHE)
                .ok()
                .and_then(|b| ldcache::parse(&b).ok())
                .unwrap_or_default();
            let text: String = folders
                .iter()
                .map(|f| format!("{}\n", in_container(f).display()))
                .collect();
            root.write_in(Path::new(FOLDERS_CONF), text.as_bytes(), 0o644)?;
            root.write_in(
                Path::new("/etc/ld.so.cache"),
                &ldcache::write(&ldcache::merge(image, &plan.ldcache)),
                0o644,
            )?;
            if let Some(musl) = &plan.musl_path {
                root.write_in(&musl.file, musl.text().as_bytes(), 0o644)?;
            }
        }
        Op::UpdateApplicationProfile => {
            if let Some(profile) = &plan.application_profile {
                root.create_dir_all_in(Path::new(APPLICATION_PROFILE).parent().unwrap(), 0o555)?;
                root.write_in(Path::new(APPLICATION_PROFILE), profile.as_bytes(), 0o444)?;
            }
        }
        Op::Chmod { .. } => {
            for (path, mode) in &plan.device_modes {
                match root.chmod_in(path, *mode) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
                    Err(e) => return Err(e).with_context(|| format!("chmod {}", path.display())),
                }
            }
        }
        Op::DisableDeviceNodeModification if plan.params.is_some() => {
            done.push("disable-device-node-modification: not done by gpurun cdi-hook (run the container with gpurun to have it)".into());
        }
        _ => {}
    }
    done.extend(plan.skipped);
    Ok(done)
}
