use std::fs;

use anyhow::{Context, Result};
use libcontainer::container::ContainerStatus;
use libcontainer::signal::Signal;
use liboci_cli::Delete;

use crate::runtime::{containers, context::Ctx};

pub fn delete(ctx: &Ctx, args: Delete) -> Result<()> {
    let id = &args.container_id;
    containers::validate_id(id)?;
    let state_dir = containers::state_dir(&ctx.root, id);
    let creating = containers::creating_dir(&ctx.root, id);
    if args.force && !containers::exists(&ctx.root, id) {
        // What a create killed halfway may have left: its working copy and
        // a state directory without state.
        let _ = fs::remove_dir_all(&creating);
        if state_dir.is_dir() {
            fs::remove_dir_all(&state_dir)
                .with_context(|| format!("remove {}", state_dir.display()))?;
        }
        return Ok(());
    }
    // For a missing container, this is the "does not exist" error.
    let mut container = containers::load(&ctx.root, id)?;
    if args.force && creating.is_dir() {
        // A create of this id is under way or was killed halfway (its
        // working directory outlives only an unfinished create). Before
        // the status is read: libcontainer calls a container without an
        // init pid "stopped", even while its intermediate process lives.
        containers::stop_killed_create(&container, &creating);
    }
    container.refresh_status()?;
    let status = container.status();
    if !args.force && matches!(status, ContainerStatus::Running | ContainerStatus::Paused) {
        anyhow::bail!(
            "container {id:?} is {}: stop it first (\"gpurun kill {id}\"), or use \"gpurun delete --force {id}\"",
            containers::status_name(&container)
        );
    }
    if args.force && status != ContainerStatus::Stopped && !containers::has_cgroup(&container) {
        // Without a cgroup, killing init (and its pid namespace) is how a
        // rootless container is stopped.
        let _ = container.kill(Signal::try_from("KILL").expect("valid"), false);
        containers::wait_gone(&container);
    }
    containers::delete(&mut container, args.force)
        .with_context(|| format!("delete container {id:?}"))?;
    let _ = fs::remove_dir_all(&creating);
    Ok(())
}
