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

pub mod adapter;
pub mod murmur2;

use crate::protocol::DebugEvents;
use crate::session::state::CellState;
use adapter::Adapter;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// ipykernel's seed for the cell hash (JupyterLab takes whatever `debugInfo` says).
pub const HASH_SEED: u32 = 0xC70F_6907;
/// How long a forwarded request may take before the panel hears that lldb-dap hangs.
const ANSWER: Duration = Duration::from_secs(10);

/// What the reader thread shares with the bridge.
#[derive(Default)]
struct Shared {
    /// Threads lldb-dap said are stopped.
    stopped: Mutex<BTreeSet<i64>>,
    /// Told when lldb-dap sends `initialized` (the attach handshake waits for it).
    initialized: Mutex<Option<Sender<()>>>,
    /// Where events go: `debug_event`s under the latest debug request.
    events: Mutex<Option<DebugEvents>>,
}

/// The debugger of one kernel: started by the panel's `initialize` and `attach`, ended by its
/// `disconnect`.
pub struct Debugger {
    state: Arc<CellState>,
    prefix: PathBuf,
    adapter: Option<Adapter>,
    attached: bool,
    /// Each source's breakpoints as the panel last set them.
    breakpoints: BTreeMap<String, Value>,
    /// The last cell built while attached.
    loaded: Option<Loaded>,
    shared: Arc<Shared>,
}

/// Where a cell's lines went: the source its library was built from (evcxr's `lib.rs`) and,
/// for each of its lines, the cell's line it holds (0: generated code).
struct Loaded {
    cell: String,
    lib: String,
    lines: Vec<usize>,
}

impl Loaded {
    /// The source's first line that holds the cell's line `line`.
    fn lib_line(&self, line: u64) -> Option<usize> {
        self.lines.iter().position(|&l| l as u64 == line).map(|i| i + 1)
    }

