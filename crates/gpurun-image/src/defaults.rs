//! What an imported image says its containers run with, kept beside the
//! rootfs so that `run --rootfs DIR/rootfs` can use it.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// The image config an import keeps beside the rootfs.
pub const IMAGE_CONFIG: &str = "image-config.json";

/// What an imported image says a container runs with (`run --rootfs
/// DIR/rootfs` reads it from DIR/image-config.json).
#[derive(Debug, Default)]
pub struct ImageDefaults {
    /// The entrypoint, then the default arguments (`Entrypoint`, `Cmd`).
    pub command: Vec<String>,
    /// The entrypoint alone, which a command given in its place may
    /// keep (`run --image-entrypoint`, pyxis's `--container-entrypoint`).
    pub entrypoint: Vec<String>,
    pub env: Vec<String>,
    pub workdir: Option<String>,
}

impl ImageDefaults {
    /// The defaults of the image imported at `rootfs`'s parent, if any.
    pub fn beside(rootfs: &Path) -> Result<Option<ImageDefaults>> {
        let Some(path) = rootfs.parent().map(|d| d.join(IMAGE_CONFIG)) else {
            return Ok(None);
        };
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
        };
        let config: serde_json::Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not an image config", path.display()))?;
        Ok(Some(ImageDefaults::from_config(&config)))
    }

    pub fn from_config(config: &serde_json::Value) -> ImageDefaults {
        let c = &config["config"];
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let entrypoint = strings(&c["Entrypoint"]);
        let mut command = entrypoint.clone();
        command.extend(strings(&c["Cmd"]));
        ImageDefaults {
            command,
            entrypoint,
            env: strings(&c["Env"]),
            workdir: c["WorkingDir"]
                .as_str()
                .filter(|w| w.starts_with('/'))
                .map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_the_entrypoint_then_cmd_and_the_entrypoint_stands_alone() {
        let config = serde_json::json!({"config": {
            "Entrypoint": ["/entry.sh", "-x"], "Cmd": ["serve"],
            "Env": ["A=1"], "WorkingDir": "relative"}});
        let image = ImageDefaults::from_config(&config);
        assert_eq!(image.command, ["/entry.sh", "-x", "serve"]);
        assert_eq!(image.entrypoint, ["/entry.sh", "-x"]);
        assert_eq!(image.env, ["A=1"]);
        assert_eq!(image.workdir, None, "a relative WorkingDir is left out");
    }
}
