use anyhow::Result;
use libcontainer::container::ContainerStatus;
use liboci_cli::State;
use serde_json::json;

use crate::runtime::{context::Ctx, state::containers};

/// Prints the container's state as runc does: the OCI state with rootfs,
/// created and owner.
pub fn state(ctx: &Ctx, args: State) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    containers::refresh_status(&mut container, &ctx.root)?;
    let status = containers::status_name(&container);
    let state = &container.state;
    // runc's fields, in its order; `owner` is left empty, as runc's
    // `state` leaves it (`list` fills it).
    let mut out = json!({
        "ociVersion": state.oci_version,
        "id": state.id,
        // A stopped container has no process, so no pid (runc prints 0).
        "pid": if state.status == ContainerStatus::Stopped { 0 } else { state.pid.unwrap_or(0) },
        "status": status,
        "bundle": state.bundle,
        "rootfs": containers::rootfs(&container),
        "created": state.created,
        "owner": "",
    });
    if let Some(annotations) = state.annotations.as_ref().filter(|a| !a.is_empty()) {
        out["annotations"] = json!(annotations);
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
