//! The JupyterLab debugger's bridge (DAP requests on the control channel): the requests that
//! are Jupyter's own (`debugInfo`, `dumpCell`, `inspectVariables`, ...) are answered here; the
//! rest go to [`adapter`] (lldb-dap) attached to evcxr's child, the process that runs cells,
//! and its events come back as `debug_event`s on iopub.
//!
//! The panel names a cell by its own file (prefix, murmur2 of the code, `.rs`) and its lines;
//! evcxr builds every cell from one `src/lib.rs`, the cell's lines among generated ones. While
//! attached, cells build with debug info, and as each one's library is about to load the
//! session tells [`Debugger::cell_built`] where its lines went: its breakpoints are set there
//! (binding as it loads) and lifted when it ends, and the frames of its code are told back in
//! the cell's file and lines.
//!
//! lldb-dap that exits or stops answering ends the debugging session (the panel hears why), never
//! the kernel; when evcxr replaces the process that runs cells, the next cell attaches a new
//! lldb-dap to the new one (the old lldb-dap, ended with its process or not, is no loss).

pub mod adapter;
mod attach;
mod cells;
mod dap;
pub mod murmur2;
mod traps;
pub mod values;

use crate::protocol::{dap_response as response, DebugEvents};
use crate::session::state::{CellState, VariablesView};
use adapter::Adapter;
use cells::Loaded;
use dap::{Breakpoint, Event, Request, SourceBreakpoint};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// ipykernel's seed for the cell hash (JupyterLab takes whatever `debugInfo` says).
pub const HASH_SEED: u32 = 0xC70F_6907;
/// How long a request may take before lldb-dap is taken to hang (and the session ends).
const ANSWER: Duration = Duration::from_secs(10);
/// How long a goodbye may take: lldb-dap is stopped after it either way.
const GOODBYE: Duration = Duration::from_secs(2);

/// What the reader thread shares with the bridge.
#[derive(Default)]
struct Shared {
    /// Threads lldb-dap said are stopped.
    stopped: Mutex<BTreeSet<i64>>,
    /// Told when lldb-dap sends `initialized` (the attach handshake waits for it).
    initialized: Mutex<Option<Sender<()>>>,
    /// Where events go: `debug_event`s under the latest debug request.
    events: Mutex<Option<DebugEvents>>,
    /// The process lldb-dap is attached to (0: none).
    pid: std::sync::atomic::AtomicU32,
    /// lldb-dap said that process ended: its own end that follows is no loss.
    debuggee_ended: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Sends an event to the panel (a `debug_event` under the latest debug request), if any.
    fn tell(&self, e: Event) {
        if let Some(events) = lock(&self.events).clone() {
            events(e.to_value());
        }
    }

    /// Whether the process lldb-dap is attached to has ended (lldb-dap said so, or it is gone or
    /// a zombie): lldb-dap's own end that follows is then no loss.
    fn debuggee_gone(&self) -> bool {
        let pid = self.pid.load(std::sync::atomic::Ordering::SeqCst);
        pid != 0 && (self.debuggee_ended.load(std::sync::atomic::Ordering::SeqCst) || !traps::alive(pid))
    }
}

