//! Where an image's blobs come from: an OCI layout directory, an OCI archive
//! (a tar of such a directory), or a `docker save` archive; and which
//! layers, in which order, with which digests.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::oci::{check_digest, host_arch, sha256_hex, REF_NAME};

/// Index, manifest and config files are small; larger ones are refused.
const MAX_JSON: u64 = 16 << 20;

/// What a layer's digest covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestOf {
    /// The blob as stored (OCI descriptors).
    Blob,
    /// The uncompressed tar (docker-save `diff_ids`).
    Uncompressed,
}

#[derive(Debug, Clone)]
pub struct Layer {
    /// Path of the blob inside the image.
    pub path: String,
    /// `sha256:<hex>`.
    pub digest: String,
    pub digest_of: DigestOf,
    pub size: Option<u64>,
}

/// A resolved image: its config and its layers, bottom first.
#[derive(Debug, Clone)]
pub struct Image {
    pub format: &'static str,
    pub config: serde_json::Value,
    pub layers: Vec<Layer>,
}

/// Random access to the files of an image, wherever they are stored.
pub enum Store {
    Dir(PathBuf),
    /// Offsets and sizes of the archive's regular files.
    Tar {
        file: PathBuf,
        entries: HashMap<String, (u64, u64)>,
    },
}

/// A relative path with no `..`, `.` or root: what an image's own
/// references must look like.
fn clean_relative(path: &str) -> Option<String> {
    let p = Path::new(path.trim_start_matches("./"));
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?.to_owned()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

impl Store {
    pub fn open(path: &Path) -> Result<Store> {
        let meta = std::fs::metadata(path).map_err(|e| {
            anyhow::anyhow!(
                "image {}: {}: name an OCI layout directory, an OCI or docker-save archive, \
                 docker://HOST/NAME:TAG or oci://LAYOUT:TAG",
                path.display(),
                match e.kind() {
                    std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
                    std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
                    _ => e.to_string(),
                }
            )
        })?;
        if meta.is_dir() {
            return Ok(Store::Dir(path.to_path_buf()));
        }
        let mut entries = HashMap::new();
        let mut archive = tar::Archive::new(
            File::open(path).with_context(|| format!("open {}", path.display()))?,
        );
        for entry in archive
            .entries()
            .with_context(|| format!("{} is not an image: give an OCI layout directory, an OCI archive or a docker save archive (docker://HOST/NAME:TAG for a registry)", path.display()))?
        {
            let entry = entry.with_context(|| format!("{} is not an image: give an OCI layout directory, an OCI archive or a docker save archive", path.display()))?;
            if entry.header().entry_type().is_file() {
                let name = entry.path()?.to_string_lossy().into_owned();
                if let Some(name) = clean_relative(&name) {
                    entries.insert(name, (entry.raw_file_position(), entry.size()));
                }
            }
        }
        Ok(Store::Tar {
            file: path.to_path_buf(),
            entries,
        })
    }

    pub fn exists(&self, name: &str) -> bool {
        match self {
            Store::Dir(dir) => clean_relative(name).is_some_and(|n| dir.join(n).is_file()),
            Store::Tar { entries, .. } => {
                clean_relative(name).is_some_and(|n| entries.contains_key(&n))
            }
        }
    }

    /// Opens a file of the image; names with `..` or a root are refused.
    pub fn open_file(&self, name: &str) -> Result<Box<dyn Read>> {
        let clean = clean_relative(name)
            .with_context(|| format!("the image refers to {name:?}, a path outside it"))?;
        match self {
            Store::Dir(dir) => {
                let path = dir.join(&clean);
                // A blob that is a symlink could point anywhere on the host.
                let file = File::options()
                    .read(true)
                    .custom_flags_nofollow()
                    .open(&path)
                    .with_context(|| format!("the image has no {clean} (or it is a symlink)"))?;
                Ok(Box::new(file))
            }
            Store::Tar { file, entries } => {
                let &(offset, size) = entries
                    .get(&clean)
                    .with_context(|| format!("the archive has no {clean}"))?;
                let mut f = File::open(file)?;
                f.seek(SeekFrom::Start(offset))?;
                Ok(Box::new(f.take(size)))
            }
        }
    }

    fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<T> {
        let mut bytes = Vec::new();
        self.open_file(name)?
            .take(MAX_JSON + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_JSON {
            bail!("{name} is larger than {} MiB", MAX_JSON >> 20);
        }
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{name} is not valid JSON of the expected shape"))
    }

    /// Reads a blob and checks it against its digest.
    fn read_verified_json(&self, name: &str, digest: &str) -> Result<serde_json::Value> {
        let mut bytes = Vec::new();
        self.open_file(name)?
            .take(MAX_JSON + 1)
            .read_to_end(&mut bytes)?;
        let actual = sha256_hex(&bytes);
        if Some(actual.as_str()) != digest.strip_prefix("sha256:") {
            bail!("{name}: digest mismatch: expected {digest}, got sha256:{actual}; the image is corrupt or was tampered with");
        }
        serde_json::from_slice(&bytes).with_context(|| format!("{name} is not valid JSON"))
    }
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOFOLLOW)
    }
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: Option<u64>,
    platform: Option<Platform>,
    #[serde(default)]
    annotations: HashMap<String, String>,
}

impl Descriptor {
    /// The name an OCI layout gives this image (`latest`, or a whole
    /// reference for gpurun's cache).
    fn ref_name(&self) -> Option<&str> {
        self.annotations.get(REF_NAME).map(String::as_str)
    }
}

