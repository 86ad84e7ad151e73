//! The running cell's state, shared by the worker thread (the engine), the output listener,
//! evcxr's stderr thread and the interrupter (which runs on the protocol's tasks).
//!
//! Where the kernel is in a cell's life is one value, a [`Phase`], behind one lock and changed
//! only by the methods below, each of which says which phases it expects: the engine's
//! (`request_begins`, `begin_cell`, `end_cell`, ...), the warm-up's, and the interrupter's
//! (`session::interrupt`, which holds the lock while it kills, so a kill meant for one cell
//! never reaches the next one's build). The other threads read snapshots.

use crate::protocol::published::StreamName;
use crate::protocol::Io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Where the kernel is in a cell's life.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Phase {
    /// evcxr's own start-up, before the first request is served.
    Starting,
    /// A step of the warm-up (ahead-of-time builds, done while no request waits).
    Warming,
    /// Nothing runs.
    #[default]
    Idle,
    /// An execute request is handled, and no user code of it runs (its magics, kernel-written
    /// code, its `user_expressions`); `interrupted`: an interrupt came, so user code it would
    /// start ends as interrupted before it builds.
    Requested { interrupted: bool },
    /// A cell's user code is being built or run.
    Running(Run),
}

/// A running cell, as the interrupter and the output listener change it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// Which cell, counting from the start: a late interrupt timer cannot reach a later cell.
    pub seq: u64,
    /// Whether it belongs to an execute request (the phase after it is `Requested`).
    pub in_request: bool,
    /// How far interrupts have gone with it.
    pub escalation: Escalation,
    /// It waits for an `input_reply` (its child reads stdin for the answer).
    pub awaiting_input: bool,
    /// How many loops that stop between steps on interrupt it is in (`DRYML_POLLING`; they nest).
    pub polling: u32,
}

/// How far interrupts have gone with a running cell: each step follows the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Escalation {
    #[default]
    None,
    /// An interrupt hit it: its builds are killed, its child not yet signalled.
    Interrupted,
    /// Its child got SIGINT: a second interrupt kills it.
    Signalled,
    /// Its child had to be killed.
    Killed,
}

/// What a warm-up step may do now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WarmUp {
    /// An interrupt ended the warm-up: no more steps.
    Stopped,
    /// A request is queued: try again when the worker is idle.
    Later,
    /// The analyzer's own start-up work is under way: wait a little and try again.
    Busy,
    /// The step runs (the phase is `Warming` until [`CellState::warm_up_ends`]).
    Go,
}

/// The phase and what the start-up's interrupts leave, under the one lock.
#[derive(Debug, Default)]
pub struct Life {
    pub(super) phase: Phase,
    /// Cells begun since the start.
    cells: u64,
    /// An interrupt ended (or skipped) the warm-up.
    warm_up_stopped: bool,
    /// A request was queued: the warm-up's step under way gives way (its build is killed) and
    /// the next one waits until the worker is idle again.
    work_waiting: bool,
}

impl Life {
    /// Marks the warm-up stopped by an interrupt.
    pub fn stop_warm_up(&mut self) {
        self.warm_up_stopped = true;
    }

    /// Marks a request queued.
    pub fn work_queued(&mut self) {
        self.work_waiting = true;
    }
}

