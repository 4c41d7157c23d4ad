//! A squashfs image file (enroot's `.sqsh`, `mksquashfs`'s output, or the
//! system partition of Apptainer's `.sif`) run in place as a container's
//! root, without unpacking it: read-only through a loop device (set to the
//! partition's offset and size), with a tmpfs upper layer over it only
//! when asked.
//!
//! Everything is mounted in a mount namespace of this `run`'s own, a slave
//! of the host's, so the host never sees the mounts: they go when the last
//! process that holds them (this `run`, then the container, whose mount
//! namespace is a copy) ends, after a `kill -9` of gpurun too. The loop
//! device is set to clear itself when its mount goes (`LO_FLAGS_AUTOCLEAR`).
//!
//! A user's image is mounted through FUSE instead (`fuse`).

use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gpurun_image::sif;
use safe_fs::detached_mount::{detached_mount, FsOption};
use safe_fs::syscall_result as check;

mod fuse;
mod kept_layer;
mod save;

pub use kept_layer::KeptLayer;
pub use save::SaveTo;

/// What goes over the image.
#[derive(Clone, Copy)]
pub enum Writable<'a> {
    /// Nothing: read-only.
    No,
    /// A layer gone with the container (root's in a tmpfs).
    Fresh,
    /// A layer kept in this directory (`--layer`).
    KeptIn(&'a Path),
}

impl Writable<'_> {
    pub fn is_writable(self) -> bool {
        !matches!(self, Writable::No)
    }

    /// The directory holding the writable layer's `upper` and `work`: the
    /// kept one, or `holder` for a fresh layer.
    fn layer_dir(self, holder: &Path) -> Option<PathBuf> {
        match self {
            Writable::No => None,
            Writable::Fresh => Some(holder.to_owned()),
            Writable::KeptIn(dir) => Some(dir.to_owned()),
        }
    }
}

/// Where `import -o FILE.sqsh` keeps the image's config inside the image.
pub const IMAGE_CONFIG_INSIDE: &str = "/.gpurun/image-config.json";
/// The most of it read.
const MAX_IMAGE_CONFIG: u64 = 1 << 20;

/// squashfs's magic, little-endian "hsqs", at the start of the file.
const SQUASHFS_MAGIC: &[u8; 4] = b"hsqs";

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_READ_ONLY: u32 = 1;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// The kernel's `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    device: u64,
    inode: u64,
    rdevice: u64,
    offset: u64,
    sizelimit: u64,
    number: u32,
    encrypt_type: u32,
    encrypt_key_size: u32,
    flags: u32,
    file_name: [u8; 64],
    crypt_name: [u8; 64],
    encrypt_key: [u8; 32],
    init: [u64; 2],
}

/// The kernel's `struct loop_config` (LOOP_CONFIGURE, Linux 5.8).
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// An image mounted for one container: the root to give it, and the
/// directory under the state root that holds the mounts (in this `run`'s
/// namespace as root, the user's FUSE mounts otherwise), unmounted and
/// removed when dropped.
pub struct MountedImage {
    pub rootfs: PathBuf,
    holder: PathBuf,
    /// A user's FUSE daemons (none yet while they start); root's kernel
    /// mounts have none.
    fuse: Option<fuse::FuseMounts>,
    by_user: bool,
}

impl Drop for MountedImage {
    fn drop(&mut self) {
        if self.by_user {
            drop(self.fuse.take());
            remove_holder(&self.holder);
        } else {
            let _ = nix::mount::umount2(&self.holder, nix::mount::MntFlags::MNT_DETACH);
            let _ = fs::remove_dir(&self.holder);
        }
    }
}

impl MountedImage {
    /// Leaves what serves the image to the container that outlives this
    /// run (`run -d`): a user's FUSE daemons keep serving until `delete`
    /// unmounts them (`release`), as after a `kill -9` of the run.
    pub fn leave_for_delete(mut self) {
        if let Some(daemons) = self.fuse.take() {
            daemons.leave_running();
        }
        if self.by_user {
            std::mem::forget(self);
        }
    }
}

