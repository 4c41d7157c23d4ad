//! Pulling an image from a registry (`docker://HOST/NAME:TAG`) into the
//! local image cache, with `oci-client`.
//!
//! The cache is an OCI image layout (`blobs/sha256/<hex>`, `index.json`)
//! shared by every import: a blob already there is not fetched again, and
//! `import` unpacks from the cache as from any OCI layout, by the pulled
//! reference's name. Every blob is checked against its digest before it
//! gets its name in the cache. A download cut short leaves
//! `<hex>.partial`, and the next pull asks the registry for the rest only.
//!
//! Credentials come from `~/.docker/config.json` (or `$DOCKER_CONFIG`), as
//! `docker login` writes them (the registry's token service is followed by
//! the client); a registry's own CA from `/etc/docker/certs.d/HOST/*.crt`
//! (or `~/.docker/certs.d`), as Docker reads it.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{json, Value};

use crate::oci::{check_digest, host_arch, sha256_hex, REF_NAME};

const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// What the caller hears during a pull.
pub enum PullProgress<'a> {
    /// A blob is needed: its digest, size, and how much of it is cached.
    Blob {
        index: usize,
        count: usize,
        digest: &'a str,
        size: u64,
        have: u64,
    },
    /// Bytes of the current blob arrived.
    Bytes(u64),
    /// The current blob is complete and checked.
    Done { index: usize },
}

/// The local image cache: root's in /var/cache, a user's in
/// $XDG_CACHE_HOME (or ~/.cache); `$GPURUN_IMAGE_CACHE` overrides both.
pub fn default_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("GPURUN_IMAGE_CACHE") {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/gpurun/images");
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("gpurun/images")
}

/// `user:password` for `host` from Docker's config, if it has them.
fn docker_credentials(host: &str) -> Result<RegistryAuth> {
    use base64::Engine;
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")))
        .map(|d| d.join("config.json"));
    let Some(path) = config else {
        return Ok(RegistryAuth::Anonymous);
    };
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let config: Value = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not Docker's JSON config", path.display()))?;
    let auths = &config["auths"];
    let entry = [
        host.to_owned(),
        format!("https://{host}"),
        format!("https://{host}/v1/"),
        format!("https://{host}/v2/"),
    ]
    .iter()
    .map(|k| &auths[k.as_str()])
    .find(|e| !e.is_null())
    .cloned();
    let Some(entry) = entry else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let (Some(user), Some(password)) = (entry["username"].as_str(), entry["password"].as_str()) {
        return Ok(RegistryAuth::Basic(user.into(), password.into()));
    }
    let Some(auth) = entry["auth"].as_str() else {
        return Ok(RegistryAuth::Anonymous);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .with_context(|| {
            format!(
                "{}: the auth of {host} is not base64 user:password",
                path.display()
            )
        })?;
    let (user, password) = decoded.split_once(':').with_context(|| {
        format!(
            "{}: the auth of {host} is not user:password",
            path.display()
        )
    })?;
    Ok(RegistryAuth::Basic(user.into(), password.into()))
}

/// The CA certificates Docker would trust for `host`.
fn registry_certificates(host: &str) -> Vec<Certificate> {
    let mut dirs = vec![Path::new("/etc/docker/certs.d").join(host)];
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".docker/certs.d").join(host));
    }
    let mut certs = Vec::new();
    for dir in dirs {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "crt") {
                if let Ok(data) = fs::read(&path) {
                    certs.push(Certificate {
                        encoding: CertificateEncoding::Pem,
                        data,
                    });
                }
            }
        }
    }
    certs
}

/// An error with its causes: reqwest's top line ("error sending request")
/// alone does not say that the certificate or the connection failed.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

fn blob_file(cache: &Path, digest: &str) -> Result<PathBuf> {
    Ok(cache.join("blobs/sha256").join(check_digest(digest)?))
}

/// Writes `bytes` as the blob `digest` if it matches.
fn store_verified(cache: &Path, digest: &str, bytes: &[u8]) -> Result<()> {
    let path = blob_file(cache, digest)?;
    let actual = format!("sha256:{}", sha256_hex(bytes));
    if actual != digest {
        bail!("the registry sent {actual} for {digest}: the image is corrupt or was tampered with");
    }
    if !path.is_file() {
        let tmp = path.with_extension(format!("new{}", std::process::id()));
        fs::write(&tmp, bytes)?;
        fs::rename(&tmp, &path)?;
    }
    Ok(())
}

