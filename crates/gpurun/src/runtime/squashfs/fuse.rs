//! A user's image, mounted without root: `squashfuse` serves the image
//! read-only and, under `--writable`, `fuse-overlayfs` a layer over it, as
//! Apptainer and enroot do for users. The mounts are the user's own FUSE
//! mounts (libfuse opens `/dev/fuse`, which every systemd host makes
//! 0666, and mounts through the setuid `fusermount3`), at the holder
//! directory in the user's state root; every file shows as the user's,
//! so inside the container's user namespace the image is root's, as a
//! root's loop mount shows it.
//!
//! The FUSE daemons run as the user with no environment of the container
//! and only paths gpurun chose. They live while their mounts do: a run
//! unmounts when its container ends; after a `kill -9` of gpurun they
//! keep serving the container until `delete` unmounts (`release`).

use std::fs::{self, File};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::ImageFile;

/// How long a FUSE daemon may take to mount.
const MOUNT_WAIT: Duration = Duration::from_secs(10);

/// The daemons serving one container's image, each with its mount point.
pub struct FuseMounts {
    daemons: Vec<(PathBuf, Child)>,
}

impl Drop for FuseMounts {
    fn drop(&mut self) {
        // The overlay first: it holds the image's mount open.
        for (point, daemon) in self.daemons.iter_mut().rev() {
            unmount(point);
            let ended = wait_a_while(daemon, Duration::from_secs(5));
            if !ended {
                let _ = daemon.kill();
                let _ = daemon.wait();
            }
        }
    }
}

impl FuseMounts {
    /// The daemons left serving their mounts, no longer this process's
    /// to stop.
    pub fn leave_running(mut self) {
        self.daemons.clear();
    }
}

/// What goes over the image, at `holder/rw`.
#[derive(Clone, PartialEq, Eq)]
pub enum Layer {
    /// Nothing: the image itself is the root.
    None,
    /// A writable layer in this directory (`upper`, `work`): the holder
    /// for `--writable`, the kept one for `--layer`.
    Writable(PathBuf),
    /// Read-only, with the mount points the image lacks (`stub`) on top.
    MountPoints,
}

/// Mounts `image` at `holder/image` through squashfuse, and `layer` over
/// it, as the user; `others_too`: for other uids than the user's as well
/// (`allow_other`, which /etc/fuse.conf must allow users).
pub fn mount(
    image: &ImageFile,
    holder: &Path,
    layer: &Layer,
    others_too: bool,
) -> Result<FuseMounts> {
    let mut mounts = FuseMounts {
        daemons: Vec::new(),
    };
    let lower = holder.join("image");
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    // The daemon reopens our descriptor of the checked file, never the
    // path, which may have changed since.
    let source = format!("/proc/{}/fd/{}", std::process::id(), image.file.as_raw_fd());
    let mut options = format!("ro,offset={},uid={uid},gid={gid}", image.offset);
    if others_too {
        options.push_str(",allow_other");
    }
    let squashfuse = program("squashfuse", "squashfuse")?;
    let mut cmd = Command::new(squashfuse);
    cmd.args(["-f", "-o", &options, &source]).arg(&lower);
    mounts.start(holder, "squashfuse", &mut cmd, &lower)?;
    if *layer != Layer::None {
        mount_layer(&mut mounts, holder, layer, others_too)?;
    }
    Ok(mounts)
}

/// fuse-overlayfs at `holder/rw`: the writable layer, or the mount-point
/// stubs over the image, read-only.
pub fn mount_layer(
    mounts: &mut FuseMounts,
    holder: &Path,
    layer: &Layer,
    others_too: bool,
) -> Result<()> {
    let image = holder.join("image");
    let mut options = match layer {
        Layer::Writable(dir) => format!(
            "lowerdir={},upperdir={},workdir={}",
            image.display(),
            dir.join("upper").display(),
            dir.join("work").display()
        ),
        _ => format!(
            "ro,lowerdir={}:{}",
            holder.join("stub").display(),
            image.display()
        ),
    };
    if others_too {
        options.push_str(",allow_other");
    }
    let rw = holder.join("rw");
    let overlay = program("fuse-overlayfs", "fuse-overlayfs")?;
    let mut cmd = Command::new(overlay);
    cmd.args(["-f", "-o", &options]).arg(&rw);
    mounts.start(holder, "fuse-overlayfs", &mut cmd, &rw)
}

impl FuseMounts {
    /// Starts a daemon and waits for its mount at `point`.
    fn start(&mut self, holder: &Path, name: &str, cmd: &mut Command, point: &Path) -> Result<()> {
        let daemon = start(holder, name, cmd)?;
        self.daemons.push((point.to_owned(), daemon));
        let daemon = &mut self.daemons.last_mut().expect("just pushed").1;
        await_mount(holder, point, daemon, name)
    }
}

/// `name` on PATH, or the one-line fix naming Debian's `package`.
fn program(name: &str, package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .with_context(|| {
            format!("a user's --image needs {name} (install {package}), or run it as root")
        })
}

/// Starts a daemon with no environment, in `/`, its errors to a file in
/// the holder (read if it fails).
fn start(holder: &Path, name: &str, cmd: &mut Command) -> Result<Child> {
    let errors = File::create(holder.join(format!(".{name}.err")))?;
    cmd.env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(errors)
        .spawn()
        .with_context(|| format!("start {name}"))
}

/// Waits until `point` is a mount (its device differs from the holder's),
/// or fails with what the daemon said.
fn await_mount(holder: &Path, point: &Path, daemon: &mut Child, name: &str) -> Result<()> {
    let holder_dev = fs::metadata(holder)?.dev();
    let start = Instant::now();
    while start.elapsed() < MOUNT_WAIT {
        if fs::metadata(point).is_ok_and(|m| m.dev() != holder_dev) {
            return Ok(());
        }
        if let Some(status) = daemon.try_wait()? {
            let mut said = String::new();
            let _ = File::open(holder.join(format!(".{name}.err")))
                .and_then(|mut f| f.read_to_string(&mut said));
            bail!(
                "{name} could not mount the image ({status}): {}",
                fuse_hint(said.trim())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!(
        "{name} did not mount the image within {} s",
        MOUNT_WAIT.as_secs()
    )
}

/// What a user can do about the usual failure: /dev/fuse closed to users.
fn fuse_hint(said: &str) -> String {
    if said.contains("/dev/fuse") && said.contains("ermission denied") {
        format!("{said}: /dev/fuse is not open to users here (udev makes it 0666 on systemd hosts; chmod 0666 /dev/fuse), or run as root")
    } else {
        said.lines().last().unwrap_or("no message").to_owned()
    }
}

fn wait_a_while(daemon: &mut Child, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if matches!(daemon.try_wait(), Ok(Some(_))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Unmounts a user's FUSE mount (lazily: a container may still hold it)
/// with the setuid fusermount3, with no environment.
pub fn unmount(point: &Path) {
    let fusermount =
        program("fusermount3", "fuse3").unwrap_or_else(|_| "/usr/bin/fusermount3".into());
    let _ = Command::new(fusermount)
        .env_clear()
        .current_dir("/")
        .args(["-u", "-z", "-q"])
        .arg(point)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
