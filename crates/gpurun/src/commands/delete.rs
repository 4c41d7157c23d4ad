use std::fs;

use anyhow::{Context, Result};
use libcontainer::container::ContainerStatus;
use liboci_cli::Delete;

use crate::runtime::{context::Ctx, state::containers};

pub fn delete(ctx: &Ctx, args: Delete) -> Result<()> {
    let id = &args.container_id;
    containers::validate_id(id)?;
    let state_dir = containers::state_dir(&ctx.root, id);
    // A forced delete holds the id's working directory, as a create
    // does, for as long as it works: no create of the id can begin under
    // it, and no other delete can remove the directory of a container
    // created after this one read its state. A live create is waited for
    // (as root, what it made in the container's cgroup is killed).
    if args.force && !ctx.root.is_dir() {
        return Ok(()); // nothing was ever made here
    }
    let _held = if args.force {
        Some(containers::hold_id(&ctx.root, id)?)
    } else {
        None
    };
    if args.force && !containers::exists(&ctx.root, id) {
        // What a create killed halfway may have left: a state directory
        // without state.
        if state_dir.is_dir() {
            fs::remove_dir_all(&state_dir)
                .with_context(|| format!("remove {}", state_dir.display()))?;
        }
        // And processes that outlived the state in the container's default
        // cgroup, as runc takes a container down from its cgroup path.
        if crate::runtime::protect::privilege::is_host_root() && !ctx.settings.systemd_cgroup {
            let killed = crate::runtime::cgroups::host::remove_orphaned_default(id);
            if killed > 0 {
                tracing::warn!(
                    "container {id:?} had no state but {killed} processes in its cgroup: killed"
                );
            }
        }
        remove_image_holder(&ctx.root, id);
        return Ok(());
    }
    // Execs under way finish starting their processes first, so that the
    // delete below finds them in the cgroup and takes them down too.
    let _locked = containers::lock_for_delete(&ctx.root, id);
    // For a missing container, this is the "does not exist" error.
    let mut container = containers::load(&ctx.root, id)?;
    containers::refresh_status(&mut container, &ctx.root)?;
    let status = container.status();
    if !args.force && status == ContainerStatus::Creating {
        anyhow::bail!(
            "container {id:?} is being created: wait for it, or use \"gpurun delete --force {id}\""
        );
    }
    if !args.force && matches!(status, ContainerStatus::Running | ContainerStatus::Paused) {
        anyhow::bail!(
            "container {id:?} is {}: stop it first (\"gpurun kill {id}\"), or use \"gpurun delete --force {id}\"",
            containers::status_name(&container)
        );
    }
    containers::delete(&mut container, args.force)
        .with_context(|| format!("delete container {id:?}"))?;
    remove_image_holder(&ctx.root, id);
    Ok(())
}

/// What a killed `run --image` left: root's empty mount-point directory
/// (its mounts went with its mount namespace), a user's FUSE mounts.
fn remove_image_holder(root: &std::path::Path, id: &str) {
    crate::runtime::squashfs::release(root, id);
}
