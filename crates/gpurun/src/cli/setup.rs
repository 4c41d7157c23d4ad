//! gpurun's setup and lxc-hook flags.

use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Containerd,
    Docker,
    Podman,
    Lxc,
    Slurm,
    Crio,
}

#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// The engine whose config to edit
    #[arg(value_enum)]
    pub engine: Engine,
    /// The config file (default: the engine's usual one)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the new config instead of writing it
    #[arg(long)]
    pub dry_run: bool,
    /// Also make gpurun the engine's default runtime
    #[arg(long)]
    pub default: bool,
    /// The runtime's name in the engine (and the Kubernetes handler)
    #[arg(long, default_value = "gpurun")]
    pub runtime_name: String,
    /// The gpurun binary to register (default: this one)
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Docker: where to put the nvidia-container-runtime-hook link, which
    /// dockerd must find on its PATH to accept --gpus (default: the
    /// binary's directory)
    #[arg(long)]
    pub hook_dir: Option<PathBuf>,
    /// containerd: also write the settings of a shared (multi-tenant)
    /// Kubernetes node into gpurun's config file: only the scheduler's
    /// allocation (CDI annotations, device-plugin volume mounts) counts,
    /// not a tenant's own NVIDIA_VISIBLE_DEVICES
    #[arg(long)]
    pub multi_tenant: bool,
    /// The gpurun config file --multi-tenant writes (default:
    /// $GPURUN_CONFIG, else /etc/gpurun/config.toml)
    #[arg(long, requires = "multi_tenant")]
    pub gpurun_config: Option<PathBuf>,
    /// Slurm: register this SPANK plugin (spank_gpurun.so: pyxis's
    /// --container-image and the other --container-* flags) in
    /// plugstack.conf (slurm.conf's PlugStackConfig, else beside
    /// slurm.conf) instead of writing oci.conf
    #[arg(long, value_name = "PLUGIN")]
    pub spank: Option<PathBuf>,
    /// Put back the config as it was before setup: the newest backup
    /// setup made, or no file where setup created it (Docker: the hook
    /// link to gpurun goes too)
    #[arg(long, conflicts_with_all = ["default", "multi_tenant"])]
    pub undo: bool,
}

#[derive(clap::Args, Debug)]
pub struct LxcHookArgs {
    /// What LXC passes to a version 0 hook: the container's name, the
    /// section ("lxc") and the hook type ("mount")
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub lxc_args: Vec<String>,
}
