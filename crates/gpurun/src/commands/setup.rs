//! `gpurun setup containerd|docker|podman|lxc`: registers gpurun in the
//! engine's own config file, in the spirit of `nvidia-ctk runtime
//! configure` (for LXC: gpurun's hooks in the default container config). Every other setting is kept, a second run changes nothing,
//! and a changed file is backed up first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_gpu::request::DOCKER_HOOK;
use toml_edit::{value, DocumentMut, Item, Table};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Containerd,
    Docker,
    Podman,
    Lxc,
}

#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// The engine whose config to edit
    #[arg(value_enum)]
    pub engine: Engine,
    /// The config file (default: the engine's usual one)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the new config instead of writing it
    #[arg(long)]
    pub dry_run: bool,
    /// Also make gpurun the engine's default runtime
    #[arg(long)]
    pub default: bool,
    /// The runtime's name in the engine (and the Kubernetes handler)
    #[arg(long, default_value = "gpurun")]
    pub runtime_name: String,
    /// The gpurun binary to register (default: this one)
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Docker: where to put the nvidia-container-runtime-hook link, which
    /// dockerd must find on its PATH to accept --gpus (default: the
    /// binary's directory)
    #[arg(long)]
    pub hook_dir: Option<PathBuf>,
}

const CRI: &str = "io.containerd.grpc.v1.cri";

fn table<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut Table> {
    let item = parent.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    item.as_table_mut()
        .with_context(|| format!("{key:?} in the config is not a table"))
}

/// containerd's config.toml (version 2): a CRI runtime `name` of type
/// runc.v2 whose `BinaryName` is gpurun.
pub fn edit_containerd(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut doc: DocumentMut = text
        .parse()
        .context("the containerd config is not valid TOML")?;
    match doc.get("version").and_then(|v| v.as_integer()) {
        None => {
            doc["version"] = value(2);
        }
        Some(2) => {}
        Some(v) => bail!("containerd config version {v}: gpurun setup writes version 2 configs (containerd 1.5 to 1.7)"),
    }
    let plugins = table(doc.as_table_mut(), "plugins")?;
    let cri = table(plugins, CRI)?;
    let containerd = table(cri, "containerd")?;
    if default {
        containerd["default_runtime_name"] = value(name);
    }
    let default_name = containerd
        .get("default_runtime_name")
        .and_then(|v| v.as_str())
        .unwrap_or("runc")
        .to_owned();
    let runtimes = table(containerd, "runtimes")?;
    // A runtimes table in the file replaces containerd's built-in one, and
    // the CRI plugin refuses to load when the default runtime is not in
    // it: keep the built-in runc there, as `containerd config default` has.
    if default_name == "runc" && !runtimes.contains_key("runc") {
        let runc = table(runtimes, "runc")?;
        runc.set_implicit(false);
        runc["runtime_type"] = value("io.containerd.runc.v2");
    }
    let runtime = table(runtimes, name)?;
    runtime.set_implicit(false);
    runtime["runtime_type"] = value("io.containerd.runc.v2");
    let options = table(runtime, "options")?;
    options.set_implicit(false);
    options["BinaryName"] = value(binary);
    Ok(doc.to_string())
}

/// Docker's daemon.json: `runtimes.<name>.path`.
pub fn edit_docker(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut config: serde_json::Value = if text.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(text).context("daemon.json is not valid JSON")?
    };
    let object = config
        .as_object_mut()
        .context("daemon.json is not a JSON object")?;
    let runtimes = object
        .entry("runtimes")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .context("\"runtimes\" in daemon.json is not an object")?;
    let entry = runtimes
        .entry(name)
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .with_context(|| format!("runtimes.{name} in daemon.json is not an object"))?;
    entry.insert("path".into(), binary.into());
    if default {
        object.insert("default-runtime".into(), name.into());
    }
    Ok(serde_json::to_string_pretty(&config)? + "\n")
}

/// Podman's containers.conf: `[engine.runtimes] <name> = [binary]`.
pub fn edit_podman(text: &str, name: &str, binary: &str, default: bool) -> Result<String> {
    let mut doc: DocumentMut = text.parse().context("containers.conf is not valid TOML")?;
    let engine = table(doc.as_table_mut(), "engine")?;
    engine.set_implicit(false);
    if default {
        engine["runtime"] = value(name);
    }
    let runtimes = table(engine, "runtimes")?;
    runtimes.set_implicit(false);
    let mut paths = toml_edit::Array::new();
    paths.push(binary);
    runtimes[name] = value(paths);
    Ok(doc.to_string())
}