#[derive(Default)]
pub struct CellState {
    life: Mutex<Life>,
    child_pid: AtomicU32,
    /// The debugger is attached: cells are built for it, and `debug_hook` (set by the kernel)
    /// hears of each user cell's build and end.
    debugging: AtomicBool,
    /// Suppress output (hidden kernel-written evals, silent executes).
    quiet: AtomicBool,
    /// The child could not load the start-up library (its stderr said so).
    startup_failed: AtomicBool,
    /// An interrupt killed a build: its leftovers are cleaned before the next one.
    build_killed: AtomicBool,
    /// What the running cell's child said of it, on other threads, for the kernel to read as
    /// the cell ends.
    leftovers: Mutex<Leftovers>,
    /// The request whose output is flowing now (kept after the cell for late output).
    io: Mutex<Option<Io>>,
    debug_hook: std::sync::OnceLock<Box<dyn CellDebugHook>>,
    /// When set, stdout is collected here instead of published.
    capture: Mutex<Option<String>>,
    /// The display ids the current request has shown (its msg_id first): a display that says
    /// `"update": "auto"` updates one of these in place, and is a new display otherwise, so a
    /// re-run cell (whose old outputs the front end cleared) shows its plot again.
    shown: Mutex<(String, std::collections::HashSet<String>)>,
}

/// What one cell's child said of it besides its output; the next cell begins without it.
#[derive(Default)]
struct Leftovers {
    /// An error it raised through a `DRYML_ERROR` line (ename, evalue).
    raised: Option<(String, String)>,
    /// It panicked (its `DRYML_PANIC` line), with the backtrace the user did not ask for.
    panic: Option<Option<String>>,
    /// Where its library lines are in the cell, once it is built.
    locations: Option<std::sync::Arc<super::errors::Locations>>,
    /// Its last stderr lines, to explain panics and crashes.
    stderr_tail: Vec<String>,
}

/// An execute request under way; dropped, it ends the request: Requested (or Running, left by
/// a panic of ours mid-cell) → Idle, its output no longer suppressed.
#[must_use = "the request ends when this is dropped"]
pub struct RequestGuard<'a>(&'a CellState);

