//! `gpurun doctor`: can the current user run a container, and a GPU
//! container, on this host? One line per check, each failure with its fix.
//! Exits 1 when a container cannot run.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::Result;
use gpurun_gpu::{flow, inventory, request, Source};

use crate::runtime::idmap::{map_helpers, UserIds};
use crate::runtime::{cgroup_path, context::Ctx, driver_paths, state_dir};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Ok,
    Info,
    Warn,
    Fail,
}

struct Report {
    worst_plain: Level,
    worst_gpu: Level,
}

impl Report {
    /// `gpu` checks only decide whether a GPU container would work.
    fn line(&mut self, level: Level, gpu: bool, name: &str, detail: impl AsRef<str>) {
        let tag = match level {
            Level::Ok => "ok  ",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{tag}  {name}: {}", detail.as_ref());
        if gpu {
            self.worst_gpu = self.worst_gpu.max(level);
        } else {
            self.worst_plain = self.worst_plain.max(level);
        }
    }
}

fn read_number(path: &str) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Tries it: a child process creates a user namespace and exits.
fn can_create_user_namespace() -> Result<(), nix::errno::Errno> {
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};
    // SAFETY: the child only calls unshare(2) and _exit(2), both
    // async-signal-safe, and doctor runs no other threads.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let code = match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
                Ok(()) => 0,
                Err(e) => e as i32,
            };
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None)? {
            WaitStatus::Exited(_, 0) => Ok(()),
            WaitStatus::Exited(_, errno) => Err(nix::errno::Errno::from_raw(errno)),
            _ => Err(nix::errno::Errno::ECHILD),
        },
    }
}

fn cgroup_version() -> &'static str {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let fs_at = |dir: &str| {
        mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(dir))
            .and_then(|l| l.split(' ').nth(2))
            .map(str::to_owned)
    };
    match fs_at("/sys/fs/cgroup").as_deref() {
        Some("cgroup2") => "v2",
        _ if fs_at("/sys/fs/cgroup/unified").is_some() => "v1 (hybrid)",
        _ => "v1",
    }
}

pub fn doctor(ctx: &Ctx, need_gpu: bool) -> Result<i32> {
    let root = nix::unistd::geteuid().is_root();
    let user = UserIds::current();
    let mut r = Report {
        worst_plain: Level::Ok,
        worst_gpu: Level::Ok,
    };
    println!(
        "gpurun doctor for {} (uid {}), gpurun {}",
        if user.name.is_empty() {
            "?"
        } else {
            &user.name
        },
        user.uid,
        env!("CARGO_PKG_VERSION")
    );

    check_state_dir(&mut r, ctx);
    check_user_namespaces(&mut r, root);
    check_subordinate_ids(&mut r, root, &user);
    check_cgroups(&mut r, root, &user);
    check_cgroup_drivers(&mut r, root);
    let gpu_verdict = check_gpu(&mut r, ctx, &user);

    let plain_ok = r.worst_plain < Level::Fail;
    println!(
        "verdict:  container: {}",
        if plain_ok {
            "would run"
        } else {
            "would NOT run (see FAIL above)"
        }
    );
    let gpu = match (plain_ok, r.worst_gpu < Level::Fail, gpu_verdict) {
        (false, _, _) => "would NOT run (no container can)",
        (true, false, _) => "would NOT get a GPU (see FAIL above)",
        (true, true, Some(true)) => "would run with the GPUs",
        _ => "would run with the driver files injected, but no kernel driver answers",
    };
    println!("verdict:  GPU container: {gpu}");
    let gpu_ok = r.worst_gpu < Level::Fail;
    Ok(if plain_ok && (gpu_ok || !need_gpu) {
        0
    } else {
        1
    })
}

/// State directory.
fn check_state_dir(r: &mut Report, ctx: &Ctx) {
    match state_dir::resolve(ctx.settings.root.as_deref(), true) {
        Ok(dir) if nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok() => r.line(
            Level::Ok,
            false,
            "state directory",
            dir.display().to_string(),
        ),
        Ok(dir) => r.line(
            Level::Fail,
            false,
            "state directory",
            format!(
                "{} is not writable: pass --root DIR with a directory of yours",
                dir.display()
            ),
        ),
        Err(e) => r.line(Level::Fail, false, "state directory", format!("{e:#}")),
    }
}

