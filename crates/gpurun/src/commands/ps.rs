use std::fs;

use anyhow::{bail, Result};
use libcgroups::common::CgroupManager;
use liboci_cli::Ps;

use crate::runtime::cgroups;
use crate::runtime::{context::Ctx, state::containers};

/// Lists the container's processes from its cgroup: `--format json` gives
/// the pids; the table is the host's `ps` (default `-ef`, or the options
/// given after the id) with only the container's rows, as runc prints it.
pub fn ps(ctx: &Ctx, args: Ps) -> Result<()> {
    let container = containers::load(&ctx.root, &args.container_id)?;
    let mut pids: Vec<i32> = if cgroups::container::has_cgroup(&container) {
        let manager = cgroups::container::manager(&container)?;
        manager.get_all_pids()?.iter().map(|p| p.as_raw()).collect()
    } else {
        container.pid().map(|p| p.as_raw()).into_iter().collect()
    };
    pids.sort_unstable();
    match args.format.as_str() {
        "json" => println!("{}", serde_json::to_string(&pids)?),
        "table" => print_table(&pids, &args.ps_options)?,
        other => bail!("unknown ps format {other:?}: use table or json"),
    }
    Ok(())
}

/// runc's table: `ps OPTIONS` run with gpurun's own environment (nothing
/// of the container's), its header, and the rows whose PID column is one
/// of `pids`. Where `ps` cannot run, pid and command line from /proc.
fn print_table(pids: &[i32], options: &[String]) -> Result<()> {
    let options: Vec<&str> = if options.is_empty() {
        vec!["-ef"]
    } else {
        options.iter().map(String::as_str).collect()
    };
    let output = match std::process::Command::new("ps").args(&options).output() {
        Ok(output) => output,
        Err(_) => {
            println!("{:>8}  CMD", "PID");
            for pid in pids {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                println!("{pid:>8}  {}", cmd.trim_end());
            }
            return Ok(());
        }
    };
    if !output.status.success() {
        bail!(
            "ps {}: {}",
            options.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let Some(pid_column) = header.split_whitespace().position(|f| f == "PID") else {
        bail!(
            "ps {}: no PID column in its output: add pid to the fields",
            options.join(" ")
        );
    };
    println!("{header}");
    for line in lines {
        let pid = line
            .split_whitespace()
            .nth(pid_column)
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| pids.contains(&p)) {
            println!("{line}");
        }
    }
    Ok(())
}
