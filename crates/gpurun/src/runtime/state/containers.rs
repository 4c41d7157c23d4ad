//! Container ids and loading a container's saved state.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::runtime::cgroups;
use anyhow::{bail, Context, Result};
use libcontainer::container::Container;
use libcontainer::error::LibcontainerError;

/// The suffix of the directory a create works in. `@` is not valid in an id,
/// so it never collides with a container's own state directory.
pub const CREATING_SUFFIX: &str = "@creating";

/// Accepts the ids runc accepts: letters, digits and `_+-.`, not `.` or `..`.
pub fn validate_id(id: &str) -> Result<()> {
    let valid_chars = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.'));
    if id.is_empty() || id == "." || id == ".." || !valid_chars || id.len() > 1024 {
        bail!(
            "invalid container id {id:?}: use 1 to 1024 letters, digits and \"_+-.\", not \".\" or \"..\""
        );
    }
    Ok(())
}

pub fn state_dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

pub fn creating_dir(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}{CREATING_SUFFIX}"))
}

/// The file a create holds an exclusive `flock` on, in its working
/// directory. The lock belongs to the open file, which libcontainer's
/// intermediate and init processes inherit through fork: it is free only
/// once every process of the create is gone (or init has exec'd the
/// container's process, where close-on-exec drops it).
const CREATOR_LOCK: &str = "creator.lock";

/// An id's `@creating` directory, held by this process (a create, or a
/// forced delete) with the creator lock in it. Dropping it removes the
/// directory, if it is still this one: a directory another gpurun put
/// under the name since (after taking this one for a dead create's) is
/// left alone.
pub struct ClaimedDir {
    pub path: PathBuf,
    identity: (u64, u64),
    _lock: std::fs::File,
}

impl Drop for ClaimedDir {
    fn drop(&mut self) {
        if dir_identity(&self.path) == Some(self.identity) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Claims the id's `@creating` directory: None if another gpurun holds
/// it. The directory is made under a name of this process's own, with
/// the creator lock taken and named in it, and then renamed into place
/// without replacing anything: no other gpurun ever finds the directory
/// without its held lock (and takes it for a dead create's).
pub fn claim_creating_dir(root: &Path, id: &str) -> Result<Option<ClaimedDir>> {
    use std::os::unix::fs::DirBuilderExt;
    let path = creating_dir(root, id);
    let unnamed = root.join(format!("{id}{CREATING_SUFFIX}.{}", std::process::id()));
    // The container's own: its config holds the process's environment.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&unnamed)
        .with_context(|| format!("create {}", unnamed.display()))?;
    let claimed = lock_creator(&unnamed).and_then(|lock| {
        let identity = dir_identity(&unnamed).context("a directory just made is gone")?;
        Ok((lock, identity))
    });
    let (lock, identity) = match claimed {
        Ok(claimed) => claimed,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&unnamed);
            return Err(e);
        }
    };
    match rename_no_replace(&unnamed, &path) {
        Ok(()) => Ok(Some(ClaimedDir {
            path,
            identity,
            _lock: lock,
        })),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&unnamed);
            match e.raw_os_error() {
                Some(libc::EEXIST) | Some(libc::ENOTEMPTY) => Ok(None),
                _ => Err(e).with_context(|| format!("create {}", path.display())),
            }
        }
    }
}

/// What creates of `id` killed before their claim was renamed into place
/// left: the unnamed directories of processes that are gone.
fn remove_dead_claims(root: &Path, id: &str) {
    let prefix = format!("{id}{CREATING_SUFFIX}.");
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if start_time(pid).is_none() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A directory's device and inode, without following a link.
fn dir_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// `renameat2(RENAME_NOREPLACE)`: fails with EEXIST where `to` exists,
/// even as an empty directory (which a plain rename would replace).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags};
    renameat2(None, from, None, to, RenameFlags::RENAME_NOREPLACE).map_err(std::io::Error::from)
}

/// Takes the creator lock in a directory no other gpurun can see yet.
/// The file names its holder (pid and start time), so that a create killed
/// while its children live on (holding the lock) is known for dead.
fn lock_creator(dir: &Path) -> Result<std::fs::File> {
    use std::io::Write;
    let path = dir.join(CREATOR_LOCK);
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
    if !try_lock(&file) {
        bail!("{} is locked by another gpurun", path.display());
    }
    let me = std::process::id() as i32;
    if let Some(start) = start_time(me) {
        let _ = write!(file, "{me} {start}");
    }
    Ok(file)
}

