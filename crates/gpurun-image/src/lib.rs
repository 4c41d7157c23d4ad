//! `gpurun import`: an OCI layout directory, an OCI archive or a `docker
//! save` archive, unpacked into a directory with every digest checked and
//! no write outside it.

pub mod defaults;
pub mod oci;
pub mod registry;
pub mod sif;
pub mod source;
pub mod unpack;
mod user_namespace;

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

pub use oci::sha256_hex;
pub use source::{Image, Layer};
pub use unpack::Stats;
pub use user_namespace::in_user_namespace;

/// What the caller hears while layers are unpacked.
pub enum Progress<'a> {
    Layer {
        index: usize,
        count: usize,
        layer: &'a Layer,
    },
    Bytes(u64),
    Done {
        index: usize,
    },
}

/// Reads an image and resolves its layers, checking the digests of its
/// index, manifest and config.
pub fn open(image: &Path, tag: Option<&str>) -> Result<(source::Store, Image)> {
    let store = source::Store::open(image)?;
    let resolved = source::resolve(&store, tag)?;
    Ok((store, resolved))
}

/// Counts bytes for the progress callback.
struct Counting<'a, R> {
    inner: R,
    since_report: u64,
    report: &'a mut dyn FnMut(Progress),
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.since_report += n as u64;
        if self.since_report >= 1 << 20 || n == 0 {
            (self.report)(Progress::Bytes(self.since_report));
            self.since_report = 0;
        }
        Ok(n)
    }
}

/// Unpacks every layer of `image` into `rootfs`, bottom first. `chown`
/// keeps the owners of the tar headers (as root or in a user namespace).
pub fn unpack(
    store: &source::Store,
    image: &Image,
    rootfs: &Path,
    chown: bool,
    report: &mut dyn FnMut(Progress),
) -> Result<Stats> {
    let mut unpacker = unpack::Unpacker::new(rootfs, chown)?;
    let count = image.layers.len();
    for (index, layer) in image.layers.iter().enumerate() {
        report(Progress::Layer {
            index,
            count,
            layer,
        });
        let blob = store.open_file(&layer.path)?;
        let context = || format!("layer {}/{count} ({})", index + 1, layer.digest);
        let (actual, size) = match layer.digest_of {
            source::DigestOf::Blob => {
                let hashing = source::Hashing::new(Counting {
                    inner: blob,
                    since_report: 0,
                    report: &mut *report,
                });
                let hashing = unpacker.apply_layer(hashing).with_context(context)?;
                (hashing.hasher, hashing.bytes)
            }
            source::DigestOf::Uncompressed => {
                // docker-save layers are plain tars; their diff_id is the
                // digest of exactly those bytes.
                let counting = Counting {
                    inner: blob,
                    since_report: 0,
                    report: &mut *report,
                };
                let mut hashing = source::Hashing::new(counting);
                unpacker.apply_tar(&mut hashing).with_context(context)?;
                std::io::copy(&mut hashing, &mut std::io::sink())?;
                (hashing.hasher, hashing.bytes)
            }
        };
        use sha2::Digest;
        let actual = format!("sha256:{}", hex::encode(actual.finalize()));
        if actual != layer.digest {
            bail!(
                "{}: digest mismatch: expected {}, got {actual}; the image is corrupt or was tampered with",
                context(),
                layer.digest
            );
        }
        if let Some(expected) = layer.size {
            if expected != size {
                bail!(
                    "{}: {size} bytes, but the manifest says {expected}",
                    context()
                );
            }
        }
        report(Progress::Done { index });
    }
    unpacker.finish()
}
