//! The workload executor: libcontainer's default, after undoing what the
//! runtime process did to itself that must not leak into the container.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::sync::OnceLock;

use libcontainer::oci_spec::runtime::Spec;
use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use nix::sys::signal::{SigSet, SigmaskHow};

use crate::runtime::protect::exec_stub::errno_text;

#[derive(Clone, Default)]
pub struct GpurunExecutor;

/// The environment entry of the stand-in process gpurun gives a config
/// without `process`: the runtime spec lets such a config be created, and
/// only `start` must fail (which `gpurun start` does before init is told to
/// go on). The stand-in is never run.
pub const NO_PROCESS_MARKER: &str = "GPURUN_NO_PROCESS=1";

fn is_stand_in(spec: &Spec) -> bool {
    spec.process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .is_some_and(|env| env.iter().any(|e| e == NO_PROCESS_MARKER))
}

impl Executor for GpurunExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if is_stand_in(spec) {
            return Err(ExecutorError::Other(
                "config.json has no process to run".into(),
            ));
        }
        // `run` blocks every signal before it clones, so that no SIGCHLD is
        // lost; the container process must start with none blocked.
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
            .map_err(|e| ExecutorError::Other(format!("reset the signal mask: {e}")))?;
        reset_signal_dispositions();
        let args: &[String] = spec
            .process()
            .as_ref()
            .and_then(|p| p.args().as_deref())
            .unwrap_or_default();
        tracing::debug!(target: "gpurun::steps", "{} exec {:?}", crate::runtime::logging::Step::Exec.number(), args.join(" "));
        let Some(program) = args.first() else {
            return Err(ExecutorError::InvalidArg);
        };
        let c_args: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| ExecutorError::InvalidArg)?;
        let spec_env = spec_env(spec);
        let env = ENVIRONMENT
            .get()
            .cloned()
            .unwrap_or_else(|| environment(spec_env, &HashMap::new()));
        let envp: Vec<CString> = env
            .iter()
            .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
            .collect();
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or(DEFAULT_PATH);
        let line = match crate::runtime::protect::exec_stub::loaded() {
            // The fast path (see exec_stub): the stub itself reports a
            // program that cannot start; this line only says the stub did
            // not. There is no falling back to a direct exec here: that
            // would run the program from a process whose exe is the host's
            // binary.
            Some(stub) => {
                let errno =
                    crate::runtime::protect::exec_stub::exec(stub, program, path, &c_args, &envp);
                format!("exec {program}: gpurun's exec stub: {}", errno_text(errno))
            }
            // A program that cannot start (a missing loader or interpreter,
            // no such file, no permission) gets runc's kind of line.
            None => exec_failure(program, exec_in_path(program, path, &c_args, &envp)),
        };
        // In the log, where engines read errors (level=error), and on the
        // container's stderr, where its user looks.
        tracing::error!(target: "gpurun", "{line}");
        if crate::runtime::logging::logs_to_file() {
            eprintln!("gpurun: error: {line}");
        }
        Err(ExecutorError::Execution(line.into()))
    }

    /// The environment is kept, not set into this process: glibc's setenv
    /// scans the whole environment on every call, so a spec with a million
    /// variables took minutes (quadratic). exec passes it as envp.
    fn setup_envs(&self, envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        let order = SPEC_ENV.get().map(Vec::as_slice).unwrap_or_default();
        let _ = ENVIRONMENT.set(environment(order, &envs));
        Ok(())
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        // Remembered for the order of the environment (see setup_envs).
        let _ = SPEC_ENV.set(spec_env(spec).to_vec());
        if is_stand_in(spec) {
            return Ok(());
        }
        check_program(spec).map_err(ExecutorValidationError::ArgValidationError)
    }
}

/// The spec's environment, seen by `validate` (init calls it first).
static SPEC_ENV: OnceLock<Vec<String>> = OnceLock::new();
/// The container's environment, from `setup_envs`.
static ENVIRONMENT: OnceLock<Vec<(String, String)>> = OnceLock::new();
/// execvp's search path when the container sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn spec_env(spec: &Spec) -> &[String] {
    spec.process()
        .as_ref()
        .and_then(|p| p.env().as_deref())
        .unwrap_or_default()
}