#[derive(Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct DockerEntry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

fn blob_path(digest: &str) -> Result<String> {
    Ok(format!("blobs/sha256/{}", check_digest(digest)?))
}

/// Finds the image in a store: OCI (index.json) or docker-save
/// (manifest.json). In an OCI layout that names several images, `tag`
/// picks one by its `org.opencontainers.image.ref.name`.
pub fn resolve(store: &Store, tag: Option<&str>) -> Result<Image> {
    if store.exists("index.json") {
        return resolve_oci(store, tag);
    }
    if store.exists("manifest.json") {
        return resolve_docker_save(store);
    }
    let at = match store {
        Store::Dir(dir) => dir,
        Store::Tar { file, .. } => file,
    };
    bail!(
        "{} is not an image: it has no index.json (OCI layout or archive) and no manifest.json (docker save archive)",
        at.display()
    )
}

/// An OCI layout or archive: the tagged manifest (or the only one), through
/// nested indexes (multi-platform images) to this host's platform.
fn resolve_oci(store: &Store, tag: Option<&str>) -> Result<Image> {
    let mut index: Index = store.read_json("index.json")?;
    pick_tag(&mut index, tag)?;
    for _ in 0..4 {
        let pick = index
            .manifests
            .iter()
            .find(|d| {
                d.platform
                    .as_ref()
                    .is_none_or(|p| p.os == "linux" && p.architecture == host_arch())
            })
            .with_context(|| format!("the image has no manifest for linux/{}", host_arch()))?;
        let path = blob_path(&pick.digest)?;
        if pick.media_type.contains("index") || pick.media_type.contains("manifest.list") {
            index = serde_json::from_value(store.read_verified_json(&path, &pick.digest)?)?;
            continue;
        }
        let manifest: Manifest =
            serde_json::from_value(store.read_verified_json(&path, &pick.digest)?)
                .context("the image manifest has no config or layers")?;
        let config = store.read_verified_json(
            &blob_path(&manifest.config.digest)?,
            &manifest.config.digest,
        )?;
        let layers = manifest
            .layers
            .iter()
            .map(|d| {
                Ok(Layer {
                    path: blob_path(&d.digest)?,
                    digest: d.digest.clone(),
                    digest_of: DigestOf::Blob,
                    size: d.size,
                })
            })
            .collect::<Result<_>>()?;
        return Ok(Image {
            format: if matches!(store, Store::Dir(_)) {
                "OCI layout"
            } else {
                "OCI archive"
            },
            config,
            layers,
        });
    }
    bail!("index.json nests image indexes too deeply");
}

/// Keeps the index's manifests tagged `tag`; without one, the layout must
/// hold a single image.
fn pick_tag(index: &mut Index, tag: Option<&str>) -> Result<()> {
    let mut names: Vec<String> = index
        .manifests
        .iter()
        .filter_map(|d| d.ref_name().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    match tag {
        Some(tag) => {
            index.manifests.retain(|d| d.ref_name() == Some(tag));
            if index.manifests.is_empty() {
                bail!(
                    "the layout has no image tagged {tag:?}; it has {}",
                    if names.is_empty() {
                        "no tags".to_owned()
                    } else {
                        names.join(", ")
                    }
                );
            }
        }
        None if names.len() > 1 => bail!(
            "the layout holds {} images ({}): pick one with oci://DIR:TAG",
            names.len(),
            names.join(", ")
        ),
        None => {}
    }
    Ok(())
}

/// A `docker save` archive: its first image, each layer checked against
/// the config's diff_ids.
fn resolve_docker_save(store: &Store) -> Result<Image> {
    let entries: Vec<DockerEntry> = store.read_json("manifest.json")?;
    let entry = entries
        .first()
        .context("manifest.json lists no image: is this a docker save archive?")?;
    // The config's file name is its digest: "<hex>.json" or a blob path.
    let config_hex = Path::new(&entry.config)
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".json").to_owned())
        .unwrap_or_default();
    let config = store.read_verified_json(&entry.config, &format!("sha256:{config_hex}"))?;
    let diff_ids: Vec<String> = config["rootfs"]["diff_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if diff_ids.len() != entry.layers.len() {
        bail!(
            "the image config lists {} layer digests for {} layers: the archive is corrupt",
            diff_ids.len(),
            entry.layers.len()
        );
    }
    let layers = entry
        .layers
        .iter()
        .zip(diff_ids)
        .map(|(path, digest)| {
            check_digest(&digest)?;
            Ok(Layer {
                path: path.clone(),
                digest,
                digest_of: DigestOf::Uncompressed,
                size: None,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Image {
        format: "docker save archive",
        config,
        layers,
    })
}

/// Counts bytes and hashes them as they pass.
pub struct Hashing<R> {
    inner: R,
    pub hasher: sha2::Sha256,
    pub bytes: u64,
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> Self {
        use sha2::Digest;
        Hashing {
            inner,
            hasher: sha2::Sha256::new(),
            bytes: 0,
        }
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_stay_inside() {
        assert_eq!(
            clean_relative("./blobs/sha256/ab").as_deref(),
            Some("blobs/sha256/ab")
        );
        assert_eq!(clean_relative("../x"), None);
        assert_eq!(clean_relative("/etc/passwd"), None);
        assert_eq!(clean_relative("a/../../b"), None);
        assert!(check_digest("sha256:../../etc").is_err());
        assert!(check_digest("md5:00").is_err());
        assert!(check_digest(&format!("sha256:{}", "a".repeat(64))).is_ok());
    }
}
