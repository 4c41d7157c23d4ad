//! Filesystem primitives every gpurun crate shares, for trees that may be
//! hostile (an image's rootfs, a layer being unpacked, a driver root):
//! paths are resolved by the kernel with openat2(2) so that no symlink
//! leads out, and filesystems are mounted nowhere until placed by fd.

pub mod detached_mount;
mod openat2;
mod rootfs;

pub use openat2::{openat2, syscall_result, BENEATH, IN_ROOT};
pub use rootfs::{Found, Rootfs};
