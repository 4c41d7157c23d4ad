//! The workload executor: libcontainer's default, after undoing what the
//! runtime process did to itself that must not leak into the container.

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
        let args = spec.process().as_ref().and_then(|p| p.args().as_ref());
        tracing::debug!(target: "gpurun::steps", "9/9 exec {:?}", args.map(|a| a.join(" ")).unwrap_or_default());
        libcontainer::workload::default::get_executor().exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        if is_stand_in(spec) {
            return Ok(());
        }
        libcontainer::workload::default::get_executor().validate(spec)
    }
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
