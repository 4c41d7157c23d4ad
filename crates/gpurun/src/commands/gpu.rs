//! `gpurun gpu info|list|plan|cdi`: views of the GPU library (`cdi -o` writes a spec).

use std::fs;

use anyhow::{Context, Result};
use gpurun_gpu::{cdi, flow, inventory, request, Source};

use crate::cli::GpuCommand;
use crate::runtime::{context::Ctx, spec::driver_paths, spec::prepare};

pub fn gpu(ctx: &Ctx, command: GpuCommand) -> Result<()> {
    let roots = driver_paths::resolve(&ctx.settings)?;
    match command {
        GpuCommand::Info { json } => info(&roots, json),
        GpuCommand::List { json } => list(&roots, json),
        GpuCommand::Plan { bundle, json, gpus } => plan(ctx, roots, &bundle, json, gpus),
        GpuCommand::Verify { .. } => unreachable!("dispatched to verify::verify"),
        GpuCommand::Cdi {
            output,
            kind,
            hook_program,
            check,
        } => cdi_spec(&roots, output, &kind, &hook_program, check),
    }
}

/// `gpu info`: the driver and each GPU, as nvidia-container-cli info.
fn info(roots: &gpurun_gpu::Roots, json: bool) -> Result<()> {
    let inv = inventory::discover(roots, Source::Auto)?;
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
    if let Some(wsl) = &inv.wsl {
        println!(
            "WSL2:           {} (driver store {})",
            gpurun_gpu::inventory::wsl::DXG,
            wsl.stores_shown()
        );
    }
    if let Some(tegra) = &inv.tegra {
        println!(
            "Tegra:          CSV mode, {} entries from {}",
            tegra.list.entries.len(),
            tegra.csv_files.join(", ")
        );
    }
    for note in &inv.notes {
        println!("Note:           {note}");
    }
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
    Ok(())
}

/// `gpu list`: device nodes and driver files, as nvidia-container-cli list.
fn list(roots: &gpurun_gpu::Roots, json: bool) -> Result<()> {
    let inv = inventory::discover(roots, Source::Auto)?;
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
    Ok(())
}

/// `gpu cdi`: this host's CDI spec, written, printed, or checked against a file.
fn cdi_spec(
    roots: &gpurun_gpu::Roots,
    output: Option<std::path::PathBuf>,
    kind: &str,
    hook_program: &str,
    check: Option<std::path::PathBuf>,
) -> Result<()> {
    let inv = inventory::discover(roots, Source::Auto)?;
    let hooks = match hook_program {
        "nvidia-cdi-hook" => cdi::HookProgram::NvidiaCdiHook,
        _ => cdi::HookProgram::Gpurun(std::env::current_exe().context("find this gpurun binary")?),
    };
    let mut spec = match kind {
        cdi::KIND => cdi::spec(&inv, &hooks),
        cdi::IMEX_KIND => cdi::imex_spec(&inv)?,
        request::MANAGEMENT_KIND => cdi::management_spec(&inv, &hooks),
        other => anyhow::bail!(
            "--kind {other:?}: gpurun writes {}, {} and {}",
            cdi::KIND,
            cdi::IMEX_KIND,
            request::MANAGEMENT_KIND
        ),
    };
    if driver_paths::request_policy()?.device_node_groups {
        cdi::give_device_groups(&mut spec);
    }
    let text = serde_json::to_string_pretty(&spec)? + "\n";
    if let Some(path) = check {
        return check_cdi_spec(&path, &spec);
    }
    match output {
        Some(path) => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).ok();
            }
            fs::write(&path, text).with_context(|| format!("write {}", path.display()))
        }
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// `gpu cdi --check FILE`: whether a spec written earlier (JSON or YAML)
/// is what this host gives now; stale specs name GPUs or driver files that
/// changed, so the exit status is 1 and the difference is said in one line.
fn check_cdi_spec(path: &std::path::Path, now: &impl serde::Serialize) -> Result<()> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "{}: missing: write it with \"gpurun gpu cdi -o {}\"",
                path.display(),
                path.display()
            );
            std::process::exit(1);
        }
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let written: serde_json::Value = serde_yaml::from_str(&text)
        .with_context(|| format!("{} is not a CDI spec (JSON or YAML)", path.display()))?;
    let now = serde_json::to_value(now)?;
    if written == now {
        println!("{}: up to date", path.display());
        return Ok(());
    }
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (old, new) = (names(&written), names(&now));
    let what = if old != new {
        format!(
            "its devices are [{}], this host's are [{}]",
            old.join(", "),
            new.join(", ")
        )
    } else {
        "its edits differ from this host's (driver files, nodes or hooks)".to_owned()
    };
    println!(
        "{}: stale: {what}; write it again with \"gpurun gpu cdi -o {}\"",
        path.display(),
        path.display()
    );
    std::process::exit(1);
}

