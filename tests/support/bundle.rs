//! Bundles: busybox and glibc root filesystems with a config.json to edit.

use crate::*;

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
        cmd.arg(repo().join("scripts/fixtures/busybox-bundle.sh"));
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

    /// A bundle with a minimal glibc rootfs (scripts/fixtures/glibc-rootfs.sh), the
    /// CUDA runtime at /opt/cudart and the probes at /usr/bin/cuda_probe
    /// and /usr/bin/cuda_vector_add.
    pub fn glibc(user: Option<&TestUser>) -> Bundle {
        let fixtures = GpuFixtures::get();
        let scratch = Scratch::new("glibc");
        let dir = scratch.path().join("bundle");
        let script = format!(
            "set -e; sh {repo}/scripts/fixtures/glibc-rootfs.sh {dir}/rootfs; \
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

    /// A bundle with a musl rootfs laid out as Alpine's with gcompat's
    /// /lib64 (scripts/fixtures/musl-rootfs.sh), and its probe at
    /// /usr/bin/musl_dlopen.
    pub fn musl(user: Option<&TestUser>) -> Bundle {
        let scratch = Scratch::new("musl");
        let dir = scratch.path().join("bundle");
        let script = format!(
            "set -e; sh {repo}/scripts/fixtures/musl-rootfs.sh {dir}/rootfs; cd {dir}; {gpurun} spec {rootless}; \
             sed -i 's/\"terminal\": true/\"terminal\": false/' config.json",
            repo = repo().display(),
            dir = dir.display(),
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
