//! Logging in the shapes engines read.
//!
//! containerd's and Docker's shims pass `--log FILE --log-format json` and read
//! errors back from that file, one JSON object a line:
//! `{"level":"error","msg":"...","time":"..."}`. Text logs to a file use
//! logrus' `time=... level=... msg=...`. Without `--log`, messages go to
//! stderr as one plain line each, for a person at a shell.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::sync::Mutex;

use anyhow::{Context, Result};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::Layer;

use crate::runtime::context::Settings;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Human,
    Text,
    Json,
}

struct LogLayer {
    sink: Mutex<Box<dyn Write + Send>>,
    format: Format,
    debug: bool,
}

/// Whether error lines also need to reach stderr: they do when the log goes
/// to a file, so a person at a shell still sees why a command failed.
pub struct LogTarget {
    pub to_file: bool,
}

#[derive(Default)]
struct Fields {
    message: String,
    extra: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.extra.push((field.name(), value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.extra.push((field.name(), format!("{value:?}")));
        }
    }
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// Whether the log goes to a file (`--log`), for messages that a person at
/// a shell must see on stderr as well.
static TO_FILE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn logs_to_file() -> bool {
    TO_FILE.load(std::sync::atomic::Ordering::Relaxed)
}

/// When the last lifecycle step was logged. A static, so the container's
/// intermediate and init processes (clones of this one) inherit it, and each
/// step's duration runs from the previous step in whichever process.
static LAST_STEP: Mutex<Option<std::time::Instant>> = Mutex::new(None);

/// Starts the lifecycle clock: the next step's duration counts from now.
pub fn start_steps() {
    if let Ok(mut last) = LAST_STEP.lock() {
        *last = Some(std::time::Instant::now());
    }
}

/// The lifecycle steps `--debug` reports for a container, numbered here
/// only: 1-5 are gpurun's GPU work, 6-8 libcontainer's init events, 9 the
/// exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    GpuRequest = 1,
    DeviceNodes,
    CgroupRules,
    DriverFiles,
    LinkerCache,
    Namespaces,
    Rootfs,
    PivotRoot,
    Exec,
}

impl Step {
    /// "N/9".
    pub fn number(self) -> String {
        format!("{}/{}", self as u8, Step::Exec as u8)
    }
}

/// The steps of the LXC mount hook, which does a container's GPU work
/// itself inside LXC's own setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LxcStep {
    GpuRequest = 1,
    DeviceNodes,
    DriverFiles,
    LinkerCache,
    NodesAllowed,
}

impl LxcStep {
    /// "N/5".
    pub fn number(self) -> String {
        format!("{}/{}", self as u8, LxcStep::NodesAllowed as u8)
    }
}

/// libcontainer's init events, numbered as gpurun's lifecycle steps.
fn lifecycle_step(message: &str) -> Option<String> {
    let (step, text) = match message {
        "namespaces cloned" => (Step::Namespaces, "namespaces cloned"),
        "rootfs prepared" => (
            Step::Rootfs,
            "rootfs prepared: mounts and device nodes carried out",
        ),
        "pivot_root done" => (Step::PivotRoot, "pivot_root"),
        _ => return None,
    };
    Some(format!("{} {text}", step.number()))
}

fn step_elapsed() -> String {
    let now = std::time::Instant::now();
    let Ok(mut last) = LAST_STEP.lock() else {
        return String::new();
    };
    let text = match *last {
        Some(t) => format!(" ({:.2} ms)", now.duration_since(t).as_secs_f64() * 1000.0),
        None => String::new(),
    };
    *last = Some(now);
    text
}

impl LogLayer {
    fn enabled_for(&self, level: &Level, target: &str) -> bool {
        // The affinity line (`affinity: 0x<mask>`) is read by runtime test
        // suites from --debug output, as runc's nsexec prints it.
        let ours = target.starts_with("gpurun")
            || target == "libcontainer::lifecycle"
            || target == "libcontainer::process::cpu_affinity";
        match (self.debug, ours) {
            (true, true) => *level <= Level::DEBUG,
            (true, false) => *level <= Level::INFO,
            // A failed poststart or poststop hook is a warning by the spec,
            // and the only word the user gets of it.
            (false, false) if target == "libcontainer::hooks" => *level == Level::WARN,
            (false, true) => *level <= Level::WARN,
            // Library internals (libcontainer's own error! calls) would
            // repeat our one error line in other words: only with --debug.
            (false, false) => false,
        }
    }
}