/// `gpu plan BUNDLE`: what `create` of that bundle would give it, from the
/// same decision (`flow::decide`), here and now: CDI devices from this
/// host's specs, NVIDIA's CDI edits, a Slurm job or step, the config.
fn plan(
    ctx: &Ctx,
    roots: gpurun_gpu::Roots,
    bundle: &std::path::Path,
    json: bool,
    gpus: Option<String>,
) -> Result<()> {
    let mut spec = prepare::load_spec(bundle)?;
    // As `run --gpus LIST` would ask.
    let invoker = gpus.map(|devices| flow::InvokerGpus {
        devices: Some(devices),
        capabilities: None,
    });
    let rootfs = prepare::rootfs_of(&spec, bundle)?;
    let user_spec = spec.clone();
    let store = ctx.root.join(flow::CACHE_DIR);
    let slurm_step = prepare::slurm_step_we_run_in();
    let around = flow::Surroundings {
        invoker: invoker.as_ref(),
        slurm_gpus_by_default: false,
        slurm_step: slurm_step.as_ref(),
        rootfs: &rootfs,
        cache_dir: Some(&store),
    };
    let decision = flow::decide(
        &mut spec,
        || Ok(roots),
        driver_paths::request_policy,
        &around,
    )?;
    match decision {
        flow::Decision::Planned { request, plan, .. } => print_plan(&request, &plan, json),
        flow::Decision::CdiEdits { request } => print_cdi_edits(&request, &user_spec, &spec, json),
        flow::Decision::Nothing { request } => {
            if json {
                println!("null");
                return Ok(());
            }
            if request.ignored.is_empty() {
                println!("no GPU requested: NVIDIA_VISIBLE_DEVICES is unset, empty or void");
            } else {
                println!("no GPU request counts:");
            }
            for i in &request.ignored {
                println!("ignored        {} {:?}: {}", i.source, i.value, i.reason);
            }
            Ok(())
        }
    }
}

/// NVIDIA's CDI edits as the container gets them: its device nodes, the
/// mounts the CDI devices added, its env; the hooks are done natively.
fn print_cdi_edits(
    request: &request::Request,
    user_spec: &libcontainer::oci_spec::runtime::Spec,
    spec: &libcontainer::oci_spec::runtime::Spec,
    json: bool,
) -> Result<()> {
    let devices: Vec<String> = spec
        .linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .map(|d| d.iter().map(|d| d.path().display().to_string()).collect())
        .unwrap_or_default();
    let before: Vec<&std::path::Path> = user_spec
        .mounts()
        .iter()
        .flatten()
        .map(|m| m.destination().as_path())
        .collect();
    let mounts: Vec<(String, String)> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| !before.contains(&m.destination().as_path()))
        .map(|m| {
            let source = m.source().as_ref().map(|s| s.display().to_string());
            (
                m.destination().display().to_string(),
                source.unwrap_or_default(),
            )
        })
        .collect();
    let cdi: Vec<&str> = request
        .cdi_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    if json {
        let mounts: Vec<serde_json::Value> = mounts
            .iter()
            .map(|(d, s)| serde_json::json!({"destination": d, "source": s}))
            .collect();
        let view = serde_json::json!({"cdiEdits": {
            "cdiDevices": cdi, "deviceNodes": devices, "addedMounts": mounts,
            "ignoredRequests": request.sources,
        }});
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(());
    }
    println!("NVIDIA's CDI edits say what this container gets; their hooks are done natively");
    for name in cdi {
        println!("CDI device     {name}");
    }
    for source in &request.sources {
        println!("ignored        the GPU request from {source}: the CDI edits win");
    }
    for d in devices {
        println!("device         {d}");
    }
    for (destination, source) in mounts {
        println!("mount          {destination} <- {source}");
    }
    Ok(())
}

/// gpurun's own plan, as text or JSON.
fn print_plan(request: &request::Request, plan: &gpurun_gpu::plan::Plan, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(plan)?);
        return Ok(());
    }
    if let Some(source) = request.sources.first() {
        println!("Request from:  {source}");
    }
    for i in &request.ignored {
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
    Ok(())
}
