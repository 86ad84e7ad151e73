//! What a compute call ends with: its error, or the report of the sandbox it ran in.

use crate::compute::context::{Context, ContextError};
use crate::sys::units::size;
use std::fmt;
use std::time::Duration;

/// Why compute did not return a value.
#[derive(Clone, PartialEq)]
pub enum ComputeError {
    /// `NoContextError`, `WrongContextError` or `ResourcesUnavailableError`.
    Context(ContextError),
    /// The closure panicked; the message and where.
    Panicked(String),
    /// The sandbox ran longer than its timeout and was stopped.
    TimedOut {
        /// The timeout.
        after: Duration,
    },
    /// The sandbox went over `mem_limit` (memory it added beyond what it was forked with).
    OutOfMemory {
        /// The limit, bytes.
        limit: u64,
        /// What it had allocated when stopped, bytes.
        used: u64,
    },
    /// The sandbox died of a signal it was not sent by us (the OOM killer's SIGKILL, a SIGSEGV).
    Killed {
        /// The signal's number.
        signal: i32,
    },
    /// The sandbox exited without a result (`std::process::exit` in the closure).
    Exited {
        /// The exit code.
        code: i32,
    },
    /// The user interrupted the notebook while the sandbox ran.
    Interrupted,
    /// The result or an updated object did not (de)serialize, or the system refused.
    Failed(String),
    /// A Slurm job's end, under the sandbox's error names where one fits (`SandboxTimedOut`,
    /// `SandboxOutOfMemory`, ...) and Slurm's own otherwise (`SlurmJobCancelled`).
    Job {
        /// The error's name.
        name: &'static str,
        /// What happened.
        message: String,
    },
}

impl ComputeError {
    /// The error's DRYML name (`NoContextError`, `TimedOut`, ...), a cell error's `ename`.
    pub fn name(&self) -> &'static str {
        match self {
            ComputeError::Context(e) => e.name(),
            ComputeError::Panicked(_) => "SandboxPanicked",
            ComputeError::TimedOut { .. } => "SandboxTimedOut",
            ComputeError::OutOfMemory { .. } => "SandboxOutOfMemory",
            ComputeError::Killed { .. } => "SandboxKilled",
            ComputeError::Exited { .. } => "SandboxExited",
            ComputeError::Interrupted => "KeyboardInterrupt",
            ComputeError::Failed(_) => "SandboxFailed",
            ComputeError::Job { name, .. } => name,
        }
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

impl ComputeError {
    /// The message without the error's name (a cell error's `evalue`).
    pub fn message(&self) -> String {
        match self {
            ComputeError::Context(e) => e.message(),
            ComputeError::Panicked(m) => format!("the sandbox panicked: {m}"),
            ComputeError::TimedOut { after } => {
                format!("the sandbox was stopped after the {} s timeout", after.as_secs_f64())
            }
            ComputeError::OutOfMemory { limit, used } => format!(
                "the sandbox was stopped at {} for going over its memory limit of {}",
                size(*used),
                size(*limit)
            ),
            ComputeError::Killed { signal } => {
                let hint = if *signal == libc::SIGKILL { " (by the system's OOM killer?)" } else { "" };
                format!("the sandbox was killed by {}{hint}", signal_name(*signal))
            }
            ComputeError::Exited { code } => format!("the sandbox exited with code {code} before returning"),
            ComputeError::Interrupted => "the sandbox was stopped by an interrupt".into(),
            ComputeError::Failed(m) | ComputeError::Job { message: m, .. } => m.clone(),
        }
    }
}

impl fmt::Display for ComputeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message())
    }
}

// evcxr prints a cell's `?` errors with `{:?}`: make that the readable message.
impl fmt::Debug for ComputeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ComputeError {}

impl From<ContextError> for ComputeError {
    fn from(e: ContextError) -> Self {
        ComputeError::Context(e)
    }
}

/// What one compute call did, for the notebook's report line.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxReport {
    /// The sandbox's pid; None when it ran in the caller's own process.
    pub pid: Option<u32>,
    /// How long it ran.
    pub wall: Duration,
    /// The sandbox's peak resident memory, pages shared with the caller included.
    pub peak_rss: u64,
    /// The most memory it allocated: resident memory beyond what it had when it started (the
    /// pages it shares with the notebook are not counted).
    pub peak_added: u64,
    /// The context it ran in.
    pub context: Context,
}

impl fmt::Display for SandboxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pid {
            None => {
                write!(f, "ran in this process's own context ({}) in {:.3} s", self.context, self.wall.as_secs_f64())
            }
            Some(pid) => write!(
                f,
                "sandbox pid {pid}: {:.3} s, peak memory {} ({} allocated in the sandbox), held {}; all released",
                self.wall.as_secs_f64(),
                size(self.peak_rss),
                size(self.peak_added),
                self.context
            ),
        }
    }
}

pub(super) static LAST: std::sync::Mutex<Option<SandboxReport>> = std::sync::Mutex::new(None);

pub(super) fn clear_report() {
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Records a `%%compute` cell that ran in this process's own context.
pub fn record_here(context: Context, wall: Duration) {
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(SandboxReport { pid: None, wall, peak_rss: 0, peak_added: 0, context });
}

/// Ends the running notebook cell as this error (its DRYML name), keeping the variables.
pub fn raise(e: &ComputeError) {
    crate::display::raise_error(e.name(), &e.message());
}

/// Prints the last report as `%%compute`'s closing line, if a compute call made one.
pub fn print_report() {
    if let Some(r) = last_report() {
        println!("[%%compute] {r}");
    }
}

/// The report of this process's last compute call (also after a failed one, if a sandbox ran).
pub fn last_report() -> Option<SandboxReport> {
    LAST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
