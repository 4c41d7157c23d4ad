use std::fs;

use anyhow::{bail, Result};
use libcontainer::container::Container;
use serde_json::json;

use crate::{containers, Ctx};

/// runc's list flags: `-f`/`--format` and `-q`/`--quiet` (liboci-cli's
/// lacks `-f`, which runc users type).
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Output format: table or json
    #[arg(short, long, default_value = "table")]
    pub format: String,
    /// Only display container IDs
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn list(ctx: &Ctx, args: ListArgs) -> Result<()> {
    let mut found = Vec::new();
    for entry in fs::read_dir(&ctx.root)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if containers::validate_id(&name).is_err() || !containers::exists(&ctx.root, &name) {
            continue;
        }
        if let Ok(mut container) = Container::load(entry.path()) {
            let _ = container.refresh_status();
            found.push(container);
        }
    }
    found.sort_by(|a, b| a.id().cmp(b.id()));
    if args.quiet {
        for c in &found {
            println!("{}", c.id());
        }
        return Ok(());
    }
    match args.format.as_str() {
        "json" => {
            let list: Vec<_> = found
                .iter()
                .map(|c| {
                    let mut entry = json!({
                        "ociVersion": c.state.oci_version,
                        "id": c.id(),
                        "pid": c.pid().map(|p| p.as_raw()).unwrap_or(0),
                        "status": containers::status_name(c),
                        "bundle": c.bundle(),
                        "rootfs": containers::rootfs(c),
                        "created": c.created(),
                        "owner": c.creator().map(|o| o.to_string_lossy().into_owned()).unwrap_or_default(),
                    });
                    // runc omits empty annotations.
                    if let Some(a) = c.state.annotations.as_ref().filter(|a| !a.is_empty()) {
                        entry["annotations"] = json!(a);
                    }
                    entry
                })
                .collect();
            println!("{}", serde_json::to_string(&list)?);
        }
        "table" => {
            println!(
                "{:<24} {:>8} {:<8} {:<40} CREATED",
                "ID", "PID", "STATUS", "BUNDLE"
            );
            for c in &found {
                println!(
                    "{:<24} {:>8} {:<8} {:<40} {}",
                    c.id(),
                    c.pid().map(|p| p.as_raw()).unwrap_or(0),
                    containers::status_name(c),
                    c.bundle().display(),
                    c.created().map(|t| t.to_rfc3339()).unwrap_or_default()
                );
            }
        }
        other => bail!("unknown list format {other:?}: use table or json"),
    }
    Ok(())
}
