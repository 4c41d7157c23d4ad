//! `gpurun generate-docs DIR` (hidden): man pages and shell completions
//! from the clap definitions, so that what is packaged cannot drift from
//! what the binary takes.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

pub fn generate_docs(dir: &Path) -> Result<()> {
    let man = dir.join("man");
    let completions = dir.join("completions");
    for d in [&man, &completions] {
        fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let mut cli = Cli::command();
    cli.build();
    // gpurun(8) and gpurun-COMMAND(8), as runc's pages are in section 8.
    write_page(&man, "gpurun", cli.clone())?;
    for sub in cli
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
    {
        // clap names are &'static str; this one-shot command leaks a few.
        let name: &'static str = format!("gpurun-{}", sub.get_name()).leak();
        write_page(&man, name, sub.clone().name(name))?;
    }
    for (shell, file) in [
        (Shell::Bash, "gpurun.bash"),
        (Shell::Zsh, "_gpurun"),
        (Shell::Fish, "gpurun.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cli.clone(), "gpurun", &mut out);
        let path = completions.join(file);
        fs::write(&path, out).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

fn write_page(dir: &Path, name: &str, cmd: clap::Command) -> Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("8")
        .render(&mut out)
        .with_context(|| format!("render {name}(8)"))?;
    let path = dir.join(format!("{name}.8"));
    fs::write(&path, out).with_context(|| format!("write {}", path.display()))
}
