//! runc's checkpoint and restore flags.

use std::path::PathBuf;

/// The flags runc's checkpoint and restore share.
#[derive(clap::Args, Debug)]
pub struct CriuFlags {
    /// Path to the criu image files
    #[arg(long, default_value = "checkpoint")]
    pub image_path: PathBuf,
    /// Path for work files and logs
    #[arg(long)]
    pub work_path: Option<PathBuf>,
    /// Allow open tcp connections
    #[arg(long)]
    pub tcp_established: bool,
    /// Allow external unix sockets
    #[arg(long)]
    pub ext_unix_sk: bool,
    /// Allow shell jobs
    #[arg(long)]
    pub shell_job: bool,
    /// Handle file locks
    #[arg(long)]
    pub file_locks: bool,
    /// Deduplicate the memory images of a parent checkpoint
    #[arg(long)]
    pub auto_dedup: bool,
    /// Dump or restore memory pages lazily (needs CRIU's lazy-pages daemon)
    #[arg(long)]
    pub lazy_pages: bool,
    /// Namespaces saved without their contents: only "network" (CRIU's limit)
    #[arg(long)]
    pub empty_ns: Vec<String>,
    /// cgroups mode for checkpoint: soft, full, strict or ignore (restore
    /// accepts it; gpurun moves the restored processes into the container's
    /// cgroup itself)
    #[arg(long, default_value = "soft", value_parser = ["soft", "full", "strict", "ignore"])]
    pub manage_cgroups_mode: String,
}

/// runc's checkpoint flags.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub criu: CriuFlags,
    /// Leave the process running after checkpointing
    #[arg(long)]
    pub leave_running: bool,
    /// Allow one to link unlinked files back when possible
    #[arg(long)]
    pub link_remap: bool,
    /// ADDRESS:PORT of a CRIU page server to send the memory pages to
    #[arg(long)]
    pub page_server: Option<String>,
    /// Path of a previous checkpoint's images, relative to --image-path
    #[arg(long)]
    pub parent_path: Option<String>,
    /// Dump only the memory, for a later full checkpoint with --parent-path
    #[arg(long)]
    pub pre_dump: bool,
    /// File descriptor CRIU writes \0 to once lazy pages are ready
    #[arg(long)]
    pub status_fd: Option<i32>,
    /// Seconds the NVIDIA driver may take to lock each CUDA process of a
    /// GPU container (its running GPU work ends first); 0: no limit
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub cuda_lock_timeout: u32,
    /// Container ID
    pub container_id: String,
}

/// runc's restore flags.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub criu: CriuFlags,
    /// Accepted for runc compatibility: the restored processes keep the
    /// LSM profile they were checkpointed with
    #[arg(long)]
    pub lsm_profile: Option<String>,
    /// Accepted for runc compatibility (SELinux mount context)
    #[arg(long)]
    pub lsm_mount_context: Option<String>,
    /// Path to the root of the bundle directory
    #[arg(short, long, default_value = ".")]
    pub bundle: PathBuf,
    /// Detach from the container's process
    #[arg(short, long)]
    pub detach: bool,
    /// File to write the process id to
    #[arg(long)]
    pub pid_file: Option<PathBuf>,
    /// Disable the subreaper that reaps reparented processes
    #[arg(long)]
    pub no_subreaper: bool,
    /// Accepted for runc compatibility (CRIU restores the root as it was)
    #[arg(long)]
    pub no_pivot: bool,
    /// Accepted for runc compatibility: containers with a terminal are not
    /// restored, so there is no pty to send
    #[arg(long)]
    pub console_socket: Option<PathBuf>,
    /// Container ID
    pub container_id: String,
}