/// The debugger of one kernel: started by the panel's `initialize` and `attach`, ended by its
/// `disconnect`.
pub struct Debugger {
    state: Arc<CellState>,
    /// The notebook's variables as the last cell left them, for the panel between cells.
    variables: Arc<VariablesView>,
    prefix: PathBuf,
    adapter: Option<Adapter>,
    attached: bool,
    /// The process lldb-dap is attached to.
    pid: u32,
    /// The panel's `initialize` arguments, for a new lldb-dap when evcxr replaces its child.
    init_args: Value,
    /// Each source's breakpoints as the panel last set them.
    breakpoints: BTreeMap<String, Vec<SourceBreakpoint>>,
    /// The cells the panel dumped (file, text), oldest first: where earlier cells' functions are.
    dumped: Vec<(String, String)>,
    /// The file of the cell whose request runs (while its code runs in the attached process).
    current: Option<String>,
    /// The last cell built while attached.
    loaded: Option<Loaded>,
    /// lldb-dap ended with the process it was attached to: the session goes on, and the next
    /// cell's process (evcxr starts a new one) gets a new lldb-dap.
    following: bool,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Debugger {
    /// A debugger, not started, that writes cells under `<tmp>/dryml_debug_<pid>/`.
    pub fn new(state: Arc<CellState>, variables: Arc<VariablesView>) -> Debugger {
        let prefix = std::env::temp_dir().join(format!("dryml_debug_{}", std::process::id()));
        Debugger {
            state,
            variables,
            prefix,
            adapter: None,
            attached: false,
            pid: 0,
            init_args: dap::empty(),
            breakpoints: BTreeMap::new(),
            dumped: Vec::new(),
            current: None,
            loaded: None,
            following: false,
            shared: Arc::default(),
        }
    }

    /// The file the panel names a cell of this code by: prefix, murmur2 of its UTF-8, suffix.
    pub fn cell_path(&self, code: &str) -> PathBuf {
        self.prefix.join(format!("{}.rs", murmur2::murmur2(code.as_bytes(), HASH_SEED)))
    }

    fn started(&self) -> bool {
        (self.adapter.is_some() && self.attached) || self.following
    }

    /// Answers one DAP request (a `debug_request`'s content) with its response.
    pub fn handle(&mut self, req: &Value, events: DebugEvents) -> Value {
        *lock(&self.shared.events) = Some(events);
        self.reap();
        let request = Request::of(req);
        let command = request.command.as_str();
        let body = match command {
            "debugInfo" => Ok(self.info()),
            "dumpCell" => self.dump_cell(&request),
            "inspectVariables" => Ok(self.variables()),
            "richInspectVariables" => {
                Err("rich views of variables are not supported for Rust; the Variables panel shows each as text"
                    .to_string())
            }
            "copyToGlobals" => Err("copyToGlobals is not supported for Rust".to_string()),
            // Answered here: lldb-dap resumes a stopped process on it, and the panel may send
            // it after every breakpoint change (jupyterlab#17673). The attach sends its own.
            "configurationDone" => Ok(dap::empty()),
            // lldb-dap would list every library of the process; the panel wants none.
            "modules" => Ok(dap::value(&dap::Modules { modules: [], total_modules: 0 })),
            "source" => source(&request),
            "initialize" => return self.initialize(req),
            "attach" => self.attach(),
            "setBreakpoints" => self.set_breakpoints(&request),
            "disconnect" => Ok(self.disconnect()),
            "stackTrace" if self.started() => return self.stack_trace(req),
            "scopes" if self.started() => return self.locals_only(req),
            "variables" if self.started() => return self.without_evcxrs(req),
            "continue" | "next" | "stepIn" | "stepOut" if self.started() => return self.resume(req, &request),
            _ if self.started() => return self.forward(req),
            _ => Err(format!("the debugger is not started: `{command}` needs it (turn it on with the bug icon)")),
        };
        response(req, body)
    }

    fn info(&self) -> Value {
        let breakpoints = self.breakpoints.iter();
        dap::value(&dap::DebugInfo {
            is_started: self.started(),
            hash_method: "Murmur2",
            hash_seed: HASH_SEED,
            tmp_file_prefix: format!("{}{}", self.prefix.display(), std::path::MAIN_SEPARATOR),
            tmp_file_suffix: ".rs",
            breakpoints: breakpoints.map(|(p, b)| dap::SourceBreakpoints { source: p, breakpoints: b }).collect(),
            stopped_threads: lock(&self.shared.stopped).iter().copied().collect(),
            rich_rendering: false,
            exception_paths: [],
            copy_to_globals: false,
        })
    }

    fn dump_cell(&mut self, req: &Request) -> Result<Value, String> {
        let dap::DumpCell { code } = req.args("`arguments.code` must be the cell's source (a string)")?;
        let path = self.cell_path(&code);
        write_atomically(&path, &code).map_err(|e| format!("dumpCell: could not write {}: {e}", path.display()))?;
        let file = path.to_string_lossy().into_owned();
        self.dumped.retain(|(p, _)| *p != file);
        self.dumped.push((file.clone(), code));
        Ok(dap::value(&dap::Dumped { source_path: file }))
    }

    /// The notebook's variables as the last cell left them: names and types, and the short
    /// values last read (blank where none was).
    fn variables(&self) -> Value {
        let vars = self.variables.get();
        let variables = (vars.types.iter())
            .map(|(name, ty)| {
                let value = vars.values.get(name).map_or("", String::as_str);
                dap::Variable { name, ty, value, variables_reference: 0 }
            })
            .collect();
        dap::value(&dap::Variables { variables })
    }

    /// The stack, its frames in the running cell's library pointed at the cell's own file and
    /// lines; frames with no source (the C library's) are left out, as the panel needs one.
    fn stack_trace(&mut self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(frames) = r["body"]["stackFrames"].as_array_mut() {
            frames.retain(|f| f["source"]["path"].is_string());
            let n = frames.len();
            r["body"]["totalFrames"] = n.into();
        }
        let Some(l) = &self.loaded else { return r };
        let frames = r["body"]["stackFrames"].as_array_mut().into_iter().flatten();
        for f in frames.filter(|f| f["source"]["path"].as_str() == Some(&l.lib)) {
            let lib_line = f["line"].as_u64().unwrap_or(0);
            let at = match l.earlier_cell_line(&self.dumped, lib_line as usize) {
                Some((path, line)) => Some((path.to_string(), line)),
                None => l.cell_line(lib_line).map(|line| (l.cell.clone(), line)),
            };
            if let Some((path, line)) = at {
                f["line"] = line.into();
                let name = Path::new(&path).file_name().map(|n| n.to_string_lossy().into_owned());
                f["source"] = dap::value(&dap::Source { path, name });
            }
        }
        r
    }

    /// The frame's scopes, Locals only: the panel fetches every scope it is given, and a
    /// process's globals and registers are many and slow.
    fn locals_only(&mut self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(scopes) = r["body"]["scopes"].as_array_mut() {
            scopes.retain(|s| s["presentationHint"] == "locals" || s["name"] == "Locals");
        }
        r
    }

    /// Resumes (a continue or a step). The panel hears `continued` from here, before the
    /// process runs, so it reaches iopub ahead of anything the cell then prints and of its idle
    /// (the panel refills its Variables after those); lldb-dap's own `continued` comes from
    /// another thread at any time, even after the cell's idle, and would empty the panel then.
    fn resume(&mut self, req: &Value, request: &Request) -> Value {
        let thread = request.args::<dap::Resume>("").unwrap_or_default().thread_id;
        // lldb-dap's continue resumes every thread; a step, the one it names.
        let all = request.command == "continue" || thread.is_none();
        let resumed: BTreeSet<i64> = {
            let mut stopped = lock(&self.shared.stopped);
            if all {
                std::mem::take(&mut *stopped)
            } else {
                thread.filter(|t| stopped.remove(t)).into_iter().collect()
            }
        };
        let tid = thread.or(resumed.first().copied());
        if !resumed.is_empty() {
            self.tell(Event::Continued { thread_id: tid, all_threads_continued: all });
        }
        let r = self.forward(req);
        if r["success"] != true && self.started() && !resumed.is_empty() {
            // Still stopped where it was: the panel is told so again.
            lock(&self.shared.stopped).extend(&resumed);
            let description = r["message"].as_str().unwrap_or("lldb-dap refused").to_string();
            self.tell(Event::Stopped { reason: "pause", thread_id: tid, all_threads_stopped: true, description });
        }
        r
    }

    /// Sends an event to the panel (a `debug_event` under the latest debug request).
    fn tell(&self, e: Event) {
        self.shared.tell(e);
    }

    /// A scope's or a value's variables, less evcxr's own (its variable store).
    fn without_evcxrs(&mut self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(vars) = r["body"]["variables"].as_array_mut() {
            vars.retain(|v| !v["name"].as_str().is_some_and(|n| n.starts_with("evcxr_")));
        }
        r
    }

    fn set_breakpoints(&mut self, req: &Request) -> Result<Value, String> {
        let dap::SetBreakpoints { source, breakpoints } =
            req.args("`arguments.source.path` must name the cell's file, each breakpoint its `line`")?;
        let path = source.path;
        let unset = breakpoints.iter().map(|b| Breakpoint::unset(&path, b.line, None)).collect();
        self.breakpoints.insert(path.clone(), breakpoints);
        if self.started() && self.loaded.is_some() {
            return self.push_breakpoints(&path);
        }
        // Kept until the cell is built while the debugger is on.
        Ok(dap::value(&dap::Breakpoints { breakpoints: unset }))
    }
}

impl Drop for Debugger {
    fn drop(&mut self) {
        self.disconnect();
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

fn body_of(r: Value) -> Result<Value, String> {
    if r["success"] == true {
        Ok(r.get("body").cloned().unwrap_or_else(dap::empty))
    } else {
        Err(r["message"].as_str().unwrap_or("lldb-dap refused").to_string())
    }
}

/// A cell file's text, for the panel to show a frame in it.
fn source(req: &Request) -> Result<Value, String> {
    let dap::SourceArgs { source } = req.args("`arguments.source.path` must name a file")?;
    let path = source.path;
    std::fs::read_to_string(&path)
        .map(|content| dap::value(&dap::Content { content }))
        .map_err(|e| format!("source {path}: {e}"))
}

/// Writes `text` to `path` whole or not at all (a temporary file renamed over it).
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests;
