//! The command line: runc's surface (from `liboci-cli`) plus gpurun's own
//! commands and flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod criu;
mod events;
mod exec;
pub mod go_flags;
pub mod lean;
mod run;
mod setup;
pub mod spank_task;
mod update;

pub use criu::{CheckpointArgs, CriuFlags, RestoreArgs};
pub use events::EventsArgs;
pub use exec::ExecArgs;
pub use run::RunArgs;
pub use setup::{Engine, LxcHookArgs, SetupArgs};
pub use update::UpdateArgs;

use crate::runtime::context::Settings;

#[derive(Parser, Debug)]
#[command(
    name = "gpurun",
    version,
    about = "An OCI container runtime with native NVIDIA GPU support"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalFlags,

    #[command(subcommand)]
    pub command: Command,
}

/// liboci-cli's own words for `--console-socket` are garbled.
const CONSOLE_SOCKET_HELP: &str =
    "A unix socket that receives the pseudoterminal's master end (process.terminal: true)";

/// The help heading of the flags every command takes.
pub const GLOBAL: &str = "Global flags";

/// Flags valid for every command, in runc's spelling.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalFlags {
    /// Root directory for container state (default: /run/gpurun, or
    /// $XDG_RUNTIME_DIR/gpurun for a non-root user)
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub root: Option<PathBuf>,

    /// Write log messages to this file instead of stderr
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub log: Option<PathBuf>,

    /// Log format: text or json
    #[arg(long, global = true, value_parser = ["text", "json"], help_heading = GLOBAL)]
    pub log_format: Option<String>,

    /// Log debug messages, including the numbered lifecycle steps
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub debug: bool,

    /// Use systemd to manage the container's cgroup
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub systemd_cgroup: bool,

    /// Where the NVIDIA driver's user-space files live [env: GPURUN_DRIVER_ROOT]
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub driver_root: Option<PathBuf>,

    /// Where the device nodes live [env: GPURUN_DEV_ROOT]
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub dev_root: Option<PathBuf>,

    /// Where procfs is mounted [env: GPURUN_PROC_ROOT]
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub proc_root: Option<PathBuf>,

    /// The criu binary for checkpoint and restore (default: criu on PATH)
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub criu: Option<PathBuf>,

    /// Accepted before the command for runc compatibility (go-runc passes
    /// --rootless=BOOL); gpurun tells a rootless caller by itself
    #[arg(long, value_parser = ["true", "false", "auto"], help_heading = GLOBAL)]
    pub rootless: Option<String>,
}

