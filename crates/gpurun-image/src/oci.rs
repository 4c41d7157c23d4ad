//! Facts of the OCI image layout that reading a store and pulling into
//! one share: the tag annotation, digests, the platform to pick.

use anyhow::{bail, Result};

/// The annotation that names an image in an OCI layout's index.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// `sha256:<64 hex>`, the only digest gpurun verifies; anything else is
/// refused rather than trusted unchecked.
pub fn check_digest(digest: &str) -> Result<&str> {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(hex),
        _ => bail!("unsupported digest {digest:?}: gpurun verifies sha256 digests only"),
    }
}

/// This host's architecture as OCI platforms name it.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
