//! `gpurun import IMAGE -o DIR` and `import --remove -o DIR`: the work is
//! runtime::import's; this shows its progress, as a bar per blob or layer
//! on a terminal and as plain lines otherwise.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Result;
use gpurun_image::registry::PullProgress;
use gpurun_image::{Progress, Stats};

use crate::runtime::import::{self, ImportEvent};

pub fn import(image: &str, output: &Path) -> Result<i32> {
    let mut shown = Shown {
        tty: std::io::stderr().is_terminal(),
        ..Shown::default()
    };
    import::import(image, output, &mut |event| {
        shown.event(event, image, output)
    })?;
    Ok(0)
}

pub fn remove(output: &Path) -> Result<i32> {
    import::remove(output)?;
    Ok(0)
}

const BAR: usize = 24;

/// What the progress lines show of the current blob or layer.
#[derive(Default)]
struct Shown {
    tty: bool,
    current: String,
    got: u64,
    size: Option<u64>,
    fetched: usize,
    layers: usize,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

impl Shown {
    fn event(&mut self, event: ImportEvent, image: &str, output: &Path) {
        match event {
            ImportEvent::Pulling { reference, cache } => {
                eprintln!("pulling docker://{reference} into {}", cache.display())
            }
            ImportEvent::Pull(p) => self.pull(p),
            ImportEvent::Pulled { name } => eprintln!(
                "pulled {name} ({} blobs fetched, the rest cached)",
                self.fetched
            ),
            ImportEvent::Importing { format, layers } => eprintln!(
                "importing {image} ({format}, {layers} layers) into {}",
                output.display()
            ),
            ImportEvent::Unpack(p) => self.unpack(p),
            ImportEvent::Unpacked => {
                if self.tty {
                    eprintln!();
                }
            }
            ImportEvent::Imported { stats, elapsed } => imported(stats, elapsed),
        }
    }

    fn pull(&mut self, p: PullProgress) {
        match p {
            PullProgress::Blob {
                index,
                count,
                digest,
                size,
                have,
            } => {
                let short: String = digest.chars().take(19).collect();
                self.current = format!("blob {}/{count} {short}", index + 1);
                (self.size, self.got) = (Some(size), have);
                if have >= size && size > 0 {
                    self.current.push_str(" cached");
                } else {
                    self.fetched += 1;
                    if have > 0 {
                        let at = format!(" resuming at {:.1} MiB", mib(have));
                        self.current.push_str(&at);
                    }
                }
                self.starting();
            }
            PullProgress::Bytes(n) => {
                self.got += n;
                let filled = self.filled();
                self.bar(
                    filled,
                    &format!(
                        "{:.1}/{:.1} MiB",
                        mib(self.got),
                        mib(self.size.unwrap_or(0))
                    ),
                );
            }
            PullProgress::Done { .. } => {
                self.done();
                if self.tty {
                    eprintln!();
                }
            }
        }
    }

    fn unpack(&mut self, p: Progress) {
        match p {
            Progress::Layer {
                index,
                count,
                layer,
            } => {
                self.got = 0;
                self.size = layer.size.filter(|&s| s > 0);
                self.layers = count;
                let short: String = layer.digest.chars().take(19).collect();
                self.current = format!("layer {}/{count} {short}", index + 1);
                self.starting();
            }
            Progress::Bytes(n) => {
                self.got += n;
                // docker-save layers have no size up front: the bar turns.
                let filled = match self.size {
                    Some(_) => self.filled(),
                    None => ((self.got >> 20) as usize) % (BAR + 1),
                };
                self.bar(filled, &format!("{:.1} MiB", mib(self.got)));
            }
            Progress::Done { index } => {
                self.done();
                if self.tty && index + 1 == self.layers {
                    eprintln!();
                }
            }
        }
    }

    /// How much of the bar the bytes so far fill (none with no size).
    fn filled(&self) -> usize {
        let size = self.size.unwrap_or(0);
        let filled = (self.got * BAR as u64).checked_div(size).unwrap_or(0);
        filled.min(BAR as u64) as usize
    }

    fn starting(&self) {
        if self.tty {
            eprint!("\r\x1b[K{} ...", self.current);
        }
    }

    fn bar(&self, filled: usize, amount: &str) {
        if self.tty {
            let (done, left) = ("#".repeat(filled), " ".repeat(BAR - filled));
            eprint!("\r\x1b[K{} [{done}{left}] {amount}", self.current);
        }
    }

    /// The line for a finished blob or layer: kept on a terminal (the
    /// caller ends it), one line of its own otherwise.
    fn done(&self) {
        let line = format!("{} done, {:.1} MiB", self.current, mib(self.got));
        if self.tty {
            eprint!("\r\x1b[K{line}");
        } else {
            eprintln!("{line}");
        }
    }
}

fn imported(stats: &Stats, elapsed: std::time::Duration) {
    eprintln!(
        "imported in {:.1}s: {} files, {} dirs, {} symlinks, {} hard links, {} whiteouts{}{}",
        elapsed.as_secs_f64(),
        stats.files,
        stats.dirs,
        stats.symlinks,
        stats.hardlinks,
        stats.whiteouts,
        counted(
            stats.skipped_devices,
            "device nodes skipped (no mknod without root)"
        ),
        counted(
            stats.unmapped_owners,
            "files keep your ownership (their owners are outside your subordinate ids)"
        ),
    );
}

/// ", N what" when there are any.
fn counted(n: u64, what: &str) -> String {
    if n > 0 {
        format!(", {n} {what}")
    } else {
        String::new()
    }
}