/// After the container is gone (`delete`): what a killed `run --image`
/// left in the state root. Root's mounts went with the run's namespace,
/// leaving the empty directory; a user's FUSE mounts are unmounted here.
pub fn release(state_root: &Path, id: &str) {
    let holder = holder_dir(state_root, id);
    if !holder.exists() {
        return;
    }
    if nix::unistd::geteuid().is_root() {
        let _ = fs::remove_dir(&holder);
        return;
    }
    for point in mounts_under(&holder).iter().rev() {
        fuse::unmount(point);
    }
    remove_holder(&holder);
}

/// Removes a user's holder and the layer in it, once nothing is mounted
/// below it (never a walk into a mounted image).
fn remove_holder(holder: &Path) {
    if mounts_under(holder).is_empty() {
        let _ = fs::remove_dir_all(holder);
    }
}

/// This process's mount points at or below `dir`, in mount order.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(table) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(unescape_mountinfo(point)))
        .filter(|point| point.starts_with(dir))
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether users may mount FUSE for other uids (`user_allow_other` in
/// /etc/fuse.conf), as a user's `--image --keep-uid` needs.
pub fn users_may_allow_others() -> bool {
    fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|conf| conf.lines().any(|l| l.trim() == "user_allow_other"))
}

/// Where `run --image` of container `id` holds its mounts.
pub fn holder_dir(state_root: &Path, id: &str) -> PathBuf {
    state_root.join(format!("{id}@image"))
}

/// An image file opened for mounting: where its squashfs lies in it
/// (the whole file, or a SIF file's system partition).
#[derive(Debug)]
pub struct ImageFile {
    file: File,
    offset: u64,
    /// 0: to the end of the file.
    size: u64,
}

/// Opens `path` as a squashfs image or a SIF file holding one: a regular
/// file (opened so that a FIFO or device cannot block), squashfs's magic
/// where the image says its squashfs begins.
pub fn open_image(path: &Path) -> Result<ImageFile> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("--image {}", path.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory: run it with --rootfs"
        } else if meta.file_type().is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        bail!("--image {}: {kind}", path.display());
    }
    let mut start = [0u8; sif::HEADER_LEN];
    let read = file.read_at(&mut start, 0)?;
    let (offset, size) = if sif::is_sif(&start[..read]) {
        sif_partition(&file, &start, meta.len())
            .with_context(|| format!("--image {}", path.display()))?
    } else {
        (0, 0)
    };
    let mut magic = [0u8; 4];
    if file.read_exact_at(&mut magic, offset).is_err() || &magic != SQUASHFS_MAGIC {
        bail!(
            "--image {}: not a squashfs image or a SIF file (make one with mksquashfs DIR FILE, or `gpurun import IMAGE -o FILE.sqsh`)",
            path.display()
        );
    }
    Ok(ImageFile { file, offset, size })
}

/// A SIF file's system partition: its offset and size.
fn sif_partition(file: &File, header: &[u8], len: u64) -> Result<(u64, u64)> {
    let header = sif::header(header)?;
    let mut table = vec![0u8; header.descriptors as usize * sif::DESCRIPTOR_LEN];
    file.read_exact_at(&mut table, header.offset)
        .context("read the SIF descriptors")?;
    let part = sif::system_partition(&table, len)?;
    Ok((part.offset, part.size))
}

