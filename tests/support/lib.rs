//! Helpers for the integration tests in `tests/`: they drive the built
//! `gpurun` binary from the outside, as an engine or a person would.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The gpurun binary under test: `$GPURUN_BIN`, or the one cargo built next
/// to this test executable.
pub fn gpurun_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("GPURUN_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("gpurun");
    assert!(
        bin.exists(),
        "{} is missing: build it first with `cargo build -p gpurun` (scripts/test.sh does)",
        bin.display()
    );
    bin
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Tests that need root say so and return early elsewhere; CI runs as root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("skipped: this test needs root");
            return;
        }
    };
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique name for this process and call.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        let dir = std::env::temp_dir().join(unique(&format!("gpurun-test-{prefix}")));
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The output of a finished command.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "expected success; stderr: {}", self.stderr);
        self
    }
}

/// Runs a command with no stdin, failing the test if it outlives `timeout`.
/// Output goes through files, not pipes: a detached container inherits
/// them, and a pipe would then never reach EOF.
pub fn run_cmd(cmd: &mut Command, timeout: Duration) -> Ran {
    let scratch = Scratch::new("out");
    let out_path = scratch.path().join("stdout");
    let err_path = scratch.path().join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} hung for {timeout:?}; stderr: {}",
                fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&fs::read(&out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&fs::read(&err_path).unwrap()).into_owned(),
    }
}

/// Who runs gpurun: root, or an unprivileged user.
#[derive(Clone, Debug)]
pub enum As {
    Root,
    User(TestUser),
}

impl As {
    /// Root, then the unprivileged test user: for what must hold for both.
    pub fn both() -> Vec<As> {
        vec![As::Root, As::User(TestUser::get())]
    }

    /// The test user, or `None` for root.
    pub fn user(&self) -> Option<&TestUser> {
        match self {
            As::Root => None,
            As::User(u) => Some(u),
        }
    }
}

/// gpurun with a private state root.
pub struct Runtime {
    pub root: PathBuf,
    pub who: As,
    /// The gpurun binary run: the build's unless a test chose a copy.
    pub bin: PathBuf,
    _scratch: Scratch,
}

impl Runtime {
    pub fn new() -> Runtime {
        Self::as_who(As::Root)
    }

    pub fn as_who(who: As) -> Runtime {
        let scratch = Scratch::new("state");
        let root = scratch.path().join("root");
        if let As::User(user) = &who {
            chown(scratch.path(), user);
        }
        Runtime {
            root,
            who,
            bin: gpurun_bin(),
            _scratch: scratch,
        }
    }

    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--root").arg(&self.root).args(args);
        if let As::User(user) = &self.who {
            user.apply(&mut cmd);
        }
        cmd
    }

    pub fn run<I, S>(&self, args: I) -> Ran
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_cmd(&mut self.command(args), TIMEOUT)
    }

    /// The entries in the state root: empty when nothing was left behind.
    /// The driver cache (`@driver-cache`, kept on purpose between
    /// containers) is not a leftover.
    pub fn leftovers(&self) -> Vec<String> {
        match fs::read_dir(&self.root) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name != "@driver-cache")
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    pub fn state(&self, id: &str) -> serde_json::Value {
        let out = self.run(["state", id]);
        out.ok();
        serde_json::from_str(&out.stdout).expect("state prints JSON")
    }
}

impl Drop for Runtime {
    /// A test that failed halfway must not leave containers running.
    fn drop(&mut self) {
        for id in self.leftovers() {
            if !id.contains('@') {
                let _ = run_cmd(&mut self.command(["delete", "--force", &id]), TIMEOUT);
            }
        }
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Self::new()
    }
}

/// An OCI bundle with a busybox rootfs.
pub struct Bundle {
    pub dir: PathBuf,
    _scratch: Scratch,
}

impl Bundle {
    pub fn busybox() -> Bundle {
        Self::build(None)
    }

    /// A rootless bundle owned by `user`, with a spec from `gpurun spec --rootless`.
    pub fn busybox_rootless(user: &TestUser) -> Bundle {
        Self::build(Some(user))
    }

    fn build(user: Option<&TestUser>) -> Bundle {
        let scratch = Scratch::new("bundle");
        let dir = scratch.path().join("bundle");
        let mut cmd = Command::new("sh");
        cmd.arg(repo().join("scripts/busybox-bundle.sh"));
        if user.is_some() {
            cmd.arg("-r");
        }
        cmd.arg(&dir).arg(gpurun_bin());
        Self::run_builder(cmd, scratch, dir, user)
    }

