//! The driver's own checkpoint API (`cuCheckpointProcess*` in
//! libcuda.so.1, driver 570 and later): a CUDA process is locked (its
//! CUDA calls wait), then checkpointed (its device memory moves to host
//! memory and it lets go of the GPU), so CRIU can dump it; after CRIU's
//! restore it is restored onto the GPU and unlocked. No cuda-checkpoint
//! binary and no CRIU plugin: gpurun loads the host driver's library (the
//! one its inventory found, never one from an image) and calls it.

use std::ffi::c_int;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use gpurun_gpu::inventory::{FileKind, Inventory};
use libloading::Library;

/// CUDA 13.0, driver 580: restore takes GPU pairs to move a process onto
/// other GPUs.
const GPU_PAIRS_SINCE: i32 = 13000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Running,
    Locked,
    Checkpointed,
    Failed,
}

impl State {
    fn from_driver(value: c_int) -> Option<State> {
        Some(match value {
            0 => State::Running,
            1 => State::Locked,
            2 => State::Checkpointed,
            3 => State::Failed,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Locked => "locked",
            State::Checkpointed => "checkpointed",
            State::Failed => "failed",
        }
    }
}

#[repr(C)]
struct LockArgs {
    timeout_ms: u32,
    reserved0: u32,
    reserved1: [u64; 7],
}

/// CUcheckpointCheckpointArgs and CUcheckpointUnlockArgs: reserved only.
#[repr(C)]
struct ReservedArgs {
    reserved: [u64; 8],
}

#[repr(C)]
pub struct GpuPair {
    pub old_uuid: [u8; 16],
    pub new_uuid: [u8; 16],
}

#[repr(C)]
struct RestoreArgs {
    gpu_pairs: *mut GpuPair,
    gpu_pairs_count: u32,
    reserved: [u8; 52 - std::mem::size_of::<*mut GpuPair>()],
    reserved1: u64,
}

type StateFn = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
type LockFn = unsafe extern "C" fn(c_int, *mut LockArgs) -> c_int;
type ReservedFn = unsafe extern "C" fn(c_int, *mut ReservedArgs) -> c_int;
type RestoreFn = unsafe extern "C" fn(c_int, *mut RestoreArgs) -> c_int;

/// The host driver's checkpoint API, loaded.
pub struct Driver {
    get_state: StateFn,
    lock: LockFn,
    checkpoint: ReservedFn,
    restore: RestoreFn,
    unlock: ReservedFn,
    /// cuDriverGetVersion: 13000 for CUDA 13.0.
    pub api_version: i32,
    pub version: String,
    // Last: the functions above point into it.
    _library: Library,
}

/// A failed call: which, on which process, and the driver's CUresult.
#[derive(Debug)]
pub struct CallError {
    pub call: &'static str,
    pub pid: i32,
    pub result: c_int,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CUDA process {}: {} failed with {} ({})",
            self.pid,
            self.call,
            result_name(self.result),
            self.result
        )
    }
}

/// The CUresult names the checkpoint calls document.
fn result_name(result: c_int) -> &'static str {
    match result {
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        100 => "CUDA_ERROR_NO_DEVICE",
        401 => "CUDA_ERROR_ILLEGAL_STATE",
        500 => "CUDA_ERROR_NOT_FOUND",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        909 => "CUDA_ERROR_TIMEOUT",
        _ => "CUDA_ERROR_UNKNOWN",
    }
}

/// The driver's function `name`, of type `T`; one a driver lacks is
/// refused with the message `missing` makes of its name.
///
/// # Safety
/// `T` must be the function's C type.
unsafe fn symbol<T: Copy>(
    library: &Library,
    name: &str,
    missing: &dyn Fn(&str) -> String,
) -> Result<T> {
    // libloading adds the terminating NUL.
    Ok(*library
        .get::<T>(name.as_bytes())
        .with_context(|| missing(name))?)
}

