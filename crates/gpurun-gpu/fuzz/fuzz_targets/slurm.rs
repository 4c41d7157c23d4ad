//! Any Slurm job environment (SLURM_*_GPUS, CUDA_VISIBLE_DEVICES) gives an
//! allocation or an error, and mapping it onto GPUs never panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gpurun_gpu::fuzzing::slurm::run(data));
