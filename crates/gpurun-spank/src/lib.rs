//! `spank_gpurun.so`: a Slurm SPANK plugin that takes pyxis's
//! `--container-*` flags (`srun --container-image=app.sqsh ...`) and runs
//! each task of the step in a container through gpurun.
//!
//! The plugin starts nothing itself. In the task, just before Slurm execs
//! the task's program, it hands the program to gpurun: argv[0] becomes
//! the gpurun binary, and the `gpurun run` flags and the program's own
//! name go in the task's environment (`GPURUN_SPANK_RUN`,
//! `GPURUN_SPANK_ARGV0`), from which gpurun rebuilds its command line.
//! Slurm does everything it does after the plugin as for any task (the
//! task prolog, the user's limits), and gpurun gives the container the
//! step's GPUs, PMI and environment as it does for `srun gpurun run`.
//!
//! plugstack.conf: `required /PATH/spank_gpurun.so gpurun=/usr/bin/gpurun
//! [driver-root=DIR dev-root=DIR proc-root=DIR]` (`gpurun setup slurm
//! --spank` writes it).

pub mod flags;
pub mod layers;

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::Mutex;

use flags::{Flags, FLAGS};

/// Slurm's names for the plugin (the SPANK_PLUGIN macro's symbols).
#[no_mangle]
pub static plugin_name: [u8; 7] = *b"gpurun\0";
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// SLURM_VERSION_NUMBER of the headers built against; SPANK plugins load
/// on any version (Slurm checks it only for its own plugins).
#[no_mangle]
pub static plugin_version: u32 = 0x16_05_08;
#[no_mangle]
pub static spank_plugin_version: u32 = 1;

/// The environment variables gpurun rebuilds its command line from.
pub const RUN_VAR: &str = "GPURUN_SPANK_RUN";
pub const ARGV0_VAR: &str = "GPURUN_SPANK_ARGV0";

#[allow(non_camel_case_types)]
type spank_t = *mut libc::c_void;

/// spank.h's `struct spank_option`.
#[repr(C)]
struct SpankOption {
    name: *const c_char,
    arginfo: *const c_char,
    usage: *const c_char,
    has_arg: c_int,
    val: c_int,
    cb: extern "C" fn(c_int, *const c_char, c_int) -> c_int,
}

/// spank.h's items used here.
const S_JOB_UID: c_int = 0;
const S_JOB_GID: c_int = 1;
const S_JOB_ID: c_int = 2;
const S_JOB_ARGV: c_int = 9;
const S_CTX_REMOTE: c_int = 2;
const ESPANK_SUCCESS: c_int = 0;

extern "C" {
    fn spank_option_register(sp: spank_t, opt: *const SpankOption) -> c_int;
    fn spank_get_item(sp: spank_t, item: c_int, ...) -> c_int;
    fn spank_getenv(sp: spank_t, var: *const c_char, buf: *mut c_char, len: c_int) -> c_int;
    fn spank_setenv(sp: spank_t, var: *const c_char, val: *const c_char, overwrite: c_int)
        -> c_int;
    fn spank_context() -> c_int;
    fn slurm_error(format: *const c_char, ...);
}

static FLAGS_GIVEN: Mutex<Flags> = Mutex::new(Flags {
    image: None,
    mounts: None,
    workdir: None,
    name: None,
    save: None,
    mount_home: None,
    remap_root: None,
    entrypoint: None,
    writable: None,
    env: None,
});

extern "C" fn on_flag(val: c_int, optarg: *const c_char, _remote: c_int) -> c_int {
    let value = if optarg.is_null() {
        String::new()
    } else {
        // SAFETY: Slurm passes a NUL-terminated string or NULL.
        unsafe { CStr::from_ptr(optarg) }
            .to_string_lossy()
            .into_owned()
    };
    let mut flags = FLAGS_GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    flags.set(val as usize, &value);
    0
}

fn error(message: &str) {
    let text = CString::new(format!("gpurun: {message}")).unwrap_or_default();
    // SAFETY: a "%s" format with one NUL-terminated argument.
    unsafe { slurm_error(c"%s".as_ptr(), text.as_ptr()) };
}

/// Registers pyxis's flags, in srun, sbatch and salloc and in slurmstepd.
///
/// # Safety
/// Called by Slurm with its handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    for (index, (name, has_arg, usage)) in FLAGS.iter().enumerate() {
        let option = SpankOption {
            name: leak(name),
            arginfo: if *has_arg {
                leak("VALUE")
            } else {
                std::ptr::null()
            },
            usage: leak(usage),
            has_arg: *has_arg as c_int,
            val: index as c_int,
            cb: on_flag,
        };
        // Slurm keeps the pointers: the strings live as long as the process.
        if spank_option_register(sp, &option) != ESPANK_SUCCESS {
            error(&format!("cannot register --{name}"));
            return -1;
        }
    }
    0
}

fn leak(text: &str) -> *const c_char {
    CString::new(text).unwrap_or_default().into_raw()
}