/// Mounts `image` for container `id`: in a new mount namespace for this
/// process, read-only, with an upper layer as `writable` says.
pub fn mount(
    image: &ImageFile,
    state_root: &Path,
    id: &str,
    writable: Writable,
    mount_points: &[PathBuf],
) -> Result<MountedImage> {
    use nix::mount::MsFlags;
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .context("a mount namespace for the image")?;
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .context("make the image's mount namespace a slave of the host's")?;
    let holder = holder_dir(state_root, id);
    fs::create_dir(&holder).with_context(|| format!("create {}", holder.display()))?;
    let mut mounted = MountedImage {
        rootfs: holder.join("image"),
        holder,
        fuse: None,
        by_user: false,
    };
    let tmpfs = detached_mount(c"tmpfs", &[FsOption::required(c"mode", c"0700")], 0)?;
    attach(&tmpfs, &mounted.holder)?;
    for dir in ["image", "rw", "upper", "work", "stub"] {
        fs::create_dir(mounted.holder.join(dir))?;
    }
    let squashfs = mount_squashfs(image)?;
    attach(&squashfs, &mounted.holder.join("image"))?;
    copy_image_config(&mounted.holder)?;
    if !writable.is_writable() && stub_mount_points(&mounted.holder, mount_points)? {
        let layers = format!(
            "{}:{}",
            mounted.holder.join("stub").display(),
            mounted.holder.join("image").display()
        );
        let overlay = detached_mount(
            c"overlay",
            &[FsOption::required(c"lowerdir", &CString::new(layers)?)],
            libc::MOUNT_ATTR_RDONLY,
        )
        .context("overlayfs for the mount points")?;
        attach(&overlay, &mounted.holder.join("rw"))?;
        mounted.rootfs = mounted.holder.join("rw");
    }
    if let Some(layer) = writable.layer_dir(&mounted.holder) {
        let lower = path_option(&mounted.holder.join("image"))?;
        let upper = path_option(&layer.join("upper"))?;
        let work = path_option(&layer.join("work"))?;
        let overlay = detached_mount(
            c"overlay",
            &[
                FsOption::required(c"lowerdir", &lower),
                FsOption::required(c"upperdir", &upper),
                FsOption::required(c"workdir", &work),
            ],
            0,
        )
        .with_context(|| format!("overlayfs for the writable layer in {}", layer.display()))?;
        attach(&overlay, &mounted.holder.join("rw"))?;
        mounted.rootfs = mounted.holder.join("rw");
    }
    Ok(mounted)
}

/// Whether a user's writable layer is the kernel's overlayfs, which the
/// container's init lays over the image in its own user namespace (Linux
/// 5.11 lets a user namespace mount it), on a tmpfs of the container's:
/// no FUSE daemon between the container and its writes, which go with the
/// container. Only for a fresh layer nobody reads after the container:
/// `--layer` keeps fuse-overlayfs's layer for the next run, and `--save`
/// packs the layer once the container has ended.
pub fn user_layer_in_container(writable: Writable, saving: bool) -> bool {
    matches!(writable, Writable::Fresh)
        && !saving
        && libcontainer::utils::kernel_at_least((5, 11)).unwrap_or(false)
}

/// Mounts `image` for a user's container `id` through FUSE (`fuse`):
/// read-only, with a layer as `writable` says (a fresh one in the holder),
/// or none where the container's init lays it (`layer_in_container`).
pub fn mount_for_user(
    image: &ImageFile,
    state_root: &Path,
    id: &str,
    writable: Writable,
    mount_points: &[PathBuf],
    others_too: bool,
    layer_in_container: bool,
) -> Result<MountedImage> {
    let holder = holder_dir(state_root, id);
    fs::create_dir(&holder).with_context(|| format!("create {}", holder.display()))?;
    let mut mounted = MountedImage {
        rootfs: holder.join("image"),
        holder,
        fuse: None,
        by_user: true,
    };
    for dir in ["image", "rw", "upper", "work", "stub"] {
        fs::create_dir(mounted.holder.join(dir))?;
    }
    let layer = match writable.layer_dir(&mounted.holder) {
        Some(dir) if !layer_in_container => fuse::Layer::Writable(dir),
        _ => fuse::Layer::None,
    };
    let mut daemons = fuse::mount(image, &mounted.holder, &layer, others_too)?;
    copy_image_config(&mounted.holder)?;
    if !writable.is_writable() && stub_mount_points(&mounted.holder, mount_points)? {
        fuse::mount_layer(
            &mut daemons,
            &mounted.holder,
            &fuse::Layer::MountPoints,
            others_too,
        )?;
        mounted.rootfs = mounted.holder.join("rw");
    }
    if writable.is_writable() && !layer_in_container {
        mounted.rootfs = mounted.holder.join("rw");
    }
    mounted.fuse = Some(daemons);
    Ok(mounted)
}

/// Makes, in `holder/stub`, the directories of `mount_points` (the -v
/// destinations and the working directory) that a read-only image lacks,
/// each at its symlink-free path inside the image: a layer over the image
/// then gives them mount points without writing the image. Whether any
/// was needed.
fn stub_mount_points(holder: &Path, mount_points: &[PathBuf]) -> Result<bool> {
    let image = safe_fs::Rootfs::open(&holder.join("image"))?;
    let mut made = false;
    for point in mount_points {
        let (real, _) = image
            .resolve(point)
            .with_context(|| format!("{} in the image", point.display()))?;
        if image.find(&real, false).is_ok() {
            continue;
        }
        let inside = real.strip_prefix("/").unwrap_or(&real);
        fs::create_dir_all(holder.join("stub").join(inside))?;
        made = true;
    }
    Ok(made)
}

