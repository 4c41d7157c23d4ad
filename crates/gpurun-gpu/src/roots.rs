//! Where the host's driver files, device nodes and procfs are.
//!
//! Each root is set by a global flag, else an environment variable
//! (`GPURUN_DRIVER_ROOT`, `GPURUN_DEV_ROOT`, `GPURUN_PROC_ROOT`), else the
//! config file (`$GPURUN_CONFIG`, else `$XDG_CONFIG_HOME/gpurun/config.toml`
//! over `/etc/gpurun/config.toml`), else the default. An engine-launched
//! runtime has no flags of ours, so the file is how it is configured:
//!
//! ```toml
//! driver-root = "/usr/local/nvidia"
//! dev-root = "/"
//! proc-root = "/proc"
//! ```
//!
//! The same files say which device requests count (`RequestPolicy`), with
//! the NVIDIA Container Toolkit's keys:
//!
//! ```toml
//! accept-nvidia-visible-devices-envvar-when-unprivileged = false
//! accept-nvidia-visible-devices-as-volume-mounts = true
//! annotation-prefixes = ["cdi.k8s.io/"]
//! cuda-compat-mode = "ldconfig"   # or "disabled"
//! device-node-groups = true   # a node's group given to the process
//! spec-dirs = ["/etc/cdi", "/var/run/cdi"]   # CDI specs of any vendor
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Roots {
    pub driver_root: PathBuf,
    pub dev_root: PathBuf,
    pub proc_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            driver_root: PathBuf::from("/"),
            dev_root: PathBuf::from("/"),
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// Roots given on the command line.
#[derive(Debug, Clone, Default)]
pub struct RootFlags {
    pub driver_root: Option<PathBuf>,
    pub dev_root: Option<PathBuf>,
    pub proc_root: Option<PathBuf>,
}

/// gpurun's config files, merged: what the roots and the request settings
/// are read from. Read once (`Config::read`) where both are needed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Config {
    driver_root: Option<PathBuf>,
    dev_root: Option<PathBuf>,
    proc_root: Option<PathBuf>,
    accept_nvidia_visible_devices_envvar_when_unprivileged: Option<bool>,
    accept_nvidia_visible_devices_as_volume_mounts: Option<bool>,
    annotation_prefixes: Option<Vec<String>>,
    cuda_compat_mode: Option<CudaCompatMode>,
    spec_dirs: Option<Vec<PathBuf>>,
    device_node_groups: Option<bool>,
    // The NVIDIA Container Toolkit's config.toml, read as is: the keys
    // gpurun has a use for, from the sections the toolkit keeps them in;
    // the rest is the toolkit's own business.
    #[serde(rename = "nvidia-container-runtime")]
    toolkit_runtime: Option<ToolkitRuntime>,
    #[serde(rename = "nvidia-container-cli")]
    toolkit_cli: Option<ToolkitCli>,
    #[serde(rename = "features")]
    toolkit_features: Option<ToolkitFeatures>,
}

/// `[features]`: only the one that turns device-node groups off.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ToolkitFeatures {
    no_additional_gids_for_device_nodes: Option<bool>,
}

/// `[nvidia-container-runtime]`: only its `modes` matter here.
#[derive(Debug, Clone, Default, Deserialize)]
struct ToolkitRuntime {
    modes: Option<ToolkitModes>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ToolkitModes {
    cdi: Option<ToolkitCdiMode>,
    legacy: Option<ToolkitLegacyMode>,
}

/// `[nvidia-container-runtime.modes.cdi]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ToolkitCdiMode {
    annotation_prefixes: Option<Vec<String>>,
    spec_dirs: Option<Vec<PathBuf>>,
}

/// `[nvidia-container-runtime.modes.legacy]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ToolkitLegacyMode {
    cuda_compat_mode: Option<CudaCompatMode>,
}

/// `[nvidia-container-cli]`: `root` is the driver root (the GPU
/// Operator's `/run/nvidia/driver`).
#[derive(Debug, Clone, Default, Deserialize)]
struct ToolkitCli {
    root: Option<PathBuf>,
}

