//! gpurun with a private state root, as root or the test user, and the check that a failure left nothing.

use crate::*;

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

/// Receives the pty master that `--console-socket` hands over.
pub fn receive_console(listener: &std::os::unix::net::UnixListener) -> fs::File {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::{AsRawFd, FromRawFd};
    // Within TIMEOUT, or the test fails: a create that never connects or
    // never sends must not hang it.
    listener.set_nonblocking(true).unwrap();
    let start = std::time::Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("no connection on the console socket: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 4096];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .unwrap();
    for cmsg in msg.cmsgs().unwrap() {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            // SAFETY: the fd was just received and is owned by nobody else.
            return unsafe { fs::File::from_raw_fd(fds[0]) };
        }
    }
    panic!("no fd on the console socket");
}