    /// The cell's line a source line holds (generated code: the cell's line before it).
    fn cell_line(&self, lib_line: u64) -> Option<usize> {
        let upto = (lib_line as usize).min(self.lines.len());
        self.lines[..upto].iter().rev().find(|&&l| l > 0).copied()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Debugger {
    /// A debugger, not started, that writes cells under `<tmp>/dryml_debug_<pid>/`.
    pub fn new(state: Arc<CellState>) -> Debugger {
        let prefix = std::env::temp_dir().join(format!("dryml_debug_{}", std::process::id()));
        Debugger { state, prefix, adapter: None, attached: false, breakpoints: BTreeMap::new(), loaded: None, shared: Arc::default() }
    }

    /// A cell's library was built (while attached) and is about to load: its breakpoints are
    /// put where its lines went, to bind as it loads.
    pub fn cell_built(&mut self, code: &str, lib: &Path, lines: &[usize]) {
        let cell = self.cell_path(code).to_string_lossy().into_owned();
        self.loaded = Some(Loaded { cell: cell.clone(), lib: lib.to_string_lossy().into_owned(), lines: lines.to_vec() });
        let bps = self.breakpoints.get(&cell).cloned().unwrap_or(json!([]));
        if let Err(e) = self.push_breakpoints(&bps) {
            tracing::warn!("the cell's breakpoints were not set: {e}");
        }
    }

    /// The cell has ended: its breakpoints are lifted from the source every cell is built
    /// from, so the hidden cells the kernel runs next (built from it too) cannot stop on them.
    pub fn cell_ended(&mut self) {
        if let (Some(a), Some(l)) = (self.adapter.as_ref().filter(|_| self.attached), self.loaded.take()) {
            if let Err(e) = a.request("setBreakpoints", Some(&json!({"source": {"path": l.lib}, "breakpoints": []})), ANSWER) {
                tracing::warn!("the cell's breakpoints were not lifted: {e}");
            }
        }
    }

    /// Sets `bps` (the panel's, on the loaded cell's lines) on the loaded cell's source; the
    /// panel's lines with what lldb-dap made of each.
    fn push_breakpoints(&self, bps: &Value) -> Result<Value, String> {
        let (Some(a), Some(l)) = (self.adapter.as_ref().filter(|_| self.attached), &self.loaded) else {
            return Err("not attached".into());
        };
        let wanted: Vec<(u64, Option<usize>)> = bps.as_array().into_iter().flatten().filter_map(|b| b["line"].as_u64()).map(|line| (line, l.lib_line(line))).collect();
        let lib_bps: Vec<Value> = wanted.iter().filter_map(|(_, at)| *at).map(|at| json!({"line": at})).collect();
        let set = body_of(a.request("setBreakpoints", Some(&json!({"source": {"path": l.lib}, "breakpoints": lib_bps})), ANSWER)?)?;
        let mut answers = set["breakpoints"].as_array().cloned().unwrap_or_default().into_iter();
        let out: Vec<Value> = wanted
            .iter()
            .map(|(line, at)| match at {
                Some(_) => {
                    let mut b = answers.next().unwrap_or(json!({"verified": false}));
                    b["line"] = json!(line);
                    b["source"] = json!({"path": l.cell});
                    b
                }
                None => json!({"verified": false, "line": line, "source": {"path": l.cell}, "message": "no code on this line"}),
            })
            .collect();
        Ok(json!({"breakpoints": out}))
    }

    /// The file the panel names a cell of this code by: prefix, murmur2 of its UTF-8, suffix.
    pub fn cell_path(&self, code: &str) -> PathBuf {
        self.prefix.join(format!("{}.rs", murmur2::murmur2(code.as_bytes(), HASH_SEED)))
    }

    fn started(&self) -> bool {
        self.adapter.is_some() && self.attached
    }

    /// Answers one DAP request (a `debug_request`'s content) with its response.
    pub fn handle(&mut self, req: &Value, events: DebugEvents) -> Value {
        *lock(&self.shared.events) = Some(events);
        let command = req["command"].as_str().unwrap_or("");
        let args = &req["arguments"];
        let body = match command {
            "debugInfo" => Ok(self.info()),
            "dumpCell" => self.dump_cell(args),
            "inspectVariables" => Ok(self.variables()),
            "richInspectVariables" => Err("rich views of variables are not supported for Rust; the Variables panel shows each as text".to_string()),
            "copyToGlobals" => Err("copyToGlobals is not supported for Rust".to_string()),
            // Answered here: lldb-dap resumes a stopped process on it, and the panel may send
            // it after every breakpoint change (jupyterlab#17673). The attach sends its own.
            "configurationDone" => Ok(json!({})),
            // lldb-dap would list every library of the process; the panel wants none.
            "modules" => Ok(json!({"modules": [], "totalModules": 0})),
            "source" => source(args),
            "initialize" => return self.initialize(req),
            "attach" => self.attach(),
            "setBreakpoints" => self.set_breakpoints(args),
            "disconnect" => Ok(self.disconnect()),
            "stackTrace" if self.started() => return self.stack_trace(req),
            "scopes" if self.started() => return self.locals_only(req),
            _ if self.started() => return self.forward(req),
            _ => Err(format!("the debugger is not started: `{command}` needs it (turn it on with the bug icon)")),
        };
        response(req, body)
    }

    fn info(&self) -> Value {
        json!({
            "isStarted": self.started(),
            "hashMethod": "Murmur2",
            "hashSeed": HASH_SEED,
            "tmpFilePrefix": format!("{}{}", self.prefix.display(), std::path::MAIN_SEPARATOR),
            "tmpFileSuffix": ".rs",
            "breakpoints": self.breakpoints.iter().map(|(p, b)| json!({"source": p, "breakpoints": b})).collect::<Vec<_>>(),
            "stoppedThreads": lock(&self.shared.stopped).iter().collect::<Vec<_>>(),
            "richRendering": false,
            "exceptionPaths": [],
            "copyToGlobals": false,
        })
    }

    fn dump_cell(&self, args: &Value) -> Result<Value, String> {
        let code = args["code"].as_str().ok_or("dumpCell: `arguments.code` must be the cell's source (a string)")?;
        let path = self.cell_path(code);
        write_atomically(&path, code).map_err(|e| format!("dumpCell: could not write {}: {e}", path.display()))?;
        Ok(json!({"sourcePath": path}))
    }

    /// The notebook's variables as the last cell left them (names and types; values are not
    /// read while a cell may run).
    fn variables(&self) -> Value {
        let vars = lock(&self.state.variables);
        let list: Vec<Value> = vars.iter().map(|(name, ty)| json!({"name": name, "type": ty, "value": "", "variablesReference": 0})).collect();
        json!({"variables": list})
    }

    fn initialize(&mut self, req: &Value) -> Value {
        if self.adapter.is_none() {
            let Some(program) = adapter::find() else {
                return response(req, Err("lldb-dap was not found: install it (Debian: apt-get install lldb-19) or set DRYML_LLDB_DAP to its path".into()));
            };
            let shared = self.shared.clone();
            match Adapter::start(&program, move |e| on_event(&shared, e)) {
                Ok(a) => self.adapter = Some(a),
                Err(e) => return response(req, Err(format!("{} did not start: {e}", program.display()))),
            }
        }
        let mut reply = self.forward(req);
        // lldb-dap offers C++ exception filters, which mean nothing in Rust.
        if let Some(body) = reply.get_mut("body").and_then(Value::as_object_mut) {
            body.insert("exceptionBreakpointFilters".into(), json!([]));
        }
        reply
    }

    /// Attaches lldb-dap to the process that runs cells, with Rust's formatters, and ends the
    /// DAP handshake itself (the panel sends `attach` with no arguments and no
    /// `configurationDone`): attach, `initialized`, the breakpoints, `configurationDone`.
    fn attach(&mut self) -> Result<Value, String> {
        let adapter = self.adapter.as_ref().ok_or("attach: send `initialize` first")?;
        if self.attached {
            return Ok(json!({}));
        }
        let pid = self.state.child_pid();
        if pid == 0 {
            return Err("attach: no process runs cells yet (the kernel is starting)".into());
        }
        let (tx, rx) = channel();
        *lock(&self.shared.initialized) = Some(tx);
        let attach = adapter.send("attach", Some(&json!({"pid": pid, "initCommands": rust_formatters()})))?;
        rx.recv_timeout(ANSWER).map_err(|_| "attach: lldb-dap did not get ready (no `initialized` event)".to_string())?;
        for (path, bps) in &self.breakpoints {
            adapter.request("setBreakpoints", Some(&json!({"source": {"path": path}, "breakpoints": bps})), ANSWER)?;
        }
        let done = adapter.send("configurationDone", None)?;
        for (rx, what) in [(attach, "attach"), (done, "configurationDone")] {
            let r = adapter::wait(&rx, what, ANSWER)?;
            if r["success"] != true {
                return Err(format!("{what}: {}", r["message"].as_str().unwrap_or("lldb-dap refused")));
            }
        }
        self.attached = true;
        self.state.debugging.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(json!({}))
    }

    /// The stack, its frames in the running cell's library pointed at the cell's own file and
    /// lines; frames with no source (the C library's) are left out, as the panel needs one.
    fn stack_trace(&self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(frames) = r["body"]["stackFrames"].as_array_mut() {
            frames.retain(|f| f["source"]["path"].is_string());
            let n = frames.len();
            r["body"]["totalFrames"] = json!(n);
        }
        if let (Some(l), Some(frames)) = (&self.loaded, r["body"]["stackFrames"].as_array_mut()) {
            for f in frames.iter_mut().filter(|f| f["source"]["path"] == json!(l.lib)) {
                if let Some(line) = f["line"].as_u64().and_then(|n| l.cell_line(n)) {
                    f["line"] = json!(line);
                    f["source"] = json!({"path": l.cell, "name": Path::new(&l.cell).file_name().map(|n| n.to_string_lossy().into_owned())});
                }
            }
        }
        r
    }

    /// The frame's scopes, Locals only: the panel fetches every scope it is given, and a
    /// process's globals and registers are many and slow.
    fn locals_only(&self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(scopes) = r["body"]["scopes"].as_array_mut() {
            scopes.retain(|s| s["presentationHint"] == "locals" || s["name"] == "Locals");
        }
        r
    }

    fn set_breakpoints(&mut self, args: &Value) -> Result<Value, String> {
        let path = args["source"]["path"].as_str().ok_or("setBreakpoints: `arguments.source.path` must name the cell's file")?;
        let bps = args.get("breakpoints").cloned().unwrap_or(json!([]));
        self.breakpoints.insert(path.to_string(), bps.clone());
        if self.started() && self.loaded.as_ref().is_some_and(|l| l.cell == path) {
            return self.push_breakpoints(&bps);
        }
        // Kept until the cell is built while the debugger is on.
        Ok(json!({"breakpoints": bps.as_array().into_iter().flatten().map(|b| json!({"verified": false, "line": b["line"], "source": {"path": path}})).collect::<Vec<_>>()}))
    }

    /// An interrupt came: a cell stopped in the debugger cannot take a signal, so the debugger
    /// lets go of it (the panel hears that it goes on) and the interrupt then reaches it as
    /// any cell's does. The debugging session ends with it.
    pub fn interrupted(&mut self) {
        if !self.started() || lock(&self.shared.stopped).is_empty() {
            return;
        }
        let events = lock(&self.shared.events).clone();
        self.disconnect();
        if let Some(events) = events {
            events(json!({"type": "event", "seq": 0, "event": "continued", "body": {"threadId": 0, "allThreadsContinued": true}}));
            events(json!({"type": "event", "seq": 0, "event": "terminated", "body": {}}));
        }
    }

    /// Detaches (the process that runs cells goes on, its variables kept) and stops lldb-dap.
    fn disconnect(&mut self) -> Value {
        if let Some(a) = self.adapter.take() {
            if self.attached {
                let _ = a.request("disconnect", Some(&json!({"terminateDebuggee": false})), ANSWER);
            }
        }
        self.attached = false;
        self.loaded = None;
        self.state.debugging.store(false, std::sync::atomic::Ordering::SeqCst);
        lock(&self.shared.stopped).clear();
        *lock(&self.shared.events) = None;
        json!({})
    }

    fn forward(&self, req: &Value) -> Value {
        let Some(a) = &self.adapter else { return response(req, Err("the debugger is not started".into())) };
        let command = req["command"].as_str().unwrap_or("");
        match a.request(command, req.get("arguments"), ANSWER) {
            Ok(mut r) => {
                // The panel's numbering, not lldb-dap's.
                r["request_seq"] = req["seq"].clone();
                r["seq"] = json!(0);
                r
            }
            Err(e) => response(req, Err(e)),
        }
    }
}

impl Drop for Debugger {
    fn drop(&mut self) {
        self.disconnect();
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

/// A DAP response to `req`: `success` with its body, or a failure that says why.
fn response(req: &Value, body: Result<Value, String>) -> Value {
    let mut r = json!({"type": "response", "seq": 0, "request_seq": req["seq"], "command": req["command"]});
    match body {
        Ok(b) => {
            r["success"] = json!(true);
            r["body"] = b;
        }
        Err(m) => {
            r["success"] = json!(false);
            r["message"] = json!(m);
        }
    }
    r
}

fn body_of(r: Value) -> Result<Value, String> {
    if r["success"] == true {
        Ok(r.get("body").cloned().unwrap_or(json!({})))
    } else {
        Err(r["message"].as_str().unwrap_or("lldb-dap refused").to_string())
    }
}

/// A cell file's text, for the panel to show a frame in it.
fn source(args: &Value) -> Result<Value, String> {
    let path = args["source"]["path"].as_str().ok_or("source: `arguments.source.path` must name a file")?;
    std::fs::read_to_string(path).map(|content| json!({"content": content})).map_err(|e| format!("source {path}: {e}"))
}

/// What lldb-dap says unasked: `stopped` and `continued` are tracked, `initialized` ends the
/// attach handshake, its console output (the formatters' set-up) stays here; the rest goes to
/// the panel.
fn on_event(shared: &Shared, e: Value) {
    match e["event"].as_str().unwrap_or("") {
        "initialized" => {
            if let Some(tx) = lock(&shared.initialized).take() {
                let _ = tx.send(());
            }
            return;
        }
        "output" => return,
        "stopped" => {
            if let Some(t) = e["body"]["threadId"].as_i64() {
                lock(&shared.stopped).insert(t);
            }
        }
        "continued" => {
            let mut stopped = lock(&shared.stopped);
            match e["body"]["threadId"].as_i64() {
                Some(t) if e["body"]["allThreadsContinued"] != true => {
                    stopped.remove(&t);
                }
                _ => stopped.clear(),
            }
        }
        _ => {}
    }
    if let Some(events) = lock(&shared.events).clone() {
        events(e);
    }
}

/// The toolchain's LLDB formatters for Rust values (what `rust-lldb` loads), when found.
fn rust_formatters() -> Vec<String> {
    let sysroot = std::process::Command::new("rustc").args(["--print", "sysroot"]).output().ok().and_then(|o| String::from_utf8(o.stdout).ok());
    let Some(etc) = sysroot.map(|s| Path::new(s.trim()).join("lib/rustlib/etc")).filter(|e| e.join("lldb_lookup.py").is_file()) else {
        return Vec::new();
    };
    vec![
        format!("command script import \"{}\"", etc.join("lldb_lookup.py").display()),
        format!("command source -s 0 \"{}\"", etc.join("lldb_commands").display()),
    ]
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