impl Config {
    /// The toolkit's nested keys as gpurun's flat ones; a flat key wins.
    fn with_toolkit_sections(mut self) -> Config {
        let modes = self
            .toolkit_runtime
            .take()
            .and_then(|r| r.modes)
            .unwrap_or_default();
        let cdi = modes.cdi.unwrap_or_default();
        self.annotation_prefixes = self.annotation_prefixes.or(cdi.annotation_prefixes);
        self.spec_dirs = self.spec_dirs.or(cdi.spec_dirs);
        self.cuda_compat_mode = self
            .cuda_compat_mode
            .or(modes.legacy.and_then(|l| l.cuda_compat_mode));
        self.driver_root = self
            .driver_root
            .or(self.toolkit_cli.take().and_then(|c| c.root));
        let toolkit_no_gids = self
            .toolkit_features
            .take()
            .and_then(|f| f.no_additional_gids_for_device_nodes);
        self.device_node_groups = self.device_node_groups.or(toolkit_no_gids.map(|no| !no));
        self
    }
}

/// gpurun's own top-level keys (those a warning lists).
const OWN_KEYS: [&str; 9] = [
    "driver-root",
    "dev-root",
    "proc-root",
    "accept-nvidia-visible-devices-envvar-when-unprivileged",
    "accept-nvidia-visible-devices-as-volume-mounts",
    "annotation-prefixes",
    "cuda-compat-mode",
    "spec-dirs",
    "device-node-groups",
];

/// The toolkit's tables gpurun reads settings from.
const TOOLKIT_TABLES_READ: [&str; 3] = [
    "nvidia-container-runtime",
    "nvidia-container-cli",
    "features",
];

/// The toolkit's top-level keys and tables gpurun has no use for: passed
/// over with a debug line, as a toolkit config.toml read as is holds them.
const TOOLKIT_ONLY: [&str; 5] = [
    "disable-require",
    "supported-driver-capabilities",
    "swarm-resource",
    "nvidia-ctk",
    "nvidia-container-runtime-hook",
];

/// Where a config file came from, which decides whether it may be absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Named by `$GPURUN_CONFIG`: it must exist and be readable.
    Named,
    /// `/etc/gpurun/config.toml`: may be absent, must be readable.
    System,
    /// The user's, found through `$HOME`: may be absent or unreadable.
    PerUser,
}

impl Config {
    /// The config files merged, a later file's keys over an earlier one's.
    pub fn read(env: &dyn Fn(&str) -> Option<String>) -> Result<Config> {
        let mut file = Config::default();
        for (path, source) in config_files(env) {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && source == Source::Named => {
                    anyhow::bail!(
                        "GPURUN_CONFIG names {}, which does not exist: create it, or unset GPURUN_CONFIG for the default files",
                        path.display()
                    )
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                // The per-user file is found through $HOME, which a daemon
                // that starts gpurun may have left pointing at another
                // user's home (slurmd started from a root shell): one that
                // cannot be read is not this user's, and is passed over.
                Err(e) if source == Source::PerUser => {
                    tracing::debug!("skipping {}: {e}", path.display());
                    continue;
                }
                Err(e) if e.raw_os_error() == Some(libc::EISDIR) => anyhow::bail!(
                    "{} is a directory, not a config file: name a TOML file (docs/config.md){}",
                    path.display(),
                    if source == Source::Named {
                        ", or unset GPURUN_CONFIG"
                    } else {
                        ""
                    }
                ),
                Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
            };
            file = parse_file(&path, &text, source == Source::Named)?.over(file);
        }
        Ok(file)
    }

    /// This file's keys over `earlier`'s.
    fn over(self, earlier: Config) -> Config {
        Config {
            driver_root: self.driver_root.or(earlier.driver_root),
            dev_root: self.dev_root.or(earlier.dev_root),
            proc_root: self.proc_root.or(earlier.proc_root),
            accept_nvidia_visible_devices_envvar_when_unprivileged: self
                .accept_nvidia_visible_devices_envvar_when_unprivileged
                .or(earlier.accept_nvidia_visible_devices_envvar_when_unprivileged),
            accept_nvidia_visible_devices_as_volume_mounts: self
                .accept_nvidia_visible_devices_as_volume_mounts
                .or(earlier.accept_nvidia_visible_devices_as_volume_mounts),
            annotation_prefixes: self.annotation_prefixes.or(earlier.annotation_prefixes),
            cuda_compat_mode: self.cuda_compat_mode.or(earlier.cuda_compat_mode),
            spec_dirs: self.spec_dirs.or(earlier.spec_dirs),
            device_node_groups: self.device_node_groups.or(earlier.device_node_groups),
            ..Config::default()
        }
    }