/// The file in a create's working directory where its init names itself
/// (pid and start time, libcontainer patch 33) before it does anything
/// else: a create killed before it saved the init's pid in the state
/// leaves no init that nothing names.
const PID_RECORD: &str = "pids";

/// Opens the create's pid record, for appending, for the builder.
pub fn open_pid_record(creating_dir: &Path) -> Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = creating_dir.join(PID_RECORD);
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("create {}", path.display()))?;
    Ok(file.into())
}

/// The processes a pid record names that still run: the same pid with the
/// same start time (a pid reused since is another process, not ours).
fn recorded_processes(creating_dir: &Path) -> Vec<nix::unistd::Pid> {
    let text = std::fs::read_to_string(creating_dir.join(PID_RECORD)).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().map(str::parse::<u64>);
            match (fields.next(), fields.next()) {
                (Some(Ok(pid)), Some(Ok(start))) => Some((i32::try_from(pid).ok()?, start)),
                _ => None,
            }
        })
        .filter(|&(pid, start)| start_time(pid) == Some(start))
        .map(|(pid, _)| nix::unistd::Pid::from_raw(pid))
        .collect()
}

/// A non-blocking exclusive `flock`.
fn try_lock(file: &std::fs::File) -> bool {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Locks on a container's state directory that keep an `exec` and a
/// `delete` of it apart: an exec holds the directory shared until its
/// process has started, a delete holds it exclusively while it takes the
/// container down. Without them a delete could remove the state and the
/// cgroup between an exec's process joining the container and its start,
/// leaving that process waiting for ever, in a cgroup it made anew. A gate
/// file in the directory, taken exclusively for a moment by each exec and
/// for the whole of a delete, lets a delete in past a stream of execs (a
/// shared lock alone would starve it).
pub struct ContainerLock {
    _dir: std::fs::File,
    _gate: Option<std::fs::File>,
}

/// The gate's name in the state directory.
const EXEC_GATE: &str = "gpurun-exec-gate";

/// How long either side waits for the other before going on without the
/// lock: an exec into a paused container holds its lock for as long as the
/// pause lasts.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Takes the shared lock for an exec: None where there is no state
/// directory (or a delete removed it while we waited), so that loading the
/// container then says it does not exist.
pub fn lock_for_exec(root: &Path, id: &str) -> Option<ContainerLock> {
    let dir = open_state_dir(root, id)?;
    let gate = open_gate(root, id);
    let gate_held = gate
        .as_ref()
        .is_some_and(|g| flock_patiently(g, libc::LOCK_EX, id));
    let locked = flock_patiently(&dir, libc::LOCK_SH, id);
    if gate_held {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        unsafe { libc::flock(gate.as_ref().map_or(-1, |g| g.as_raw_fd()), libc::LOCK_UN) };
    }
    (locked && still_linked(&dir)).then_some(ContainerLock {
        _dir: dir,
        _gate: None,
    })
}

/// Takes the exclusive lock for a delete: the gate first (no new exec
/// starts), then the directory (the execs under way have started).
pub fn lock_for_delete(root: &Path, id: &str) -> Option<ContainerLock> {
    let dir = open_state_dir(root, id)?;
    let gate = open_gate(root, id);
    if let Some(gate) = &gate {
        flock_patiently(gate, libc::LOCK_EX, id);
    }
    flock_patiently(&dir, libc::LOCK_EX, id).then_some(ContainerLock {
        _dir: dir,
        _gate: gate,
    })
}

/// `flock(op | LOCK_NB)` retried for `LOCK_PATIENCE`; false (with a
/// warning) when the other side held it all that time.
fn flock_patiently(file: &std::fs::File, op: libc::c_int, id: &str) -> bool {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return true;
        }
        if std::time::Instant::now() > deadline {
            tracing::warn!(
                "container {id:?} stayed locked by another gpurun: going on without the lock"
            );
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn open_state_dir(root: &Path, id: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(state_dir(root, id))
        .ok()
}

/// The gate file, made on first use (its owner is the container's).
fn open_gate(root: &Path, id: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(state_dir(root, id).join(EXEC_GATE))
        .ok()
}

/// A directory removed after it was opened has no links left.
fn still_linked(dir: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.metadata().is_ok_and(|m| m.nlink() > 0)
}

/// Takes the id's `@creating` directory, the lock a create takes, waiting
/// up to ten seconds for a live create (or delete) to end and removing
/// one a killed create left.
pub fn hold_id(root: &Path, id: &str) -> Result<ClaimedDir> {
    let dir = creating_dir(root, id);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(held) = claim_creating_dir(root, id)? {
            remove_dead_claims(root, id);
            return Ok(held);
        }
        let cgroup = load(root, id)
            .ok()
            .and_then(|c| c.spec().ok())
            .map(|config| config.cgroup_path);
        let judged = dir_identity(&dir);
        if !create_is_live(&dir) {
            end_create(id, &dir, cgroup.as_deref(), true);
            // Another delete may have removed it and claimed the id since.
            if judged.is_some() && dir_identity(&dir) == judged {
                let _ = std::fs::remove_dir_all(&dir);
            }
            continue;
        }
        if std::time::Instant::now() > deadline {
            bail!("container {id:?} is being created or deleted by another gpurun: try again");
        }
        end_create(id, &dir, cgroup.as_deref(), false);
    }
}

/// Whether a create is working in `creating_dir`: its creator lock held,
/// or (made right after the directory) not there yet on a young directory.
pub fn create_is_live(creating_dir: &Path) -> bool {
    if !creating_dir.is_dir() {
        return false;
    }
    match std::fs::File::open(creating_dir.join(CREATOR_LOCK)) {
        Ok(lock) => !try_lock(&lock) && holder_alive(&lock),
        Err(_) => std::fs::metadata(creating_dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < std::time::Duration::from_secs(5)),
    }
}

/// A process's start time (clock ticks after boot), from its stat line.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process a held lock file names still runs (a file that names
/// none, as an older gpurun wrote it, counts as alive).
fn holder_alive(mut lock: &std::fs::File) -> bool {
    use std::io::Read;
    let mut text = String::new();
    if lock.read_to_string(&mut text).is_err() {
        return true;
    }
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    match (fields.next(), fields.next()) {
        (Some(Ok(pid)), Some(Ok(start))) => start_time(pid as i32) == Some(start),
        _ => true,
    }
}

/// Waits for a create of `id` that is under way, or was killed halfway
/// (`dead`), to end: its working directory gone (it finished, or failed
/// and cleaned up) or its creator lock free (no process of it is left).
/// Meanwhile it kills every process in the container's own cgroup (and
/// nothing else), so that no process of a killed create can make a cgroup
/// directory after `delete` removed them, and, for a dead create, the
/// init its pid record names. Gives up after five seconds.
fn end_create(id: &str, creating_dir: &Path, cgroup: Option<&Path>, dead: bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut lock = None;
    loop {
        if dead {
            for pid in recorded_processes(creating_dir) {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        if let Some(path) = cgroup {
            for pid in crate::runtime::cgroups::host::pids(path) {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        if !creating_dir.exists() {
            return;
        }
        if lock.is_none() {
            // Made right after the directory: its absence for long means
            // the create died before it (a dead one without it has no
            // process left).
            lock = std::fs::File::open(creating_dir.join(CREATOR_LOCK)).ok();
            if lock.is_none() && dead {
                return;
            }
        }
        let free = lock.as_ref().is_some_and(try_lock);
        if free || std::time::Instant::now() > deadline {
            if !free {
                tracing::warn!("processes of the create of {id:?} are still alive");
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Present in the state dir of a container whose config has no `process`.
const NO_PROCESS_FILE: &str = "gpurun-no-process";

pub fn mark_no_process(root: &Path, id: &str) -> Result<()> {
    let path = state_dir(root, id).join(NO_PROCESS_FILE);
    std::fs::write(&path, b"").with_context(|| format!("write {}", path.display()))
}

/// `start` of a container without a process is an error that leaves the
/// container as it was, as the runtime spec asks.
pub fn refuse_start_without_process(root: &Path, id: &str) -> Result<()> {
    if state_dir(root, id).join(NO_PROCESS_FILE).exists() {
        bail!(
            "container {id:?} has no process to start: its config.json has no \"process\"; delete it (\"gpurun delete {id}\"), add one (see \"gpurun spec\") and create it again"
        );
    }
    Ok(())
}

pub fn exists(root: &Path, id: &str) -> bool {
    state_dir(root, id).join("state.json").exists()
}

pub fn load(root: &Path, id: &str) -> Result<Container> {
    validate_id(id)?;
    let dir = state_dir(root, id);
    if !dir.join("state.json").exists() {
        bail!(
            "container {id:?} does not exist in {}: see \"{}\"",
            root.display(),
            crate::runtime::state::state_dir::list_command(root)
        );
    }
    Container::load(dir).with_context(|| format!("read the state of container {id:?}"))
}

/// Waits up to a second for the container's init to be gone.
pub fn wait_gone(container: &Container) {
    let Some(pid) = container.pid() else { return };
    for _ in 0..100 {
        match nix::sys::signal::kill(pid, None) {
            Err(_) => return,
            Ok(()) => {
                // A zombie still answers; its state letter tells.
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
                {
                    return;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `delete --force` of a live container: its processes killed, and waited
/// for, before libcontainer removes the cgroup (whose brief retries a
/// process with much memory to free outlasts: seen with a restored CUDA
/// worker holding 512 MiB). Without a cgroup, killing init (and its pid
/// namespace) is how a rootless container is stopped; libcontainer's kill
/// of "all" finds no process to signal there.
fn stop_for_delete(container: &mut Container) {
    let kill = libcontainer::signal::Signal::try_from("KILL").expect("valid");
    if !cgroups::container::has_cgroup(container) {
        let _ = container.kill(kill, false);
        wait_gone(container);
        return;
    }
    let _ = container.kill(kill, true);
    if let Ok(manager) = cgroups::container::manager(container) {
        cgroups::container::wait_empty(&manager);
    }
}

/// The container's root filesystem, absolute, as its create resolved it
/// (runc's state carries it as `rootfs`).
pub fn rootfs(container: &Container) -> Option<PathBuf> {
    let text = std::fs::read(container.root.join("config.json")).ok()?;
    let spec: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let path = PathBuf::from(spec["root"]["path"].as_str()?);
    Some(if path.is_absolute() {
        path
    } else {
        container.bundle().join(path)
    })
}

/// The OCI spelling of a status: "created", "running", "stopped", ...
/// The container's status now, as `state` and `list` report it. A create
/// in progress saves its state before its init has a pid, and loading a
/// container with no pid makes it "stopped": while the create holds its
/// lock it is "creating" (an engine polling `state` would take "stopped"
/// for a container that died).
pub fn refresh_status(container: &mut Container, root: &Path) -> Result<()> {
    use libcontainer::container::ContainerStatus;
    container.refresh_status()?;
    if container.status() == ContainerStatus::Stopped
        && container.pid().is_none()
        && create_is_live(&creating_dir(root, container.id()))
    {
        container.set_status(ContainerStatus::Creating);
    }
    Ok(())
}

pub fn status_name(container: &Container) -> String {
    serde_json::to_value(container.status())
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| container.status().to_string().to_lowercase())
}

/// Deletes a container, then, for a container gpurun placed below a Slurm
/// step on cgroup v1, the step's directories its creation made in the
/// hierarchies Slurm does not use (cpu, pids, ...): one path serves every
/// v1 hierarchy, so they were made there for it. They are removed only
/// while empty: Slurm's own (holding the step's tasks) and those of
/// another container in the step refuse rmdir and stay.
pub fn delete(container: &mut Container, force: bool) -> Result<(), LibcontainerError> {
    if force {
        let _ = container.refresh_status();
        if container.status() != libcontainer::container::ContainerStatus::Stopped {
            stop_for_delete(container);
        }
    }
    let cgroup = container.spec().ok().map(|config| config.cgroup_path);
    container.delete(force)?;
    if let Some(path) = cgroup {
        crate::runtime::cgroups::host::remove_empty_slurm_parents(&path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state root of the test's own.
    fn root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("containers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Whether `done` holds within two seconds: a lock dropped here stays
    /// held a moment longer while another test's child, forked with our
    /// descriptors, has not reached its exec yet.
    fn soon(done: impl Fn() -> bool) -> bool {
        (0..200).any(|_| {
            done() || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        })
    }

    #[test]
    fn a_create_is_live_while_its_lock_is_held_by_a_live_holder() {
        let root = root("live");
        let dir = creating_dir(&root, "c1");
        std::fs::create_dir(&dir).unwrap();
        let lock = lock_creator(&dir).unwrap();
        assert!(create_is_live(&dir));
        drop(lock);
        assert!(
            soon(|| !create_is_live(&dir)),
            "a free lock is a finished create"
        );
        // A held lock whose named holder is gone (its children inherited
        // it): the create is dead all the same.
        let lock = lock_creator(&dir).unwrap();
        std::fs::write(dir.join(CREATOR_LOCK), "1 1").unwrap();
        assert!(!create_is_live(&dir));
        drop(lock);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_dead_create_s_recorded_processes_are_killed_and_only_they() {
        let root = root("dead");
        let dir = creating_dir(&root, "c2");
        std::fs::create_dir(&dir).unwrap();
        let mut ours = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut reused = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let (a, b) = (ours.id() as i32, reused.id() as i32);
        let start = start_time(a).unwrap();
        // The second names its pid with another start time: a pid reused
        // since by a process that is not ours.
        let wrong = start_time(b).unwrap() + 1;
        std::fs::write(dir.join(PID_RECORD), format!("{a} {start}\n{b} {wrong}\n")).unwrap();
        end_create("c2", &dir, None, true);
        assert!(
            ours.wait().unwrap().code().is_none(),
            "the recorded init was killed"
        );
        assert!(
            reused.try_wait().unwrap().is_none(),
            "a reused pid was signalled"
        );
        reused.kill().unwrap();
        reused.wait().unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_forced_delete_holds_the_id_and_waits_out_a_live_create() {
        let root = root("hold");
        std::fs::create_dir(state_dir(&root, "c3")).unwrap();
        let held = hold_id(&root, "c3").unwrap();
        assert!(create_is_live(&creating_dir(&root, "c3")));
        // A create of the id cannot begin: its working directory is taken.
        assert!(std::fs::create_dir(creating_dir(&root, "c3")).is_err());
        drop(held);
        assert!(!creating_dir(&root, "c3").exists());
        // A directory a killed create left (no lock, long made) is taken over.
        let left = creating_dir(&root, "c3");
        std::fs::create_dir(&left).unwrap();
        let old = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let path = std::ffi::CString::new(left.to_str().unwrap()).unwrap();
        // SAFETY: utimensat on a path we made, with two valid timespecs.
        assert_eq!(
            unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), [old, old].as_ptr(), 0) },
            0
        );
        let held = hold_id(&root, "c3").unwrap();
        drop(held);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn one_claim_at_a_time_and_a_claim_removes_only_its_own_directory() {
        let root = root("claim");
        let first = claim_creating_dir(&root, "c5").unwrap().expect("free");
        assert!(create_is_live(&first.path), "found with its lock held");
        assert!(claim_creating_dir(&root, "c5").unwrap().is_none());
        // An empty directory under the name is not replaced either.
        let empty = root.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(rename_no_replace(&empty, &first.path).is_err());
        // Taken over (as from a create judged dead) and claimed anew: the
        // first claim's drop leaves the new holder's directory alone.
        std::fs::remove_dir_all(&first.path).unwrap();
        let second = claim_creating_dir(&root, "c5").unwrap().expect("free");
        drop(first);
        assert!(second.path.join(CREATOR_LOCK).exists());
        drop(second);
        assert!(!creating_dir(&root, "c5").exists());
        // A claim a killed create left unnamed goes with the next delete;
        // a live process's stays.
        let dead = root.join(format!("c5{CREATING_SUFFIX}.{}", i32::MAX));
        let live = root.join(format!("c5{CREATING_SUFFIX}.1"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::create_dir(&live).unwrap();
        drop(hold_id(&root, "c5").unwrap());
        assert!(!dead.exists() && live.exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_exec_waiting_on_a_delete_finds_the_container_gone() {
        let root = root("gate");
        std::fs::create_dir(state_dir(&root, "c4")).unwrap();
        let exec = lock_for_exec(&root, "c4").expect("no delete: the exec goes in");
        drop(exec);
        let delete = lock_for_delete(&root, "c4").unwrap();
        let waiting = {
            let root = root.clone();
            std::thread::spawn(move || lock_for_exec(&root, "c4").is_some())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::remove_dir_all(state_dir(&root, "c4")).unwrap();
        drop(delete);
        assert!(
            !waiting.join().unwrap(),
            "an exec went on into a deleted container"
        );
        std::fs::remove_dir_all(root).unwrap();
    }
}
