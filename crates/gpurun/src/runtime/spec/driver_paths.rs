//! The GPU roots and request settings for this invocation: flags,
//! environment, config files.

use std::sync::Mutex;

use anyhow::Result;
use gpurun_gpu::request::RequestPolicy;
use gpurun_gpu::roots::Config;
use gpurun_gpu::{RootFlags, Roots};

use crate::runtime::context::Settings;

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// The config files, read once per process: a GPU create asks for the
/// request settings and then for the roots.
fn config() -> Result<Config> {
    static READ: Mutex<Option<Config>> = Mutex::new(None);
    let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(config) = &*read {
        return Ok(config.clone());
    }
    let config = Config::read(&env)?;
    *read = Some(config.clone());
    Ok(config)
}

/// Whether the config files read: doctor names a bad one as such.
pub fn check_config() -> Result<()> {
    config().map(drop)
}

pub fn resolve(flags: &Settings) -> Result<Roots> {
    let flags = RootFlags {
        driver_root: flags.driver_root.clone(),
        dev_root: flags.dev_root.clone(),
        proc_root: flags.proc_root.clone(),
    };
    Ok(Roots::from_config(&flags, &env, config()?))
}

/// Which device requests count, from the config files.
pub fn request_policy() -> Result<RequestPolicy> {
    Ok(config()?.request_policy())
}
