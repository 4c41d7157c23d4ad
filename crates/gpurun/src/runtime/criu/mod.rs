//! Checkpoint and restore with CRIU (`checkpoint.rs`, `restore.rs`) and
//! what they share: their options, the CRIU client, the mounts CRIU must
//! be told come from outside the container, and CRIU's errors.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::Spec;
use rust_criu::rust_criu_protobuf::rpc;
use rust_criu::Criu;

use crate::runtime::context::Ctx;

/// CRIU 3.15 is the oldest with the RPC options used here (as crun).
const CRIU_MINIMUM: u32 = 31500;

/// Where the container's stdio pointed at checkpoint time, for restore.
pub const DESCRIPTORS: &str = "descriptors.json";

/// The container's cgroup mounts at checkpoint time (mount point and
/// controllers), which restore binds to the new cgroup's directories.
pub const CGROUP_MOUNTS: &str = "gpurun-cgroup-mounts.json";

pub mod checkpoint;
pub mod cuda;
pub mod gpu;
pub mod restore;

/// The options checkpoint and restore share (runc's flags, as the
/// command line gives them).
#[derive(Debug)]
pub struct Common {
    pub image_path: PathBuf,
    pub work_path: Option<PathBuf>,
    pub tcp_established: bool,
    pub ext_unix_sk: bool,
    pub shell_job: bool,
    pub file_locks: bool,
    pub auto_dedup: bool,
    pub lazy_pages: bool,
    pub empty_ns: Vec<String>,
    pub manage_cgroups_mode: String,
}

/// `checkpoint`'s options.
#[derive(Debug)]
pub struct CheckpointOptions {
    pub criu: Common,
    pub leave_running: bool,
    pub link_remap: bool,
    pub page_server: Option<String>,
    pub parent_path: Option<String>,
    pub pre_dump: bool,
    pub status_fd: Option<i32>,
    /// How long the driver may take to lock each CUDA process.
    pub cuda_lock_timeout: std::time::Duration,
    pub container_id: String,
}

/// `restore`'s options (runc's --lsm-profile, --lsm-mount-context,
/// --no-pivot and --console-socket are taken and not used, as before).
#[derive(Debug)]
pub struct RestoreOptions {
    pub criu: Common,
    pub bundle: PathBuf,
    pub detach: bool,
    pub pid_file: Option<PathBuf>,
    pub no_subreaper: bool,
    pub container_id: String,
}

/// Sets the CRIU options checkpoint and restore share.
pub fn apply_criu_flags(flags: &Common, client: &mut rust_criu::Criu) -> Result<()> {
    client.set_log_level(4);
    client.set_ext_unix_sk(flags.ext_unix_sk);
    client.set_shell_job(flags.shell_job);
    client.set_tcp_established(flags.tcp_established);
    client.set_file_locks(flags.file_locks);
    client.set_manage_cgroups(true);
    client.set_auto_dedup(flags.auto_dedup);
    client.set_lazy_pages(flags.lazy_pages);
    for namespace in &flags.empty_ns {
        if namespace != "network" {
            bail!("--empty-ns {namespace}: CRIU can leave out only the network namespace");
        }
        client.set_empty_net_ns(true);
    }
    Ok(())
}

/// CRIU's mode for runc's --manage-cgroups-mode names.
pub fn cgroups_mode(name: &str) -> rust_criu::CgMode {
    use rust_criu::CgMode;
    match name {
        "ignore" => CgMode::IGNORE,
        "props" => CgMode::PROPS,
        "full" => CgMode::FULL,
        "strict" => CgMode::STRICT,
        _ => CgMode::SOFT,
    }
}

/// The CRIU binary: `--criu`, else criu on PATH.
pub fn path(ctx: &Ctx) -> String {
    ctx.settings
        .criu
        .as_deref()
        .unwrap_or(Path::new("criu"))
        .to_string_lossy()
        .into_owned()
}

/// A CRIU client for `--criu` (default: criu on PATH), checked to run,
/// and for a GPU container checked to be CRIU 4 or later.
pub fn client(ctx: &Ctx, gpu: bool) -> Result<Criu> {
    let path = path(ctx);
    let fix = "install CRIU 3.15 or newer, or pass --criu PATH (scripts/fixtures/criu.sh fetches one that runs on current kernels)";
    let gpu_fix = "GPU containers need CRIU 4.0 or later (the first that checkpoints processes which used a GPU): install it, or pass --criu PATH (scripts/fixtures/criu.sh fetches one)";
    let mut criu =
        Criu::new_with_criu_path(path.clone()).map_err(|e| anyhow::anyhow!("criu {path}: {e}"))?;
    let version = criu
        .get_criu_version()
        .map_err(|e| anyhow::anyhow!("criu {path} does not run ({e}): {fix}"))?;
    let (minimum, fix) = if gpu {
        (gpu::CRIU_MINIMUM, gpu_fix)
    } else {
        (CRIU_MINIMUM, fix)
    };
    if version < minimum {
        bail!(
            "criu {path} is version {}.{}.{}: {fix}",
            version / 10000,
            version / 100 % 100,
            version % 100
        );
    }
    Criu::new_with_criu_path(path.clone()).map_err(|e| anyhow::anyhow!("criu {path}: {e}"))
}

