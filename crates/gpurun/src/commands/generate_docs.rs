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
    // The pages name no `help` subcommand: `--help` is the help.
    let mut pages = without_help_subcommands(Cli::command());
    pages.build();
    write_pages(&man, "gpurun", pages)?;
    let mut cli = Cli::command();
    cli.build();
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

fn without_help_subcommands(cmd: clap::Command) -> clap::Command {
    cmd.disable_help_subcommand(true)
        .mut_subcommands(without_help_subcommands)
}

/// NAME(8), and NAME-SUB(8) for each visible subcommand, nested ones too
/// (gpurun-gpu-info(8)), as runc's pages are in section 8.
fn write_pages(dir: &Path, name: &'static str, cmd: clap::Command) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        // clap names are &'static str; this one-shot command leaks a few.
        let sub_name: &'static str = format!("{name}-{}", sub.get_name()).leak();
        write_pages(dir, sub_name, sub.clone().name(sub_name))?;
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("8")
        .render(&mut out)
        .with_context(|| format!("render {name}(8)"))?;
    out.extend_from_slice(closing_sections(name).as_bytes());
    let path = dir.join(format!("{name}.8"));
    fs::write(&path, out).with_context(|| format!("write {}", path.display()))
}

/// The sections runc's and crun's pages have that clap does not make:
/// all of them on gpurun(8), EXIT STATUS and SEE ALSO on the others.
fn closing_sections(name: &str) -> String {
    let status = exit_status(name);
    if name == "gpurun" {
        return format!("{EXAMPLES}{FILES}{ENVIRONMENT}{status}{SEE_ALSO}");
    }
    format!("{status}.SH \"SEE ALSO\"\n.BR gpurun (8)\n")
}

/// Each page's own EXIT STATUS: what that command exits with (runc's codes
/// where runc has the command: exec's own errors are 255, as runc's).
fn exit_status(name: &str) -> String {
    const ERROR: &str =
        "1 on an error, with one line on standard error, a command line that cannot be parsed included; 3 for a command gpurun has not (runc's statuses).";
    let own = match name {
        "gpurun" => "0 on success. run, exec and restore (without \\-\\-detach) exit with the \
                     container process's own status; exec's own errors are 255; see each command's page.",
        "gpurun-run" | "gpurun-restore" => "The container's own exit status (128+N when signal N ended it); \
                     0 with \\-\\-detach once it runs.",
        "gpurun-exec" => "The process's own exit status (128+N when signal N ended it); 0 with \\-\\-detach \
                     once it runs; 255 when gpurun could not run it (as runc), with one line on standard error.",
        "gpurun-doctor" => "0 when the host can run containers (and GPU containers, with \\-\\-gpu); \
                     1 otherwise, the failing checks marked FAIL.",
        "gpurun-gpu-verify" => "0 when the throwaway container saw exactly the GPUs asked for; 1 otherwise, \
                     the verdict line saying why.",
        "gpurun-gpu-cdi" => "0 when the spec is written or printed, or with \\-\\-check when it is up to date; \
                     1 when \\-\\-check finds it missing or stale.",
        _ => "0 on success.",
    };
    format!(".SH \"EXIT STATUS\"\n{own}\n{ERROR}\n")
}

const EXAMPLES: &str = r#".SH EXAMPLES
.nf
gpurun spec && gpurun run \-\-bundle . demo
gpurun run \-\-rootfs DIR \-\-gpus 0 \-\- nvidia\-smi
gpurun setup containerd
gpurun gpu plan \-\-gpus all BUNDLE
gpurun doctor \-\-gpu
.fi
"#;

const FILES: &str = r#".SH FILES
.TP
.I /run/gpurun
State of root's containers (a user's: \fI$XDG_RUNTIME_DIR/gpurun\fR, else \fI/tmp/gpurun\-UID\fR).
.TP
.I /etc/gpurun/config.toml
Driver locations and GPU policy; a user's own file is \fI~/.config/gpurun/config.toml\fR.
.TP
.I /etc/cdi, /var/run/cdi
CDI specs, from which CDI device names are resolved.
"#;

const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
.B GPURUN_CONFIG
The one config file to read instead of the defaults.
.TP
.B GPURUN_DRIVER_ROOT, GPURUN_DEV_ROOT, GPURUN_PROC_ROOT
Where the driver's files, the device nodes and procfs are (as the flags).
.TP
.B NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*
Read from the container's own environment: the GPUs it asks for.
"#;

const SEE_ALSO: &str = r#".SH "SEE ALSO"
.BR gpurun\-run (8),
.BR gpurun\-gpu (8),
.BR gpurun\-doctor (8),
.BR runc (8)
"#;