/// User namespaces: root needs none; everyone else needs to create one.
fn check_user_namespaces(r: &mut Report, root: bool) {
    if root {
        r.line(Level::Ok, false, "user namespaces", "not needed as root");
    } else {
        let max = read_number("/proc/sys/user/max_user_namespaces");
        match can_create_user_namespace() {
            Ok(()) => r.line(
                Level::Ok,
                false,
                "user namespaces",
                format!("enabled (max_user_namespaces={})", max.unwrap_or(-1)),
            ),
            Err(e) => {
                let fix = if max == Some(0) {
                    "user.max_user_namespaces is 0: as root, sysctl -w user.max_user_namespaces=15000"
                } else if read_number("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
                    "as root, sysctl -w kernel.unprivileged_userns_clone=1"
                } else if read_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
                    == Some(1)
                {
                    "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): as root, sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give gpurun an AppArmor profile allowing userns"
                } else {
                    "the kernel or a security module refuses unprivileged user namespaces"
                };
                r.line(
                    Level::Fail,
                    false,
                    "user namespaces",
                    format!("cannot create one ({e}): {fix}"),
                )
            }
        }
    }
}

/// Subordinate ids and the helpers that map them.
fn check_subordinate_ids(r: &mut Report, root: bool, user: &UserIds) {
    if root {
        r.line(Level::Ok, false, "subuid/subgid", "not needed as root");
    } else if user.subuids.is_empty() || user.subgids.is_empty() {
        r.line(
            Level::Warn,
            false,
            "subuid/subgid",
            format!(
                "no ranges for {:?}: containers map only your own id (files of other owners show as nobody, --keep-uid is unavailable); as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {}",
                user.name, user.name
            ),
        );
    } else {
        let (u, g) = (user.subuids[0], user.subgids[0]);
        r.line(
            Level::Ok,
            false,
            "subuid/subgid",
            format!("{}+{} and {}+{}", u.start, u.count, g.start, g.count),
        );
    }
    match map_helpers() {
        Some((uidmap, gidmap)) => {
            let setuid = |p: &Path| {
                fs::metadata(p).is_ok_and(|m| m.mode() & 0o4000 != 0)
                    || xattr_present(p, "security.capability")
            };
            if root || (setuid(&uidmap) && setuid(&gidmap)) {
                r.line(
                    Level::Ok,
                    false,
                    "newuidmap",
                    format!("{} and {}", uidmap.display(), gidmap.display()),
                )
            } else {
                r.line(
                    Level::Warn,
                    false,
                    "newuidmap",
                    format!(
                        "{} has neither the setuid bit nor file capabilities: reinstall uidmap",
                        uidmap.display()
                    ),
                )
            }
        }
        None if root => r.line(Level::Ok, false, "newuidmap", "not needed as root"),
        None => r.line(
            Level::Warn,
            false,
            "newuidmap",
            "not installed: only your own id can be mapped; apt-get install uidmap",
        ),
    }
}

/// Cgroups.
fn check_cgroups(r: &mut Report, root: bool, user: &UserIds) {
    let version = cgroup_version();
    if root {
        r.line(
            Level::Ok,
            false,
            "cgroups",
            format!("{version}, limits applied (root)"),
        );
    } else if cgroup_path::writable_for_current_user(Path::new("/gpurun")) {
        r.line(
            Level::Ok,
            false,
            "cgroups",
            format!("{version}, delegated: limits applied"),
        );
    } else {
        r.line(
            Level::Warn,
            false,
            "cgroups",
            format!("{version}, no delegation to uid {}: containers run without cgroup limits (as with runc); on cgroup v2 use systemd-run --user --scope -p Delegate=yes", user.uid),
        );
    }
}

