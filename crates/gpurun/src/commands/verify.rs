//! `gpurun gpu verify`: checks our own injection by running `nvidia-smi -L`
//! in a throwaway container (runtime::verify), and reports what it saw.

use std::path::PathBuf;

use anyhow::Result;

use crate::runtime::context::Ctx;

/// Returns the exit code: 0 when the container saw exactly the GPUs it was
/// given, 1 otherwise (the report says why).
pub fn verify(ctx: &Ctx, rootfs: Option<PathBuf>, gpus: &str) -> Result<i32> {
    let v = crate::runtime::verify::verify(ctx, rootfs, gpus)?;
    println!(
        "host:       driver {}, {} GPU(s): {}",
        v.driver_version,
        v.host.len(),
        v.host.join(", ")
    );
    println!(
        "requested:  {gpus} -> {} GPU(s): {}",
        v.expected.len(),
        v.expected.join(", ")
    );
    let seen = v.seen();
    println!(
        "container:  nvidia-smi exit code {}, {} GPU(s): {}",
        v.code,
        seen.len(),
        seen.join(", ")
    );
    if v.passed() {
        println!("verdict:    OK: the container sees exactly the requested GPUs");
        return Ok(0);
    }
    println!("verdict:    {}", v.verdict());
    Ok(1)
}
