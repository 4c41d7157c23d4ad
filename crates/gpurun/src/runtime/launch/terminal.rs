//! A terminal for a foreground container that asked for one
//! (`process.terminal`, or `exec -t`) and got no `--console-socket`: as
//! runc does, gpurun takes the pty's master itself and relays it to its own
//! stdin and stdout, in raw mode when those are a terminal, with the window
//! size passed on (also on SIGWINCH).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context, Result};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
use nix::sys::termios::{self, SetArg, Termios};

/// The master of the terminal being relayed, for SIGWINCH.
static MASTER: AtomicI32 = AtomicI32::new(-1);

/// The console socket gpurun listens on while the container is created.
pub struct ConsoleSocket {
    listener: UnixListener,
}

impl ConsoleSocket {
    /// Listens at `path` (inside gpurun's own working directory of the
    /// create, which goes away with it).
    pub fn bind(path: &Path) -> Result<ConsoleSocket> {
        let listener = UnixListener::bind(path).with_context(|| {
            format!("listen for the container's terminal at {}", path.display())
        })?;
        Ok(ConsoleSocket { listener })
    }

    /// Takes the master the container's init sent, and starts relaying.
    pub fn relay(self) -> Result<Relay> {
        let (stream, _) = self
            .listener
            .accept()
            .context("take the container's terminal")?;
        let master = receive_fd(stream.as_raw_fd())?;
        Relay::start(master)
    }
}

fn receive_fd(socket: RawFd) -> Result<OwnedFd> {
    let mut buf = [0u8; 4096];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<UnixAddr>(
        socket,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .context("receive the container's terminal")?;
    for cmsg in msg.cmsgs().context("receive the container's terminal")? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this descriptor for us.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    bail!("the container's init sent no terminal")
}

/// Copies our window size to the relayed terminal.
pub fn pass_window_size() {
    let master = MASTER.load(Ordering::Relaxed);
    if master < 0 {
        return;
    }
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ/TIOCSWINSZ with a valid winsize on our fds.
    unsafe {
        if libc::ioctl(libc::STDIN_FILENO, libc::TIOCGWINSZ, &mut size) == 0 {
            libc::ioctl(master, libc::TIOCSWINSZ, &size);
        }
    }
}

/// A running relay; dropping it restores our terminal.
pub struct Relay {
    output_done: std::sync::mpsc::Receiver<()>,
    saved: Option<Termios>,
}

impl Relay {
    fn start(master: OwnedFd) -> Result<Relay> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(original) = &saved {
            let mut raw = original.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        MASTER.store(master.as_raw_fd(), Ordering::Relaxed);
        pass_window_size();
        let master = File::from(master);
        let mut reader = master.try_clone().context("relay the terminal")?;
        let mut writer = master;
        // Input may block forever on a terminal nobody types in: that
        // thread is left to end with the process.
        std::thread::spawn(move || {
            let mut input = std::io::stdin().lock();
            let mut buf = [0u8; 4096];
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || writer.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let (done, output_done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut out = std::io::stdout();
            let mut buf = [0u8; 4096];
            // EIO once the container's last process has closed it.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
            let _ = done.send(());
        });
        Ok(Relay { output_done, saved })
    }

    /// Waits until the container's output is all relayed (the terminal
    /// closes with its last process), for at most two seconds.
    pub fn finish(self) {
        let _ = self
            .output_done
            .recv_timeout(std::time::Duration::from_secs(2));
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        MASTER.store(-1, Ordering::Relaxed);
        if let Some(saved) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, saved);
        }
    }
}
