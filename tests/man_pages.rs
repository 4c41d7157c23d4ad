//! `gpurun generate-docs DIR`: the man pages the package ships.

use std::fs;
use std::process::Command;

use gpurun_tests::*;

fn generate() -> (Scratch, Vec<String>) {
    let scratch = Scratch::new("man");
    let out = run_cmd(
        Command::new(gpurun_bin())
            .arg("generate-docs")
            .arg(scratch.path()),
        TIMEOUT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut pages: Vec<String> = fs::read_dir(scratch.path().join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    (scratch, pages)
}

#[test]
fn every_page_a_page_names_exists_nested_commands_included() {
    let (scratch, pages) = generate();
    for nested in ["gpurun-gpu-info.8", "gpurun-gpu-plan.8", "gpurun-gpu-cdi.8"] {
        assert!(
            pages.iter().any(|p| p == nested),
            "{nested} missing: {pages:?}"
        );
    }
    for page in &pages {
        let text = fs::read_to_string(scratch.path().join("man").join(page)).unwrap();
        // A subcommand entry is "NAME\-SUB(8)" in roff.
        for named in text
            .split_whitespace()
            .filter(|w| w.len() > 3 && w.ends_with("(8)"))
        {
            let file = format!("{}.8", named.trim_end_matches("(8)").replace("\\-", "-"));
            assert!(
                pages.contains(&file),
                "{page} names {named}, which is not a page"
            );
        }
        assert!(!text.contains("help(8)"), "{page} names a help page");
    }
}

#[test]
fn the_main_page_has_runcs_closing_sections() {
    let (scratch, _) = generate();
    let main = fs::read_to_string(scratch.path().join("man/gpurun.8")).unwrap();
    for section in ["EXAMPLES", "FILES", "ENVIRONMENT", "EXIT STATUS"] {
        assert!(
            main.contains(&format!(".SH {section}"))
                || main.contains(&format!(".SH \"{section}\"")),
            "{section}"
        );
    }
    let run = fs::read_to_string(scratch.path().join("man/gpurun-run.8")).unwrap();
    assert!(run.contains(".SH \"EXIT STATUS\""));
}

#[test]
fn each_page_states_its_own_commands_exit_status() {
    let (scratch, _) = generate();
    let status = |page: &str| {
        let text = fs::read_to_string(scratch.path().join("man").join(page)).unwrap();
        let at = text.find(".SH \"EXIT STATUS\"").expect(page);
        text[at..].split(".SH").nth(1).unwrap().to_owned()
    };
    assert!(status("gpurun-exec.8").contains("255"), "exec: runc's 255");
    assert!(status("gpurun-run.8").contains("128+N"));
    assert!(
        !status("gpurun-doctor.8").contains("for run"),
        "doctor's page speaks of run"
    );
    assert!(status("gpurun-gpu-cdi.8").contains("stale"));
    assert!(status("gpurun-gpu-verify.8").contains("GPUs asked for"));
}

/// A page's section NAME, up to the next section.
fn section(text: &str, name: &str) -> String {
    let heading = [format!(".SH {name}\n"), format!(".SH \"{name}\"\n")];
    let at = heading
        .iter()
        .find_map(|h| text.find(h.as_str()))
        .unwrap_or_else(|| panic!("no {name} section"));
    let rest = &text[at + 4..];
    rest[..rest.find("\n.SH").unwrap_or(rest.len())].to_owned()
}

#[test]
fn a_commands_synopsis_lists_its_own_flags_and_the_global_ones_apart() {
    let (scratch, _) = generate();
    let run = fs::read_to_string(scratch.path().join("man/gpurun-run.8")).unwrap();
    let synopsis = section(&run, "SYNOPSIS");
    assert!(synopsis.contains("GLOBAL FLAGS"), "{synopsis}");
    assert!(synopsis.contains("\\-\\-rootfs"), "{synopsis}");
    for global in ["\\-\\-root\\fR", "\\-\\-debug", "\\-\\-driver\\-root"] {
        assert!(!synopsis.contains(global), "{global} in run's synopsis");
    }
    // The global flags are still described, under their own heading.
    assert!(section(&run, "GLOBAL FLAGS").contains("\\-\\-driver\\-root"));
}

/// Each EXAMPLES line of a command's page is that command, with flags
/// its own `--help` lists (global flags are on gpurun's).
#[test]
fn every_example_names_its_command_and_flags_that_exist() {
    let (scratch, pages) = generate();
    let mut examples = 0;
    for page in &pages {
        let text = fs::read_to_string(scratch.path().join("man").join(page)).unwrap();
        if !text.contains(".SH EXAMPLES") {
            continue;
        }
        for block in section(&text, "EXAMPLES").split(".nf\n").skip(1) {
            let line = block.split("\n.fi").next().unwrap().replace("\\-", "-");
            let words: Vec<&str> = line.split_whitespace().collect();
            let command = words.iter().skip(1).take_while(|w| !w.starts_with('-'));
            let command: Vec<&str> = command.copied().collect();
            let expected: Vec<&str> = page.trim_end_matches(".8")["gpurun".len()..]
                .split('-')
                .filter(|w| !w.is_empty())
                .collect();
            // gpurun(8)'s examples are of any command; `gpu`'s have two words.
            let depth = match expected.len() {
                0 if command.first() == Some(&"gpu") => 2,
                0 => 1,
                _ => expected.len(),
            };
            assert!(
                command.join("-").starts_with(&expected.join("-")),
                "{page}: {line}"
            );
            let help_words = &command[..depth.min(command.len())];
            let out = run_cmd(
                Command::new(gpurun_bin()).args(help_words).arg("--help"),
                TIMEOUT,
            );
            assert_eq!(out.code, 0, "{page}: {line}: {}", out.stderr);
            let flags = words.iter().take_while(|w| **w != "--");
            for flag in flags.filter(|w| w.starts_with('-')) {
                assert!(
                    out.stdout.contains(&format!("{flag} "))
                        || out.stdout.contains(&format!("{flag},")),
                    "{page}: {line}: {flag} is not a flag of gpurun {}",
                    help_words.join(" ")
                );
            }
            examples += 1;
        }
    }
    assert!(examples > 20, "only {examples} examples");
}

/// exec's page says what exec exits with, and exec does exit so: 255 for
/// its own errors (a container that is not there), 1 for a bad command line.
#[test]
fn execs_page_states_the_statuses_exec_gives() {
    let (scratch, _) = generate();
    let exec = fs::read_to_string(scratch.path().join("man/gpurun-exec.8")).unwrap();
    let status = section(&exec, "EXIT STATUS");
    assert!(!status.contains("1 on an error"), "{status}");
    assert!(status.contains("255") && status.contains("1 when the command line"));
    let root = Scratch::new("exec-status");
    let exec = |args: &[&str]| {
        let mut cmd = Command::new(gpurun_bin());
        cmd.arg("--root").arg(root.path()).arg("exec").args(args);
        run_cmd(&mut cmd, TIMEOUT)
    };
    assert_eq!(exec(&["no-such-container", "true"]).code, 255);
    assert_eq!(exec(&["--no-such-flag", "x", "true"]).code, 1);
}