/// The comment that opens gpurun's lines in an LXC config.
const LXC_MARK: &str = "# GPUs through gpurun (gpurun setup lxc): set NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES with lxc.environment";

/// An LXC config (`default.conf` or a container's own): gpurun's mount and
/// start-host hooks, in place of NVIDIA's `hooks/nvidia`. On cgroup v2 a
/// hook cannot widen LXC's device program, so `v2_majors` (the NVIDIA
/// device majors) get allow lines; on v1 the start-host hook allows the
/// container's own GPU nodes only.
pub fn edit_lxc(text: &str, command: &str, v2_majors: &[u32]) -> String {
    let hook = format!("{command} lxc-hook");
    let ours: Vec<String> = std::iter::once(LXC_MARK.to_owned())
        .chain(["mount", "start-host"].map(|t| format!("lxc.hook.{t} = {hook}")))
        .chain(
            v2_majors
                .iter()
                .map(|m| format!("lxc.cgroup2.devices.allow = c {m}:* rwm")),
        )
        .collect();
    // Earlier gpurun lines (any binary) and NVIDIA's hook make way.
    let is_old = |line: &str| {
        let trimmed = line.trim();
        let value = trimmed.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
        trimmed == LXC_MARK
            || (trimmed.starts_with("lxc.hook.")
                && (value.ends_with(" lxc-hook") || value.ends_with("/hooks/nvidia")))
            || ours.iter().any(|o| o == trimmed)
    };
    let mut kept: Vec<&str> = text.lines().filter(|l| !is_old(l)).collect();
    while kept.last().is_some_and(|l| l.trim().is_empty()) {
        kept.pop();
    }
    let mut out = String::new();
    for line in kept {
        out.push_str(line);
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    for line in ours {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The hook's command line: the binary and the driver-location flags
/// given to setup (the hook takes no GPURUN_* variables). LXC runs it
/// through sh, so only plain paths are taken.
fn lxc_hook_command(binary: &str, global: &crate::cli::GlobalFlags) -> Result<String> {
    let mut command = binary.to_owned();
    for (flag, value) in [
        ("--driver-root", &global.driver_root),
        ("--dev-root", &global.dev_root),
        ("--proc-root", &global.proc_root),
    ] {
        if let Some(path) = value {
            command.push_str(&format!(" {flag} {}", path.display()));
        }
    }
    if !command
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" /-_.+@:,".contains(&b))
    {
        bail!("{command}: LXC runs hooks through sh; use paths without spaces, quotes or shell characters");
    }
    Ok(command)
}

/// The majors of NVIDIA's character devices, where cgroup v2 is the only
/// hierarchy with a devices controller (no v1 `devices` mount).
fn lxc_v2_device_majors() -> Vec<u32> {
    let v1_devices = fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines().any(|l| {
            l.split_once(" - ").is_some_and(|(_, rest)| {
                let mut f = rest.split(' ');
                f.next() == Some("cgroup")
                    && f.nth(1)
                        .is_some_and(|o| o.split(',').any(|o| o == "devices"))
            })
        })
    });
    if v1_devices {
        return Vec::new();
    }
    let mut majors = vec![195];
    let devices = fs::read_to_string("/proc/devices").unwrap_or_default();
    for line in devices.lines() {
        if let Some((major, name)) = line.trim().split_once(' ') {
            if name.starts_with("nvidia") {
                if let Ok(m) = major.parse::<u32>() {
                    if !majors.contains(&m) {
                        majors.push(m);
                    }
                }
            }
        }
    }
    majors
}

fn default_config(engine: Engine) -> PathBuf {
    let root = nix::unistd::geteuid().is_root();
    match engine {
        Engine::Containerd => "/etc/containerd/config.toml".into(),
        Engine::Docker => "/etc/docker/daemon.json".into(),
        Engine::Podman if root => "/etc/containers/containers.conf".into(),
        Engine::Podman => user_config_dir().join("containers/containers.conf"),
        Engine::Lxc if root => "/etc/lxc/default.conf".into(),
        Engine::Lxc => user_config_dir().join("lxc/default.conf"),
    }
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
fn user_config_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| ".config".into())
}

/// Writes `text` to `path` through a temporary file and a rename, with the
/// old file's permissions, after copying the old file to a backup.
fn replace_file(path: &Path, text: &str, existed: bool) -> Result<Option<PathBuf>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut backup = None;
    let mode = if existed {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let to = PathBuf::from(format!("{}.{stamp}.bak", path.display()));
        fs::copy(path, &to)
            .with_context(|| format!("back up {} to {}", path.display(), to.display()))?;
        backup = Some(to);
        fs::metadata(path)?.permissions().mode()
    } else {
        0o644
    };
    let tmp = PathBuf::from(format!("{}.gpurun-tmp", path.display()));
    fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, path).with_context(|| format!("replace {}", path.display()))?;
    Ok(backup)
}