/// The SHA-256 of a file's first bytes, as the hasher to go on with.
fn hash_file(file: &mut File) -> Result<sha2::Sha256> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher)
}

/// Adds (or moves) `name` in the cache's index to the manifest `digest`.
fn record(cache: &Path, name: &str, digest: &str, media_type: &str, size: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    let lock = File::create(cache.join(".lock"))?;
    // SAFETY: flock on a descriptor we own; released when it closes.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    let index_path = cache.join("index.json");
    let mut index: Value = match fs::read(&index_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({})),
        Err(_) => json!({}),
    };
    index["schemaVersion"] = json!(2);
    let mut manifests: Vec<Value> = index["manifests"].as_array().cloned().unwrap_or_default();
    manifests.retain(|m| m["annotations"][REF_NAME] != name);
    manifests.push(json!({
        "mediaType": media_type,
        "digest": digest,
        "size": size,
        "annotations": {REF_NAME: name},
    }));
    index["manifests"] = json!(manifests);
    let tmp = cache.join(format!("index.json.{}", std::process::id()));
    fs::write(&tmp, serde_json::to_vec_pretty(&index)?)?;
    fs::rename(&tmp, &index_path)?;
    fs::write(
        cache.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    Ok(())
}

/// `HOST/NAME:TAG` as a reference, or one line saying how to write it:
/// checked before anything is said to be pulled.
pub fn parse_reference(reference: &str) -> Result<Reference> {
    reference.parse().map_err(|e| {
        anyhow::anyhow!(
            "docker://{reference}: not an image reference ({e}); write docker://HOST/NAME:TAG"
        )
    })
}