/// Which cgroup driver each engine on this host hands gpurun (read from
/// their own configuration, their defaults otherwise), and, where that is
/// systemd, whether the spec's device rules hold there: systemd gets
/// `DevicePolicy=strict` and a `DeviceAllow` list, and gpurun attaches its
/// own device program beside systemd's, which needs the kernel to load one.
fn check_cgroup_drivers(r: &mut Report, root: bool) {
    let systemd = Path::new("/run/systemd/system").is_dir();
    let v2 = cgroup_version() == "v2";
    let default = if systemd && v2 { "systemd" } else { "cgroupfs" };
    let read = |path: &str| fs::read_to_string(path).ok();
    let mut engines: Vec<(&str, &str)> = Vec::new();
    if let Some(text) =
        read("/etc/docker/daemon.json").or_else(|| which("dockerd").then(String::new))
    {
        let driver = if text.contains("native.cgroupdriver=systemd") {
            "systemd"
        } else if text.contains("native.cgroupdriver=cgroupfs") {
            "cgroupfs"
        } else {
            default // Docker's own default since 20.10
        };
        engines.push(("Docker", driver));
    }
    if let Some(text) =
        read("/etc/containerd/config.toml").or_else(|| which("containerd").then(String::new))
    {
        let systemd_cgroup = text
            .lines()
            .any(|l| l.split('#').next().unwrap_or("").replace(' ', "") == "SystemdCgroup=true");
        engines.push((
            "containerd",
            if systemd_cgroup {
                "systemd"
            } else {
                "cgroupfs"
            },
        ));
    }
    if which("podman") {
        let conf = read("/etc/containers/containers.conf")
            .or_else(|| read("/usr/share/containers/containers.conf"))
            .unwrap_or_default();
        let driver = conf
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cgroup_manager"))
            .find_map(|rest| rest.split('"').nth(1).map(str::to_owned));
        engines.push((
            "Podman",
            if driver.as_deref() == Some("cgroupfs") {
                "cgroupfs"
            } else {
                default
            },
        ));
    }
    if let Some(text) = read("/var/lib/kubelet/config.yaml") {
        let driver = if text.contains("cgroupDriver: cgroupfs") {
            "cgroupfs"
        } else {
            "systemd"
        };
        engines.push(("kubelet", driver));
    }
    let listed: Vec<String> = engines.iter().map(|(e, d)| format!("{e}: {d}")).collect();
    r.line(
        Level::Info,
        false,
        "cgroup drivers",
        if listed.is_empty() {
            format!(
                "no engine configured; systemd {}",
                if systemd { "is init" } else { "is not init" }
            )
        } else {
            listed.join(", ")
        },
    );
    if !(systemd && v2 && root) {
        return;
    }
    // What `--systemd-cgroup` needs beyond systemd's own list: a device
    // program gpurun can load.
    let loaded = libcgroups::v2::devices::program::Program::from_rules(&[], false)
        .map_err(|e| e.to_string())
        .and_then(|program| {
            libcgroups::v2::devices::bpf::prog::load("Apache", program.bytecodes())
                .map_err(|e| e.to_string())
        });
    match loaded {
        Ok(fd) => {
            let _ = nix::unistd::close(fd);
            r.line(
                Level::Ok,
                false,
                "device rules under systemd",
                "enforced: the unit gets DevicePolicy=strict and the spec's DeviceAllow list, and gpurun's own device program holds the rules exactly through daemon-reload and update",
            );
        }
        Err(e) => r.line(
            Level::Fail,
            false,
            "device rules under systemd",
            format!("gpurun cannot load a device program ({e}): --systemd-cgroup containers would fail to start; check that the kernel has CONFIG_CGROUP_BPF and that no seccomp or LSM policy refuses bpf(2) to root"),
        ),
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The NVIDIA driver, judged the way `run` judges it: the same request
/// turned into a plan by the same code, for every GPU with the default
/// capabilities (utility, compute).
/// Inside a Slurm job, the job's allocation bounds it as it bounds a
/// container.
fn check_gpu(r: &mut Report, ctx: &Ctx, user: &UserIds) -> Option<bool> {
    match driver_paths::resolve(&ctx.settings).and_then(|roots| {
        let request = request::from_env(&["NVIDIA_VISIBLE_DEVICES=all"])?;
        let job = flow::SlurmJob::from_env(false)?;
        match flow::resolve(|| Ok(roots.clone()), request, job.as_ref(), None, None)? {
            (_, Some((inv, plan))) => Ok((roots, inv, plan)),
            (_, None) => anyhow::bail!("the Slurm job has no GPUs"),
        }
    }) {
        Err(e) => {
            r.line(
                Level::Fail,
                true,
                "NVIDIA driver",
                format!("a GPU container would fail: {e:#}"),
            );
            None
        }
        Ok((roots, inv, plan)) => {
            r.line(
                Level::Ok,
                true,
                "NVIDIA driver",
                format!(
                    "{} ({} kernel module) under {}: {} GPU(s), {} driver files for utility,compute",
                    inv.driver_version,
                    inv.kernel_module.as_deref().unwrap_or("no"),
                    roots.driver_root.display(),
                    inv.gpus.len(),
                    plan.mounts.len()
                ),
            );
            for note in &inv.notes {
                r.line(Level::Info, true, "driver files", note);
            }
            let has = |name: &str| {
                plan.mounts
                    .iter()
                    .any(|m| m.destination.file_name().is_some_and(|f| f == name))
            };
            for (file, what) in [
                ("nvidia-smi", "nvidia-smi (an ELF program)"),
                ("libnvidia-ml.so.1", "libnvidia-ml.so.1"),
                ("libcuda.so.1", "libcuda.so.1"),
            ] {
                if !has(file) {
                    r.line(
                        Level::Warn,
                        true,
                        "driver files",
                        format!(
                            "no {what} found under {}: GPU containers will not have it; set --driver-root to where the driver is",
                            roots.driver_root.display()
                        ),
                    );
                }
            }
            // NVML, loaded in a child that cannot change the host, says
            // whether a kernel driver answers.
            let answers =
                inventory::discover(&roots, Source::Auto).is_ok_and(|i| i.source == "nvml");
            let kernel = roots.proc_root.join("driver/nvidia/version");
            if answers {
                r.line(
                    Level::Ok,
                    true,
                    "kernel driver",
                    "loaded and answering (NVML)",
                );
            } else if kernel.is_file() {
                r.line(
                    Level::Info,
                    true,
                    "kernel driver",
                    format!("{} exists, but NVML does not initialise: nvidia-smi in a container will exit 9", kernel.display()),
                );
            } else {
                r.line(
                    Level::Info,
                    true,
                    "kernel driver",
                    format!("not loaded (no {}): containers get the driver files, and nvidia-smi exits 9", kernel.display()),
                );
            }
            if plan.device_nodes.is_empty() {
                r.line(
                    Level::Fail,
                    true,
                    "device nodes",
                    format!("no /dev/nvidia* under {}: load the driver (nvidia-modprobe) or set --dev-root", roots.dev_root.display()),
                );
            } else {
                let blocked: Vec<String> = plan
                    .device_nodes
                    .iter()
                    .filter(|n| {
                        let is_char = fs::metadata(&n.host_path)
                            .is_ok_and(|m| m.file_type().is_char_device());
                        !is_char
                            || nix::unistd::access(
                                &n.host_path,
                                nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
                            )
                            .is_err()
                    })
                    .map(|n| n.host_path.display().to_string())
                    .collect();
                if blocked.is_empty() {
                    r.line(
                        Level::Ok,
                        true,
                        "device nodes",
                        format!(
                            "{} nodes, read-write for uid {}",
                            plan.device_nodes.len(),
                            user.uid
                        ),
                    );
                } else {
                    r.line(
                        Level::Fail,
                        true,
                        "device nodes",
                        format!(
                            "uid {} cannot open {}: make them mode 0666 (NVreg_DeviceFileMode=0666) or add the user to their group",
                            user.uid,
                            blocked.join(", ")
                        ),
                    );
                }
            }
            Some(answers)
        }
    }
}

fn xattr_present(path: &Path, name: &str) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(p), Ok(n)) = (
        std::ffi::CString::new(path.as_os_str().as_bytes()),
        std::ffi::CString::new(name),
    ) else {
        return false;
    };
    // SAFETY: valid C strings; a NULL buffer of size 0 asks for the size only.
    unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) > 0 }
}