/// Docker's `--gpus` needs an executable of the toolkit hook's name on
/// dockerd's PATH; gpurun's is a link to itself that refuses to run as a
/// hook (see main.rs), since gpurun does the work as the runtime.
fn install_hook_link(dir: &Path, binary: &Path, dry_run: bool) -> Result<()> {
    let link = dir.join(DOCKER_HOOK);
    match fs::symlink_metadata(&link) {
        Ok(m) if m.file_type().is_symlink() && fs::read_link(&link)? == binary => {
            println!("{} already links to {}", link.display(), binary.display());
            return Ok(());
        }
        Ok(m) if !m.file_type().is_symlink() => {
            println!(
                "{} exists and is not gpurun's link (the NVIDIA Container Toolkit?): left alone; gpurun drops that hook from specs it runs",
                link.display()
            );
            return Ok(());
        }
        _ => {}
    }
    if dry_run {
        println!("would link {} to {}", link.display(), binary.display());
        return Ok(());
    }
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(binary, &link)
        .with_context(|| format!("link {}", link.display()))?;
    println!(
        "linked {} to {} (dockerd must find it on its PATH to accept --gpus)",
        link.display(),
        binary.display()
    );
    Ok(())
}

pub fn setup(args: SetupArgs, global: &crate::cli::GlobalFlags) -> Result<i32> {
    let binary = match &args.binary {
        Some(b) => fs::canonicalize(b).with_context(|| format!("--binary {}", b.display()))?,
        None => fs::canonicalize(std::env::current_exe()?)?,
    };
    let binary_str = binary.to_str().context("the binary's path is not UTF-8")?;
    let name = &args.runtime_name;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("--runtime-name {name:?}: use letters, digits, '-' and '_'");
    }
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| default_config(args.engine));
    let (old, existed) = match fs::read_to_string(&path) {
        Ok(text) => (text, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let new = match args.engine {
        Engine::Containerd => edit_containerd(&old, name, binary_str, args.default),
        Engine::Docker => edit_docker(&old, name, binary_str, args.default),
        Engine::Podman => edit_podman(&old, name, binary_str, args.default),
        Engine::Lxc => lxc_hook_command(binary_str, global)
            .map(|hook| edit_lxc(&old, &hook, &lxc_v2_device_majors())),
    }
    .with_context(|| format!("{}", path.display()))?;

    let what = match args.engine {
        Engine::Lxc => "gpurun's LXC hooks".to_owned(),
        _ => format!("runtime {name:?}"),
    };
    if new == old {
        println!(
            "{} already registers {what}: nothing to change",
            path.display()
        );
    } else if args.dry_run {
        println!("# {} would become:", path.display());
        print!("{new}");
    } else {
        let backup = replace_file(&path, &new, existed)?;
        println!(
            "registered {what} ({binary_str}) in {}{}",
            path.display(),
            backup
                .map(|b| format!("; the old file is in {}", b.display()))
                .unwrap_or_default()
        );
    }
    match args.engine {
        Engine::Docker => {
            let dir = match &args.hook_dir {
                Some(d) => d.clone(),
                None => binary
                    .parent()
                    .context("the binary has no directory")?
                    .to_path_buf(),
            };
            install_hook_link(&dir, &binary, args.dry_run)?;
            println!("restart dockerd to load it; then: docker run --runtime={name} --gpus all IMAGE nvidia-smi");
        }
        Engine::Containerd => {
            println!(
                "restart containerd to load it. For Kubernetes, this RuntimeClass selects it:"
            );
            println!("---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: {name}\nhandler: {name}");
        }
        Engine::Podman => println!("then: podman --runtime {name} run ..."),
        Engine::Lxc => println!(
            "containers made from it get gpurun's hooks (for an existing one, run this with --config /var/lib/lxc/NAME/config); \
             then: lxc.environment = NVIDIA_VISIBLE_DEVICES=0 in its config"
        ),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lxc_hooks_replace_nvidias_and_setup_is_idempotent() {
        let old = "lxc.include = /usr/share/lxc/config/common.conf\nlxc.hook.mount = /usr/share/lxc/hooks/nvidia\nlxc.net.0.type = empty\n";
        let new = edit_lxc(old, BIN, &[]);
        assert!(!new.contains("hooks/nvidia"), "{new}");
        assert!(new.contains("lxc.net.0.type = empty\n"), "{new}");
        assert!(
            new.contains(&format!("lxc.hook.mount = {BIN} lxc-hook\n")),
            "{new}"
        );
        assert!(
            new.contains(&format!("lxc.hook.start-host = {BIN} lxc-hook\n")),
            "{new}"
        );
        assert!(!new.contains("cgroup2"), "{new}");
        assert_eq!(edit_lxc(&new, BIN, &[]), new);
        // Another binary replaces the old one's lines; v2 majors are added once.
        let moved = edit_lxc(&new, "/opt/gpurun", &[195, 508]);
        assert!(!moved.contains(BIN), "{moved}");
        assert_eq!(moved.matches("lxc-hook").count(), 2, "{moved}");
        assert!(
            moved.contains("lxc.cgroup2.devices.allow = c 508:* rwm\n"),
            "{moved}"
        );
        assert_eq!(edit_lxc(&moved, "/opt/gpurun", &[195, 508]), moved);
    }

    const BIN: &str = "/usr/local/bin/gpurun";

    #[test]
    fn containerd_keeps_other_settings_and_is_idempotent() {
        let old = "# my settings\nversion = 2\nroot = \"/var/lib/containerd\"\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.6\"\n";
        let new = edit_containerd(old, "gpurun", BIN, false).unwrap();
        assert!(
            new.contains("# my settings") && new.contains("sandbox_image = \"pause:3.6\""),
            "{new}"
        );
        let doc: toml::Table = toml::from_str(&new).unwrap();
        let rt = &doc["plugins"][CRI]["containerd"]["runtimes"]["gpurun"];
        assert_eq!(rt["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
        assert_eq!(rt["options"]["BinaryName"].as_str(), Some(BIN));
        assert!(doc["plugins"][CRI]["containerd"]
            .get("default_runtime_name")
            .is_none());
        // The default runtime stays configured, or CRI would not load.
        assert_eq!(
            doc["plugins"][CRI]["containerd"]["runtimes"]["runc"]["runtime_type"].as_str(),
            Some("io.containerd.runc.v2")
        );
        assert_eq!(edit_containerd(&new, "gpurun", BIN, false).unwrap(), new);
        let with_default = edit_containerd(&new, "gpurun", BIN, true).unwrap();
        assert!(with_default.contains("default_runtime_name = \"gpurun\""));
        assert!(edit_containerd("version = 1\n", "gpurun", BIN, false).is_err());
        assert!(edit_containerd("plugins = 3\n", "gpurun", BIN, false).is_err());
        // An empty file gets a version.
        assert!(edit_containerd("", "gpurun", BIN, false)
            .unwrap()
            .starts_with("version = 2"));
    }

    #[test]
    fn docker_keeps_other_settings_and_is_idempotent() {
        let old = r#"{"data-root": "/srv/docker", "runtimes": {"other": {"path": "/bin/other"}}}"#;
        let new = edit_docker(old, "gpurun", BIN, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&new).unwrap();
        assert_eq!(v["data-root"], "/srv/docker");
        assert_eq!(v["runtimes"]["other"]["path"], "/bin/other");
        assert_eq!(v["runtimes"]["gpurun"]["path"], BIN);
        assert_eq!(v["default-runtime"], "gpurun");
        // Keys keep their order.
        assert!(new.find("data-root").unwrap() < new.find("runtimes").unwrap());
        assert_eq!(edit_docker(&new, "gpurun", BIN, true).unwrap(), new);
        assert!(edit_docker("[1]", "gpurun", BIN, false).is_err());
        assert!(edit_docker("{", "gpurun", BIN, false).is_err());
    }

    #[test]
    fn podman_keeps_other_settings_and_is_idempotent() {
        let old = "[containers]\nlog_size_max = 100\n\n[engine]\ncgroup_manager = \"cgroupfs\"\n";
        let new = edit_podman(old, "gpurun", BIN, false).unwrap();
        let doc: toml::Table = toml::from_str(&new).unwrap();
        assert_eq!(doc["containers"]["log_size_max"].as_integer(), Some(100));
        assert_eq!(doc["engine"]["cgroup_manager"].as_str(), Some("cgroupfs"));
        assert_eq!(doc["engine"]["runtimes"]["gpurun"][0].as_str(), Some(BIN));
        assert!(doc["engine"].get("runtime").is_none());
        assert_eq!(edit_podman(&new, "gpurun", BIN, false).unwrap(), new);
        let with_default = edit_podman(&new, "gpurun", BIN, true).unwrap();
        assert!(with_default.contains("runtime = \"gpurun\""));
    }
}
