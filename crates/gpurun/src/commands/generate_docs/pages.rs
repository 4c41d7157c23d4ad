//! What each man page says that clap's definitions do not: a description
//! in prose, worked examples and the command's own exit status, as runc's
//! `man/*.8.md` and crun's `crun.1.md` have them.

/// The text of one page beyond its options.
pub struct PageText {
    /// Paragraphs after the one-line summary (blank lines part them).
    pub description: &'static str,
    /// (what it does, the command line), each of which must parse.
    pub examples: &'static [(&'static str, &'static str)],
    /// The statuses this command exits with.
    pub exit_status: &'static str,
}

/// Most commands' errors: one line on stderr and 1, as runc's.
const ERROR_1: &str = "1 on an error, with one line on standard error (a command line that \
                       cannot be parsed included).";

pub fn page_text(name: &str) -> PageText {
    let (description, examples, exit_status) = match name {
        "gpurun" => MAIN,
        "gpurun-create" => CREATE,
        "gpurun-start" => START,
        "gpurun-run" => RUN,
        "gpurun-exec" => EXEC,
        "gpurun-kill" => KILL,
        "gpurun-delete" => DELETE,
        "gpurun-state" => STATE,
        "gpurun-list" => LIST,
        "gpurun-ps" => PS,
        "gpurun-spec" => SPEC,
        "gpurun-checkpoint" => CHECKPOINT,
        "gpurun-restore" => RESTORE,
        "gpurun-update" => UPDATE,
        "gpurun-events" => EVENTS,
        "gpurun-import" => IMPORT,
        "gpurun-setup" => SETUP,
        "gpurun-doctor" => DOCTOR,
        "gpurun-gpu-plan" => GPU_PLAN,
        "gpurun-gpu-cdi" => GPU_CDI,
        "gpurun-gpu-verify" => GPU_VERIFY,
        "gpurun-gpu-info" => GPU_INFO,
        "gpurun-features" => FEATURES,
        "gpurun-cdi-hook" => CDI_HOOK,
        "gpurun-lxc-hook" => LXC_HOOK,
        _ => ("", &[][..], ""),
    };
    let exit_status = if exit_status.is_empty() {
        "0 on success."
    } else {
        exit_status
    };
    PageText {
        description,
        examples,
        exit_status,
    }
}

/// The page's EXIT STATUS paragraph: its own statuses, then how errors end.
pub fn exit_status(name: &str) -> String {
    let own = page_text(name).exit_status;
    match name {
        // exec's own errors are 255, as runc's; only a bad command line is 1.
        "gpurun-exec" => format!("{own} 1 when the command line cannot be parsed."),
        "gpurun" => {
            format!("{own} {ERROR_1} 3 for a command gpurun does not have (runc's statuses).")
        }
        _ => format!("{own} {ERROR_1}"),
    }
}

type Text = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

const MAIN: Text = (
    "gpurun is an OCI container runtime: it takes runc's command line, so containerd, \
Docker, Podman, CRI-O and LXC run it where they run runc, and it runs containers \
from a shell with run --rootfs or run --image.

A container that asks for NVIDIA GPUs (NVIDIA_VISIBLE_DEVICES and the other NVIDIA_* \
variables in its environment, CDI device names, or --gpus) gets the device nodes, \
the driver's libraries and programs for its capabilities, and a linker cache, from \
gpurun itself, with no hook process and no NVIDIA Container Toolkit. gpurun gpu plan \
prints what a bundle's container would get.

The global flags hold for every command; engines give them before the command, as \
they give runc's.",
    &[
        (
            "Run a command in a root filesystem, with the first GPU:",
            "gpurun run --rootfs /srv/rootfs --gpus 0 -- nvidia-smi",
        ),
        (
            "Make containerd run gpurun for the runtime class gpurun:",
            "gpurun setup containerd",
        ),
        (
            "What a bundle's container would get, as run --gpus all would plan it:",
            "gpurun gpu plan --gpus all ./bundle",
        ),
        (
            "Check that this user can run GPU containers here:",
            "gpurun doctor --gpu",
        ),
    ],
    "0 on success. run, exec and restore (without --detach) exit with the container \
process's own status, and exec's own errors are 255; each command's page has its own.",
);

const CREATE: Text = (
    "Creates the container that the bundle's config.json describes: namespaces, cgroup, \
mounts, devices and GPUs are set up and the container's process waits, before the \
user's program runs, until start. Engines call it with --bundle, --pid-file and, for \
a terminal, --console-socket. A create that fails removes what it made and nothing else.",
    &[(
        "Create a container from the bundle in ./bundle, then start it:",
        "gpurun create --bundle ./bundle demo",
    )],
    "0 once the container is created.",
);

