//! The GPU roots for this invocation: flags, environment, config file.

use anyhow::Result;
use gpurun_gpu::request::RequestPolicy;
use gpurun_gpu::{RootFlags, Roots};

use crate::runtime::context::Settings;

pub fn resolve(flags: &Settings) -> Result<Roots> {
    Roots::resolve(
        &RootFlags {
            driver_root: flags.driver_root.clone(),
            dev_root: flags.dev_root.clone(),
            proc_root: flags.proc_root.clone(),
        },
        &|key| std::env::var(key).ok(),
    )
}

/// Which device requests count, from the config files.
pub fn request_policy() -> Result<RequestPolicy> {
    gpurun_gpu::roots::request_policy(&|key| std::env::var(key).ok())
}