impl Drop for RequestGuard<'_> {
    fn drop(&mut self) {
        let mut life = self.0.life();
        if !matches!(life.phase, Phase::Requested { .. }) {
            tracing::error!("a request ended in phase {:?}", life.phase);
        }
        life.phase = Phase::Idle;
        drop(life);
        self.0.set_quiet(false);
    }
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

    /// Sets whether output is suppressed; returns what it was.
    pub fn set_quiet(&self, quiet: bool) -> bool {
        self.quiet.swap(quiet, Ordering::SeqCst)
    }

    pub fn child_pid(&self) -> u32 {
        self.child_pid.load(Ordering::SeqCst)
    }

    pub fn set_child_pid(&self, pid: u32) {
        self.child_pid.store(pid, Ordering::SeqCst);
    }

    pub fn debugging(&self) -> bool {
        self.debugging.load(Ordering::SeqCst)
    }

    pub fn set_debugging(&self, on: bool) {
        self.debugging.store(on, Ordering::SeqCst);
    }

    /// The child's stderr said it could not load the start-up library.
    pub fn startup_failed(&self) {
        self.startup_failed.store(true, Ordering::SeqCst);
    }

    /// Whether the start-up library failed to load since this was last asked.
    pub fn take_startup_failed(&self) -> bool {
        self.startup_failed.swap(false, Ordering::SeqCst)
    }

    /// An interrupt killed a build (the interrupter says so under the lock).
    pub fn build_was_killed(&self) {
        self.build_killed.store(true, Ordering::SeqCst);
    }

    /// Whether a build was killed since this was last asked.
    pub fn take_build_killed(&self) -> bool {
        self.build_killed.swap(false, Ordering::SeqCst)
    }

    /// The cell panicked: `DRYML_PANIC`, with the backtrace its hook kept.
    pub fn panicked(&self, backtrace: Option<String>) {
        self.leftovers().panic = Some(backtrace);
    }

    /// The cell's panic, if it panicked: its backtrace, if one was kept.
    pub fn take_panic(&self) -> Option<Option<String>> {
        self.leftovers().panic.take()
    }

    /// The cell raised an error through a `DRYML_ERROR` line.
    pub fn raised(&self, ename: String, evalue: String) {
        self.leftovers().raised = Some((ename, evalue));
    }

    /// The error the cell raised, if it did.
    pub fn take_raised(&self) -> Option<(String, String)> {
        self.leftovers().raised.take()
    }

    /// The running cell is built: where its library's lines are in the cell.
    pub fn built_at(&self, locations: super::errors::Locations) {
        self.leftovers().locations = Some(std::sync::Arc::new(locations));
    }

    fn leftovers(&self) -> std::sync::MutexGuard<'_, Leftovers> {
        self.leftovers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The request whose output flows from now on (the engine's, as a request begins; the
    /// output listener's, for a child's messages between requests).
    pub fn set_io(&self, io: Io) {
        *self.io.lock().unwrap_or_else(PoisonError::into_inner) = Some(io);
    }

    /// The current request's output, silenced or not (a widget's messages are never quiet).
    pub fn request_io(&self) -> Option<Io> {
        self.io.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sets what hears of each cell while the debugger is attached (once; false if set).
    pub fn set_debug_hook(&self, hook: Box<dyn CellDebugHook>) -> bool {
        self.debug_hook.set(hook).is_ok()
    }

    pub fn debug_hook(&self) -> Option<&dyn CellDebugHook> {
        self.debug_hook.get().map(|hook| &**hook)
    }

    /// The current request's output, unless it is silenced.
    pub fn io(&self) -> Option<Io> {
        if self.quiet() {
            return None;
        }
        self.io.lock().unwrap().clone()
    }

    /// Collects stdout (of hidden evals) rather than publish it, until [`Self::take_capture`].
    pub fn start_capture(&self) {
        self.capture.lock().unwrap().replace(String::new());
    }

    /// What was collected since [`Self::start_capture`]; publishing goes on.
    pub fn take_capture(&self) -> String {
        self.capture.lock().unwrap().take().unwrap_or_default()
    }

    /// Publishes stream text for the current cell, or captures stdout for a hidden eval.
    pub fn stream(&self, name: StreamName, text: &str) {
        if text.is_empty() {
            return;
        }
        if name == StreamName::Stdout {
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
        let at = self.leftovers().locations.clone();
        match at {
            Some(at) => std::borrow::Cow::Owned(at.map(text).into_owned()),
            None => std::borrow::Cow::Borrowed(text),
        }
    }

    /// Keeps one stderr line in the cell's bounded tail.
    pub fn keep_stderr(&self, line: &str) {
        let tail = &mut self.leftovers().stderr_tail;
        if tail.len() >= 2 * STDERR_TAIL_LINES {
            tail.drain(..STDERR_TAIL_LINES);
        }
        tail.push(line.to_string());
    }

    /// The cell's last stderr lines, oldest first.
    pub fn stderr_lines(&self) -> Vec<String> {
        let tail = &self.leftovers().stderr_tail;
        tail[tail.len().saturating_sub(STDERR_TAIL_LINES)..].to_vec()
    }
}

/// The notebook's variables: their types after every cell, and short values (read by a hidden
/// cell, only when the debugger's panel asks) as of cell `values_of` (`cells_begun`).
#[derive(Default, Clone)]
pub struct Variables {
    pub types: std::collections::BTreeMap<String, String>,
    pub values: std::collections::BTreeMap<String, String>,
    pub values_of: Option<u64>,
}

/// The variables view, an owner of its own: the worker writes it after each cell, the
/// debugger's panel (on the control task) reads a copy while a cell may run.
#[derive(Default)]
pub struct VariablesView(Mutex<Variables>);

impl VariablesView {
    /// The variable types after a cell (their values are read again when asked).
    pub fn set_types(&self, types: std::collections::BTreeMap<String, String>) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).types = types;
    }

    /// The variables with their values as of cell `values_of` (`cells_begun`).
    pub fn set(&self, variables: Variables) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = variables;
    }

    /// A copy of the variables as the last cell left them.
    pub fn get(&self) -> Variables {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
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

mod life;

#[cfg(test)]
mod tests;
