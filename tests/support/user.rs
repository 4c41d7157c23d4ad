//! The unprivileged test user, with subordinate ids, for rootless tests.

use crate::*;

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
        cmd.uid(self.uid).gid(self.gid);
        self.apply_env(cmd);
    }

    /// This user's login-like environment for `cmd` (which changes to the
    /// user itself, as `setpriv` does where std's `uid` would drop groups).
    pub fn apply_env(&self, cmd: &mut Command) {
        cmd.env_clear()
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
