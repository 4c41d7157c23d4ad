//! The command line of the commands engines call many times a second,
//! parsed against a command of its own: the global flags and that one
//! subcommand. Building every subcommand's arguments (clap's derive does
//! it before parsing) cost about a millisecond of each `state`, `start`,
//! `kill` or `delete`. Anything the lean command cannot parse, and every
//! request for help, goes to the whole command line, so that errors,
//! suggestions and help read as they always did.

use std::ffi::OsString;

use clap::{Args, Command, CommandFactory, FromArgMatches};

use super::{go_flags, Cli, ExecArgs, KillArgs, RunArgs};

/// Adds a subcommand's arguments to its command (`Args::augment_args`).
type Augment = fn(Command) -> Command;

/// The subcommands with a lean command: each a variant holding one
/// `Args` type, whose arguments are those the whole command gives it.
const LEAN: [(&str, Augment); 8] = [
    ("create", liboci_cli::Create::augment_args),
    ("start", liboci_cli::Start::augment_args),
    ("run", RunArgs::augment_args),
    ("state", liboci_cli::State::augment_args),
    ("kill", KillArgs::augment_args),
    ("delete", liboci_cli::Delete::augment_args),
    ("exec", ExecArgs::augment_args),
    ("ps", liboci_cli::Ps::augment_args),
];

/// Parses the command line (without the program's name), as clap's
/// `get_matches_from` on `Cli::command()` would, exiting on an error.
pub fn parse(program: OsString, args: Vec<OsString>) -> Cli {
    if let Some(cli) = lean_command(&args).and_then(|lean| try_parse(lean, &program, args.clone()))
    {
        return cli;
    }
    let command = Cli::command();
    let args = go_flags::normalize(&command, args);
    command
        .try_get_matches_from(std::iter::once(program).chain(args))
        .and_then(|matches| Cli::from_arg_matches(&matches))
        .unwrap_or_else(|e| usage_error(e))
}

/// Help and version as clap prints them; a usage error as every other
/// error, one `gpurun: error:` line (clap's message, its tips and the
/// usage it names), runc's exit status.
fn usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    eprintln!("gpurun: error: {}", one_line_usage(&e.render().to_string()));
    // runc's statuses: 1 for a usage error, 3 for a command it has none of
    // (urfave/cli's "No help topic").
    std::process::exit(if e.kind() == ErrorKind::InvalidSubcommand {
        3
    } else {
        1
    })
}

/// clap's rendered error ("error: ...", "  tip: ...", "Usage: ...") as one
/// line.
fn one_line_usage(rendered: &str) -> String {
    let mut parts = Vec::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(message) = line.strip_prefix("error: ") {
            parts.push(message.to_owned());
        } else if let Some(tip) = line.strip_prefix("tip: ") {
            parts.push(tip.to_owned());
        } else if let Some(u) = line.strip_prefix("Usage: ") {
            usage = Some(u.to_owned());
        } else if !line.starts_with("For more information") {
            parts.push(line.to_owned());
        }
    }
    // A part that ends in ':' introduces the next ("not provided:" then
    // the arguments): joined by a space, not "; ".
    let mut text = String::new();
    for part in &parts {
        if !text.is_empty() {
            text.push_str(if text.ends_with(':') { " " } else { "; " });
        }
        text.push_str(part);
    }
    if let Some(usage) = usage {
        text.push_str(&format!(" (usage: {usage}; see --help)"));
    }
    text
}

/// The lean command for the first argument naming a lean subcommand;
/// none where help is asked for (the lean command's would lack the texts).
fn lean_command(args: &[OsString]) -> Option<Command> {
    if args
        .iter()
        .any(|a| a == "-h" || a == "--help" || a == "help")
    {
        return None;
    }
    let (name, augment) = args
        .iter()
        .find_map(|a| LEAN.iter().find(|(name, _)| a == name))?;
    let top = super::GlobalFlags::augment_args(Command::new("gpurun"));
    Some(top.subcommand(augment(Command::new(*name))))
}

/// The command line as `command` parses it; none where it refuses it.
fn try_parse(command: Command, program: &OsString, args: Vec<OsString>) -> Option<Cli> {
    let args = go_flags::normalize(&command, args);
    let matches = command
        .try_get_matches_from(std::iter::once(program.clone()).chain(args))
        .ok()?;
    Cli::from_arg_matches(&matches).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(args: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let cli = try_parse(Cli::command(), &OsString::from("gpurun"), args).unwrap();
        format!("{cli:?}")
    }

    fn lean(args: &[&str]) -> Option<String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let command = lean_command(&args)?;
        try_parse(command, &OsString::from("gpurun"), args).map(|cli| format!("{cli:?}"))
    }

    /// What engines send (containerd's shim, conmon, Docker's
    /// `--rootless` and Go-style single-dash flags among them) parses to
    /// the same command line either way.
    #[test]
    fn lean_parses_what_the_whole_command_parses() {
        let calls: &[&[&str]] = &[
            &[
                "--root",
                "/run/x",
                "--log",
                "/l",
                "--log-format",
                "json",
                "create",
                "--bundle",
                "/b",
                "--pid-file",
                "/p",
                "--console-socket",
                "/s",
                "id",
            ],
            &[
                "--root",
                "/run/x",
                "--systemd-cgroup",
                "create",
                "-b",
                "/b",
                "--no-pivot",
                "--no-new-keyring",
                "id",
            ],
            &["-root", "/run/x", "-log", "/l", "start", "id"],
            &["--rootless=false", "state", "id"],
            &["state", "--root", "/run/x", "id"],
            &["kill", "--all", "id", "9"],
            &["kill", "id"],
            &["delete", "--force", "id"],
            &[
                "--debug",
                "run",
                "-d",
                "--bundle",
                "/b",
                "--pid-file",
                "/p",
                "id",
            ],
            &[
                "exec",
                "--process",
                "/p.json",
                "--detach",
                "--pid-file",
                "/p",
                "id",
            ],
            &[
                "exec",
                "-t",
                "-e",
                "A=1",
                "--cwd",
                "/",
                "id",
                "sh",
                "-c",
                "echo --help",
            ],
            &["ps", "--format", "json", "id"],
            &[
                "run",
                "--rootfs",
                "/r",
                "--gpus",
                "0",
                "--",
                "nvidia-smi",
                "-L",
            ],
            &["exec", "id", "--", "ls", "-l"],
        ];
        for call in calls {
            assert_eq!(lean(call), Some(full(call)), "{call:?}");
        }
        // A flag's value naming a lean command: the lean parse fails, and
        // the whole command line parses it.
        assert_eq!(lean(&["--root", "state", "delete", "id"]), None);
        assert!(lean(&["state", "--help"]).is_none(), "help is never lean");
        assert!(lean(&["sate", "id"]).is_none());
    }

    #[test]
    fn a_usage_error_reads_as_one_line() {
        let rendered = "error: unexpected argument '--nope' found\n\n  tip: a similar argument exists: '--no-pivot'\n\nUsage: gpurun run --no-pivot [CONTAINER_ID]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line_usage(rendered),
            "unexpected argument '--nope' found; a similar argument exists: '--no-pivot' \
             (usage: gpurun run --no-pivot [CONTAINER_ID]; see --help)"
        );
        // "not provided:" introduces what was missing, with no "; ".
        let rendered = "error: the following required arguments were not provided:
  --output <DIR>

Usage: gpurun import --output <DIR> <IMAGE>
";
        assert_eq!(
            one_line_usage(rendered),
            "the following required arguments were not provided: --output <DIR> (usage: gpurun import --output <DIR> <IMAGE>; see --help)"
        );
    }
}
