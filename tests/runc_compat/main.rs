//! What runc does for these, gpurun does too (written from runc's own
//! documented behaviour and its bats tests), one module per area: cgroups,
//! exec, seccomp, hooks, stdio and terminals, the command line engines
//! read, namespaces and mounts. Helpers that run the same steps under
//! gpurun and runc side by side live here.

mod cgroups;
mod cli;
mod exec;
mod hooks;
mod namespaces_and_mounts;
mod seccomp;
mod stdio;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpurun_tests::*;
use serde_json::json;

fn sleeping(rt: &Runtime, bundle: &Bundle) -> String {
    bundle.set_args(&["sleep", "300"]);
    let id = unique("compat");
    rt.run(["run", "-d", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    id
}

/// Each runtime, on its own state root, for the runc-versus-gpurun tests.
fn each_runtime() -> Vec<(std::path::PathBuf, Scratch)> {
    vec![
        (gpurun_bin(), Scratch::new("rt-gpurun")),
        ("runc".into(), Scratch::new("rt-runc")),
    ]
}

/// A detached busybox `sleep 300` under one runtime; its bundle (kept
/// while the container runs) and id.
fn sleeping_under(program: &Path, root: &Scratch, prefix: &str) -> (Bundle, String) {
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "300"]);
    let id = unique(prefix);
    let dir = bundle.dir.to_str().unwrap();
    runtime_cmd(program, root, &["run", "-d", "--bundle", dir, &id]).ok();
    (bundle, id)
}

/// `run` of `bundle` under one runtime, with a fresh id from `prefix`.
fn run_bundle(program: &Path, root: &Scratch, bundle: &Bundle, prefix: &str) -> Ran {
    let dir = bundle.dir.to_str().unwrap();
    runtime_cmd(program, root, &["run", "--bundle", dir, &unique(prefix)])
}

/// Waits up to 5 s for container `id` to be stopped under one runtime.
fn wait_stopped(program: &Path, root: &Scratch, id: &str) {
    for _ in 0..500 {
        if runtime_cmd(program, root, &["state", id])
            .stdout
            .contains("stopped")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn runtime_cmd(program: &Path, root: &Scratch, args: &[&str]) -> Ran {
    run_cmd(
        Command::new(program)
            .arg("--root")
            .arg(root.path())
            .args(args),
        TIMEOUT,
    )
}
