use std::fs;

use anyhow::{bail, Result};
use libcgroups::common::CgroupManager;
use liboci_cli::Ps;

use crate::{containers, Ctx};

/// Lists the container's processes from its cgroup: `--format json` gives
/// the pids, the table gives pid and command line, read from /proc.
pub fn ps(ctx: &Ctx, args: Ps) -> Result<()> {
    let container = containers::load(&ctx.root, &args.container_id)?;
    let mut pids: Vec<i32> = if containers::has_cgroup(&container) {
        let manager = containers::cgroup_manager(&container)?;
        manager.get_all_pids()?.iter().map(|p| p.as_raw()).collect()
    } else {
        container.pid().map(|p| p.as_raw()).into_iter().collect()
    };
    pids.sort_unstable();
    match args.format.as_str() {
        "json" => println!("{}", serde_json::to_string(&pids)?),
        "table" => {
            println!("{:>8}  CMD", "PID");
            for pid in pids {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                println!("{pid:>8}  {}", cmd.trim_end());
            }
        }
        other => bail!("unknown ps format {other:?}: use table or json"),
    }
    Ok(())
}