/// The config `import` kept inside the image, copied beside the mounted
/// root (the holder's tmpfs), where `run --rootfs` looks for an imported
/// image's defaults. Read inside the image, a regular file only.
fn copy_image_config(holder: &Path) -> Result<()> {
    let image = safe_fs::Rootfs::open(&holder.join("image"))?;
    match image.read(Path::new(IMAGE_CONFIG_INSIDE), MAX_IMAGE_CONFIG) {
        Ok(bytes) => {
            fs::write(holder.join(gpurun_image::defaults::IMAGE_CONFIG), bytes)?;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("the image's {IMAGE_CONFIG_INSIDE}")),
    }
}

fn path_option(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// The image, read-only, through a loop device that clears itself once
/// the mount is gone.
fn mount_squashfs(image: &ImageFile) -> Result<OwnedFd> {
    // The device stays open until it is mounted: autoclear would clear it
    // at its last close before.
    let (_open, device) = attach_loop(image).context("a loop device for the image")?;
    let source = path_option(&device)?;
    detached_mount(
        c"squashfs",
        &[
            FsOption::required(c"source", &source),
            FsOption::required(c"ro", c""),
        ],
        libc::MOUNT_ATTR_RDONLY,
    )
    .with_context(|| format!("mount the image (squashfs on {})", device.display()))
}

/// A free loop device set to `image`, read-only, autoclear: open, and its
/// path. Another process may take the free device first: then again.
fn attach_loop(image: &ImageFile) -> Result<(File, PathBuf)> {
    let control = File::open("/dev/loop-control").map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!("this kernel has no loop devices (/dev/loop-control): load the loop module (modprobe loop)")
        } else {
            anyhow::Error::from(e).context("open /dev/loop-control")
        }
    })?;
    for _ in 0..16 {
        // SAFETY: an ioctl without argument on our own descriptor.
        let number = check(unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) } as i64)?;
        let path = PathBuf::from(format!("/dev/loop{number}"));
        let device = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .with_context(|| format!("open {}", path.display()))?;
        // SAFETY: an all-zero loop_config is valid; the fields set below.
        let mut config: LoopConfig = unsafe { std::mem::zeroed() };
        config.fd = image.file.as_raw_fd() as u32;
        config.info.offset = image.offset;
        config.info.sizelimit = image.size;
        config.info.flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
        // SAFETY: LOOP_CONFIGURE reads the config we own.
        let set = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CONFIGURE, &config) };
        match check(set as i64) {
            Ok(_) => return Ok((device, path)),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => continue,
            Err(e) => return Err(e).with_context(|| format!("set up {}", path.display())),
        }
    }
    bail!("no free loop device after 16 tries")
}

/// Attaches a detached mount at `target`.
fn attach(mount: &OwnedFd, target: &Path) -> Result<()> {
    let target_c = path_option(target)?;
    // SAFETY: move_mount of our own descriptor onto a NUL-terminated path.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target_c.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(moved)
        .map(|_| ())
        .with_context(|| format!("attach a mount at {}", target.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_loop_structures_have_their_abi_sizes() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
        assert_eq!(std::mem::size_of::<LoopConfig>(), 304);
    }

    #[test]
    fn only_a_regular_file_with_squashfs_magic_is_an_image() {
        let dir = std::env::temp_dir().join(format!("squashfs-magic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.sqsh");
        fs::write(&good, b"hsqs\0\0\0\0").unwrap();
        let bad = dir.join("bad.sqsh");
        fs::write(&bad, b"\x7fELF").unwrap();
        assert!(open_image(&good).is_ok());
        let err = open_image(&bad).unwrap_err().to_string();
        assert!(err.contains("not a squashfs image or a SIF file"), "{err}");
        let err = open_image(&dir).unwrap_err().to_string();
        assert!(err.contains("a directory"), "{err}");
        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = open_image(&dir.join("fifo")).unwrap_err().to_string();
        assert!(err.contains("a FIFO"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/run/a\\040b"), "/run/a b");
        assert_eq!(unescape_mountinfo("/x\\134y"), "/x\\y");
        assert_eq!(unescape_mountinfo("/plain\\"), "/plain\\");
    }
}