/// The host's libcuda.so.1, as the inventory found it.
fn libcuda(inventory: &Inventory) -> Result<PathBuf> {
    inventory
        .files
        .values()
        .flatten()
        .find(|f| {
            f.kind == FileKind::Library && !f.compat32 && f.soname.as_deref() == Some("libcuda.so.1")
        })
        .map(|f| f.host_path.clone())
        .with_context(|| {
            format!(
                "NVIDIA driver {} has no libcuda.so.1 in {}: the CUDA state of a GPU container is saved through it",
                inventory.driver_version,
                inventory.roots.driver_root.display()
            )
        })
}

impl Driver {
    /// Loads the host driver's libcuda.so.1 and its checkpoint API, and
    /// initialises it. A driver without the API is refused in one line.
    pub fn load(inventory: &Inventory) -> Result<Driver> {
        let path = libcuda(inventory)?;
        // SAFETY: the host's own driver library, found by the inventory in
        // the driver root; its initialisers are the driver's.
        let library = unsafe { Library::new(&path) }
            .with_context(|| format!("load the driver's {}", path.display()))?;
        let version = &inventory.driver_version;
        let missing = |name: &str| {
            format!(
                "NVIDIA driver {version} ({}) has no checkpoint API ({name}): checkpoint and restore of GPU containers need driver 570 or later",
                path.display()
            )
        };
        // SAFETY: each symbol is looked up with the driver API's C type;
        // the functions stay valid while `library` (kept in the Driver) is.
        let (init, get_version, get_state, lock, checkpoint, restore, unlock) = unsafe {
            (
                symbol::<unsafe extern "C" fn(u32) -> c_int>(&library, "cuInit", &missing)?,
                symbol::<unsafe extern "C" fn(*mut c_int) -> c_int>(
                    &library,
                    "cuDriverGetVersion",
                    &missing,
                )?,
                symbol::<StateFn>(&library, "cuCheckpointProcessGetState", &missing)?,
                symbol::<LockFn>(&library, "cuCheckpointProcessLock", &missing)?,
                symbol::<ReservedFn>(&library, "cuCheckpointProcessCheckpoint", &missing)?,
                symbol::<RestoreFn>(&library, "cuCheckpointProcessRestore", &missing)?,
                symbol::<ReservedFn>(&library, "cuCheckpointProcessUnlock", &missing)?,
            )
        };
        // SAFETY: cuInit and cuDriverGetVersion take a flag and an int.
        let result = unsafe { init(0) };
        if result != 0 {
            bail!(
                "cuInit of NVIDIA driver {version} ({}) failed with {} ({result}): is the driver loaded?",
                path.display(),
                result_name(result)
            );
        }
        let mut api_version = 0;
        // SAFETY: as above.
        unsafe { get_version(&mut api_version) };
        Ok(Driver {
            get_state,
            lock,
            checkpoint,
            restore,
            unlock,
            api_version,
            version: version.clone(),
            _library: library,
        })
    }

    /// A process's CUDA state; `None` for a process the driver does not
    /// know (no CUDA in it).
    pub fn state(&self, pid: i32) -> Option<State> {
        let mut state: c_int = -1;
        // SAFETY: the driver writes one int.
        let result = unsafe { (self.get_state)(pid, &mut state) };
        (result == 0).then(|| State::from_driver(state)).flatten()
    }

    /// Whether restore can move a process onto other GPUs.
    pub fn takes_gpu_pairs(&self) -> bool {
        self.api_version >= GPU_PAIRS_SINCE
    }

