//! The descriptors a caller leaked to gpurun, kept from the container.

/// Descriptors a caller leaked to us must not reach a container (the
/// CVE-2024-21626 pattern: a process.cwd of /proc/self/fd/N). Everything
/// past stdio, --preserve-fds and systemd's LISTEN_FDS is marked
/// close-on-exec, so the sealed re-exec drops it before any container
/// exists, as runc's init does for its own exec; `process_fd` (exec's
/// `--process /dev/fd/N`) stays open too.
pub fn close_on_exec(preserved: i32, process_fd: Option<u32>) {
    let listen: i32 = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let first = 3 + preserved.max(0) as u32 + listen.max(0) as u32;
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    let mut ranges = vec![(first, u32::MAX)];
    if let Some(fd) = process_fd.filter(|fd| *fd >= first) {
        ranges = vec![(first, fd - 1), (fd + 1, u32::MAX)];
    }
    for (from, to) in ranges {
        if from > to {
            continue;
        }
        // SAFETY: close_range only changes flags of our own descriptors.
        let done =
            unsafe { libc::syscall(libc::SYS_close_range, from, to, CLOSE_RANGE_CLOEXEC) } == 0;
        if !done {
            // Kernels before 5.11: one by one.
            let fds: Vec<u32> = std::fs::read_dir("/proc/self/fd")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|fd: &u32| (from..=to).contains(fd))
                .collect();
            for fd in fds {
                // SAFETY: setting FD_CLOEXEC on a descriptor number is
                // harmless even if it was the directory listing's, now closed.
                unsafe { libc::fcntl(fd as i32, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
    }
}

/// N, for `/dev/fd/N` or `/proc/self/fd/N`.
pub fn descriptor_path(path: &std::path::Path) -> Option<u32> {
    let text = path.to_str()?;
    text.strip_prefix("/dev/fd/")
        .or_else(|| text.strip_prefix("/proc/self/fd/"))?
        .parse()
        .ok()
}
