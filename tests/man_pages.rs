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