    /// Which device requests count.
    pub fn request_policy(&self) -> RequestPolicy {
        let defaults = RequestPolicy::default();
        RequestPolicy {
            accept_envvar_unprivileged: self
                .accept_nvidia_visible_devices_envvar_when_unprivileged
                .unwrap_or(defaults.accept_envvar_unprivileged),
            accept_volume_mounts: self
                .accept_nvidia_visible_devices_as_volume_mounts
                .unwrap_or(defaults.accept_volume_mounts),
            annotation_prefixes: self
                .annotation_prefixes
                .clone()
                .unwrap_or(defaults.annotation_prefixes),
            cuda_compat_mode: self.cuda_compat_mode.unwrap_or(defaults.cuda_compat_mode),
            spec_dirs: self.spec_dirs.clone().unwrap_or(defaults.spec_dirs),
            device_node_groups: self
                .device_node_groups
                .unwrap_or(defaults.device_node_groups),
        }
    }
}

/// Which device requests count, from the config files.
pub fn request_policy(env: &dyn Fn(&str) -> Option<String>) -> Result<RequestPolicy> {
    Config::read(env).map(|config| config.request_policy())
}

/// One config file's text: gpurun's keys and the toolkit's sections it
/// reads; other keys are passed over (debug line), a known key of the
/// wrong type is an error naming the file, the line and the key.
fn parse_file(path: &Path, text: &str, named: bool) -> Result<Config> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        anyhow::anyhow!(
            "{} is not valid TOML: {}{}: fix that line (docs/config.md shows the syntax){}",
            path.display(),
            one_line(e.message()),
            at_line(text, e.span()),
            if named {
                ", or unset GPURUN_CONFIG"
            } else {
                ""
            }
        )
    })?;
    let (toolkit, unknown): (Vec<&str>, Vec<&str>) = table
        .keys()
        .map(String::as_str)
        .filter(|k| !OWN_KEYS.contains(k) && !TOOLKIT_TABLES_READ.contains(k))
        .partition(|k| TOOLKIT_ONLY.contains(k));
    if !toolkit.is_empty() {
        tracing::debug!(
            "{}: passing over the toolkit's keys gpurun does not use: {}",
            path.display(),
            toolkit.join(", ")
        );
    }
    // Neither gpurun's nor the toolkit's: a typo would otherwise leave a
    // setting silently unset.
    for key in unknown {
        match closest_key(key) {
            Some(known) => tracing::warn!(
                "{}: unknown key \"{key}\", passed over: did you mean \"{known}\"? (docs/config.md)",
                path.display()
            ),
            None => tracing::warn!(
                "{}: unknown key \"{key}\", passed over: gpurun's keys are {} (docs/config.md)",
                path.display(),
                OWN_KEYS.join(", ")
            ),
        }
    }
    toml::from_str::<Config>(text)
        .map(Config::with_toolkit_sections)
        .map_err(|e| {
            anyhow::anyhow!(
                "{} is not a valid gpurun config: {}{}; see docs/config.md for each key's type",
                path.display(),
                one_line(e.message()),
                at_line(text, e.span())
            )
        })
}

/// A parser message on one line: toml's own spans several.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// gpurun's key nearest to a misspelled one: at most two edits away.
fn closest_key(key: &str) -> Option<&'static str> {
    OWN_KEYS
        .iter()
        .map(|known| (edit_distance(key, known), *known))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// " (line N)" for an error's byte span in `text`.
fn at_line(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.and_then(|s| text.get(..s.start))
        .map(|before| format!(" (line {})", before.matches('\n').count() + 1))
        .unwrap_or_default()
}

/// The config files read, lowest precedence first, with their sources.
fn config_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<(PathBuf, Source)> {
    if let Some(path) = env("GPURUN_CONFIG").filter(|p| !p.is_empty()) {
        return vec![(PathBuf::from(path), Source::Named)];
    }
    let mut files = vec![(PathBuf::from("/etc/gpurun/config.toml"), Source::System)];
    let xdg = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")));
    if let Some(dir) = xdg {
        files.push((dir.join("gpurun/config.toml"), Source::PerUser));
    }
    files
}

impl Roots {
    /// Flags, then the environment, then the config files, then defaults.
    pub fn resolve(flags: &RootFlags, env: &dyn Fn(&str) -> Option<String>) -> Result<Roots> {
        Config::read(env).map(|config| Roots::from_config(flags, env, config))
    }

