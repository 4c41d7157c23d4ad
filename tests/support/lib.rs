//! Helpers for the integration tests in `tests/`: they drive the built
//! `gpurun` binary from the outside, as an engine or a person would.

mod bundle;
mod criu;
mod gpu;
mod host;
mod runtime;
mod user;

pub use bundle::*;
pub use criu::*;
pub use gpu::*;
pub use host::*;
pub use runtime::*;
pub use user::*;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The gpurun binary under test: `$GPURUN_BIN`, or the one cargo built next
/// to this test executable.
pub fn gpurun_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("GPURUN_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("gpurun");
    assert!(
        bin.exists(),
        "{} is missing: build it first with `cargo build -p gpurun` (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// The seccomp architecture of the host's own programs (a profile naming
/// only another one filters nothing here).
pub fn native_scmp_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "SCMP_ARCH_AARCH64"
    } else {
        "SCMP_ARCH_X86_64"
    }
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Tests that need root say so and return early elsewhere; CI runs as root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("skipped: this test needs root");
            return;
        }
    };
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// `/tmp/gpurun-test-NAME-<pid>`, for what a test program builds once and
/// keeps in a static (never dropped). The same directories of programs no
/// longer running are removed first, so runs leave at most their own.
pub fn per_process_dir(name: &str) -> PathBuf {
    let prefix = format!("gpurun-test-{name}-");
    for entry in fs::read_dir("/tmp").into_iter().flatten().flatten() {
        let file_name = entry.file_name();
        let pid = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    PathBuf::from(format!("/tmp/{prefix}{}", std::process::id()))
}

/// A unique name for this process and call.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A directory made now, never one left by an earlier process with
    /// our PID (a test that leaked it would hand us its files).
    pub fn new(prefix: &str) -> Scratch {
        loop {
            let dir = std::env::temp_dir().join(unique(&format!("gpurun-test-{prefix}")));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
                    return Scratch(dir);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("cannot make {}: {e}", dir.display()),
            }
        }
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The output of a finished command.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "expected success; stderr: {}", self.stderr);
        self
    }
}

/// Runs a command with no stdin, failing the test if it outlives `timeout`.
/// Output goes through files, not pipes: a detached container inherits
/// them, and a pipe would then never reach EOF.
pub fn run_cmd(cmd: &mut Command, timeout: Duration) -> Ran {
    let scratch = Scratch::new("out");
    let out_path = scratch.path().join("stdout");
    let err_path = scratch.path().join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} hung for {timeout:?}; stderr: {}",
                fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&fs::read(&out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&fs::read(&err_path).unwrap()).into_owned(),
    }
}