impl GlobalFlags {
    /// The flags as the layers below the command line take them.
    pub fn settings(&self) -> Settings {
        Settings {
            root: self.root.clone(),
            log: self.log.clone(),
            log_format: self.log_format.clone(),
            debug: self.debug,
            systemd_cgroup: self.systemd_cgroup,
            driver_root: self.driver_root.clone(),
            dev_root: self.dev_root.clone(),
            proc_root: self.proc_root.clone(),
            criu: self.criu.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a container from a bundle; start it with `start`
    #[command(
        mut_arg("console_socket", |a| a.help(CONSOLE_SOCKET_HELP)),
        mut_arg("no_pivot", |a| a.help("Do not use pivot_root to jail the process inside the rootfs")),
        mut_arg("container_id", |a| a.help("The new container's id"))
    )]
    Create(liboci_cli::Create),
    /// Start a created container
    Start(liboci_cli::Start),
    /// Create and start a container, and wait for it unless --detach
    Run(RunArgs),
    /// Print a container's state as JSON
    State(liboci_cli::State),
    /// Send a signal to a container's init (or all its processes with --all)
    Kill(KillArgs),
    /// Delete a container and everything it holds
    Delete(liboci_cli::Delete),
    /// Run a new process inside a running container
    Exec(ExecArgs),
    /// Checkpoint a running container with CRIU (it stops unless --leave-running)
    Checkpoint(CheckpointArgs),
    /// Restore a container from a checkpoint
    Restore(RestoreArgs),
    /// List the processes of a container
    Ps(liboci_cli::Ps),
    /// List containers
    List(ListArgs),
    /// Freeze all processes of a container
    Pause(liboci_cli::Pause),
    /// Thaw a paused container
    Resume(liboci_cli::Resume),
    /// Change a container's cgroup limits
    Update(UpdateArgs),
    /// Print what this runtime supports, as JSON
    Features(liboci_cli::Features),
    /// Write a starter config.json
    Spec(liboci_cli::Spec),
    /// Print container events and statistics
    Events(EventsArgs),
    /// Unpack an image (a registry's, an OCI layout, an OCI archive or a
    /// docker-save archive) into a bundle
    Import {
        /// The image: docker://HOST/NAME:TAG (a registry), oci://DIR[:TAG]
        /// (an OCI layout, one of its tags), or the path of an OCI layout
        /// directory, an OCI archive or a docker save archive
        #[arg(required_unless_present = "remove")]
        image: Option<String>,
        /// Remove a bundle that import made (its files may belong to your
        /// subordinate ids, which only gpurun's user namespace can delete)
        #[arg(long)]
        remove: bool,
        /// The bundle directory to create (new or empty)
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
    /// Register gpurun in containerd's, Docker's, Podman's, LXC's or Slurm's
    /// config (--undo puts the backup back)
    Setup(SetupArgs),
    /// LXC mount hook (lxc.hook.mount = gpurun lxc-hook): GPUs for an LXC
    /// container from NVIDIA_* in its lxc.environment
    LxcHook(LxcHookArgs),
    /// Check whether this user can run containers and GPU containers here
    Doctor {
        /// Also exit non-zero when a GPU container would get no GPU
        #[arg(long)]
        gpu: bool,
    },
    /// GPU inventory, plans and CDI specs; `verify` runs a throwaway
    /// container, `cdi -o` writes a file
    #[command(subcommand)]
    Gpu(GpuCommand),
    /// NVIDIA's CDI hooks (nvidia-cdi-hook's subcommands and flags) for a
    /// runtime that runs hooks, such as runc: reads the container state on
    /// stdin and the bundle's config, writes only inside the rootfs
    #[command(name = "cdi-hook")]
    CdiHook {
        /// SUBCOMMAND [FLAGS]: create-symlinks, enable-cuda-compat,
        /// update-ldcache, update-application-profile, chmod,
        /// disable-device-node-modification
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Man pages and shell completions from these definitions, for
    /// packaging (scripts/package-deb.sh)
    #[command(name = "generate-docs", hide = true)]
    GenerateDocs {
        /// The directory to write man/*.{1,8} and completions/* into
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum GpuCommand {
    /// Driver version, CUDA version and each GPU (like nvidia-container-cli info)
    Info {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Device nodes and driver files per capability (like nvidia-container-cli list)
    List {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Exactly what a bundle's container would get
    Plan {
        /// The bundle directory (holding config.json)
        bundle: PathBuf,
        /// Print JSON (with the CDI edits as `cdiEdits`) instead of text
        #[arg(long)]
        json: bool,
        /// As `run --gpus LIST` would plan it: the invoker's own request
        #[arg(long, value_name = "LIST")]
        gpus: Option<String>,
    },
    /// Run nvidia-smi -L in a throwaway container and compare with the host
    Verify {
        /// A rootfs holding glibc (default: one made from the host's libc)
        #[arg(long)]
        rootfs: Option<PathBuf>,
        /// The GPUs to give the container (NVIDIA_VISIBLE_DEVICES syntax)
        #[arg(long, default_value = "all")]
        gpus: String,
    },
    /// Write a CDI spec for this host
    Cdi {
        /// Write to this file instead of stdout
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// The CDI kind: nvidia.com/gpu (GPUs and the driver),
        /// nvidia.com/imex-channel (the host's IMEX channels), or
        /// management.nvidia.com/gpu (every node, for the GPU Operator's
        /// own pods)
        #[arg(long, default_value = "nvidia.com/gpu")]
        kind: String,
        /// The program the spec's hooks name: gpurun (this binary, as
        /// `gpurun cdi-hook`) or nvidia-cdi-hook (the toolkit's)
        #[arg(long, default_value = "gpurun", value_parser = ["gpurun", "nvidia-cdi-hook"])]
        hook_program: String,
        /// Compare this spec file with what this host gives now instead of
        /// writing one: exit 0 when it matches, 1 (with what differs) when
        /// it is stale or missing, as after a driver or MIG change
        #[arg(long, value_name = "FILE", conflicts_with = "output")]
        check: Option<PathBuf>,
    },
}

/// runc's list flags: `-f`/`--format` and `-q`/`--quiet` (liboci-cli's
/// lacks `-f`, which runc users type).
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Output format: table or json
    #[arg(short, long, default_value = "table")]
    pub format: String,
    /// Only display container IDs
    #[arg(short, long)]
    pub quiet: bool,
}

/// `kill ID [SIGNAL]`: the signal defaults to SIGTERM, as in runc.
#[derive(Args, Debug)]
pub struct KillArgs {
    /// Send the signal to every process in the container
    #[arg(short, long)]
    pub all: bool,
    /// The container to signal
    pub container_id: String,
    /// The signal: a name (KILL, SIGKILL) or a number
    #[arg(default_value = "SIGTERM")]
    pub signal: String,
}

/// What main must know of a command before it runs it: one description
/// per command, in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traits {
    /// It places a process inside a container, and so must run from a
    /// binary the container cannot write (`seal`): a container process can
    /// reach `/proc/<pid>/exe` only of a runtime that joined its namespaces.
    pub enters_containers: bool,
    /// Its work is printing (or is done before it prints): when its reader
    /// goes away (`gpurun list | head -1`) it ends quietly on SIGPIPE, as
    /// runc does. The others keep SIGPIPE ignored: they talk to their own
    /// children over pipes, and a dead child is an error they clean up after.
    pub only_reports: bool,
    pub state_root: StateRoot,
}

/// What a command needs of the state root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateRoot {
    /// None: it keeps no state (doctor reports a broken root instead).
    Unused,
    /// One that exists, or nothing to find.
    Existing,
    /// It makes containers, and so may make the root where it is missing.
    MayMake,
}

impl Command {
    /// This command's traits; every command is listed, so a new one must
    /// say what it is.
    pub fn traits(&self) -> Traits {
        use StateRoot::*;
        let (enters_containers, only_reports, state_root) = match self {
            Command::Create(_) | Command::Run(_) => (true, false, MayMake),
            Command::Exec(_) => (true, false, Existing),
            Command::Restore(_) => (false, false, MayMake),
            Command::Start(_)
            | Command::Kill(_)
            | Command::Delete(_)
            | Command::Checkpoint(_)
            | Command::Pause(_)
            | Command::Resume(_)
            | Command::Update(_) => (false, false, Existing),
            Command::State(_)
            | Command::Ps(_)
            | Command::List(_)
            | Command::Features(_)
            | Command::Spec(_)
            | Command::Events(_)
            | Command::Setup(_) => (false, true, Existing),
            Command::Gpu(GpuCommand::Verify { .. }) => (false, false, Existing),
            Command::Gpu(_) => (false, true, Existing),
            Command::Doctor { .. } => (false, true, Unused),
            Command::Import { .. }
            | Command::LxcHook(_)
            | Command::CdiHook { .. }
            | Command::GenerateDocs { .. } => (false, false, Unused),
        };
        Traits {
            enters_containers,
            only_reports,
            state_root,
        }
    }

    /// The names of the commands that enter containers, for main's scan
    /// of the arguments before they are parsed (the protected re-exec
    /// comes first); a test holds it to `traits`.
    pub const ENTERING_CONTAINERS: [&'static str; 3] = ["create", "run", "exec"];
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// The names main scans for are exactly the commands whose traits say
    /// they enter containers.
    #[test]
    fn the_names_main_scans_for_are_the_commands_that_enter_containers() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let name = sub.get_name();
            if name == "help" {
                continue;
            }
            let parsed = Cli::try_parse_from(minimal_args(name))
                .unwrap_or_else(|e| panic!("gpurun {name}: {e}"));
            assert_eq!(
                parsed.command.traits().enters_containers,
                Command::ENTERING_CONTAINERS.contains(&name),
                "{name}"
            );
        }
        for name in Command::ENTERING_CONTAINERS {
            assert!(cli.find_subcommand(name).is_some(), "{name}");
        }
    }

    /// `gpurun NAME` with the positional arguments its parse needs.
    fn minimal_args(name: &str) -> Vec<&str> {
        let mut args = vec!["gpurun", name];
        match name {
            "update" | "checkpoint" | "restore" | "create" | "start" | "state" | "kill"
            | "delete" | "ps" | "pause" | "resume" | "events" => args.push("id"),
            "exec" => args.extend(["id", "true"]),
            "gpu" => args.push("info"),
            "setup" => args.push("docker"),
            "import" => args.extend(["-o", "dir", "image"]),
            "generate-docs" => args.push("dir"),
            "cdi-hook" => args.push("update-ldcache"),
            _ => {}
        }
        args
    }
}