    /// Runs a bundle-building command (as `user`, owning the scratch dir,
    /// if given) and keeps the result.
    fn run_builder(
        mut cmd: Command,
        scratch: Scratch,
        dir: PathBuf,
        user: Option<&TestUser>,
    ) -> Bundle {
        if let Some(user) = user {
            chown(scratch.path(), user);
            user.apply(&mut cmd);
        }
        run_cmd(&mut cmd, Duration::from_secs(60)).ok();
        Bundle {
            dir,
            _scratch: scratch,
        }
    }

    pub fn config(&self) -> serde_json::Value {
        serde_json::from_slice(&fs::read(self.dir.join("config.json")).unwrap()).unwrap()
    }

    pub fn set_config(&self, config: &serde_json::Value) {
        fs::write(
            self.dir.join("config.json"),
            serde_json::to_vec_pretty(config).unwrap(),
        )
        .unwrap();
    }

    /// Edits config.json in place.
    pub fn edit(&self, f: impl FnOnce(&mut serde_json::Value)) {
        let mut config = self.config();
        f(&mut config);
        self.set_config(&config);
    }

    /// A new user namespace whose root is host id `host`, with 65536 ids
    /// (as a root-run engine's userns-remap or `hostUsers: false` gives).
    pub fn map_root_to(&self, host: u32) {
        self.edit(|c| {
            c["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"type": "user"}));
            let map = serde_json::json!([{"containerID": 0, "hostID": host, "size": 65536}]);
            c["linux"]["uidMappings"] = map.clone();
            c["linux"]["gidMappings"] = map;
        });
    }

    pub fn set_args(&self, args: &[&str]) {
        self.edit(|c| c["process"]["args"] = serde_json::json!(args));
    }

    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }
}

/// An unprivileged user with subordinate id ranges, made once per host.
#[derive(Clone, Debug)]
pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl TestUser {
    /// `gpurun-test`, created with useradd (which also writes subuid/subgid
    /// ranges) on first use.
    pub fn get() -> TestUser {
        let name = "gpurun-test";
        if nix::unistd::User::from_name(name).unwrap().is_none() {
            let out = run_cmd(
                Command::new("useradd").args(["-m", "-s", "/bin/sh", name]),
                Duration::from_secs(30),
            );
            // Two test binaries may race to create it.
            if out.code != 0 && !out.stderr.contains("already exists") {
                panic!("useradd {name}: {}", out.stderr);
            }
        }
        let user = nix::unistd::User::from_name(name).unwrap().unwrap();
        for file in ["/etc/subuid", "/etc/subgid"] {
            let text = fs::read_to_string(file).unwrap_or_default();
            if !text.lines().any(|l| l.starts_with(&format!("{name}:"))) {
                fs::write(file, format!("{text}{name}:200000:65536\n")).unwrap();
            }
        }
        TestUser {
            name: name.into(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            home: user.dir,
        }
    }

    /// The user's first subordinate uid range start.
    pub fn subuid_start(&self) -> u32 {
        let text = fs::read_to_string("/etc/subuid").unwrap();
        text.lines()
            .find_map(|l| {
                let mut f = l.split(':');
                (f.next() == Some(&self.name)).then(|| f.next().unwrap().parse().unwrap())
            })
            .unwrap()
    }

    pub fn runtime_dir(&self) -> PathBuf {
        let dir = PathBuf::from(format!("/tmp/gpurun-test-xdg-{}", self.uid));
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(self.uid), Some(self.gid)).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    /// Makes `cmd` run as this user, with a login-like environment.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.uid(self.uid)
            .gid(self.gid)
            .env_clear()
            .env("HOME", &self.home)
            .env("USER", &self.name)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .current_dir("/");
    }
}

pub fn chown(path: &Path, user: &TestUser) {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).unwrap();
}