    fn lock(&self, pid: i32, timeout: Duration) -> Result<(), CallError> {
        let mut args = LockArgs {
            timeout_ms: u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX),
            reserved0: 0,
            reserved1: [0; 7],
        };
        // SAFETY: the args live across the call.
        self.timed("cuCheckpointProcessLock", pid, State::Locked, || unsafe {
            (self.lock)(pid, &mut args)
        })
    }

    fn checkpoint(&self, pid: i32) -> Result<(), CallError> {
        let mut args = ReservedArgs { reserved: [0; 8] };
        // SAFETY: as above.
        self.timed(
            "cuCheckpointProcessCheckpoint",
            pid,
            State::Checkpointed,
            || unsafe { (self.checkpoint)(pid, &mut args) },
        )
    }

    fn restore(&self, pid: i32, pairs: &mut [GpuPair]) -> Result<(), CallError> {
        let mut args = RestoreArgs {
            gpu_pairs: if pairs.is_empty() {
                std::ptr::null_mut()
            } else {
                pairs.as_mut_ptr()
            },
            gpu_pairs_count: pairs.len() as u32,
            reserved: [0; 52 - std::mem::size_of::<*mut GpuPair>()],
            reserved1: 0,
        };
        // SAFETY: the args and the pairs they point to live across the call.
        self.timed(
            "cuCheckpointProcessRestore",
            pid,
            State::Locked,
            || unsafe { (self.restore)(pid, &mut args) },
        )
    }

    fn unlock(&self, pid: i32) -> Result<(), CallError> {
        let mut args = ReservedArgs { reserved: [0; 8] };
        // SAFETY: as above.
        self.timed(
            "cuCheckpointProcessUnlock",
            pid,
            State::Running,
            || unsafe { (self.unlock)(pid, &mut args) },
        )
    }

    /// One call, its time and the state change in the debug log.
    fn timed(
        &self,
        call: &'static str,
        pid: i32,
        to: State,
        f: impl FnOnce() -> c_int,
    ) -> Result<(), CallError> {
        let from = self.state(pid);
        let start = Instant::now();
        let result = f();
        let took = start.elapsed().as_secs_f64() * 1000.0;
        if result != 0 {
            tracing::debug!(
                "CUDA process {pid}: {call} failed with {} after {took:.1} ms",
                result_name(result)
            );
            return Err(CallError { call, pid, result });
        }
        tracing::debug!(
            "CUDA process {pid}: {} -> {} in {took:.1} ms",
            from.map_or("?", State::name),
            to.name()
        );
        Ok(())
    }
}

/// The container's CUDA processes, saved: each locked and checkpointed,
/// so CRIU can dump them. `resume` gives them back their GPUs; dropping
/// it without `resume` or `keep` resumes them too, so no failure path
/// leaves a process locked.
pub struct Saved<'a> {
    driver: &'a Driver,
    /// Each process and how far it got.
    processes: Vec<(i32, State)>,
}

/// Locks every CUDA process among `pids`, then checkpoints each. On any
/// failure, what was done is undone (restored, unlocked) and the error
/// names the process and the driver's CUresult.
pub fn save<'a>(driver: &'a Driver, pids: &[i32], lock_timeout: Duration) -> Result<Saved<'a>> {
    let mut saved = Saved {
        driver,
        processes: Vec::new(),
    };
    for &pid in pids {
        match driver.state(pid) {
            Some(State::Running) => saved.processes.push((pid, State::Running)),
            Some(other) => bail!(
                "CUDA process {pid} is already {} (another checkpoint tool at work?): leave it running and try again",
                other.name()
            ),
            None => {}
        }
    }
    let started = Instant::now();
    for i in 0..saved.processes.len() {
        let pid = saved.processes[i].0;
        driver.lock(pid, lock_timeout)?;
        saved.processes[i].1 = State::Locked;
    }
    let locked = started.elapsed();
    for i in 0..saved.processes.len() {
        let pid = saved.processes[i].0;
        driver.checkpoint(pid)?;
        saved.processes[i].1 = State::Checkpointed;
    }
    tracing::debug!(
        "{} CUDA process(es) locked in {:.1} ms and checkpointed in {:.1} ms",
        saved.processes.len(),
        locked.as_secs_f64() * 1000.0,
        (started.elapsed() - locked).as_secs_f64() * 1000.0
    );
    Ok(saved)
}

impl Saved<'_> {
    pub fn count(&self) -> usize {
        self.processes.len()
    }

    /// Restores and unlocks every process saved (the container runs on).
    pub fn resume(mut self) -> Result<()> {
        self.undo()
    }

    /// The processes are gone with the dump (CRIU ended them): nothing to
    /// give back.
    pub fn keep(mut self) {
        self.processes.clear();
    }

    fn undo(&mut self) -> Result<()> {
        let mut first_error = None;
        for (pid, state) in std::mem::take(&mut self.processes) {
            let step = (|| {
                if state == State::Checkpointed {
                    self.driver.restore(pid, &mut [])?;
                }
                if state != State::Running {
                    self.driver.unlock(pid)?;
                }
                Ok::<(), CallError>(())
            })();
            if let Err(e) = step {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(anyhow::anyhow!("{e}")),
            None => Ok(()),
        }
    }
}