/// Pulls `reference` into `cache` and returns the name it has in the
/// cache's index (the reference, in full).
pub fn pull(reference: &str, cache: &Path, report: &mut dyn FnMut(PullProgress)) -> Result<String> {
    let reference = parse_reference(reference)?;
    let host = reference.resolve_registry().to_owned();
    check_cache_writable(cache)?;
    let auth = docker_credentials(&host)?;
    let config = ClientConfig {
        protocol: ClientProtocol::Https,
        extra_root_certificates: registry_certificates(&host),
        ..ClientConfig::default()
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pull = Pull {
        client: Client::new(config),
        name: reference.whole(),
        reference,
        host,
        auth,
        cache,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the registry client")?;
    runtime.block_on(pull.run(report))
}

/// Made, and checked up front: a cache of another user's would fail
/// halfway otherwise.
fn check_cache_writable(cache: &Path) -> Result<()> {
    fs::create_dir_all(cache.join("blobs/sha256"))
        .with_context(|| format!("create the image cache {}", cache.display()))?;
    let blobs = std::ffi::CString::new(
        cache
            .join("blobs/sha256")
            .into_os_string()
            .into_encoded_bytes(),
    )?;
    // SAFETY: a NUL-terminated path; access(2) only reads it.
    if unsafe { libc::access(blobs.as_ptr(), libc::W_OK) } != 0 {
        bail!(
            "the image cache {} is not writable by this user: set GPURUN_IMAGE_CACHE to a directory of your own",
            cache.display()
        );
    }
    Ok(())
}

/// One pull: its client, what it pulls and where to.
struct Pull<'a> {
    client: Client,
    reference: Reference,
    name: String,
    host: String,
    auth: RegistryAuth,
    cache: &'a Path,
}

/// A manifest as stored: its bytes parsed, digest, media type and size.
struct StoredManifest {
    manifest: Value,
    digest: String,
    media_type: String,
    size: u64,
}

impl Pull<'_> {
    async fn run(&self, report: &mut dyn FnMut(PullProgress)) -> Result<String> {
        let mut stored = self.manifest(&self.reference, None).await?;
        if stored.manifest["manifests"].is_array() {
            stored = self.platform_manifest(&stored.manifest).await?;
        }
        let mut blobs = vec![stored.manifest["config"].clone()];
        blobs.extend(
            stored.manifest["layers"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        let count = blobs.len();
        for (index, blob) in blobs.iter().enumerate() {
            let blob_digest = blob["digest"]
                .as_str()
                .context("a manifest descriptor has no digest")?;
            let blob_size = blob["size"].as_u64().unwrap_or(0);
            fetch_blob(
                &self.client,
                &self.reference,
                self.cache,
                blob_digest,
                blob_size,
                index,
                count,
                report,
            )
            .await?;
        }
        record(
            self.cache,
            &self.name,
            &stored.digest,
            &stored.media_type,
            stored.size,
        )?;
        Ok(self.name.clone())
    }

    /// Fetches a manifest, stores it checked, and returns it parsed, with
    /// `media_type` (an index's descriptor's), else the manifest's own.
    async fn manifest(
        &self,
        reference: &Reference,
        media_type: Option<&str>,
    ) -> Result<StoredManifest> {
        let (bytes, digest) = self
            .client
            .pull_manifest_raw(reference, &self.auth, MANIFEST_TYPES)
            .await
            .map_err(|e| self.explain(e))?;
        store_verified(self.cache, &digest, &bytes)?;
        let manifest: Value = serde_json::from_slice(&bytes).context("the manifest is not JSON")?;
        let media_type = media_type.or(manifest["mediaType"].as_str());
        Ok(StoredManifest {
            media_type: media_type.unwrap_or_default().to_owned(),
            manifest,
            digest,
            size: bytes.len() as u64,
        })
    }

    /// From a multi-platform index: this platform's manifest.
    async fn platform_manifest(&self, index: &Value) -> Result<StoredManifest> {
        let name = &self.name;
        let pick = index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| {
                m["platform"]["os"] == "linux" && m["platform"]["architecture"] == host_arch()
            })
            .cloned()
            .with_context(|| format!("{name} has no image for linux/{}", host_arch()))?;
        let child = pick["digest"].as_str().unwrap_or_default().to_owned();
        let by_digest: Reference = format!(
            "{}/{}@{child}",
            self.reference.registry(),
            self.reference.repository()
        )
        .parse()
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let media_type = pick["mediaType"].as_str().unwrap_or_default();
        let stored = self.manifest(&by_digest, Some(media_type)).await?;
        if stored.digest != child {
            bail!(
                "{name}: the registry sent manifest {} for {child}",
                stored.digest
            );
        }
        Ok(stored)
    }

    fn explain(&self, e: oci_client::errors::OciDistributionError) -> anyhow::Error {
        let (host, name) = (&self.host, &self.name);
        let text = error_chain(&e);
        let lower = text.to_lowercase();
        if text.contains("401")
            || lower.contains("unauthorized")
            || lower.contains("not authorized")
        {
            anyhow::anyhow!(
                "{host}: not authorized for {name} ({text}): log in (docker login {host}) or check the credentials in ~/.docker/config.json"
            )
        } else {
            anyhow::anyhow!("{host}: {text}")
        }
    }
}

/// Fetches one blob into the cache, resuming a partial download.
#[allow(clippy::too_many_arguments)]
async fn fetch_blob(
    client: &Client,
    reference: &Reference,
    cache: &Path,
    digest: &str,
    size: u64,
    index: usize,
    count: usize,
    report: &mut dyn FnMut(PullProgress),
) -> Result<()> {
    use futures_util::StreamExt;
    use sha2::Digest;
    let path = blob_file(cache, digest)?;
    if path.is_file() {
        report(PullProgress::Blob {
            index,
            count,
            digest,
            size,
            have: size,
        });
        report(PullProgress::Done { index });
        return Ok(());
    }
    let partial = path.with_extension("partial");
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&partial)
        .with_context(|| format!("open {}", partial.display()))?;
    let mut have = file.metadata()?.len();
    if size > 0 && have > size {
        file.set_len(0)?;
        have = 0;
    }
    report(PullProgress::Blob {
        index,
        count,
        digest,
        size,
        have,
    });
    let mut hasher = hash_file(&mut file)?;
    let descriptor = digest;
    let response = client
        .pull_blob_stream_partial(reference, descriptor, have, None)
        .await
        .map_err(|e| anyhow::anyhow!("fetch {digest}: {}", error_chain(&e)))?;
    let mut stream = match response {
        oci_client::client::BlobResponse::Partial(stream) => stream.stream,
        oci_client::client::BlobResponse::Full(stream) => {
            // The registry sent it all: start over.
            file.set_len(0)?;
            hasher = sha2::Sha256::new();
            stream.stream
        }
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.with_context(|| format!("fetch {digest}"))?;
        file.write_all(&chunk)?;
        hasher.update(&chunk);
        report(PullProgress::Bytes(chunk.len() as u64));
    }
    file.flush()?;
    let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
    if actual != digest {
        let _ = fs::remove_file(&partial);
        bail!("{digest}: the bytes received hash to {actual}: the download was corrupt or tampered with (removed; pull again)");
    }
    fs::rename(&partial, &path)?;
    report(PullProgress::Done { index });
    Ok(())
}
