//! The workload executor: libcontainer's default, after undoing what the
//! runtime process did to itself that must not leak into the container.

use libcontainer::oci_spec::runtime::Spec;
use libcontainer::workload::{Executor, ExecutorError, ExecutorValidationError};
use nix::sys::signal::{SigSet, SigmaskHow};

#[derive(Clone, Default)]
pub struct GpurunExecutor;

impl Executor for GpurunExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        // `run` blocks every signal before it clones, so that no SIGCHLD is
        // lost; the container process must start with none blocked.
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
            .map_err(|e| ExecutorError::Other(format!("reset the signal mask: {e}")))?;
        let args = spec.process().as_ref().and_then(|p| p.args().as_ref());
        tracing::debug!(target: "gpurun::steps", "9/9 exec {:?}", args.map(|a| a.join(" ")).unwrap_or_default());
        libcontainer::workload::default::get_executor().exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        libcontainer::workload::default::get_executor().validate(spec)
    }
}
