//! The plan as spec edits that libcontainer carries out in the
//! container's init.

use super::*;

/// What [`apply`] did, for `--debug`.
#[derive(Debug, Default, Serialize)]
pub struct Done {
    pub hooks: Vec<String>,
    pub plan: HookPlan,
}

/// chmod's modes on the spec's own device entries.
pub(super) fn set_device_modes(spec: &mut Spec, modes: &[(PathBuf, u32)]) {
    let Some(devices) = spec
        .linux_mut()
        .as_mut()
        .and_then(|l| l.devices_mut().as_mut())
    else {
        return;
    };
    for (path, mode) in modes {
        for d in devices.iter_mut().filter(|d| d.path() == path) {
            d.set_file_mode(Some(*mode));
        }
    }
}

/// The planned links not made in the private layer (`linked`): none on a
/// mount the spec makes or over an image's file; the others in the
/// image's own writable layer (an engine's container layer, or a folder
/// right under /), as the toolkit makes them, resolved inside the root.
pub(super) fn make_links(
    root: &Rootfs,
    spec: &Spec,
    linked: &[PathBuf],
    plan: &mut HookPlan,
) -> Result<()> {
    let covered = |p: &Path| {
        spec.mounts()
            .iter()
            .flatten()
            .filter(|m| m.typ().as_deref() != Some("overlay"))
            .any(|m| p.starts_with(m.destination()) && m.destination() != Path::new("/"))
    };
    for l in &plan.links {
        if linked.contains(&l.link) {
            continue;
        }
        if covered(&l.link) {
            plan.skipped.push(format!(
                "link {}: on a mount the spec makes, not in the image",
                l.link.display()
            ));
            continue;
        }
        if root.file_type(&l.link).is_ok_and(|t| !t.is_symlink()) {
            plan.skipped.push(format!(
                "link {}: the image has a file there, kept",
                l.link.display()
            ));
            continue;
        }
        root.symlink_in(&l.target, &l.link).with_context(|| {
            format!(
                "create the link {} -> {} in the container",
                l.link.display(),
                l.target.display()
            )
        })?;
    }
    Ok(())
}

/// Carries out the NVIDIA CDI hooks in `spec` natively: removes them and
/// adds the edits that do their work (see the module's text). Returns
/// `None` where the spec has none.
pub fn apply(
    spec: &mut Spec,
    rootfs: &Path,
    shared: &Path,
    host: &HostFacts,
) -> Result<Option<Done>> {
    let ops = take(spec)?;
    if ops.is_empty() {
        return Ok(None);
    }
    let root = Rootfs::open(rootfs).with_context(|| format!("open rootfs {}", rootfs.display()))?;
    let mut plan = plan(&ops, spec, &root, host, false);
    let mut mounts: Vec<Mount> = Vec::new();
    let mut applied = Applied::default();
    if !plan.ldcache.is_empty() {
        mounts.push(spec_apply::linker_cache_bind(
            &plan.ldcache,
            rootfs,
            shared,
            &mut applied,
        )?);
    }
    if let Some(musl) = &plan.musl_path {
        mounts.push(spec_apply::shared_file_bind(
            shared,
            &musl.text(),
            &musl.file,
        )?);
    }
    for (text, destination) in [
        (&plan.params, PARAMS),
        (&plan.application_profile, APPLICATION_PROFILE),
    ] {
        if let Some(text) = text {
            mounts.push(spec_apply::shared_file_bind(
                shared,
                text,
                Path::new(destination),
            )?);
        }
    }
    set_device_modes(spec, &plan.device_modes);

    // Links already in the image as wanted need nothing.
    plan.links
        .retain(|l| root.read_link(&l.link).ok().flatten().as_ref() != Some(&l.target));
    // The links, and mount points for the spec's driver binds in the same
    // folders (a read-only root could not take them), in the private layer.
    let mut extra: Vec<Needed> = plan
        .links
        .iter()
        .map(|l| Needed {
            destination: l.link.clone(),
            entry: LayerEntry::Link(l.target.clone()),
        })
        .collect();
    let spec_mounts: Vec<Mount> = spec.mounts().clone().unwrap_or_default();
    // The spec's own file binds (the driver's files, at paths the image
    // lacks) get their mount points there too, as gpurun's own injected
    // files do: the image is not changed, and a read-only one needs none.
    extra.extend(file_binds(spec).into_iter().map(|(dest, _)| Needed {
        destination: dest,
        entry: LayerEntry::File,
    }));
    let (all, provided) = spec_apply::with_mount_points_and(
        spec,
        spec_mounts,
        mounts,
        extra,
        rootfs,
        shared,
        &mut applied,
    )?;
    spec.set_mounts(Some(all));
    plan.done.push(format!(
        "mount points: {} ({} overlays)",
        provided.how,
        provided.overlays.len()
    ));
    make_links(&root, spec, &provided.linked, &mut plan)?;
    Ok(Some(Done {
        hooks: ops.iter().map(|o| o.name().to_owned()).collect(),
        plan,
    }))
}
