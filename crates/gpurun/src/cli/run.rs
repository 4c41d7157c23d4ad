//! `run`'s flags.

use std::path::PathBuf;

use clap::Args;
use gpurun_gpu::flow::InvokerGpus;

/// `run`: runc's flags, GPU shortcuts, and the HPC form that needs no
/// config.json: `run --rootfs DIR [-v SRC:DST] [-e K=V] [-w DIR] -- CMD`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Path to the bundle directory, containing config.json and root filesystem
    #[arg(short, long, conflicts_with = "rootfs")]
    pub bundle: Option<PathBuf>,
    /// Unix socket (file) path, which will receive the pseudoterminal's master fd
    #[arg(short, long)]
    pub console_socket: Option<PathBuf>,
    /// File to write the pid of the container's init to
    #[arg(short, long)]
    pub pid_file: Option<PathBuf>,
    /// Disable the use of the subreaper used to reap reparented processes
    #[arg(long)]
    pub no_subreaper: bool,
    /// Do not use pivot_root to jail the process inside the rootfs
    #[arg(long)]
    pub no_pivot: bool,
    /// Do not create a new session keyring for the container
    #[arg(long)]
    pub no_new_keyring: bool,
    /// Pass N additional file descriptors to the container
    #[arg(long, default_value = "0")]
    pub preserve_fds: i32,
    /// Keep container's state directory and cgroup after the container exits
    #[arg(long)]
    pub keep: bool,
    /// Detach from the container process (with --rootfs: print the id,
    /// discard the output, delete the container when it exits)
    #[arg(short, long)]
    pub detach: bool,

    /// GPUs for the container: all, none, indexes (0,1) or UUIDs; the same
    /// as setting NVIDIA_VISIBLE_DEVICES in config.json
    #[arg(long, value_parser = gpu_list)]
    pub gpus: Option<String>,
    /// Driver capabilities (NVIDIA_DRIVER_CAPABILITIES), e.g. compute,utility
    #[arg(long)]
    pub gpu_capabilities: Option<String>,

    /// Run this root filesystem directly, with a spec made on the fly
    /// (rootless for a non-root user, host network)
    #[arg(long, value_name = "DIR")]
    pub rootfs: Option<PathBuf>,
    /// Run this squashfs image file in place (enroot's .sqsh, mksquashfs's
    /// output), read-only, as --rootfs runs a directory (as root)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["bundle", "rootfs"])]
    pub image: Option<PathBuf>,
    /// With --image: a writable layer (tmpfs) over the image, gone with
    /// the container; the image file is never written
    #[arg(long)]
    pub writable: bool,
    /// With --image: the writable layer in DIR (made if missing) instead
    /// of a tmpfs, kept for the next run with the same DIR, which may then
    /// leave --image out; one container at a time
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "rootfs"])]
    pub layer: Option<PathBuf>,
    /// With --image and --writable or --layer: once the container ends,
    /// its root as it ended (the image and what it wrote) packed into FILE
    /// with mksquashfs (FILE is replaced)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["bundle", "rootfs"])]
    pub save: Option<PathBuf>,
    /// With --rootfs or --image: bind SRC on the host at DST in the container (:ro for read-only)
    #[arg(short = 'v', long = "volume", value_name = "SRC:DST[:ro]")]
    pub volumes: Vec<String>,
    /// With --rootfs or --image: set K=V in the container's environment (K alone copies ours)
    #[arg(short = 'e', long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// With --rootfs or --image: the working directory inside the container
    #[arg(short = 'w', long = "workdir", value_name = "DIR")]
    pub workdir: Option<String>,
    /// With --rootfs or --image: keep your uid and gid inside instead of becoming root
    #[arg(long)]
    pub keep_uid: bool,
    /// With --rootfs or --image: a private network namespace instead of the host's
    #[arg(long)]
    pub private_network: bool,
    /// With --image or --rootfs of an imported image: run the image's
    /// entrypoint with CMD as its arguments (without it, CMD replaces the
    /// entrypoint too)
    #[arg(long)]
    pub image_entrypoint: bool,
    /// With --image or --rootfs: every variable of gpurun's own environment
    /// that the image does not set, as pyxis gives a task the job's (set by
    /// the SPANK plugin)
    #[arg(long, hide = true)]
    pub job_env: bool,
    /// Set by `--image` without `--writable`: a tmpfs at /tmp.
    #[arg(skip)]
    pub private_tmp: bool,

    /// The container id (made up with --rootfs when left out)
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub container_id: Option<String>,
    /// With --rootfs or --image: the command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--gpus`, checked as NVIDIA_VISIBLE_DEVICES is, named as the flag.
fn gpu_list(value: &str) -> Result<String, String> {
    gpurun_gpu::formats::devlist::parse(Some(value))
        .map(|_| value.to_owned())
        .map_err(|e| {
            let why = e.to_string();
            let why = why.strip_prefix("NVIDIA_VISIBLE_DEVICES: ").unwrap_or(&why);
            format!("{why}; give all, none, indexes (0,1), GPU-<uuid>, MIG devices or CDI names")
        })
}

impl RunArgs {
    /// The invoker's own GPU request the GPU flags make, if any.
    pub fn invoker_gpus(&self) -> Option<InvokerGpus> {
        (self.gpus.is_some() || self.gpu_capabilities.is_some()).then(|| InvokerGpus {
            devices: self.gpus.clone(),
            capabilities: self.gpu_capabilities.clone(),
        })
    }
}
