//! The running cell's state, shared by the worker thread (the engine), the output listener,
//! evcxr's stderr thread and the interrupter (which runs on the protocol's tasks).

use crate::protocol::Io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct CellState {
    /// The request whose output is flowing now (kept after the cell for late output).
    pub io: Mutex<Option<Io>>,
    /// A cell's user code is running in the child.
    pub running: AtomicBool,
    /// The kernel is starting; `warming` while a step of its warm-up (optional, ahead-of-time
    /// builds, done while no request waits) runs, and `warm_up_stopped` once an interrupt ended
    /// or skipped the warm-up.
    pub starting: AtomicBool,
    pub warming: AtomicBool,
    pub warm_up_stopped: AtomicBool,
    /// A request was queued: the warm-up's step under way gives way (its build is killed) and
    /// the next one waits until the worker is idle again.
    pub work_waiting: AtomicBool,
    /// The child could not load the start-up library (its stderr said so).
    pub startup_failed: AtomicBool,
    pub child_pid: AtomicU32,
    /// An interrupt hit the running cell; `killed` when the child had to be killed.
    pub interrupted: AtomicBool,
    pub killed: AtomicBool,
    /// Held while the interrupter kills a cell's builds or child, and while a cell (or the
    /// warm-up) is marked ended: a kill meant for one cell cannot reach the next one's build.
    pub gate: Mutex<()>,
    /// An interrupt killed a build: its leftovers are cleaned before the next one.
    pub build_killed: AtomicBool,
    /// An execute request is being handled (its cell may not have reached user code yet), and
    /// an interrupt came before it did: the cell then ends as interrupted before it builds.
    pub requested: AtomicBool,
    pub early_interrupt: AtomicBool,
    /// The running cell waits for an `input_reply` (its child reads stdin for the answer).
    pub awaiting_input: AtomicBool,
    /// The debugger is attached: cells are built for it, and `debug_hook` (set by the kernel)
    /// hears of each user cell's build and end.
    pub debugging: AtomicBool,
    pub debug_hook: std::sync::OnceLock<Box<dyn CellDebugHook>>,
    /// The notebook's variables as the last cell left them (the debugger's Variables panel
    /// reads them while a cell may run).
    pub variables: Mutex<Variables>,
    /// The running cell's child got SIGINT (a second interrupt then kills it).
    pub signalled: AtomicBool,
    /// Counts cells run, so a late interrupt timer cannot kill the child under a later cell.
    pub cell_seq: AtomicU64,
    /// How many loops that stop between steps on interrupt the running cell is in
    /// (`DRYML_POLLING`; loops nest).
    pub polling: AtomicU32,
    pub panicked: AtomicBool,
    /// The backtrace of the panic that ended the cell, when the user did not ask for them all.
    pub panic_backtrace: Mutex<Option<String>>,
    /// An error a cell raised through a `DRYML_ERROR` line (ename, evalue).
    pub raised: Mutex<Option<(String, String)>>,
    /// Suppress output (hidden kernel-written evals, silent executes).
    pub quiet: AtomicBool,
    /// When set, stdout is collected here instead of published.
    pub capture: Mutex<Option<String>>,
    /// Where the running cell's library lines are in the cell, once it is built.
    pub locations: Mutex<Option<std::sync::Arc<super::errors::Locations>>>,
    /// The current cell's last stderr lines, to explain panics and crashes.
    pub stderr_tail: Mutex<Vec<String>>,
    /// The display ids the current request has shown (its msg_id first): a display that says
    /// `"update": "auto"` updates one of these in place, and is a new display otherwise, so a
    /// re-run cell (whose old outputs the front end cleared) shows its plot again.
    pub shown: Mutex<(String, std::collections::HashSet<String>)>,
}

/// How many stderr lines of a cell are kept to explain its panic or crash: a panic's message
/// and backtrace are the last lines, and a flood of warnings must not grow the kernel.
const STDERR_TAIL_LINES: usize = 200;

impl CellState {
    /// Records that request `msg_id` shows display `id`; true when it already did (so the
    /// display is an update).
    pub fn mark_shown(&self, msg_id: &str, id: &str) -> bool {
        let mut shown = self.shown.lock().unwrap();
        if shown.0 != msg_id {
            *shown = (msg_id.to_string(), Default::default());
        }
        !shown.1.insert(id.to_string())
    }

