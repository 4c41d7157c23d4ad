//! Each hook's arguments, parsed into an [`Op`] (pure, fuzzed), and the
//! hooks taken out of a spec.

use super::*;

/// One hook's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "hook")]
pub enum Op {
    /// `--link TARGET::LINK`, repeatable.
    CreateSymlinks {
        links: Vec<Link>,
    },
    /// `--host-driver-version`, `--host-cuda-version` (toolkit 1.19,
    /// where NVML gives no driver branch: Tegra) and
    /// `--cuda-compat-container-root` (the image's folder, Orin's
    /// `compat_orin`; empty: `/usr/local/cuda/compat`).
    EnableCudaCompat {
        host_driver_version: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        host_cuda_version: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        compat_root: String,
    },
    /// `--folder DIR`, repeatable.
    UpdateLdcache {
        folders: Vec<PathBuf>,
    },
    DisableDeviceNodeModification,
    UpdateApplicationProfile,
    Chmod {
        mode: u32,
        paths: Vec<PathBuf>,
    },
    /// A subcommand gpurun does not know: skipped with a warning, as the
    /// toolkit's own hook does.
    Unknown {
        name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// What the link points to, as written (inside the container).
    pub target: PathBuf,
    /// Where it stands, as written (inside the container).
    pub link: PathBuf,
}

impl Op {
    pub fn name(&self) -> &str {
        match self {
            Op::CreateSymlinks { .. } => "create-symlinks",
            Op::EnableCudaCompat { .. } => "enable-cuda-compat",
            Op::UpdateLdcache { .. } => "update-ldcache",
            Op::DisableDeviceNodeModification => "disable-device-node-modification",
            Op::UpdateApplicationProfile => "update-application-profile",
            Op::Chmod { .. } => "chmod",
            Op::Unknown { name } => name,
        }
    }
}

/// The hook's arguments after the program (and `hook` / `cdi-hook`) if
/// `path` and `args` name one of NVIDIA's CDI hooks or gpurun's own;
/// `None` for any other hook.
pub fn nvidia_hook_args<'a>(path: &Path, args: &'a [String]) -> Option<&'a [String]> {
    let program = path.file_name()?.to_str()?;
    let rest = args.get(1..).unwrap_or_default();
    match program {
        NVIDIA_CDI_HOOK => Some(rest),
        NVIDIA_CTK if rest.first().map(String::as_str) == Some("hook") => Some(&rest[1..]),
        "gpurun" if rest.first().map(String::as_str) == Some(GPURUN_SUBCOMMAND) => Some(&rest[1..]),
        _ => None,
    }
}

