//! The OCI runtime spec, requirement by requirement: one module per spec
//! document (runtime.md, config.md, config-linux.md), one test per
//! requirement, named after the section it comes from. docs/dev/conformance.md
//! maps every MUST of those documents to its test here (or elsewhere in
//! tests/), or says why there is none.

mod config;
mod config_linux;
mod runtime;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpurun_tests::{unique, Bundle, Ran, Runtime, Scratch};

/// A busybox bundle with a writable rootfs, running `sh -c script`.
fn bundle_running(script: &str) -> Bundle {
    let bundle = Bundle::busybox();
    bundle.edit(|c| {
        c["root"]["readonly"] = false.into();
        c["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    });
    bundle
}

/// A busybox bundle (read-only rootfs, as `gpurun spec` makes it) whose
/// process sleeps for 30 s: a container that stays up while it is looked at.
fn bundle_sleeping() -> Bundle {
    let bundle = Bundle::busybox();
    bundle.set_args(&["sleep", "30"]);
    bundle
}

/// `gpurun run` in the foreground; the container's output is in stdout.
fn run(rt: &Runtime, bundle: &Bundle) -> (String, Ran) {
    let id = unique("oci");
    let out = rt.run(["run", "--bundle", bundle.dir.to_str().unwrap(), &id]);
    (id, out)
}

/// Runs `script` in a default container and returns its stdout, failing
/// the test if the container fails.
fn output_of(script: &str) -> String {
    let rt = Runtime::new();
    let bundle = bundle_running(script);
    let (_, out) = run(&rt, &bundle);
    assert_eq!(
        out.code, 0,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    out.stdout
}

fn create(rt: &Runtime, bundle: &Bundle) -> String {
    let id = unique("oci");
    rt.run(["create", "--bundle", bundle.dir.to_str().unwrap(), &id])
        .ok();
    id
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn init_pid(rt: &Runtime, id: &str) -> i32 {
    rt.state(id)["pid"].as_i64().expect("a pid") as i32
}

/// A file inside a running container, read through its init's root.
fn read_in(pid: i32, path: &str) -> String {
    fs::read_to_string(format!("/proc/{pid}/root{path}")).unwrap_or_default()
}

/// A hook script that appends what it was given on stdin, with a label, to
/// a log file: `LABEL <state json>` per line.
struct HookLog {
    dir: Scratch,
}

impl HookLog {
    fn new() -> HookLog {
        let dir = Scratch::new("hooks");
        let script = dir.path().join("hook.sh");
        fs::write(
            &script,
            "#!/bin/sh\n# $1: label, $2: log file\nstate=$(cat)\nprintf '%s %s\\n' \"$1\" \"$state\" >> \"$2\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        HookLog { dir }
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("hook.sh")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    /// A hook entry that logs under `label`.
    fn hook(&self, label: &str) -> serde_json::Value {
        serde_json::json!({
            "path": self.script(),
            "args": ["hook.sh", label, self.log()],
        })
    }

    /// (label, state) for every hook that ran, in order.
    fn entries(&self) -> Vec<(String, serde_json::Value)> {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|line| {
                let (label, state) = line.split_once(' ').unwrap();
                (label.to_owned(), serde_json::from_str(state).unwrap())
            })
            .collect()
    }

    fn labels(&self) -> Vec<String> {
        self.entries().into_iter().map(|(l, _)| l).collect()
    }
}

fn exists(path: impl AsRef<Path>) -> bool {
    path.as_ref().exists()
}
