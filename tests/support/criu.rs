//! CRIU for the checkpoint tests, and containers started so CRIU can dump
//! them.

use crate::*;

/// scripts/fixtures/criu.sh's CRIU, one that runs on this kernel; with `gpu`, CRIU
/// 4 or later, as GPU containers need (`criu.sh --gpu`). Found once per
/// test program.
pub fn criu(gpu: bool) -> &'static str {
    static ANY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static GPU: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    (if gpu { &GPU } else { &ANY }).get_or_init(|| {
        let mut cmd = Command::new("sh");
        cmd.arg(repo().join("scripts/fixtures/criu.sh"));
        if gpu {
            cmd.arg("--gpu");
        }
        let out = run_cmd(&mut cmd, Duration::from_secs(300));
        out.ok();
        out.stdout.trim().to_owned()
    })
}

/// Runs `cmd`, a `run -d`, with stdio on /dev/null, and checks that it
/// started: CRIU, as under runc, cannot dump a container whose stdio is a
/// file outside its mount namespace.
pub fn start_detached(mut cmd: Command) {
    use std::process::Stdio;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "run -d failed");
}