/// Every cgroup directory named by `relative` (v1 controllers and v2).
pub fn cgroup_dirs(relative: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut dirs = vec![root.join(relative)];
    if let Ok(entries) = fs::read_dir(root) {
        dirs.extend(entries.flatten().map(|e| e.path().join(relative)));
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Mount points in our mount namespace that mention `needle`.
pub fn mounts_mentioning(needle: &str) -> Vec<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// Whether `pid` is a live process: it exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            // The state letter follows the command name's closing paren.
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

/// Host processes whose command line contains `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Each process as a leak report shows it: command line, stat line, what
/// it waits in, its pid namespace and its pids (v1) and unified cgroups.
pub fn describe_processes(pids: &[i32]) -> Vec<String> {
    let read =
        |p: i32, file: &str| fs::read_to_string(format!("/proc/{p}/{file}")).unwrap_or_default();
    pids.iter()
        .map(|&p| {
            let cgroups: Vec<String> = read(p, "cgroup")
                .lines()
                .filter(|l| l.contains("pids") || l.starts_with("0::"))
                .map(str::to_owned)
                .collect();
            format!(
                "{} [stat {}] [wchan {}] [{} {}]",
                read(p, "cmdline").replace('\0', " "),
                read(p, "stat").trim_end(),
                read(p, "wchan"),
                fs::read_link(format!("/proc/{p}/ns/pid"))
                    .unwrap_or_default()
                    .display(),
                cgroups.join(";")
            )
        })
        .collect()
}

/// The fake GPU host, libcudart and the CUDA probe, built once per test
/// binary by `scripts/gpu-fixtures.sh` (downloads are cached).
pub struct GpuFixtures {
    pub dir: PathBuf,
}

impl GpuFixtures {
    pub fn get() -> &'static GpuFixtures {
        static FIXTURES: std::sync::OnceLock<GpuFixtures> = std::sync::OnceLock::new();
        FIXTURES.get_or_init(|| {
            let dir = PathBuf::from(format!(
                "/tmp/gpurun-test-gpu-fixtures-{}",
                std::process::id()
            ));
            let out = run_cmd(
                Command::new("sh")
                    .arg(repo().join("scripts/gpu-fixtures.sh"))
                    .arg(&dir),
                Duration::from_secs(300),
            );
            assert_eq!(out.code, 0, "gpu-fixtures.sh: {}", out.stderr);
            GpuFixtures { dir }
        })
    }

    /// The global flags that point gpurun at the fake host.
    pub fn flags(&self) -> Vec<String> {
        let host = self.dir.join("host");
        vec![
            "--driver-root".into(),
            host.join("driver").to_string_lossy().into_owned(),
            "--dev-root".into(),
            host.to_string_lossy().into_owned(),
            "--proc-root".into(),
            host.join("proc").to_string_lossy().into_owned(),
        ]
    }

    /// gpurun's arguments: the fake-host flags, then `args`.
    pub fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = self.flags();
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }

    /// A fake host with one of the driver layouts real hosts have
    /// (`scripts/fake-gpu-host.sh --layout`), built once per test binary.
    pub fn layout(&self, layout: &str, kernel_module: &str) -> FakeHost {
        static HOSTS: std::sync::Mutex<Vec<(String, FakeHost)>> = std::sync::Mutex::new(Vec::new());
        let key = format!("{layout}-{kernel_module}");
        let mut hosts = HOSTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, host)) = hosts.iter().find(|(k, _)| *k == key) {
            return host.clone();
        }
        let dir = self.dir.join("layouts").join(&key);
        let out = run_cmd(
            Command::new("sh")
                .arg(repo().join("scripts/fake-gpu-host.sh"))
                .args(["--layout", layout, "--kernel-module", kernel_module])
                .arg(&dir)
                .arg("2"),
            Duration::from_secs(300),
        );
        assert_eq!(
            out.code, 0,
            "fake-gpu-host.sh --layout {layout}: {}",
            out.stderr
        );
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("a+rX")
            .arg(&dir)
            .status();
        let flags = fs::read_to_string(dir.join("flags")).unwrap();
        let host = FakeHost {
            dir,
            flags: flags.split_whitespace().map(str::to_owned).collect(),
        };
        hosts.push((key, host.clone()));
        host
    }
}

/// A fake GPU host of one layout.
#[derive(Clone, Debug)]
pub struct FakeHost {
    pub dir: PathBuf,
    /// `--driver-root ... --dev-root ... --proc-root ...`
    pub flags: Vec<String>,
}

impl FakeHost {
    /// gpurun's arguments: this host's flags, then `args`.
    pub fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = self.flags.clone();
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }
}

