//! `gpurun gpu info|list|plan|cdi`: read-only views of the GPU library.

use std::fs;

use anyhow::{Context, Result};
use gpurun_gpu::{cdi, flow, inventory, request, Source};

use crate::cli::GpuCommand;
use crate::runtime::{context::Ctx, driver_paths, prepare};

pub fn gpu(ctx: &Ctx, command: GpuCommand) -> Result<()> {
    let roots = driver_paths::resolve(&ctx.settings)?;
    match command {
        GpuCommand::Info { json } => {
            let inv = inventory::discover(&roots, Source::Auto)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&inv)?);
                return Ok(());
            }
            println!("NVRM version:   {}", inv.driver_version);
            println!(
                "CUDA version:   {}",
                inv.cuda_version.as_deref().unwrap_or("unknown")
            );
            println!("Source:         {}", inv.source);
            for g in &inv.gpus {
                println!();
                println!("Device Index:   {}", g.index);
                println!("Device Minor:   {}", g.minor);
                println!("Model:          {}", g.model);
                println!(
                    "Brand:          {}",
                    g.brand.as_deref().unwrap_or("unknown")
                );
                println!("GPU UUID:       {}", g.uuid);
                println!("Bus Location:   {}", g.pci_bus_id);
                println!("Architecture:   {}", g.arch.as_deref().unwrap_or("unknown"));
                for m in &g.migs {
                    println!("MIG Device:     {} {}", m.index, m.uuid);
                }
            }
            let channels: Vec<String> = inv.imex_channels().map(|n| n.minor.to_string()).collect();
            if inv.imex_major.is_some() {
                println!();
                println!(
                    "IMEX channels:  {}",
                    if channels.is_empty() {
                        "none made".to_owned()
                    } else {
                        channels.join(",")
                    }
                );
            }
            for (family, nodes) in &inv.gated_nodes {
                let paths: Vec<&str> = nodes.iter().map(|n| n.path.as_str()).collect();
                println!(
                    "{:<16}{}",
                    format!("{}:", family.env_var()),
                    paths.join(" ")
                );
            }
        }
        GpuCommand::List { json } => {
            let inv = inventory::discover(&roots, Source::Auto)?;
            let mut nodes: Vec<_> = inv.control_nodes.clone();
            nodes.extend(inv.gpus.iter().filter_map(|g| g.node.clone()));
            nodes.extend(inv.gpus.iter().flat_map(|g| g.drm_nodes.iter().cloned()));
            nodes.extend(inv.other_nodes.iter().cloned());
            nodes.extend(inv.gated_nodes.values().flatten().cloned());
            if json {
                let out = serde_json::json!({
                    "driverVersion": inv.driver_version,
                    "deviceNodes": nodes,
                    "files": inv.files,
                    "firmware": inv.firmware,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            for n in &nodes {
                println!("{}", n.host_path.display());
            }
            for (cap, files) in &inv.files {
                for f in files {
                    println!("{}\t{cap}", f.host_path.display());
                }
            }
            for f in &inv.firmware {
                println!("{}\tfirmware", f.host_path.display());
            }
        }
        GpuCommand::Plan { bundle, json } => {
            let spec = prepare::load_spec(&bundle)?;
            let rootfs = prepare::rootfs_of(&spec, &bundle)?;
            let req = request::from_spec(&spec, driver_paths::request_policy)?;
            let source = req.sources.first().cloned();
            let ignored = req.ignored.clone();
            // As `create` would plan it: inside a Slurm job, bounded by it.
            let job = flow::SlurmJob::from_env(false)?;
            let (_, planned) = flow::resolve(
                || Ok(roots.clone()),
                req,
                job.as_ref(),
                Some(&rootfs),
                Some(&ctx.root.join(flow::CACHE_DIR)),
            )?;
            let Some((_, plan)) = planned else {
                if json {
                    println!("null");
                } else {
                    if ignored.is_empty() {
                        println!(
                            "no GPU requested: NVIDIA_VISIBLE_DEVICES is unset, empty or void"
                        );
                    } else {
                        println!("no GPU request counts:");
                    }
                    for i in &ignored {
                        println!("ignored        {} {:?}: {}", i.source, i.value, i.reason);
                    }
                }
                return Ok(());
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
                return Ok(());
            }
            if let Some(source) = source {
                println!("Request from:  {source}");
            }
            for i in &ignored {
                println!("ignored        {} {:?}: {}", i.source, i.value, i.reason);
            }
            let gpus: Vec<String> = plan
                .gpus
                .iter()
                .map(|g| format!("{} ({})", g.index, g.uuid))
                .collect();
            println!(
                "GPUs:          {}",
                if gpus.is_empty() {
                    "none".into()
                } else {
                    gpus.join(", ")
                }
            );
            let caps: Vec<&str> = plan.capabilities.iter().map(|c| c.name()).collect();
            println!("Capabilities:  {}", caps.join(","));
            for n in &plan.device_nodes {
                println!("device         {} (c {}:{})", n.path, n.major, n.minor);
            }
            for m in &plan.mounts {
                println!(
                    "mount          {} <- {}",
                    m.destination.display(),
                    m.source.display()
                );
            }
            for e in &plan.env {
                println!("env            {e}");
            }
            for e in &plan.ldcache {
                println!("ld.so.cache    {} => {}", e.name, e.path);
            }
            if let Some(copy) = &plan.proc_driver_nvidia {
                println!("masked         /proc/driver/nvidia");
                for bus in &copy.gpus {
                    println!("mount          /proc/driver/nvidia/gpus/{bus} (read-only)");
                }
            }
            if let Some(compat) = &plan.cuda_compat {
                println!(
                    "CUDA compat    {} {}: {}",
                    compat.library.display(),
                    if compat.used { "used" } else { "not used" },
                    compat.why
                );
            }
        }
        GpuCommand::Verify { .. } => unreachable!("dispatched to verify::verify"),
        GpuCommand::Cdi {
            output,
            kind,
            hook_program,
        } => {
            let inv = inventory::discover(&roots, Source::Auto)?;
            let hooks = match hook_program.as_str() {
                "nvidia-cdi-hook" => cdi::HookProgram::NvidiaCdiHook,
                _ => cdi::HookProgram::Gpurun(
                    std::env::current_exe().context("find this gpurun binary")?,
                ),
            };
            let spec = match kind.as_str() {
                cdi::KIND => cdi::spec(&inv, &hooks),
                cdi::IMEX_KIND => cdi::imex_spec(&inv)?,
                other => anyhow::bail!(
                    "--kind {other:?}: gpurun writes {} and {}",
                    cdi::KIND,
                    cdi::IMEX_KIND
                ),
            };
            let text = serde_json::to_string_pretty(&spec)? + "\n";
            match output {
                Some(path) => {
                    if let Some(dir) = path.parent() {
                        fs::create_dir_all(dir).ok();
                    }
                    fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
                }
                None => print!("{text}"),
            }
        }
    }
    Ok(())
}
