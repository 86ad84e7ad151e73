//! The JupyterLab debugger's bridge (DAP requests on the control channel): the requests that
//! are Jupyter's own (`debugInfo`, `dumpCell`, `inspectVariables`, ...) are answered here; the
//! rest go to [`adapter`] (lldb-dap) attached to evcxr's child, the process that runs cells,
//! and its events come back as `debug_event`s on iopub.

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
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Debugger {
    /// A debugger, not started, that writes cells under `<tmp>/dryml_debug_<pid>/`.
    pub fn new(state: Arc<CellState>) -> Debugger {
        let prefix = std::env::temp_dir().join(format!("dryml_debug_{}", std::process::id()));
        Debugger { state, prefix, adapter: None, attached: false, breakpoints: BTreeMap::new(), shared: Arc::default() }
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
        Ok(json!({}))
    }

    fn set_breakpoints(&mut self, args: &Value) -> Result<Value, String> {
        let path = args["source"]["path"].as_str().ok_or("setBreakpoints: `arguments.source.path` must name the cell's file")?;
        let bps = args.get("breakpoints").cloned().unwrap_or(json!([]));
        self.breakpoints.insert(path.to_string(), bps.clone());
        match &self.adapter {
            Some(a) if self.attached => body_of(a.request("setBreakpoints", Some(args), ANSWER)?),
            // Kept until the debugger starts.
            _ => Ok(json!({"breakpoints": bps.as_array().into_iter().flatten().map(|b| json!({"verified": false, "line": b["line"]})).collect::<Vec<_>>()})),
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