/// The environment in the spec's order (a repeated name keeps its first
/// place and, as in the spec, its last value), then what init added (HOME,
/// LISTEN_FDS) in name order. `values` (init's map) wins where given.
fn environment(spec: &[String], values: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut last: HashMap<&str, &str> = HashMap::with_capacity(spec.len());
    let mut order: Vec<&str> = Vec::with_capacity(spec.len());
    for entry in spec {
        let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
        if last.insert(key, value).is_none() {
            order.push(key);
        }
    }
    let from_spec: HashSet<&str> = order.iter().copied().collect();
    let pick = |key: &str| {
        values
            .get(key)
            .cloned()
            .or_else(|| last.get(key).map(|v| v.to_string()))
    };
    let mut out: Vec<(String, String)> = Vec::with_capacity(order.len() + 4);
    for key in &order {
        if values.is_empty() || values.contains_key(*key) {
            if let Some(value) = pick(key) {
                out.push((key.to_string(), value));
            }
        }
    }
    let mut added: Vec<&String> = values
        .keys()
        .filter(|k| !from_spec.contains(k.as_str()))
        .collect();
    added.sort();
    out.extend(added.into_iter().map(|k| (k.clone(), values[k].clone())));
    out
}

/// execvp's search with an explicit environment: `program` itself if it
/// names a path, else each directory of `path` in turn. Returns the error
/// that stopped it (execve only returns on failure).
fn exec_in_path(
    program: &str,
    path: &str,
    args: &[CString],
    envp: &[CString],
) -> nix::errno::Errno {
    use nix::errno::Errno;
    let attempt = |file: &str| match CString::new(file) {
        Ok(file) => match nix::unistd::execve(&file, args, envp) {
            Err(errno) => errno,
            Ok(never) => match never {},
        },
        Err(_) => Errno::EINVAL,
    };
    if program.contains('/') {
        return attempt(program);
    }
    let mut denied = false;
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        match attempt(&format!("{dir}/{program}")) {
            Errno::ENOENT | Errno::ENOTDIR | Errno::ESTALE | Errno::ENODEV | Errno::ETIMEDOUT => {}
            Errno::EACCES => denied = true,
            other => return other,
        }
    }
    if denied {
        Errno::EACCES
    } else {
        Errno::ENOENT
    }
}

/// The program must exist and be executable before the container is
/// reported created, in runc's words: `exec: "x": executable file not
/// found in $PATH`, `exec: "/x": stat /x: no such file or directory`.
fn check_program(spec: &Spec) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(program) = spec
        .process()
        .as_ref()
        .and_then(|p| p.args().as_ref())
        .and_then(|a| a.first())
    else {
        return Err("process.args is empty: name the program to run".into());
    };
    let executable = |path: &std::path::Path| -> Result<(), String> {
        let meta = std::fs::metadata(path).map_err(|e| {
            let errno = nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0));
            format!(
                "exec: {program:?}: {}",
                exec_failure(&format!("stat {}", path.display()), errno)
                    .trim_start_matches("exec ")
            )
        })?;
        if meta.is_dir() {
            return Err(format!("exec: {program:?}: is a directory"));
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("exec: {program:?}: permission denied"));
        }
        Ok(())
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    let path = spec_env(spec)
        .iter()
        .rev()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH);
    let found = path
        .split(':')
        .map(|dir| std::path::Path::new(if dir.is_empty() { "." } else { dir }).join(program))
        .find(|p| p.is_file());
    match found {
        Some(p) => executable(&p),
        None => Err(format!(
            "exec: {program:?}: executable file not found in $PATH"
        )),
    }
}

/// "exec /x: no such file or directory", in Go's lower-case wording as
/// runc prints it.
pub fn exec_failure(program: &str, errno: nix::errno::Errno) -> String {
    format!("exec {program}: {}", errno_text(errno))
}

/// An ignored signal stays ignored across exec, and the Rust runtime
/// ignores SIGPIPE: without this the container's process would start with
/// SIGPIPE ignored (`yes | head` would never end, and a shell could not
/// trap it). Caught signals are reset by exec itself.
fn reset_signal_dispositions() {
    for signal in 1..=libc::SIGRTMAX() {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: setting a disposition to the default touches no memory;
        // numbers the kernel does not take just fail.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_keeps_the_specs_order_and_init_wins() {
        let spec: Vec<String> = ["PATH=/bin", "A=1", "B=2", "A=3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut values: HashMap<String, String> =
            [("PATH", "/bin"), ("A", "3"), ("B", "2"), ("HOME", "/root")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let env = environment(&spec, &values);
        let names: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(names, ["PATH=/bin", "A=3", "B=2", "HOME=/root"]);
        values.clear();
        assert_eq!(environment(&spec, &values).len(), 3);
    }

    #[test]
    fn exec_failures_read_as_runc_prints_them() {
        assert_eq!(
            exec_failure("/x", nix::errno::Errno::ENOENT),
            "exec /x: no such file or directory"
        );
        assert_eq!(
            exec_failure("/bin/s", nix::errno::Errno::EACCES),
            "exec /bin/s: permission denied"
        );
    }
}