/// One request to `criu swrk` over its socket, for what rust-criu's client
/// cannot ask (pre-dump, feature checks): CRIU's own RPC, as runc speaks
/// it. Descriptors named in the options are read by CRIU through
/// /proc/<our pid>/fd. No notifications are asked for, so the first
/// answer is the result.
pub fn request(criu: &str, request: &rpc::Criu_req) -> Result<rpc::Criu_resp> {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;
    use std::os::unix::process::CommandExt;

    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use protobuf::Message;

    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let theirs_fd = theirs.as_raw_fd();
    let mut command = std::process::Command::new(criu);
    command
        .arg("swrk")
        .arg(theirs_fd.to_string())
        .stdin(std::process::Stdio::null());
    // SAFETY: fcntl is async-signal-safe; it only lets CRIU inherit its
    // end of the socket.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(theirs_fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("run {criu} swrk"))?;
    drop(theirs);
    let socket = UnixDatagram::from(ours);
    let bytes = request.write_to_bytes()?;
    let sent = (|| -> Result<rpc::Criu_resp> {
        socket.send(&bytes).context("send the request to CRIU")?;
        let mut answer = vec![0u8; 1 << 16];
        let n = socket.recv(&mut answer).context("read CRIU's answer")?;
        Ok(rpc::Criu_resp::parse_from_bytes(&answer[..n])?)
    })();
    drop(socket);
    let _ = child.wait();
    sent
}

/// Bind mounts whose source is outside the container: CRIU keeps them out
/// of the images as external mounts, keyed by their destination, and
/// restore names their sources again.
pub fn external_binds(spec: &Spec) -> Vec<(PathBuf, PathBuf)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| {
            m.typ().as_deref() == Some("bind")
                || m.options()
                    .iter()
                    .flatten()
                    .any(|o| o == "bind" || o == "rbind")
        })
        .filter_map(|m| Some((m.destination().clone(), m.source().clone()?)))
        .collect()
}

/// The cgroup filesystems mounted in the container of `pid`, as container
/// paths: the hierarchies are the host's, so CRIU treats them as external
/// mounts and restore binds the new cgroup's directories there.
pub fn cgroup_mounts(pid: i32) -> Result<Vec<(PathBuf, String)>> {
    let text = fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .with_context(|| format!("read the mounts of process {pid}"))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            let point = fields.split(' ').nth(4)?;
            let mut rest = rest.split(' ');
            let fstype = rest.next()?;
            let options = rest.nth(1)?;
            match fstype {
                "cgroup2" => Some((PathBuf::from(point), CGROUP2.to_owned())),
                "cgroup" => Some((PathBuf::from(point), hierarchy_name(options))),
                _ => None,
            }
        })
        .collect())
}

/// How `cgroup_mounts` names the unified hierarchy.
pub const CGROUP2: &str = "cgroup2";

/// A v1 hierarchy's name as /proc/PID/cgroup writes it: its controllers
/// (and `name=...`), without the mount's other options.
fn hierarchy_name(options: &str) -> String {
    options
        .split(',')
        .filter(|o| {
            !matches!(
                *o,
                "rw" | "ro"
                    | "clone_children"
                    | "noprefix"
                    | "xattr"
                    | "cpuset_v2_mode"
                    | "favordynmods"
            ) && !o.starts_with("release_agent=")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The lines of a CRIU log that say what failed, for the one-line error.
pub fn log_errors(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Error") || l.contains("err "))
        .collect();
    let tail = &errors[errors.len().saturating_sub(3)..];
    tail.iter().map(|l| l.trim()).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchies_are_named_as_proc_cgroup_names_them() {
        assert_eq!(hierarchy_name("rw,cpuset,clone_children"), "cpuset");
        assert_eq!(hierarchy_name("rw,xattr,name=systemd"), "name=systemd");
        assert_eq!(hierarchy_name("ro,cpu,cpuacct"), "cpu,cpuacct");
        assert_eq!(
            hierarchy_name("rw,release_agent=/sbin/agent,memory"),
            "memory"
        );
    }
}