/// Parses a hook's subcommand and flags (`--flag VALUE`, `--flag=VALUE`,
/// `-flag VALUE`, as the toolkit's CLI takes them). Global flags before
/// the subcommand (`--debug`) are passed over. A flag the subcommand does
/// not know is passed over too (newer toolkits add testing flags); a
/// malformed value is an error, as it is for the toolkit's hook.
pub fn parse(args: &[String]) -> Result<Op> {
    let mut rest = args.iter().skip_while(|a| a.starts_with('-'));
    let Some(sub) = rest.next() else {
        bail!("no hook subcommand given");
    };
    let mut flags: Vec<(String, String)> = Vec::new();
    let mut rest = rest.peekable();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), v.to_owned()),
            None => {
                let value = match rest.peek() {
                    Some(v) if !v.starts_with('-') => rest.next().cloned().unwrap_or_default(),
                    _ => String::new(),
                };
                (flag.to_owned(), value)
            }
        };
        flags.push((name, value));
    }
    let all = |name: &str| -> Vec<String> {
        flags
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    Ok(match sub.as_str() {
        "create-symlinks" => {
            let mut links = Vec::new();
            for spec in all("link") {
                let Some((target, link)) = spec.split_once("::") else {
                    bail!("create-symlinks: invalid symlink specification {spec:?} (want TARGET::LINK)");
                };
                if target.is_empty() || link.is_empty() || link.contains("::") {
                    bail!("create-symlinks: invalid symlink specification {spec:?} (want TARGET::LINK)");
                }
                let link = Link {
                    target: target.into(),
                    link: link.into(),
                };
                if !links.contains(&link) {
                    links.push(link);
                }
            }
            Op::CreateSymlinks { links }
        }
        "enable-cuda-compat" => Op::EnableCudaCompat {
            host_driver_version: all("host-driver-version").pop().unwrap_or_default(),
            host_cuda_version: all("host-cuda-version").pop().unwrap_or_default(),
            compat_root: all("cuda-compat-container-root").pop().unwrap_or_default(),
        },
        "update-ldcache" => Op::UpdateLdcache {
            folders: all("folder").into_iter().map(PathBuf::from).collect(),
        },
        "disable-device-node-modification" => Op::DisableDeviceNodeModification,
        "update-application-profile" => Op::UpdateApplicationProfile,
        "chmod" => {
            let text = all("mode").pop().unwrap_or_default();
            let mode = u32::from_str_radix(text.trim(), 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .with_context(|| format!("chmod: the mode {text:?} is not an octal file mode"))?;
            let paths: Vec<PathBuf> = all("path").into_iter().map(PathBuf::from).collect();
            if paths.iter().any(|p| p.as_os_str().is_empty()) {
                bail!("chmod: paths must not be empty");
            }
            Op::Chmod { mode, paths }
        }
        other => Op::Unknown {
            name: other.to_owned(),
        },
    })
}

/// A path as the container names it, made absolute and clean: `..` stops
/// at `/`, as it does for a process whose root it is.
pub fn in_container(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// Removes the NVIDIA CDI hooks from every stage that may hold them and
/// parses each; the other hooks stay as they are.
pub fn take(spec: &mut Spec) -> Result<Vec<Op>> {
    let Some(hooks) = spec.hooks_mut().as_mut() else {
        return Ok(Vec::new());
    };
    let mut ops = Vec::new();
    let mut take_from = |list: Option<Vec<Hook>>| -> Result<Option<Vec<Hook>>> {
        let Some(list) = list else { return Ok(None) };
        let mut kept = Vec::new();
        for hook in list {
            let args = hook.args().clone().unwrap_or_default();
            match nvidia_hook_args(hook.path(), &args) {
                Some(rest) => ops
                    .push(parse(rest).with_context(|| format!("hook {}", hook.path().display()))?),
                None => kept.push(hook),
            }
        }
        Ok((!kept.is_empty()).then_some(kept))
    };
    let create_runtime = take_from(hooks.create_runtime().clone())?;
    let create_container = take_from(hooks.create_container().clone())?;
    #[allow(deprecated)]
    let prestart = take_from(hooks.prestart().clone())?;
    hooks.set_create_runtime(create_runtime);
    hooks.set_create_container(create_container);
    #[allow(deprecated)]
    hooks.set_prestart(prestart);
    Ok(ops)
}

/// Whether the engine applied NVIDIA's CDI edits to `spec` (its hooks, or
/// the variable the spec sets): then gpurun's own request path adds
/// nothing, so nothing is injected twice and the image's own
/// `NVIDIA_VISIBLE_DEVICES=all` never widens what CDI gave.
pub fn carries_nvidia_cdi_edits(spec: &Spec) -> bool {
    let hooks = spec.hooks().as_ref();
    #[allow(deprecated)]
    let lists = hooks
        .map(|h| {
            [h.create_runtime(), h.create_container(), h.prestart()]
                .into_iter()
                .flatten()
                .flatten()
                .cloned()
                .collect::<Vec<Hook>>()
        })
        .unwrap_or_default();
    lists
        .iter()
        .any(|h| nvidia_hook_args(h.path(), h.args().as_deref().unwrap_or_default()).is_some())
        || crate::request::environment(spec).contains_key(LIBCUDA_DIR_ENV)
}
