use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::os::unix::prelude::CommandExt;
use std::path::Path;
use std::{process, thread, time};

use nix::sys::signal;
use nix::unistd::Pid;
use oci_spec::runtime::{Hook, State as OciState};

use crate::container::{State, StateConversionError};
use crate::utils;

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("failed to execute hook command")]
    CommandExecute(#[source] std::io::Error),
    #[error("failed to encode container state")]
    EncodeContainerState(#[source] serde_json::Error),
    /// Go's words, as runc prints them: "exit status 3", then the
    /// hook's stderr. (gpurun patch)
    #[error("exit status {0}{1}")]
    NonZeroExitCode(i32, StderrTail),
    /// "signal: bad system call", as runc (Go) names the signal.
    #[error("signal: {0}{1}")]
    Killed(&'static str, StderrTail),
    #[error("failed to execute hook command due to a timeout")]
    Timeout,
    #[error("container state is required to run hook")]
    MissingContainerState,
    #[error("failed to write container state to stdin")]
    WriteContainerState(#[source] std::io::Error),
    #[error("failed to convert state to OCI format")]
    StateConversion(#[from] StateConversionError),
    #[error("error running hook #{index}")]
    Numbered {
        index: usize,
        source: Box<HookError>,
    },
}

type Result<T> = std::result::Result<T, HookError>;

/// The end of a failed hook's stderr, shown after its status as runc
/// shows it (", stderr: ..."); empty when the hook wrote nothing.
#[derive(Debug, Default)]
pub struct StderrTail(String);

impl std::fmt::Display for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.trim_end() {
            "" => Ok(()),
            text => write!(f, ", stderr: {text}"),
        }
    }
}

impl StderrTail {
    const KEEP: u64 = 4096;

    /// The last `KEEP` bytes of what the hook wrote to `file`.
    fn read(file: Option<std::fs::File>) -> Self {
        use std::io::{Read, Seek, SeekFrom};
        let Some(mut file) = file else {
            return Self::default();
        };
        let end = file.seek(SeekFrom::End(0)).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(end.saturating_sub(Self::KEEP)));
        let mut bytes = Vec::new();
        let _ = file.take(Self::KEEP).read_to_end(&mut bytes);
        Self(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Go's name of a signal (its syscall package's table), which runc prints.
fn go_signal_name(signal: i32) -> &'static str {
    const NAMES: [&str; 31] = [
        "hangup",
        "interrupt",
        "quit",
        "illegal instruction",
        "trace/breakpoint trap",
        "aborted",
        "bus error",
        "floating point exception",
        "killed",
        "user defined signal 1",
        "segmentation fault",
        "user defined signal 2",
        "broken pipe",
        "alarm clock",
        "terminated",
        "stack fault",
        "child exited",
        "continued",
        "stopped (signal)",
        "stopped",
        "stopped (tty input)",
        "stopped (tty output)",
        "urgent I/O condition",
        "CPU time limit exceeded",
        "file size limit exceeded",
        "virtual timer expired",
        "profiling timer expired",
        "window changed",
        "I/O possible",
        "power failure",
        "bad system call",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("real-time signal")
}

/// A file for the hook's stderr: an anonymous memfd, read back once the
/// hook has ended, so no pipe can fill up and stall it and no thread is
/// needed to drain one. None (stderr inherited) where memfds are missing.
fn stderr_capture() -> Option<std::fs::File> {
    nix::sys::memfd::memfd_create(
        c"gpurun-hook-stderr",
        nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
    )
    .ok()
    .map(std::fs::File::from)
}

/// Runs each hook in turn; a failing one is logged as a warning and the
/// rest still run. The runtime spec asks this of poststart and poststop
/// hooks: "the runtime MUST log a warning, but the remaining hooks and
/// lifecycle continue as if the hook had succeeded". (gpurun patch)
pub fn run_hooks_warn_on_failure(
    hooks: Option<&Vec<Hook>>,
    state: Option<&State>,
    cwd: Option<&Path>,
    kind: &str,
) {
    for hook in hooks.into_iter().flatten() {
        if let Err(err) = run_hooks(Some(&vec![hook.clone()]), state, cwd, None, None) {
            tracing::warn!(
                "{kind} hook {:?} failed, going on: {}",
                hook.path(),
                utils::error_chain(&err)
            );
        }
    }
}

pub fn run_hooks(
    hooks: Option<&Vec<Hook>>,
    state: Option<&State>,
    // TODO: Remove the following parameters. To comply with the OCI State, hooks should only depend on structures defined in oci-spec-rs. Cleaning these up ensures proper functional isolation.
    cwd: Option<&Path>,
    pid: Option<Pid>,
    default_env: Option<&HashMap<String, String>>,
) -> Result<()> {
    let base_state = state.ok_or(HookError::MissingContainerState)?;

    // High-level container runtimes use OCI state to pass the container state to the hooks.
    // So we need to convert the container state to OCI state.
    // Ref: https://github.com/containerd/containerd/blob/v2.2.1/cmd/containerd/command/oci-hook.go#L82
    let mut oci_state = OciState::try_from(base_state)?;

    // The `pid` parameter allows overriding the PID in the state. This is needed because
    // high-level container runtimes like containerd set the PID separately for certain hooks.
    // Ref: https://github.com/containerd/containerd/blob/main/cmd/containerd/command/oci-hook.go#L90
    if let Some(override_pid) = pid {
        oci_state.set_pid(Some(override_pid.as_raw()));
    }

    if let Some(hooks) = hooks {
        // runc's words, "error running hook #N", which scripts match.
        for (index, hook) in hooks.iter().enumerate() {
            run_hook(hook, &oci_state, cwd, default_env).map_err(|source| HookError::Numbered {
                index,
                source: Box::new(source),
            })?;
        }
    }

    Ok(())
}

/// A hook starts as runc's do: no signal blocked, every catchable one at
/// its default action. A runtime that forwards signals blocks them while
/// it works, and a child inherits the mask across exec: a hook would then
/// ignore SIGTERM and survive its own SIGSYS. (gpurun patch)
fn default_signals() -> std::io::Result<()> {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction is async-signal-safe; the C library refuses
        // the signals it keeps for itself, which is harmless here.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    // SAFETY: an empty set, made here; pthread_sigmask is async-signal-safe.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    Ok(())
}

fn run_hook(
    hook: &Hook,
    oci_state: &OciState,
    cwd: Option<&Path>,
    default_env: Option<&HashMap<String, String>>,
) -> Result<()> {
    let mut hook_command = process::Command::new(hook.path());

    if let Some(cwd) = cwd {
        hook_command.current_dir(cwd);
    }

    // Based on OCI spec, the first argument of the args vector is the
    // arg0, which can be different from the path.  For example, path
    // may be "/usr/bin/true" and arg0 is set to "true". However, rust
    // command differentiates arg0 from args, where rust command arg
    // doesn't include arg0. So we have to make the split arg0 from the
    // rest of args.
    if let Some((arg0, args)) = hook.args().as_ref().and_then(|a| a.split_first()) {
        tracing::debug!("run_hooks arg0: {:?}, args: {:?}", arg0, args);
        hook_command.arg0(arg0).args(args)
    } else {
        hook_command.arg0(hook.path().display().to_string())
    };

    let envs: HashMap<String, String> = if let Some(env) = hook.env() {
        utils::parse_env(env)
    } else if let Some(default) = default_env {
        default.clone()
    } else {
        HashMap::new()
    };
    tracing::debug!("run_hooks envs: {:?}", envs);

    // SAFETY: the closure makes only async-signal-safe calls.
    unsafe {
        hook_command.pre_exec(default_signals);
    }
    let stderr_file = stderr_capture();
    let stderr = match stderr_file.as_ref().map(|f| f.try_clone()) {
        Some(Ok(copy)) => process::Stdio::from(copy),
        _ => process::Stdio::inherit(),
    };
    let mut hook_process = hook_command
        .env_clear()
        .envs(envs)
        .stdin(process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(HookError::CommandExecute)?;
    let hook_process_pid = Pid::from_raw(hook_process.id() as i32);
    // Based on the OCI spec, we need to pipe the container state into
    // the hook command through stdin.
    if let Some(stdin) = &mut hook_process.stdin {
        // We want to ignore BrokenPipe here. A BrokenPipe indicates
        // either the hook is crashed/errored or it ran successfully.
        // Either way, this is an indication that the hook command
        // finished execution.  If the hook command was successful,
        // which we will check later in this function, we should not
        // fail this step here. We still want to check for all the other
        // error, in the case that the hook command is waiting for us to
        // write to stdin.
        let encoded_state =
            serde_json::to_string(&oci_state).map_err(HookError::EncodeContainerState)?;
        if let Err(e) = stdin.write_all(encoded_state.as_bytes()) {
            if e.kind() != ErrorKind::BrokenPipe {
                // Not a broken pipe. The hook command may be waiting
                // for us.
                let _ = signal::kill(hook_process_pid, signal::Signal::SIGKILL);
                return Err(HookError::WriteContainerState(e));
            }
        }
    }

    let res = if let Some(timeout_sec) = hook.timeout() {
        // Rust does not make it easy to handle executing a command and
        // timeout. Here we decided to wait for the command in a
        // different thread, so the main thread is not blocked. We use a
        // channel shared between main thread and the wait thread, since
        // the channel has timeout functions out of the box. Rust won't
        // let us copy the Command structure, so we can't share it
        // between the wait thread and main thread. Therefore, we will
        // use pid to identify the process and send a kill signal. This
        // is what the Command.kill() does under the hood anyway. When
        // timeout, we have to kill the process and clean up properly.
        let (s, r) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let res = hook_process.wait();
            let _ = s.send(res);
        });
        match r.recv_timeout(time::Duration::from_secs(timeout_sec as u64)) {
            Ok(res) => res,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // Kill the process. There is no need to further clean
                // up because we will be error out.
                let _ = signal::kill(hook_process_pid, signal::Signal::SIGKILL);
                return Err(HookError::Timeout);
            }
            Err(_) => {
                unreachable!();
            }
        }
    } else {
        hook_process.wait()
    };

    match res {
        Ok(exit_status) => {
            use std::os::unix::process::ExitStatusExt;
            match (exit_status.code(), exit_status.signal()) {
                (Some(0), _) => Ok(()),
                (Some(exit_code), _) => Err(HookError::NonZeroExitCode(
                    exit_code,
                    StderrTail::read(stderr_file),
                )),
                (None, signal) => Err(HookError::Killed(
                    go_signal_name(signal.unwrap_or(0)),
                    StderrTail::read(stderr_file),
                )),
            }
        }
        Err(e) => Err(HookError::CommandExecute(e)),
    }?;
    Ok(())
}

#[cfg(test)]
mod test {
    use std::{env, fs};

    use anyhow::{Context, Result, bail};
    use oci_spec::runtime::HookBuilder;
    use serial_test::serial;

    use super::*;
    use crate::container::Container;

    fn is_command_in_path(program: &str) -> bool {
        if let Ok(path) = env::var("PATH") {
            for p in path.split(':') {
                let p_str = format!("{p}/{program}");
                if fs::metadata(p_str).is_ok() {
                    return true;
                }
            }
        }
        false
    }

    // Note: the run_hook will require the use of pipe to write the container
    // state into stdin of the hook command. When cargo test runs these tests in
    // parallel with other tests, the pipe becomes flaky and often we will get
    // broken pipe or bad file descriptors. There is not much we can do and we
    // decide not to retry in the test. The most sensible way to test this is
    // ask cargo test to run these tests in serial.

    #[test]
    #[serial]
    fn test_run_hook() -> Result<()> {
        {
            let default_container: Container = Default::default();
            run_hooks(None, Some(&default_container.state), None, None, None)
                .context("Failed simple test")?;
        }

        {
            assert!(is_command_in_path("true"), "The true was not found.");
            let default_container: Container = Default::default();

            let hook = HookBuilder::default().path("true").build()?;
            let hooks = Some(vec![hook]);
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                None,
                None,
            )
            .context("Failed true")?;
        }

        {
            assert!(
                is_command_in_path("printenv"),
                "The printenv was not found."
            );
            // Use `printenv` to make sure the environment is set correctly.
            let default_container: Container = Default::default();
            let hook = HookBuilder::default()
                .path("bash")
                .args(vec![
                    String::from("bash"),
                    String::from("-c"),
                    String::from("printenv key > /dev/null"),
                ])
                .env(vec![String::from("key=value")])
                .build()?;
            let hooks = Some(vec![hook]);
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                None,
                None,
            )
            .context("Failed printenv test")?;
        }

        {
            assert!(is_command_in_path("pwd"), "The pwd was not found.");

            let tmp = tempfile::tempdir()?;

            let default_container: Container = Default::default();
            let hook = HookBuilder::default()
                .path("bash")
                .args(vec![
                    String::from("bash"),
                    String::from("-c"),
                    format!("test $(pwd) = {:?}", tmp.path()),
                ])
                .build()?;
            let hooks = Some(vec![hook]);
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                Some(tmp.path()),
                None,
                None,
            )
            .context("Failed pwd test")?;
        }

        {
            let default_container: Container = Default::default();
            let expected_pid = Pid::from_raw(1000);

            let hook = HookBuilder::default()
                .path("bash")
                .args(vec![
                    String::from("bash"),
                    String::from("-c"),
                    format!("cat | grep '\"pid\":{}'", expected_pid),
                ])
                .build()?;
            let hooks = Some(vec![hook]);
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                Some(expected_pid),
                None,
            )
            .context("Failed pid test")?;
        }

        Ok(())
    }

    #[test]
    #[serial]
    // This will test executing hook with a timeout. Since the timeout is set in
    // secs, minimally, the test will run for 1 second to trigger the timeout.
    fn test_run_hook_timeout() -> Result<()> {
        let default_container: Container = Default::default();
        // We use `tail -f /dev/null` here to simulate a hook command that hangs.
        let hook = HookBuilder::default()
            .path("tail")
            .args(vec![
                String::from("tail"),
                String::from("-f"),
                String::from("/dev/null"),
            ])
            .timeout(1)
            .build()?;
        let hooks = Some(vec![hook]);
        match run_hooks(
            hooks.as_ref(),
            Some(&default_container.state),
            None,
            None,
            None,
        ) {
            Ok(_) => {
                bail!(
                    "The test expects the hook to error out with timeout. Should not execute cleanly"
                );
            }
            // Named by its index since patch 41. (gpurun patch)
            Err(HookError::Numbered { source, .. }) if matches!(*source, HookError::Timeout) => {}
            Err(err) => {
                bail!(
                    "The test expects the hook to error out with timeout. Got error: {}",
                    err
                );
            }
        };

        Ok(())
    }

    #[test]
    #[serial]
    fn test_run_hook_default_env() -> Result<()> {
        // Test: hook without explicit env uses default_env
        {
            let default_container: Container = Default::default();
            let hook = HookBuilder::default()
                .path("sh")
                .args(vec![
                    String::from("sh"),
                    String::from("-c"),
                    String::from("test \"$TEST_ENV\" = 'default_value'"),
                ])
                .build()?;
            let hooks = Some(vec![hook]);
            let mut default_env = HashMap::new();
            default_env.insert("TEST_ENV".to_string(), "default_value".to_string());
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                None,
                Some(&default_env),
            )
            .context("Failed: hook without explicit env should use default_env")?;
        }

        // Test: hook with explicit env takes priority over default_env
        {
            let default_container: Container = Default::default();
            let hook = HookBuilder::default()
                .path("sh")
                .args(vec![
                    String::from("sh"),
                    String::from("-c"),
                    String::from("test \"$TEST_ENV\" = 'explicit_value'"),
                ])
                .env(vec![String::from("TEST_ENV=explicit_value")])
                .build()?;
            let hooks = Some(vec![hook]);
            let mut default_env = HashMap::new();
            default_env.insert("TEST_ENV".to_string(), "default_value".to_string());
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                None,
                Some(&default_env),
            )
            .context("Failed: hook with explicit env should ignore default_env")?;
        }

        // Test: hook without explicit env and no default_env gets empty environment
        {
            let default_container: Container = Default::default();
            let hook = HookBuilder::default()
                .path("sh")
                .args(vec![
                    String::from("sh"),
                    String::from("-c"),
                    // Verify that the environment is empty (no TEST_ENV, etc.)
                    String::from("test -z \"$TEST_ENV\""),
                ])
                .build()?;
            let hooks = Some(vec![hook]);
            run_hooks(
                hooks.as_ref(),
                Some(&default_container.state),
                None,
                None,
                None,
            )
            .context("Failed: hook without env and without default_env should have empty env")?;
        }

        Ok(())
    }
}