    /// `resolve` with the config files already read.
    pub fn from_config(
        flags: &RootFlags,
        env: &dyn Fn(&str) -> Option<String>,
        file: Config,
    ) -> Roots {
        let pick =
            |flag: &Option<PathBuf>, var: &str, from_file: Option<PathBuf>, default: PathBuf| {
                flag.clone()
                    .or_else(|| env(var).filter(|v| !v.is_empty()).map(PathBuf::from))
                    .or(from_file)
                    .unwrap_or(default)
            };
        let defaults = Roots::default();
        Roots {
            driver_root: pick(
                &flags.driver_root,
                "GPURUN_DRIVER_ROOT",
                file.driver_root,
                defaults.driver_root,
            ),
            dev_root: pick(
                &flags.dev_root,
                "GPURUN_DEV_ROOT",
                file.dev_root,
                defaults.dev_root,
            ),
            proc_root: pick(
                &flags.proc_root,
                "GPURUN_PROC_ROOT",
                file.proc_root,
                defaults.proc_root,
            ),
        }
    }
}

/// Where specs are looked for when the config does not say (`spec-dirs`),
/// the CDI library's and the toolkit's default.
pub const DEFAULT_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// Which request sources count, from gpurun's config file with the NVIDIA
/// Container Toolkit's names and defaults. On a shared node the scheduler's
/// allocation (annotations, volume mounts) is the authority: set
/// `accept-nvidia-visible-devices-envvar-when-unprivileged = false` there,
/// so a tenant's own `NVIDIA_VISIBLE_DEVICES=all` gets nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RequestPolicy {
    #[serde(rename = "accept-nvidia-visible-devices-envvar-when-unprivileged")]
    pub accept_envvar_unprivileged: bool,
    #[serde(rename = "accept-nvidia-visible-devices-as-volume-mounts")]
    pub accept_volume_mounts: bool,
    pub annotation_prefixes: Vec<String>,
    /// `ldconfig` (the image's newer CUDA compat library first in the
    /// linker cache) or `disabled`.
    pub cuda_compat_mode: CudaCompatMode,
    /// Where CDI specs are read from (the toolkit's `spec-dirs`).
    pub spec_dirs: Vec<PathBuf>,
    /// A device node's group is given to the container's process where
    /// the node's mode needs it (off: the toolkit's
    /// `no-additional-gids-for-device-nodes`).
    pub device_node_groups: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CudaCompatMode {
    Ldconfig,
    Disabled,
}

