//! The bundle's spec made ready for libcontainer: the GPU edits and
//! checks (prepare), refusals of bad input (validate), the spec that
//! `run --rootfs` makes (with a Slurm step's MPI pass-through), the user
//! namespace's id maps, and where the driver's files are.

pub mod driver_paths;
pub mod idmap;
pub mod prepare;
pub mod rootfs_spec;
pub mod slurm_mpi;
pub mod validate;
