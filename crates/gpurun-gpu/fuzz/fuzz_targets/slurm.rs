//! Any Slurm job environment (SLURM_*_GPUS, CUDA_VISIBLE_DEVICES) gives an
//! allocation or an error, and mapping it onto GPUs never panics.
#![no_main]
use gpurun_gpu::inventory::Gpu;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The input is "NAME=value" lines; the job id is always set.
    let get = |key: &str| {
        if key == "SLURM_JOB_ID" {
            return Some("42".to_owned());
        }
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let Ok(Some(allocation)) = gpurun_gpu::slurm::from_env(get) else {
        return;
    };
    let gpus: Vec<Gpu> = (0..4)
        .map(|index| Gpu {
            index,
            minor: index * 2,
            uuid: format!("GPU-0000000{index}-0000-0000-0000-000000000000"),
            pci_bus_id: String::new(),
            model: String::new(),
            arch: None,
            brand: None,
            node: None,
            drm_nodes: Vec::new(),
            migs: Vec::new(),
        })
        .collect();
    let _ = allocation.gpu_indexes(&gpus, |gpu| gpu.index != 3);
});
