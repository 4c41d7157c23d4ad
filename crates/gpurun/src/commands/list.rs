use std::fs;

use anyhow::{bail, Context, Result};
use libcontainer::container::Container;
use serde_json::json;

use crate::cli::ListArgs;
use crate::runtime::{context::Ctx, state::containers};

pub fn list(ctx: &Ctx, args: ListArgs) -> Result<()> {
    let mut found = Vec::new();
    let entries: Vec<fs::DirEntry> = match fs::read_dir(&ctx.root) {
        Ok(entries) => entries.flatten().collect(),
        // A state root not made yet holds no container, as runc lists it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("read the state root {}", ctx.root.display()))
        }
    };
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if containers::validate_id(&name).is_err() || !containers::exists(&ctx.root, &name) {
            continue;
        }
        if let Ok(mut container) = Container::load(entry.path()) {
            let _ = containers::refresh_status(&mut container, &ctx.root);
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
                        "pid": listed_pid(c),
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
            // runc (Go) marshals an empty list as null.
            if list.is_empty() {
                println!("null");
            } else {
                println!("{}", serde_json::to_string(&list)?);
            }
        }
        "table" => {
            let mut rows =
                vec![["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"].map(String::from)];
            for c in &found {
                rows.push([
                    c.id().to_owned(),
                    listed_pid(c).to_string(),
                    containers::status_name(c),
                    c.bundle().display().to_string(),
                    c.created().map(go_rfc3339_nano).unwrap_or_default(),
                    owner_name(c),
                ]);
            }
            print!("{}", tabulate(&rows));
        }
        other => bail!("unknown list format {other:?}: use table or json"),
    }
    Ok(())
}

/// The init's pid, or 0 for a stopped container, as runc lists it.
fn listed_pid(c: &Container) -> i32 {
    match containers::status_name(c).as_str() {
        "stopped" => 0,
        _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
    }
}

/// The creator's user name, or `#UID` where it has none (runc's OWNER).
fn owner_name(c: &Container) -> String {
    let Some(uid) = c.state.creator else {
        return String::new();
    };
    nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map_or_else(|| format!("#{uid}"), |u| u.name)
}

/// Go's `time.RFC3339Nano`: nanoseconds without trailing zeros, `Z` for UTC.
fn go_rfc3339_nano(t: chrono::DateTime<chrono::Utc>) -> String {
    let text = t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let (stamp, _) = text.split_once('Z').unwrap_or((&text, ""));
    let stamp = match stamp.split_once('.') {
        Some((seconds, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                seconds.to_owned()
            } else {
                format!("{seconds}.{fraction}")
            }
        }
        None => stamp.to_owned(),
    };
    format!("{stamp}Z")
}

/// The table as runc's tabwriter lays it out (minimum width 12, padding 3,
/// spaces; the last column unpadded).
fn tabulate(rows: &[[String; 6]]) -> String {
    let mut widths = [0usize; 6];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max((cell.chars().count() + 3).max(12));
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}", width = widths[i]));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_go_rfc3339_nano() {
        use chrono::TimeZone;
        let t = chrono::Utc
            .timestamp_opt(1_700_000_000, 120_000_000)
            .unwrap();
        assert_eq!(go_rfc3339_nano(t), "2023-11-14T22:13:20.12Z");
        let t = chrono::Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        assert_eq!(go_rfc3339_nano(t), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn columns_are_laid_out_as_tabwriter_does() {
        let rows = [
            ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"].map(String::from),
            ["a-long-container-id", "1", "running", "/b", "t", "root"].map(String::from),
        ];
        assert_eq!(
            tabulate(&rows),
            "ID                    PID         STATUS      BUNDLE      CREATED     OWNER\n\
             a-long-container-id   1           running     /b          t           root\n"
        );
    }
}
