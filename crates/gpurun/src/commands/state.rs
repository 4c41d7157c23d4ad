use anyhow::Result;
use libcontainer::container::ContainerStatus;
use liboci_cli::State;
use serde_json::json;

use crate::{containers, Ctx};

/// Prints the OCI state: ociVersion, id, status, pid, bundle, annotations.
pub fn state(ctx: &Ctx, args: State) -> Result<()> {
    let mut container = containers::load(&ctx.root, &args.container_id)?;
    container.refresh_status()?;
    let status = containers::status_name(&container);
    let state = &container.state;
    let mut out = json!({
        "ociVersion": state.oci_version,
        "id": state.id,
        "status": status,
        "bundle": state.bundle,
    });
    // A stopped container has no process, so no pid (as runc prints it: 0).
    out["pid"] = json!(if state.status == ContainerStatus::Stopped {
        0
    } else {
        state.pid.unwrap_or(0)
    });
    if let Some(annotations) = &state.annotations {
        out["annotations"] = json!(annotations);
    }
    if let Some(created) = &state.created {
        out["created"] = json!(created);
    }
    if let Some(owner) = state.creator {
        out["owner"] = json!(owner.to_string());
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
