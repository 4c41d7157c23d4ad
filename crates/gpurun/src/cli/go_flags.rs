//! Go-style long flags. runc parses its command line with urfave/cli, which
//! takes `-no-subreaper` as well as `--no-subreaper`, and engines rely on it:
//! containerd's go-runc passes `-no-subreaper` to `restore`. clap reads a
//! single dash as a cluster of short flags, so such arguments are rewritten
//! to their double-dash form first, the way runc would read them.

use std::ffi::OsString;

use clap::{Arg, Command};

/// `args` (without argv[0]) with every single-dash spelling of one of
/// `command`'s long flags given two dashes. As in Go's flag package, flags
/// end at the first argument that is neither a flag, a flag's value nor the
/// subcommand's name, and at `--`: the container's own command line after
/// the id is never touched.
pub fn normalize(command: &Command, args: Vec<OsString>) -> Vec<OsString> {
    let mut current = command;
    let mut out = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    let mut flags_ended = false;
    while let Some(arg) = args.next() {
        if flags_ended {
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            flags_ended = true;
            continue;
        };
        if text == "--" {
            out.push(arg);
            flags_ended = true;
            continue;
        }
        if let Some(spelled) = text.strip_prefix("--") {
            let takes_value = !spelled.contains('=')
                && find_long(current, command, spelled).is_some_and(takes_a_value);
            out.push(arg);
            if takes_value {
                out.extend(args.next());
            }
            continue;
        }
        if let Some(spelled) = text.strip_prefix('-').filter(|s| s.len() > 1) {
            let name = spelled.split('=').next().unwrap_or(spelled);
            if let Some(flag) = find_long(current, command, name) {
                let takes_value = !spelled.contains('=') && takes_a_value(flag);
                out.push(OsString::from(format!("-{text}")));
                if takes_value {
                    out.extend(args.next());
                }
                continue;
            }
            // A cluster of short flags (or one with its value attached).
            out.push(arg);
            continue;
        }
        if let Some(short) = text.strip_prefix('-').and_then(|s| s.chars().next()) {
            let takes_value = current
                .get_arguments()
                .find(|a| a.get_short() == Some(short))
                .is_some_and(takes_a_value);
            out.push(arg);
            if takes_value {
                out.extend(args.next());
            }
            continue;
        }
        match current.find_subcommand(text) {
            Some(sub) if std::ptr::eq(current, command) => {
                current = sub;
                out.push(arg);
            }
            _ => {
                out.push(arg);
                flags_ended = true;
            }
        }
    }
    out
}

fn find_long<'a>(current: &'a Command, root: &'a Command, name: &str) -> Option<&'a Arg> {
    let named = |a: &&Arg| a.get_long() == Some(name);
    current.get_arguments().find(named).or_else(|| {
        root.get_arguments()
            .filter(|a| a.is_global_set())
            .find(named)
    })
}

fn takes_a_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::CommandFactory;

    fn normalized(line: &str) -> String {
        let args = line.split(' ').map(OsString::from).collect();
        let out = normalize(&Cli::command(), args);
        out.iter()
            .map(|a| a.to_str().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn single_dash_long_flags_get_two() {
        assert_eq!(
            normalized("--root /r restore --detach -no-subreaper --bundle /b id"),
            "--root /r restore --detach --no-subreaper --bundle /b id"
        );
        assert_eq!(
            normalized("-root /r create -pid-file /p -bundle=/b id"),
            "--root /r create --pid-file /p --bundle=/b id"
        );
    }

    #[test]
    fn the_container_command_and_values_are_left_alone() {
        // After the id: the process's own arguments, even ones that name a
        // gpurun flag.
        assert_eq!(
            normalized("exec -t id find / -user root -no-subreaper"),
            "exec -t id find / -user root -no-subreaper"
        );
        // A value that looks like a flag is a value.
        assert_eq!(
            normalized("exec --cwd -detach id true"),
            "exec --cwd -detach id true"
        );
        assert_eq!(
            normalized("exec -e -user=x id true"),
            "exec -e -user=x id true"
        );
        assert_eq!(normalized("run -d -- -bundle"), "run -d -- -bundle");
    }

    #[test]
    fn unknown_single_dash_words_stay_as_they_are() {
        assert_eq!(normalized("state -xyz id"), "state -xyz id");
    }
}
