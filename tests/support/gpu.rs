//! The fake GPU host's fixtures (scripts/fixtures/gpu-fixtures.sh), built once per test program.

use crate::*;

/// The fake GPU host, libcudart and the CUDA probe, built once per test
/// binary by `scripts/fixtures/gpu-fixtures.sh` (downloads are cached), or
/// `$GPURUN_TEST_FIXTURES`, that script's output made once for several
/// programs (scripts/ci/host-matrix.sh builds it on the host for its
/// guests, where building it under emulation takes minutes).
pub struct GpuFixtures {
    pub dir: PathBuf,
}

impl GpuFixtures {
    pub fn get() -> &'static GpuFixtures {
        static FIXTURES: std::sync::OnceLock<GpuFixtures> = std::sync::OnceLock::new();
        FIXTURES.get_or_init(|| {
            let shared = std::env::var_os("GPURUN_TEST_FIXTURES").filter(|d| !d.is_empty());
            if let Some(dir) = shared.map(PathBuf::from) {
                assert!(
                    dir.join("host/flags").is_file() && dir.join("cuda_probe").is_file(),
                    "GPURUN_TEST_FIXTURES={}: not gpu-fixtures.sh's output",
                    dir.display()
                );
                return GpuFixtures { dir };
            }
            let dir = per_process_dir("gpu-fixtures");
            let out = run_cmd(
                Command::new("sh")
                    .arg(repo().join("scripts/fixtures/gpu-fixtures.sh"))
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

    /// The flags of the fake host whose libcuda has the driver's checkpoint
    /// API (gpu-fixtures.sh's `host-checkpoint`: the stand-in
    /// tests/fixtures/fake_cuda.c).
    pub fn checkpoint_host_flags(&self) -> Vec<String> {
        let flags = fs::read_to_string(self.dir.join("host-checkpoint/flags")).unwrap();
        flags.split_whitespace().map(str::to_owned).collect()
    }

    /// `gpurun run [FLAGS] --bundle DIR ID` of `bundle` by `rt` over the
    /// fake host (or the host flags `host` names), with `config` as gpurun's config file (GPURUN_CONFIG)
    /// where given and `--log`/`--log-format json` before `run` where `log`
    /// is (as containerd's shim has it); asserts nothing was left behind.
    pub fn run_bundle(&self, rt: &Runtime, bundle: &Bundle, how: &BundleRun) -> Ran {
        let dir = bundle.dir.to_string_lossy().into_owned();
        let id = unique("gpu");
        let log = how.log.map(|l| l.to_string_lossy().into_owned());
        let mut args: Vec<&str> = Vec::new();
        if let Some(log) = &log {
            args.extend(["--log", log, "--log-format", "json"]);
        }
        args.push("run");
        args.extend_from_slice(how.flags);
        args.extend(["--bundle", &dir, &id]);
        let mut all = how.host.map_or_else(|| self.flags(), <[String]>::to_vec);
        all.extend(args.iter().map(|a| a.to_string()));
        let mut cmd = rt.command(all);
        if let Some(config) = how.config {
            cmd.env("GPURUN_CONFIG", config);
        }
        let out = run_cmd(&mut cmd, Duration::from_secs(120));
        assert!(rt.leftovers().is_empty(), "left: {:?}", rt.leftovers());
        out
    }

    /// The CUDA compat library fixture `case` (`compat/CASE`: the library
    /// and its libcuda.so.1 link) copied into `bundle`'s image as
    /// `/usr/local/cuda/DIR` (`compat`, or an Orin's `compat_orin`).
    pub fn copy_compat(&self, case: &str, bundle: &Bundle, dir: &str) {
        let cuda = bundle.rootfs().join("usr/local/cuda");
        fs::create_dir_all(&cuda).unwrap();
        let copied = Command::new("cp")
            .arg("-a")
            .arg(self.dir.join("compat").join(case))
            .arg(cuda.join(dir))
            .status()
            .unwrap();
        assert!(copied.success(), "copy the compat fixture {case}");
    }

    /// gpurun's arguments: the fake-host flags, then `args`.
    pub fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = self.flags();
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }

    /// A fake host with one of the driver layouts real hosts have
    /// (`scripts/fixtures/fake-gpu-host.sh --layout`), built once per test binary.
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
                .arg(repo().join("scripts/fixtures/fake-gpu-host.sh"))
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
        let host = FakeHost::at(dir);
        hosts.push((key, host.clone()));
        host
    }
}

impl GpuFixtures {
    /// A fake WSL2 host (`scripts/fixtures/fake-wsl-host.sh`) made from this
    /// host's driver files, built once per test binary.
    pub fn wsl(&self) -> FakeHost {
        static HOST: std::sync::OnceLock<FakeHost> = std::sync::OnceLock::new();
        HOST.get_or_init(|| self.derived_host("fake-wsl-host.sh", "wsl-host"))
            .clone()
    }

    /// A fake Jetson in CSV mode (`scripts/fixtures/fake-tegra-host.sh`),
    /// built once per test binary.
    pub fn tegra(&self) -> FakeHost {
        static HOST: std::sync::OnceLock<FakeHost> = std::sync::OnceLock::new();
        HOST.get_or_init(|| self.derived_host("fake-tegra-host.sh", "tegra-host"))
            .clone()
    }

    /// A host `script` makes from this host's driver files.
    fn derived_host(&self, script: &str, name: &str) -> FakeHost {
        let dir = per_process_dir(name);
        let out = run_cmd(
            Command::new("sh")
                .arg(repo().join("scripts/fixtures").join(script))
                .arg(self.dir.join("host"))
                .arg(&dir),
            Duration::from_secs(60),
        );
        assert_eq!(out.code, 0, "{script}: {}", out.stderr);
        FakeHost::at(dir)
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
    /// The host a fixture script made in `dir`: readable to the test user
    /// (rootless tests use it), with the flags it wrote.
    fn at(dir: PathBuf) -> FakeHost {
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("a+rX")
            .arg(&dir)
            .status();
        let flags = fs::read_to_string(dir.join("flags")).unwrap();
        FakeHost {
            dir,
            flags: flags.split_whitespace().map(str::to_owned).collect(),
        }
    }

    /// gpurun's arguments: this host's flags, then `args`.
    pub fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = self.flags.clone();
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }
}

/// The device names of a CDI spec, in its order.
pub fn cdi_device_names(spec: &serde_json::Value) -> Vec<&str> {
    spec["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["name"].as_str().unwrap_or_default())
        .collect()
}

/// How `GpuFixtures::run_bundle` runs a bundle: flags after `run`, a config
/// file, a JSON log, the global flags of a host other than the fixture's.
#[derive(Default)]
pub struct BundleRun<'a> {
    pub flags: &'a [&'a str],
    pub host: Option<&'a [String]>,
    pub config: Option<&'a Path>,
    pub log: Option<&'a Path>,
}