impl Default for RequestPolicy {
    fn default() -> Self {
        RequestPolicy {
            accept_envvar_unprivileged: true,
            accept_volume_mounts: false,
            annotation_prefixes: vec!["cdi.k8s.io/".to_owned()],
            cuda_compat_mode: CudaCompatMode::Ldconfig,
            spec_dirs: DEFAULT_SPEC_DIRS.iter().map(PathBuf::from).collect(),
            device_node_groups: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn flags_beat_env_beat_file() {
        let dir = std::env::temp_dir().join(format!("roots-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config.toml");
        std::fs::write(
            &cfg,
            "driver-root = \"/from/file\"\ndev-root = \"/dev/file\"\nproc-root = \"/proc/file\"\n",
        )
        .unwrap();
        let vars: HashMap<&str, String> = [
            ("GPURUN_CONFIG", cfg.to_string_lossy().into_owned()),
            ("GPURUN_DEV_ROOT", "/dev/env".into()),
            ("GPURUN_PROC_ROOT", "/proc/env".into()),
        ]
        .into();
        let env = |k: &str| vars.get(k).cloned();
        let flags = RootFlags {
            proc_root: Some("/proc/flag".into()),
            ..Default::default()
        };
        let roots = Roots::resolve(&flags, &env).unwrap();
        assert_eq!(roots.driver_root, PathBuf::from("/from/file"));
        assert_eq!(roots.dev_root, PathBuf::from("/dev/env"));
        assert_eq!(roots.proc_root, PathBuf::from("/proc/flag"));

        // A key gpurun does not use is passed over; one it uses must have
        // its type.
        std::fs::write(&cfg, "driver_root = 1").unwrap();
        assert!(Roots::resolve(&RootFlags::default(), &env).is_ok());
        std::fs::write(&cfg, "driver-root = 1").unwrap();
        let err = Roots::resolve(&RootFlags::default(), &env).unwrap_err();
        assert!(
            err.to_string().contains("not a valid gpurun config"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_request_policy_has_the_toolkits_keys_and_defaults() {
        let dir = std::env::temp_dir().join(format!("policy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config.toml");
        let path = cfg.to_string_lossy().into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| path.clone());
        std::fs::write(&cfg, "").unwrap();
        assert_eq!(request_policy(&env).unwrap(), RequestPolicy::default());
        std::fs::write(
            &cfg,
            "accept-nvidia-visible-devices-envvar-when-unprivileged = false\naccept-nvidia-visible-devices-as-volume-mounts = true\nannotation-prefixes = [\"a/\", \"b/\"]\n",
        )
        .unwrap();
        let policy = request_policy(&env).unwrap();
        assert!(!policy.accept_envvar_unprivileged && policy.accept_volume_mounts);
        assert_eq!(policy.annotation_prefixes, ["a/", "b/"]);
        std::fs::write(
            &cfg,
            "accept-nvidia-visible-devices-envvar-when-unprivileged = \"no\"\n",
        )
        .unwrap();
        let err = request_policy(&env).unwrap_err().to_string();
        assert!(err.contains("not a valid gpurun config"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The toolkit's own config.toml, as its package installs it, is read
    /// as is: its nested keys count, its other sections are passed over.
    #[test]
    fn the_toolkits_config_toml_is_read_as_is() {
        let dir = std::env::temp_dir().join(format!("toolkit-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config.toml");
        let path = cfg.to_string_lossy().into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| path.clone());
        std::fs::write(
            &cfg,
            r#"accept-nvidia-visible-devices-as-volume-mounts = true
accept-nvidia-visible-devices-envvar-when-unprivileged = false
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true
root = "/run/nvidia/driver"

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/", "nvidia.cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi", "/opt/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-container-runtime.modes.legacy]
cuda-compat-mode = "disabled"

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
skip-mode-detection = false

[nvidia-ctk]
path = "nvidia-ctk"
"#,
        )
        .unwrap();
        let policy = request_policy(&env).unwrap();
        assert!(!policy.accept_envvar_unprivileged && policy.accept_volume_mounts);
        assert_eq!(
            policy.annotation_prefixes,
            ["cdi.k8s.io/", "nvidia.cdi.k8s.io/"]
        );
        assert_eq!(policy.spec_dirs.len(), 3);
        assert_eq!(policy.cuda_compat_mode, CudaCompatMode::Disabled);
        let roots = Roots::resolve(&RootFlags::default(), &env).unwrap();
        assert_eq!(roots.driver_root, PathBuf::from("/run/nvidia/driver"));
        // gpurun's own flat key wins over the toolkit's section.
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, format!("driver-root = \"/usr/local/nvidia\"\n{text}")).unwrap();
        let roots = Roots::resolve(&RootFlags::default(), &env).unwrap();
        assert_eq!(roots.driver_root, PathBuf::from("/usr/local/nvidia"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn defaults_without_anything() {
        let empty = std::env::temp_dir().join(format!("roots-empty-{}", std::process::id()));
        std::fs::write(&empty, "").unwrap();
        let given = empty.to_string_lossy().into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| given.clone());
        assert_eq!(
            Roots::resolve(&RootFlags::default(), &env).unwrap(),
            Roots::default()
        );
        let _ = std::fs::remove_file(empty);
    }

    #[test]
    fn a_named_config_that_is_missing_is_an_error() {
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| "/nonexistent/config.toml".to_owned());
        let err = Roots::resolve(&RootFlags::default(), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "GPURUN_CONFIG names /nonexistent/config.toml, which does not exist: create it, or unset GPURUN_CONFIG for the default files"
        );
    }

    /// What `nvidia-ctk config default` writes (toolkit 1.17 to 1.20: the
    /// `[features]` table, every section), as gpurun reads it: the keys it
    /// uses taken, the rest passed over.
    const TOOLKIT_DEFAULT: &str = r#"#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[features]
#allow-cuda-compat-libs-from-container = false
#disable-cuda-compat-lib-hook = false
#disable-imex-channel-creation = false
#enable-cdi-in-runtime = false

[nvidia-container-cli]
#debug = "/var/log/nvidia-container-toolkit.log"
environment = []
#ldcache = "/etc/ld.so.cache"
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true
#no-cgroups = false
#path = "/usr/bin/nvidia-container-cli"
#root = "/run/nvidia/driver"
#user = "root:video"

[nvidia-container-runtime]
#debug = "/var/log/nvidia-container-runtime.log"
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]

[nvidia-container-runtime.modes]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-container-runtime.modes.legacy]
cuda-compat-mode = "ldconfig"

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
skip-mode-detection = false

[nvidia-ctk]
path = "nvidia-ctk"
"#;

    #[test]
    fn the_toolkits_default_config_is_read_as_is() {
        let path = std::env::temp_dir().join(format!("roots-toolkit-{}", std::process::id()));
        for (text, root) in [
            (TOOLKIT_DEFAULT.to_owned(), "/"),
            (
                TOOLKIT_DEFAULT.replace("#root = ", "root = "),
                "/run/nvidia/driver",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let given = path.to_string_lossy().into_owned();
            let env = |k: &str| (k == "GPURUN_CONFIG").then(|| given.clone());
            let config = Config::read(&env).unwrap();
            let policy = config.request_policy();
            assert_eq!(policy.annotation_prefixes, ["cdi.k8s.io/"]);
            assert_eq!(policy.cuda_compat_mode, CudaCompatMode::Ldconfig);
            let roots = Roots::from_config(&RootFlags::default(), &env, config);
            assert_eq!(roots.driver_root, PathBuf::from(root));
        }
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn device_node_groups_by_gpuruns_key_or_the_toolkits_feature() {
        let path = std::env::temp_dir().join(format!("roots-groups-{}", std::process::id()));
        let given = path.to_string_lossy().into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| given.clone());
        for (text, want) in [
            (TOOLKIT_DEFAULT.to_owned(), true),
            (
                TOOLKIT_DEFAULT.replace(
                    "[features]\n",
                    "[features]\nno-additional-gids-for-device-nodes = true\n",
                ),
                false,
            ),
            ("device-node-groups = false\n".to_owned(), false),
            // gpurun's own key wins over the toolkit's feature.
            (
                "device-node-groups = true\n[features]\nno-additional-gids-for-device-nodes = true\n"
                    .to_owned(),
                true,
            ),
        ] {
            std::fs::write(&path, &text).unwrap();
            let policy = Config::read(&env).unwrap().request_policy();
            assert_eq!(policy.device_node_groups, want, "{text}");
        }
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_misspelled_key_is_matched_to_the_nearest_known_one() {
        assert_eq!(closest_key("driver-roott"), Some("driver-root"));
        assert_eq!(closest_key("dev_root"), Some("dev-root"));
        assert_eq!(closest_key("spec-dir"), Some("spec-dirs"));
        assert_eq!(closest_key("log-level"), None);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_syntax_error_is_one_line_with_its_line_and_the_fix() {
        let err = parse_file(Path::new("/c.toml"), "a = 1\nb = \n", true)
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("(line 2): fix that line"), "{err}");
        assert!(err.ends_with("or unset GPURUN_CONFIG"), "{err}");
        let err = parse_file(Path::new("/c.toml"), "b = \n", false)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("GPURUN_CONFIG"), "{err}");
    }

    #[test]
    fn a_used_key_of_the_wrong_type_is_one_error_naming_it() {
        let path = std::env::temp_dir().join(format!("roots-type-{}", std::process::id()));
        std::fs::write(
            &path,
            "accept-nvidia-visible-devices-as-volume-mounts = \"yes\"\n[features]\nx = 1\n",
        )
        .unwrap();
        let given = path.to_string_lossy().into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| given.clone());
        let err = Config::read(&env).unwrap_err().to_string();
        let _ = std::fs::remove_file(&path);
        assert!(err.contains("is not a valid gpurun config"), "{err}");
        assert!(err.contains("boolean"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }

    #[test]
    fn an_unreadable_per_user_config_is_passed_over_an_explicit_one_is_not() {
        // A directory where the file should be: unreadable even to root
        // (a 0600 file of another user would be, to anyone but root).
        let home = std::env::temp_dir().join(format!("roots-home-{}", std::process::id()));
        std::fs::create_dir_all(home.join(".config/gpurun/config.toml")).unwrap();
        let home_text = home.to_string_lossy().into_owned();
        let env = |k: &str| (k == "HOME").then(|| home_text.clone());
        if let Err(e) = Roots::resolve(&RootFlags::default(), &env) {
            panic!("an unreadable per-user config stopped the run: {e}");
        }
        let given = home
            .join(".config/gpurun/config.toml")
            .to_string_lossy()
            .into_owned();
        let env = |k: &str| (k == "GPURUN_CONFIG").then(|| given.clone());
        let err = Roots::resolve(&RootFlags::default(), &env).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a directory, not a config file"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(home);
    }
}
