//! gpurun: a runc-compatible OCI runtime with native NVIDIA GPU support.

mod cli;
mod commands;
mod runtime;

use std::path::PathBuf;

use crate::cli::StateRoot;
use crate::runtime::context::{one_line, Ctx, Failure};
use crate::runtime::protect::stub_policy::Protection;
use crate::runtime::protect::{inherited_fds, seal};
use crate::runtime::spec::slurm_mpi;
use crate::runtime::{logging, state::state_dir};

fn main() {
    refuse_to_run_as_a_hook();
    // A Slurm task's program handed over by the SPANK plugin: the command
    // line is rebuilt before anything reads it.
    let command_line = cli::spank_task::command_line();
    print_version_if_asked(&command_line);
    // The protected re-exec comes before anything else is done, so that
    // the command line is parsed once, in the protected process. Any
    // argument naming a command that enters a container counts: a false
    // match (a container called "exec") costs one re-exec, nothing more.
    // A root `run` alone decides once its spec is read (stub_policy::protect_run,
    // told so by `protection`): most need no re-exec.
    let entering: Vec<std::ffi::OsString> = command_line
        .iter()
        .skip(1)
        .filter(|&a| cli::Command::ENTERING_CONTAINERS.iter().any(|c| a == *c))
        .cloned()
        .collect();
    let mut protection = Protection::Done;
    if !entering.is_empty() {
        if entering.iter().all(|a| a == "run") && nix::unistd::geteuid().is_root() {
            protection = Protection::ChosenByRun;
        } else if let Err(e) = seal::ensure_sealed() {
            eprintln!("gpurun: error: {e:#}");
            std::process::exit(1);
        }
    }
    let mut argv = command_line.into_iter();
    let program = argv.next().unwrap_or_else(|| "gpurun".into());
    let mut cli = cli::lean::parse(program, argv.collect());
    keep_pmi_socket(&mut cli.command);
    let (preserved, process_fd) = kept_fds(&cli.command);
    inherited_fds::close_on_exec(preserved, process_fd);
    let traits = cli.command.traits();
    if traits.only_reports {
        // SAFETY: restoring a default disposition, before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let settings = cli.global.settings();
    let target = match logging::init(&settings) {
        Ok(target) => target,
        Err(e) => {
            eprintln!("gpurun: error: {e:#}");
            std::process::exit(1);
        }
    };
    // doctor reports a broken state directory instead of stopping at it.
    let state = match traits.state_root {
        StateRoot::Unused => Ok(PathBuf::new()),
        needed => state_dir::resolve(settings.root.as_deref(), needed == StateRoot::MayMake),
    };
    let result = state.and_then(|root| {
        let ctx = Ctx { settings, root };
        commands::dispatch(&ctx, cli.command, protection)
    });
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            let message = one_line(&e);
            tracing::error!(target: "gpurun", "{message}");
            if target.to_file {
                eprintln!("gpurun: error: {message}");
            }
            e.downcast_ref::<Failure>().map_or(1, |f| f.exit_code)
        }
    };
    std::process::exit(code);
}

/// `gpurun --version` (or `-v`, `-V`), in runc's shape: version, commit, the
/// OCI runtime spec version, and the libseccomp it runs with.
fn print_version_if_asked(command_line: &[std::ffi::OsString]) {
    let args = &command_line[1.min(command_line.len())..];
    if !(args.len() == 1 && (args[0] == "--version" || args[0] == "-v" || args[0] == "-V")) {
        return;
    }
    let seccomp = libseccomp::ScmpVersion::current()
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
        .unwrap_or_else(|_| "unknown".into());
    // As for the reporting commands: a reader that stops early (`| head -1`)
    // ends us quietly, as it ends runc, not with a panic.
    // SAFETY: restoring a default disposition, before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    println!(
        "gpurun version {}\ncommit: {}\nspec: {}\nlibseccomp: {seccomp}",
        env!("CARGO_PKG_VERSION"),
        env!("GPURUN_COMMIT"),
        libcontainer::oci_spec::runtime::VERSION
    );
    std::process::exit(0);
}

/// `gpurun setup docker` links nvidia-container-runtime-hook to gpurun, so
/// that dockerd accepts --gpus. gpurun then drops that hook from the spec
/// and injects the GPUs itself. If another runtime (runc) runs the link as
/// a prestart hook, fail before touching anything: the runtime then aborts
/// the create, and the container is not half set up.
fn refuse_to_run_as_a_hook() {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0).file_name().unwrap_or_default();
    if name == gpurun_gpu::request::DOCKER_HOOK {
        eprintln!(
            "gpurun: error: nvidia-container-runtime-hook here is gpurun, which injects GPUs as the OCI runtime, not as a hook: \
             run this container with gpurun as its runtime (docker run --runtime=gpurun, or \"gpurun setup docker --default\"), \
             or install the NVIDIA Container Toolkit for runc"
        );
        std::process::exit(1);
    }
}

/// In a Slurm step, a `run --rootfs` or `--image` (an MPI job's task)
/// preserves PMI-2's socket (`PMI_FD`) for the container, as if asked
/// with `--preserve-fds`: kept here and handed to the container by the
/// launch alike.
fn keep_pmi_socket(command: &mut cli::Command) {
    if let cli::Command::Run(a) = command {
        if a.rootfs.is_some() || a.image.is_some() {
            a.preserve_fds = slurm_mpi::preserved_fds(a.preserve_fds, &|k| std::env::var(k).ok());
        }
    }
}

/// What the command keeps of the descriptors it was given: its
/// `--preserve-fds`, and `exec --process /dev/fd/N`'s N (the caller hands
/// the process.json over as a descriptor, which must survive the re-exec to
/// be read; the container's init closes it like every other).
fn kept_fds(command: &cli::Command) -> (i32, Option<u32>) {
    match command {
        cli::Command::Create(a) => (a.preserve_fds, None),
        cli::Command::Run(a) => (a.preserve_fds, None),
        cli::Command::Exec(a) => (
            a.preserve_fds,
            a.process
                .as_deref()
                .and_then(inherited_fds::descriptor_path),
        ),
        _ => (0, None),
    }
}
