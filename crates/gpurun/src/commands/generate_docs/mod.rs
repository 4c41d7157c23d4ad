//! `gpurun generate-docs DIR` (hidden): man pages and shell completions
//! from the clap definitions, so that what is packaged cannot drift from
//! what the binary takes.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

mod pages;

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
    let page = render_page(name, cmd).with_context(|| format!("render {name}(8)"))?;
    let path = dir.join(format!("{name}.8"));
    fs::write(&path, page).with_context(|| format!("write {}", path.display()))
}

/// clap's sections, with a SYNOPSIS of the command's own flags (the global
/// ones apart, as runc's pages have them) and the sections clap lacks.
fn render_page(name: &str, cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let text = pages::page_text(name);
    let man = clap_mangen::Man::new(cmd.clone()).section("8");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    out.extend_from_slice(synopsis(name, &cmd)?.as_bytes());
    man.render_description_section(&mut out)?;
    out.extend_from_slice(paragraphs(text.description).as_bytes());
    man.render_options_section(&mut out)?;
    if cmd.get_subcommands().any(|c| !c.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    out.extend_from_slice(examples(text.examples).as_bytes());
    if name == "gpurun" {
        out.extend_from_slice(format!("{FILES}{ENVIRONMENT}").as_bytes());
    }
    let status = roff_escape(&pages::exit_status(name));
    out.extend_from_slice(format!(".SH \"EXIT STATUS\"\n{status}\n").as_bytes());
    out.extend_from_slice(see_also(name).as_bytes());
    Ok(out)
}

/// "gpurun [GLOBAL FLAGS] run [flags of run] ARGS": clap's synopsis of a
/// copy whose global flags are hidden, under the words that reach it.
fn synopsis(name: &str, cmd: &clap::Command) -> std::io::Result<String> {
    if name == "gpurun" {
        return Ok(
            ".SH SYNOPSIS\n\\fBgpurun\\fR [\\fIGLOBAL FLAGS\\fR] \\fICOMMAND\\fR \
                   [\\fIOPTIONS\\fR] [\\fIARGS\\fR]\n.br\n\\fBgpurun\\fR \
                   \\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR\n"
                .to_owned(),
        );
    }
    let own = cmd
        .clone()
        .mut_args(|a| if is_global(&a) { a.hide(true) } else { a });
    let mut out = Vec::new();
    clap_mangen::Man::new(own).render_synopsis_section(&mut out)?;
    let roff = String::from_utf8_lossy(&out).into_owned();
    let bin = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_owned();
    let command = roff_escape(bin.strip_prefix("gpurun ").unwrap_or(&bin));
    Ok(roff.replacen(
        &format!("\\fB{}\\fR", roff_escape(&bin)),
        &format!("\\fBgpurun\\fR [\\fIGLOBAL FLAGS\\fR] \\fB{command}\\fR"),
        1,
    ))
}

fn is_global(arg: &clap::Arg) -> bool {
    arg.is_global_set() || arg.get_help_heading() == Some(crate::cli::GLOBAL)
}

/// Paragraphs of plain text as roff, parted where the text has blank lines.
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .map(|p| format!(".PP\n{}\n", roff_escape(&p.replace('\n', " "))))
        .collect()
}

fn examples(examples: &[(&str, &str)]) -> String {
    if examples.is_empty() {
        return String::new();
    }
    let mut out = String::from(".SH EXAMPLES\n");
    for (what, line) in examples {
        out += &format!(
            ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
            roff_escape(what),
            roff_escape(line)
        );
    }
    out
}

fn see_also(name: &str) -> String {
    if name == "gpurun" {
        return SEE_ALSO.to_owned();
    }
    ".SH \"SEE ALSO\"\n.BR gpurun (8)\n".to_owned()
}

/// Text as roff takes it: backslashes and hyphens escaped, and no line
/// starting with a control character.
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

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