/// A fingerprint of a directory tree: every entry's path, type, mode,
/// owner, size, modification time, symlink target and content. Equal
/// before and after means nothing in the tree was changed.
pub fn tree_fingerprint(root: &Path) -> Vec<String> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let mut line = format!(
            "{rel} mode={:o} uid={} gid={} size={} mtime={}.{}",
            meta.mode(),
            meta.uid(),
            meta.gid(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        if meta.file_type().is_symlink() {
            line += &format!(" -> {}", fs::read_link(&path).unwrap().display());
        } else if meta.is_file() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            fs::read(&path).unwrap().hash(&mut h);
            line += &format!(" content={:x}", h.finish());
        } else if meta.is_dir() {
            for e in fs::read_dir(&path).unwrap().flatten() {
                todo.push(e.path());
            }
        }
        out.push(line);
    }
    out.sort();
    out
}

/// The lines of `after` that differ from `before`.
pub fn tree_changes(before: &[String], after: &[String]) -> Vec<String> {
    let mut changes: Vec<String> = after
        .iter()
        .filter(|l| !before.contains(l))
        .map(|l| format!("+ {l}"))
        .collect();
    changes.extend(
        before
            .iter()
            .filter(|l| !after.contains(l))
            .map(|l| format!("- {l}")),
    );
    changes
}

impl Bundle {
    /// A bundle with a minimal glibc rootfs (scripts/glibc-rootfs.sh), the
    /// CUDA runtime at /opt/cudart and the probes at /usr/bin/cuda_probe
    /// and /usr/bin/cuda_vector_add.
    pub fn glibc(user: Option<&TestUser>) -> Bundle {
        let fixtures = GpuFixtures::get();
        let scratch = Scratch::new("glibc");
        let dir = scratch.path().join("bundle");
        let script = format!(
            "set -e; sh {repo}/scripts/glibc-rootfs.sh {dir}/rootfs; \
             mkdir -p {dir}/rootfs/opt/cudart; cp {fx}/cudart/libcudart.so.12 {dir}/rootfs/opt/cudart/; \
             cp {fx}/cuda_probe {fx}/cuda_vector_add {dir}/rootfs/usr/bin/; cd {dir}; {gpurun} spec {rootless}; \
             sed -i 's/\"terminal\": true/\"terminal\": false/' config.json",
            repo = repo().display(),
            dir = dir.display(),
            fx = fixtures.dir.display(),
            gpurun = gpurun_bin().display(),
            rootless = if user.is_some() { "--rootless" } else { "" },
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        Self::run_builder(cmd, scratch, dir, user)
    }

    /// Sets the process args and environment (PATH plus `env`).
    pub fn set_process(&self, args: &[&str], env: &[&str]) {
        let mut full = vec!["PATH=/usr/sbin:/usr/bin:/sbin:/bin"];
        full.extend_from_slice(env);
        self.edit(|c| {
            c["process"]["args"] = serde_json::json!(args);
            c["process"]["env"] = serde_json::json!(full);
        });
    }
}

/// Runs `create` and checks the failure is clean: exit 1 (255 for `exec`,
/// as runc), one stderr line containing `want`, no state, no cgroup, no
/// mount.
pub fn assert_clean_failure(rt: &Runtime, args: &[&str], id: &str, want: &str) {
    let out = rt.run(args);
    let code = if args.first() == Some(&"exec") {
        255
    } else {
        1
    };
    assert_eq!(
        out.code, code,
        "{args:?}: stdout {} stderr {}",
        out.stdout, out.stderr
    );
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "want one error line, got: {}", out.stderr);
    assert!(lines[0].starts_with("gpurun: error: "), "{}", lines[0]);
    assert!(lines[0].contains(want), "{:?} lacks {want:?}", lines[0]);
    let left: Vec<String> = rt
        .leftovers()
        .into_iter()
        .filter(|e| e.contains(id))
        .collect();
    assert!(left.is_empty(), "left in state dir: {left:?}");
    if !id.is_empty() && !id.contains('/') {
        assert!(
            cgroup_dirs(&format!("gpurun/{id}")).is_empty(),
            "cgroup left"
        );
    }
    assert!(mounts_mentioning(&format!("/{id}/")).is_empty() || id.is_empty());
}

/// Unmounts a test's own mount when the test ends, passed or not.
pub struct Unmount(pub PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
