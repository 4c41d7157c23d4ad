//! What every command gets (the user's settings and the state root), and how
//! a command's failure reaches the user: one line, and runc's exit code.

use std::path::PathBuf;

/// What the user set for every command (runc's global flags and gpurun's
/// driver paths), as plain data: the command line is parsed above this.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The state root asked for; `state_dir::resolve` picks the default.
    pub root: Option<PathBuf>,
    pub log: Option<PathBuf>,
    /// "text" or "json".
    pub log_format: Option<String>,
    pub debug: bool,
    pub systemd_cgroup: bool,
    pub driver_root: Option<PathBuf>,
    pub dev_root: Option<PathBuf>,
    pub proc_root: Option<PathBuf>,
    pub criu: Option<PathBuf>,
}

/// What every command gets: the user's settings and the state root.
pub struct Ctx {
    pub settings: Settings,
    pub root: PathBuf,
}

/// A command's own failure where runc exits with another code than 1 and
/// says what failed first (the error's outermost context).
#[derive(Debug)]
pub struct Failure {
    pub exit_code: i32,
    pub what: &'static str,
}

impl Failure {
    /// runc's `exec failed: ...`, exit 255.
    pub const EXEC: Failure = Failure {
        exit_code: 255,
        what: "exec failed",
    };
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }
}

/// An error chain as one line: "context: cause: cause". libcontainer's
/// wrappers around what the container's init reported add nothing a user
/// needs ("exec process failed with error error in executing process :"),
/// so they are dropped; what the init said is kept.
pub fn one_line(e: &anyhow::Error) -> String {
    const NOISE: &[&str] = &[
        "exec process failed with error ",
        "error in executing process : ",
        "failed to create container: ",
    ];
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let mut text = cause.to_string().replace('\n', " ");
        loop {
            let before = text.len();
            for noise in NOISE {
                while let Some(at) = text.find(noise) {
                    text.replace_range(at..at + noise.len(), "");
                }
            }
            if text.len() == before {
                break;
            }
        }
        let text = text.trim().to_owned();
        if text.is_empty() || text == "failed to create container" {
            continue;
        }
        // libcontainer's errors often repeat their source in their own text.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}