const START: Text = (
    "Runs the user's program of a created container (the process in config.json) and \
returns at once; the container's status becomes running.",
    &[("Start the container created as demo:", "gpurun start demo")],
    "0 once the program has been started.",
);

const RUN: Text = (
    "Creates and starts a container and, unless --detach, waits for it, passes on the \
signals it gets and exits with the container's status; the container is deleted \
when it exits, unless --keep.

With --bundle (default: the current directory) it runs that bundle's config.json, as \
runc run does. With --rootfs DIR it makes the spec itself: the command after --, the \
host's network, and for a non-root user a user namespace with the user as root inside \
(--keep-uid keeps the user's own ids). With --image FILE it runs a squashfs or SIF \
image file in place, read-only (root only); --writable adds a layer that goes with \
the container. --gpus, --volume, --env and --workdir shape the made spec.",
    &[
        (
            "Run the bundle in ./bundle as demo:",
            "gpurun run --bundle ./bundle demo",
        ),
        (
            "Run nvidia-smi in a root filesystem with every GPU:",
            "gpurun run --rootfs /srv/rootfs --gpus all -- nvidia-smi",
        ),
        (
            "Run a job from a squashfs image with a scratch directory:",
            "gpurun run --image ./app.sqsh --gpus 0 -v /scratch:/scratch -w /scratch -- ./train.sh",
        ),
    ],
    "The container's own exit status (128+N when signal N ended it); 0 with --detach \
once it runs.",
);

const EXEC: Text = (
    "Runs a new process in a running container: in its namespaces and cgroup, with \
its capabilities, seccomp filter and user unless the flags say otherwise. -p reads \
the process from a process.json as runc's; otherwise the command follows the \
container's id. The process gets no GPU the container does not have.",
    &[
        (
            "List the processes of demo from inside it:",
            "gpurun exec demo ps",
        ),
        ("An interactive shell in demo:", "gpurun exec -t demo sh"),
        (
            "Run the process a process.json describes:",
            "gpurun exec -p ./process.json demo",
        ),
    ],
    "The process's own exit status (128+N when signal N ended it); 0 with --detach \
once it runs; 255 when gpurun could not run it (exec's own errors, as runc's), with one \
line on standard error.",
);

const KILL: Text = (
    "Sends a signal to the container's init, or with --all to every process in its \
cgroup. gpurun signals only processes in the container's own cgroup.",
    &[
        ("Stop demo with SIGKILL:", "gpurun kill demo KILL"),
        (
            "Send SIGTERM to every process of demo:",
            "gpurun kill --all demo TERM",
        ),
    ],
    "",
);

const DELETE: Text = (
    "Removes a stopped container: its state, its cgroup and what gpurun made for it. \
--force kills a running container first.",
    &[(
        "Delete demo, stopping it if it still runs:",
        "gpurun delete --force demo",
    )],
    "",
);

const STATE: Text = (
    "Prints the container's state as runc's JSON (ociVersion, id, pid, status, bundle, \
rootfs, created, owner, annotations).",
    &[("The state of demo:", "gpurun state demo")],
    "",
);

const LIST: Text = (
    "Lists the containers in --root, as a table or, with --format json, as runc's JSON \
(null when there are none, as runc prints).",
    &[("Every container as JSON:", "gpurun list --format json")],
    "",
);

const PS: Text = (
    "Lists the processes of a container, by running the host's ps on the container's \
pids; --format json prints only the pids.",
    &[("The processes of demo:", "gpurun ps demo")],
    "",
);

const SPEC: Text = (
    "Writes a starter config.json for a bundle whose root filesystem is ./rootfs; \
--rootless writes one for a non-root user (a user namespace that maps the user to \
root inside).",
    &[(
        "A rootless bundle's config.json in the current directory:",
        "gpurun spec --rootless",
    )],
    "",
);

const CHECKPOINT: Text = (
    "Saves a running container with CRIU into --image-path; the container stops unless \
--leave-running. A GPU container is saved too: gpurun locks and checkpoints each \
CUDA process through the driver's own checkpoint API first, so device memory is in \
the images (driver 570 or newer, CRIU 4 or newer).",
    &[(
        "Checkpoint demo into /var/lib/ckpt/demo:",
        "gpurun checkpoint --image-path /var/lib/ckpt/demo demo",
    )],
    "0 once the images are written.",
);

const RESTORE: Text = (
    "Restores a container from a checkpoint's images, with the bundle it was created \
from; CUDA processes get their device memory back before they run again.",
    &[(
        "Restore demo from its images and bundle:",
        "gpurun restore --image-path /var/lib/ckpt/demo --bundle ./bundle demo",
    )],
    "The container's own exit status; 0 with --detach once it runs again.",
);

const UPDATE: Text = (
    "Changes a running container's cgroup limits, from flags or from a JSON resources \
file (-r, - for standard input), as runc update does.",
    &[(
        "Limit demo to 1 GiB of memory and 100 processes:",
        "gpurun update --memory 1g --pids-limit 100 demo",
    )],
    "",
);

const EVENTS: Text = (
    "Prints a container's events and statistics as JSON lines, every --interval, or \
once with --stats.",
    &[(
        "One statistics event for demo:",
        "gpurun events --stats demo",
    )],
    "",
);

const IMPORT: Text = (
    "Unpacks an image into a new bundle: its layers into rootfs and its config into \
config.json (the image's command, environment and working directory). The image can \
be an OCI layout, an OCI archive, a docker save archive or a registry's. With \
-o FILE.sqsh it writes one squashfs image file instead, for run --image. A user's \
import maps the image's owners onto the user's subordinate ids.",
    &[
        (
            "A bundle from a docker save archive:",
            "gpurun import ./image.tar -o ./bundle",
        ),
        (
            "A squashfs image file from the same archive:",
            "gpurun import ./image.tar -o ./app.sqsh",
        ),
    ],
    "",
);

const SETUP: Text = (
    "Registers gpurun in an engine's config: containerd, Docker, Podman, CRI-O, LXC or \
Slurm. It keeps the file's other settings, backs the file up, changes nothing a \
second time and, with --undo, puts the backup back. --dry-run prints the new config.",
    &[
        (
            "Register gpurun in containerd's config:",
            "gpurun setup containerd",
        ),
        (
            "Put Docker's config back as it was:",
            "gpurun setup docker --undo",
        ),
    ],
    "",
);

const DOCTOR: Text = (
    "Checks, for the user who runs it, what running containers here needs: the state \
directory, user namespaces and subordinate ids, newuidmap, cgroups and the cgroup \
drivers engines use, and the NVIDIA driver's files and device nodes. Each check is \
one line, ok or FAIL with the fix, and a verdict ends it.",
    &[("Check this host for GPU containers:", "gpurun doctor --gpu")],
    "0 when the host can run containers (and GPU containers, with --gpu); 1 otherwise, \
the failing checks marked FAIL.",
);

const GPU_PLAN: Text = (
    "Prints exactly what a bundle's container would get: its GPUs, device nodes, \
driver files by capability, mounts, environment and linker cache, decided as create \
decides it, without creating anything.",
    &[(
        "The plan for ./bundle with GPU 0, as JSON:",
        "gpurun gpu plan --gpus 0 --json ./bundle",
    )],
    "",
);

const GPU_CDI: Text = (
    "Writes NVIDIA's form of a CDI spec for this host (nvidia.com/gpu by default), to \
standard output or -o FILE; --check FILE compares a spec on disk with the host as it \
is now, as after a driver upgrade or a MIG change.",
    &[
        (
            "Write the spec engines read:",
            "gpurun gpu cdi -o /var/run/cdi/nvidia.yaml",
        ),
        (
            "Is the spec still right for this host?",
            "gpurun gpu cdi --check /var/run/cdi/nvidia.yaml",
        ),
    ],
    "0 when the spec is written or printed, or with --check when it is up to date; \
1 when --check finds it missing or stale.",
);

const GPU_VERIFY: Text = (
    "Runs nvidia-smi -L in a throwaway container with the GPUs asked for and compares \
the GPUs it lists with the host's.",
    &[(
        "Verify that a container sees GPU 0 and only GPU 0:",
        "gpurun gpu verify --gpus 0",
    )],
    "0 when the throwaway container saw exactly the GPUs asked for; 1 otherwise, the \
verdict line saying why.",
);

const GPU_INFO: Text = (
    "Prints the driver and CUDA versions and each GPU (index, minor number, model, UUID, bus \
location), from the driver, as nvidia-container-cli info does.",
    &[("The host's GPUs as JSON:", "gpurun gpu info --json")],
    "",
);

const FEATURES: Text = (
    "Prints what this runtime supports as the OCI features JSON runc prints: \
namespaces, capabilities, mount options, seccomp, cgroup drivers, and in \
annotations what the GPU support offers on this host.",
    &[("The features JSON:", "gpurun features")],
    "",
);

const CDI_HOOK: Text = (
    "Carries out NVIDIA's CDI hooks for a runtime that runs hooks, such as runc or \
crun: a spec whose hooks name gpurun cdi-hook (gpurun gpu cdi --hook-program gpurun). \
It reads the container's state on standard input and writes only inside the \
container's root filesystem. gpurun itself does these hooks natively.",
    &[],
    "0 when the hook is done.",
);

const LXC_HOOK: Text = (
    "An LXC mount hook (lxc.hook.mount = gpurun lxc-hook): gives an LXC container the \
GPUs its lxc.environment asks for with NVIDIA_VISIBLE_DEVICES, as gpurun gives them \
to an OCI container.",
    &[],
    "0 when the container's GPUs are in place.",
);