/// In the task, as the user, before Slurm execs its program: the program
/// handed to gpurun (see the crate's comment).
///
/// # Safety
/// Called by Slurm with its handle and the plugin's arguments.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(
    sp: spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    if spank_context() != S_CTX_REMOTE {
        return 0;
    }
    let flags = FLAGS_GIVEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if !flags.wants_container() {
        return 0;
    }
    let plugin_args = plugin_args(ac, av);
    let task = flags::Task {
        uid: libc::getuid(),
        job: getenv(sp, "SLURM_JOB_ID"),
        home: getenv(sp, "HOME"),
        local_id: getenv(sp, "SLURM_LOCALID"),
    };
    let run = match flags.run_args(&task) {
        Ok(run) => run,
        Err(why) => {
            error(&why);
            return -1;
        }
    };
    let (gpurun, globals) = gpurun_and_globals(&plugin_args);
    let mut args = globals;
    args.extend(run);
    let mut argc: c_int = 0;
    let mut argv: *mut *mut c_char = std::ptr::null_mut();
    if spank_get_item(
        sp,
        S_JOB_ARGV,
        &mut argc as *mut c_int,
        &mut argv as *mut *mut *mut c_char,
    ) != ESPANK_SUCCESS
        || argv.is_null()
        || argc < 1
    {
        error("the task has no command");
        return -1;
    }
    let argv0 = CStr::from_ptr(*argv).to_string_lossy().into_owned();
    let encoded = serde_json::to_string(&args).unwrap_or_default();
    if !setenv(sp, RUN_VAR, &encoded) || !setenv(sp, ARGV0_VAR, &argv0) {
        error("cannot set the task's environment");
        return -1;
    }
    // Slurm execs argv[0] with argv: gpurun, with the task's arguments.
    *argv = leak(&gpurun) as *mut c_char;
    0
}

/// In slurmstepd, as root, once the step's flags are known: a named
/// container's user gets a directory of layers of their own on the node.
///
/// # Safety
/// Called by Slurm with its handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init_post_opt(
    sp: spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    let named = FLAGS_GIVEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .name
        .is_some();
    if spank_context() != S_CTX_REMOTE || !named {
        return 0;
    }
    let (Some(uid), Some(gid)) = (item_u32(sp, S_JOB_UID), item_u32(sp, S_JOB_GID)) else {
        error("--container-name: the job's user is not known");
        return -1;
    };
    match layers::make_user_dir(uid, gid) {
        Ok(()) => 0,
        Err(why) => {
            error(&format!("--container-name: {why}"));
            -1
        }
    }
}

/// In the job's epilog on each node, as root: the job's named containers
/// are removed, as pyxis removes a job's containers.
///
/// # Safety
/// Called by Slurm with its handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(
    sp: spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    if let (Some(uid), Some(job)) = (item_u32(sp, S_JOB_UID), item_u32(sp, S_JOB_ID)) {
        layers::remove_job(uid, job);
    }
    0
}

/// A 32-bit item (uid_t, gid_t, uint32_t), if Slurm gives it here.
unsafe fn item_u32(sp: spank_t, item: c_int) -> Option<u32> {
    let mut value: u32 = 0;
    (spank_get_item(sp, item, &mut value as *mut u32) == ESPANK_SUCCESS).then_some(value)
}

/// The plugin's `KEY=VALUE` arguments from plugstack.conf.
unsafe fn plugin_args(ac: c_int, av: *mut *mut c_char) -> Vec<(String, String)> {
    (0..ac.max(0) as usize)
        .filter_map(|i| {
            let arg = CStr::from_ptr(*av.add(i)).to_string_lossy().into_owned();
            arg.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// The gpurun binary (`gpurun=`, default /usr/bin/gpurun) and the global
/// flags the other arguments name.
pub fn gpurun_and_globals(plugin_args: &[(String, String)]) -> (String, Vec<String>) {
    let mut gpurun = "/usr/bin/gpurun".to_owned();
    let mut globals = Vec::new();
    for (key, value) in plugin_args {
        match key.as_str() {
            "gpurun" => gpurun = value.clone(),
            "driver-root" | "dev-root" | "proc-root" => {
                globals.extend([format!("--{key}"), value.clone()]);
            }
            _ => error(&format!(
                "plugstack.conf: unknown argument {key}= passed over"
            )),
        }
    }
    (gpurun, globals)
}

unsafe fn getenv(sp: spank_t, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    if spank_getenv(
        sp,
        name.as_ptr(),
        buf.as_mut_ptr() as *mut c_char,
        buf.len() as c_int,
    ) != ESPANK_SUCCESS
    {
        return None;
    }
    Some(
        CStr::from_ptr(buf.as_ptr() as *const c_char)
            .to_string_lossy()
            .into_owned(),
    )
}

unsafe fn setenv(sp: spank_t, name: &str, value: &str) -> bool {
    match (CString::new(name), CString::new(value)) {
        (Ok(n), Ok(v)) => spank_setenv(sp, n.as_ptr(), v.as_ptr(), 1) == ESPANK_SUCCESS,
        _ => false,
    }
}