impl Drop for Saved<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.undo() {
            tracing::error!("giving a CUDA process its GPU back: {e:#}");
        }
    }
}

/// After CRIU's restore: every process among `pids` the driver holds
/// checkpointed is restored (onto the new GPUs, by `pairs`) and unlocked.
/// Returns how many.
pub fn resume_restored(driver: &Driver, pids: &[i32], pairs: &mut [GpuPair]) -> Result<usize> {
    let started = Instant::now();
    let mut done = 0;
    for &pid in pids {
        if driver.state(pid) != Some(State::Checkpointed) {
            continue;
        }
        driver.restore(pid, pairs)?;
        driver.unlock(pid)?;
        done += 1;
    }
    tracing::debug!(
        "{done} CUDA process(es) restored and unlocked in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(done)
}

impl From<CallError> for anyhow::Error {
    fn from(e: CallError) -> Self {
        anyhow::anyhow!("{e}")
    }
}

#[cfg(test)]
mod tests {
    //! The lock, checkpoint, restore and unlock protocol against a stand-in
    //! driver: C functions over a table of process states, as the real
    //! API keeps them, that can be told to fail one call.
    use std::collections::HashMap;
    use std::sync::{Mutex, MutexGuard};

    use super::*;

    /// The stand-in driver's processes, its calls, and the call to fail.
    #[derive(Default)]
    struct Fake {
        states: HashMap<c_int, c_int>,
        calls: Vec<(&'static str, c_int)>,
        fail: Option<(&'static str, c_int, c_int)>,
        pairs_seen: Vec<u32>,
    }

    static FAKE: Mutex<Option<Fake>> = Mutex::new(None);
    /// The stand-in is one per process: the tests take turns.
    static TURN: Mutex<()> = Mutex::new(());

    fn with_fake<T>(f: impl FnOnce(&mut Fake) -> T) -> T {
        f(FAKE.lock().unwrap().get_or_insert_with(Fake::default))
    }

    /// A call: logged, failed if asked, else the state moves `from` -> `to`.
    fn call(name: &'static str, pid: c_int, from: c_int, to: c_int) -> c_int {
        with_fake(|fake| {
            fake.calls.push((name, pid));
            if let Some((failing, failing_pid, result)) = fake.fail {
                if failing == name && failing_pid == pid {
                    return result;
                }
            }
            match fake.states.get_mut(&pid) {
                Some(state) if *state == from => {
                    *state = to;
                    0
                }
                Some(_) => 401,
                None => 500,
            }
        })
    }

    unsafe extern "C" fn get_state(pid: c_int, out: *mut c_int) -> c_int {
        match with_fake(|fake| fake.states.get(&pid).copied()) {
            Some(state) => {
                // SAFETY: the caller passes one int to write.
                unsafe { *out = state };
                0
            }
            None => 500,
        }
    }
    unsafe extern "C" fn lock(pid: c_int, _: *mut LockArgs) -> c_int {
        call("lock", pid, 0, 1)
    }
    unsafe extern "C" fn checkpoint(pid: c_int, _: *mut ReservedArgs) -> c_int {
        call("checkpoint", pid, 1, 2)
    }
    unsafe extern "C" fn restore(pid: c_int, args: *mut RestoreArgs) -> c_int {
        // SAFETY: the caller's args live across the call.
        let count = unsafe { (*args).gpu_pairs_count };
        with_fake(|fake| fake.pairs_seen.push(count));
        call("restore", pid, 2, 1)
    }
    unsafe extern "C" fn unlock(pid: c_int, _: *mut ReservedArgs) -> c_int {
        call("unlock", pid, 1, 0)
    }

    /// The stand-in with `cuda` processes running CUDA (others unknown
    /// to it), and the turn held while the test runs.
    fn driver(cuda: &[(c_int, State)]) -> (Driver, MutexGuard<'static, ()>) {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        *FAKE.lock().unwrap() = Some(Fake {
            states: cuda.iter().map(|&(pid, s)| (pid, s as c_int)).collect(),
            ..Fake::default()
        });
        let driver = Driver {
            get_state,
            lock,
            checkpoint,
            restore,
            unlock,
            api_version: 12080,
            version: "570.86.15".into(),
            _library: libloading::os::unix::Library::this().into(),
        };
        (driver, turn)
    }

    fn calls() -> Vec<(&'static str, c_int)> {
        with_fake(|fake| fake.calls.clone())
    }

    fn state_of(pid: c_int) -> Option<c_int> {
        with_fake(|fake| fake.states.get(&pid).copied())
    }

    const WAIT: Duration = Duration::from_secs(1);

    #[test]
    fn every_cuda_process_is_locked_before_any_is_checkpointed() {
        let (driver, _turn) = driver(&[(10, State::Running), (12, State::Running)]);
        let saved = save(&driver, &[10, 11, 12], WAIT).unwrap();
        assert_eq!(saved.count(), 2, "11 runs no CUDA: left alone");
        assert_eq!(
            calls(),
            [
                ("lock", 10),
                ("lock", 12),
                ("checkpoint", 10),
                ("checkpoint", 12)
            ]
        );
        saved.keep();
        // Kept (CRIU ended them): nothing is given back.
        assert_eq!(calls().len(), 4);
        assert_eq!(state_of(10), Some(State::Checkpointed as c_int));
    }

    #[test]
    fn a_failed_checkpoint_gives_every_process_its_gpu_back() {
        let (driver, _turn) = driver(&[(20, State::Running), (21, State::Running)]);
        with_fake(|fake| fake.fail = Some(("checkpoint", 21, 2)));
        let err = save(&driver, &[20, 21], WAIT).err().unwrap().to_string();
        assert_eq!(
            err,
            "CUDA process 21: cuCheckpointProcessCheckpoint failed with CUDA_ERROR_OUT_OF_MEMORY (2)"
        );
        // 20 was checkpointed: restored, then unlocked; 21 only locked.
        assert_eq!(
            calls()[4..],
            [("restore", 20), ("unlock", 20), ("unlock", 21)]
        );
        assert_eq!(state_of(20), Some(State::Running as c_int));
        assert_eq!(state_of(21), Some(State::Running as c_int));
    }

    #[test]
    fn a_process_another_tool_holds_is_refused_untouched() {
        let (driver, _turn) = driver(&[(30, State::Running), (31, State::Locked)]);
        let err = save(&driver, &[30, 31], WAIT).err().unwrap().to_string();
        assert!(err.contains("CUDA process 31 is already locked"), "{err}");
        assert!(calls().is_empty(), "nothing locked: {:?}", calls());
    }

    #[test]
    fn resume_gives_back_what_save_took() {
        let (driver, _turn) = driver(&[(40, State::Running)]);
        save(&driver, &[40], WAIT).unwrap().resume().unwrap();
        assert_eq!(
            calls(),
            [
                ("lock", 40),
                ("checkpoint", 40),
                ("restore", 40),
                ("unlock", 40)
            ]
        );
        assert_eq!(state_of(40), Some(State::Running as c_int));
    }

    #[test]
    fn after_criu_only_checkpointed_processes_are_restored_onto_the_pairs() {
        let (driver, _turn) = driver(&[(50, State::Checkpointed), (51, State::Running)]);
        let mut pairs = [GpuPair {
            old_uuid: [1; 16],
            new_uuid: [2; 16],
        }];
        assert_eq!(
            resume_restored(&driver, &[50, 51, 52], &mut pairs).unwrap(),
            1
        );
        assert_eq!(calls(), [("restore", 50), ("unlock", 50)]);
        assert_eq!(with_fake(|fake| fake.pairs_seen.clone()), [1]);
        assert!(!driver.takes_gpu_pairs(), "CUDA 12.8 moves no process");
    }
}
