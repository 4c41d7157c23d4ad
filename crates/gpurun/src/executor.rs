//! The workload executor: libcontainer's default, after undoing what the
//! runtime process did to itself that must not leak into the container.

use std::ffi::CString;

use libcontainer::oci_spec::runtime::Spec;
use libcontainer::workload::{Executor, ExecutorError, ExecutorValidationError};
use nix::sys::signal::{SigSet, SigmaskHow};

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
        tracing::debug!(target: "gpurun::steps", "9/9 exec {:?}", args.join(" "));
        let Some(program) = args.first() else {
            return Err(ExecutorError::InvalidArg);
        };
        let c_args: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| ExecutorError::InvalidArg)?;
        let errno = match nix::unistd::execvp(&c_args[0], &c_args) {
            Err(errno) => errno,
            Ok(never) => match never {},
        };
        // A program that cannot start (a missing loader or interpreter, no
        // such file, no permission) gets runc's kind of line on the
        // container's stderr, where its user looks, and in the log.
        let line = exec_failure(program, errno);
        eprintln!("gpurun: {line}");
        Err(ExecutorError::Execution(line.into()))
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        if is_stand_in(spec) {
            return Ok(());
        }
        libcontainer::workload::default::get_executor().validate(spec)
    }
}

/// "exec /x: no such file or directory", in Go's lower-case wording as
/// runc prints it.
pub fn exec_failure(program: &str, errno: nix::errno::Errno) -> String {
    let desc = errno.desc();
    let mut chars = desc.chars();
    let lower: String = chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    format!("exec {program}: {lower}")
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