impl<S: Subscriber> Layer<S> for LogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
        let meta = event.metadata();
        if !self.enabled_for(meta.level(), meta.target()) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let target = meta.target();
        if target == "libcontainer::lifecycle" {
            match lifecycle_step(&fields.message) {
                Some(step) => fields.message = format!("step {step}{}", step_elapsed()),
                None => return,
            }
        } else if target == "gpurun::steps" {
            fields.message = format!("step {}{}", fields.message, step_elapsed());
        }
        let mut line = render(self.format, meta.level(), &fields.message, fields.extra);
        line.push('\n');
        if let Ok(mut sink) = self.sink.lock() {
            let _ = sink.write_all(line.as_bytes());
            let _ = sink.flush();
        }
    }
}

/// One record as the sink's format writes it, without the newline.
fn render(
    format: Format,
    level: &Level,
    message: &str,
    extra: Vec<(&'static str, String)>,
) -> String {
    let name = level_name(level);
    let mut line = String::new();
    match format {
        Format::Human => {
            // `gpurun: error: …`: tools and test suites that read only
            // stderr look for the word, as runc's `level=error` gives it.
            let _ = write!(line, "gpurun: {name}: ");
            line.push_str(message);
            for (k, v) in &extra {
                let _ = write!(line, " {k}={v}");
            }
        }
        Format::Text => {
            let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
            let _ = write!(line, "time=\"{time}\" level={name} msg={message:?}");
            for (k, v) in &extra {
                let _ = write!(line, " {k}={v:?}");
            }
        }
        Format::Json => {
            let mut obj = serde_json::Map::new();
            obj.insert("level".into(), name.into());
            obj.insert("msg".into(), message.into());
            for (k, v) in extra {
                obj.insert(k.into(), v.into());
            }
            let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
            obj.insert("time".into(), time.into());
            line = serde_json::Value::Object(obj).to_string();
        }
    }
    line
}

/// The sink's descriptor and format, for `error_line_parts`.
static SINK: std::sync::OnceLock<(std::os::fd::RawFd, Format)> = std::sync::OnceLock::new();

/// Where and how the error `{message_start}TEXT` would be logged, with TEXT
/// not yet known: (descriptor, what comes before TEXT, what after), one
/// entry per place the line goes (the log, and stderr when the log is a
/// file), as `tracing::error!` plus the `logs_to_file` echo write it. For
/// a process that will have been replaced by the time TEXT is known (the
/// exec stub).
pub fn error_line_parts(message_start: &str) -> Vec<(std::os::fd::RawFd, String, String)> {
    // Neither JSON nor Rust's {:?} escapes any of these characters, and
    // the text is the record's last part of the message (rfind).
    const PLACE: &str = "@@GPURUN-TEXT@@";
    let echo = (
        2,
        format!("gpurun: error: {message_start}"),
        "\n".to_owned(),
    );
    let Some(&(fd, format)) = SINK.get() else {
        return vec![echo];
    };
    let line = render(
        format,
        &Level::ERROR,
        &format!("{message_start}{PLACE}"),
        Vec::new(),
    );
    let Some(at) = line.rfind(PLACE) else {
        return vec![echo];
    };
    let mut parts = vec![(
        fd,
        line[..at].to_owned(),
        format!("{}\n", &line[at + PLACE.len()..]),
    )];
    if logs_to_file() {
        parts.push(echo);
    }
    parts
}

pub fn init(flags: &Settings) -> Result<LogTarget> {
    let (sink, format, to_file): (Box<dyn Write + Send>, Format, bool) = match &flags.log {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("open log file {}", path.display()))?;
            let format = match flags.log_format.as_deref() {
                Some("json") => Format::Json,
                _ => Format::Text,
            };
            let _ = SINK.set((std::os::fd::AsRawFd::as_raw_fd(&file), format));
            (Box::new(file), format, true)
        }
        None => {
            let format = match flags.log_format.as_deref() {
                Some("json") => Format::Json,
                _ => Format::Human,
            };
            let _ = SINK.set((2, format));
            (Box::new(io::stderr()), format, false)
        }
    };
    let layer = LogLayer {
        sink: Mutex::new(sink),
        format,
        debug: flags.debug,
    };
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::set_global_default(subscriber).context("install the logger")?;
    TO_FILE.store(to_file, std::sync::atomic::Ordering::Relaxed);
    Ok(LogTarget { to_file })
}