    pub fn quiet(&self) -> bool {
        self.quiet.load(Ordering::SeqCst)
    }

    pub fn child_pid(&self) -> u32 {
        self.child_pid.load(Ordering::SeqCst)
    }

    /// The current request's output, unless it is silenced.
    pub fn io(&self) -> Option<Io> {
        if self.quiet() {
            return None;
        }
        self.io.lock().unwrap().clone()
    }

    /// Publishes stream text for the current cell, or captures stdout for a hidden eval.
    pub fn stream(&self, name: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        if name == "stdout" {
            if let Some(buf) = self.capture.lock().unwrap().as_mut() {
                buf.push_str(text);
                return;
            }
        }
        if !self.quiet() {
            // Not `io()`: a clone of the request per line was most of a stderr flood's cost.
            if let Some(io) = self.io.lock().unwrap().as_ref() {
                io.stream(name, text);
            }
        }
    }

    /// `text` with the running cell's library locations (`src/lib.rs:L:C`) as its own lines.
    pub fn in_cell<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if !text.contains("src/lib.rs:") {
            return std::borrow::Cow::Borrowed(text);
        }
        match self.locations.lock().unwrap().as_ref() {
            Some(at) => std::borrow::Cow::Owned(at.map(text).into_owned()),
            None => std::borrow::Cow::Borrowed(text),
        }
    }

    /// Keeps one stderr line in the cell's bounded tail.
    pub fn keep_stderr(&self, line: &str) {
        let mut tail = self.stderr_tail.lock().unwrap();
        if tail.len() >= 2 * STDERR_TAIL_LINES {
            tail.drain(..STDERR_TAIL_LINES);
        }
        tail.push(line.to_string());
    }

    /// The cell's last stderr lines, oldest first.
    pub fn stderr_lines(&self) -> Vec<String> {
        let tail = self.stderr_tail.lock().unwrap();
        tail[tail.len().saturating_sub(STDERR_TAIL_LINES)..].to_vec()
    }

    /// Marks the running cell (or the warm-up) ended, once no kill for it is under way.
    pub fn end_cell(&self) {
        let _gate = self.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.running.store(false, Ordering::SeqCst);
        self.warming.store(false, Ordering::SeqCst);
    }

    /// Clears the per-cell flags before user code runs.
    pub fn begin_cell(&self) {
        self.stderr_tail.lock().unwrap().clear();
        self.locations.lock().unwrap().take();
        self.panicked.store(false, Ordering::SeqCst);
        self.panic_backtrace.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        self.raised.lock().unwrap().take();
        self.interrupted.store(self.early_interrupt.swap(false, Ordering::SeqCst), Ordering::SeqCst);
        self.killed.store(false, Ordering::SeqCst);
        self.polling.store(0, Ordering::SeqCst);
        self.signalled.store(false, Ordering::SeqCst);
        self.cell_seq.fetch_add(1, Ordering::SeqCst);
        self.running.store(true, Ordering::SeqCst);
    }
}

/// The notebook's variables: their types after every cell, and short values (read by a hidden
/// cell, only when the debugger's panel asks) as of cell `values_of` (`cell_seq`).
#[derive(Default)]
pub struct Variables {
    pub types: std::collections::BTreeMap<String, String>,
    pub values: std::collections::BTreeMap<String, String>,
    pub values_of: Option<u64>,
}

/// What the debugger hears of a cell while it is attached.
pub trait CellDebugHook: Send + Sync {
    /// A cell's request begins: its source, as the panel names its file by.
    fn began(&self, source: &str);
    /// The cell's body runs away from the process the debugger is attached to (`why`): what to
    /// tell the user, when the cell has breakpoints.
    fn elsewhere(&self, why: &str) -> Option<String>;
    /// User code of the cell was built and is about to load: the source it was built from
    /// and, for each line of that source, the cell's line it holds (0: none).
    fn built(&self, lib: &std::path::Path, lines: &[usize]);
    /// That code has ended (the hidden cells the kernel runs next must not stop on its
    /// breakpoints).
    fn ended(&self);
}
