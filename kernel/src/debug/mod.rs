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
mod cells;
pub mod murmur2;
mod traps;
pub mod values;

use crate::protocol::{dap_response as response, DebugEvents};
use crate::session::state::{CellState, VariablesView};
use adapter::Adapter;
use cells::Loaded;
use serde_json::{json, Value};
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
    breakpoints: BTreeMap<String, Value>,
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
            init_args: json!({}),
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
        let command = req["command"].as_str().unwrap_or("");
        let args = &req["arguments"];
        let body = match command {
            "debugInfo" => Ok(self.info()),
            "dumpCell" => self.dump_cell(args),
            "inspectVariables" => Ok(self.variables()),
            "richInspectVariables" => {
                Err("rich views of variables are not supported for Rust; the Variables panel shows each as text"
                    .to_string())
            }
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
            "variables" if self.started() => return self.without_evcxrs(req),
            "continue" | "next" | "stepIn" | "stepOut" if self.started() => return self.resume(req),
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

    fn dump_cell(&mut self, args: &Value) -> Result<Value, String> {
        let code = args["code"].as_str().ok_or("dumpCell: `arguments.code` must be the cell's source (a string)")?;
        let path = self.cell_path(code);
        write_atomically(&path, code).map_err(|e| format!("dumpCell: could not write {}: {e}", path.display()))?;
        let file = path.to_string_lossy().into_owned();
        self.dumped.retain(|(p, _)| *p != file);
        self.dumped.push((file, code.to_string()));
        Ok(json!({"sourcePath": path}))
    }

    /// The notebook's variables as the last cell left them: names and types, and the short
    /// values last read (blank where none was).
    fn variables(&self) -> Value {
        let vars = self.variables.get();
        let list: Vec<Value> = vars
            .types
            .iter()
            .map(|(name, ty)| json!({"name": name, "type": ty, "value": vars.values.get(name).map_or("", String::as_str), "variablesReference": 0}))
            .collect();
        json!({"variables": list})
    }

    /// A new lldb-dap, its events going to the panel.
    fn start_adapter(&mut self) -> Result<(), String> {
        let program = adapter::find().ok_or(
            "lldb-dap was not found: install it (Debian: apt-get install lldb-19) or set DRYML_LLDB_DAP to its path",
        )?;
        let (on_events, on_exit) = (self.shared.clone(), self.shared.clone());
        let a = Adapter::start(
            &program,
            move |e| on_event(&on_events, e),
            move || {
                let pid = on_exit.pid.load(std::sync::atomic::Ordering::SeqCst);
                if on_exit.debuggee_gone() {
                    return tracing::info!("lldb-dap ended with process {pid}: the next one gets another");
                }
                mend(pid);
                tell_lost(
                    &on_exit,
                    "lldb-dap exited: the debugging session has ended (turn the debugger on again to start a new one)",
                )
            },
        );
        self.adapter = Some(a.map_err(|e| format!("{} did not start: {e}", program.display()))?);
        Ok(())
    }

    fn initialize(&mut self, req: &Value) -> Value {
        self.init_args = req.get("arguments").cloned().unwrap_or(json!({}));
        if self.adapter.is_none() {
            if let Err(e) = self.start_adapter() {
                return response(req, Err(e));
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
        if self.adapter.is_none() {
            return Err("attach: send `initialize` first".into());
        }
        if self.attached {
            return Ok(json!({}));
        }
        let pid = self.state.child_pid();
        if pid == 0 {
            return Err("attach: no process runs cells yet (the kernel is starting)".into());
        }
        self.handshake(pid).inspect_err(|_| {
            self.end();
            mend(pid);
        })?;
        Ok(json!({}))
    }

    /// The attach handshake with the started lldb-dap (initialized).
    fn handshake(&mut self, pid: u32) -> Result<(), String> {
        let adapter = self.adapter.as_ref().ok_or("lldb-dap is not started")?;
        // The process to mend if lldb-dap fails from here on.
        self.pid = pid;
        self.shared.pid.store(pid, std::sync::atomic::Ordering::SeqCst);
        self.shared.debuggee_ended.store(false, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = channel();
        *lock(&self.shared.initialized) = Some(tx);
        // An interrupt reaches a running cell as SIGINT, which LLDB would stop on.
        let post = ["process handle SIGINT --pass true --stop false --notify false"];
        let attach = adapter
            .send("attach", Some(&json!({"pid": pid, "initCommands": rust_formatters(), "postRunCommands": post})))?;
        rx.recv_timeout(ANSWER)
            .map_err(|_| "attach: lldb-dap did not get ready (no `initialized` event)".to_string())?;
        let done = adapter.send("configurationDone", None)?;
        for (rx, what) in [(attach, "attach"), (done, "configurationDone")] {
            let r = adapter::wait(&rx, what, ANSWER)?;
            if r["success"] != true {
                return Err(format!("{what}: {}", r["message"].as_str().unwrap_or("lldb-dap refused")));
            }
        }
        self.attached = true;
        self.following = false;
        self.state.set_debugging(true);
        Ok(())
    }

    /// A new lldb-dap attached to `pid`, evcxr's new process that runs cells, as the panel
    /// started the last one (the old one's process is gone).
    fn reattach(&mut self, pid: u32) -> Result<(), String> {
        self.shared.pid.store(0, std::sync::atomic::Ordering::SeqCst);
        self.adapter = None;
        self.attached = false;
        lock(&self.shared.stopped).clear();
        self.start_adapter()?;
        let init_args = self.init_args.clone();
        body_of(self.adapter.as_ref().expect("started").request("initialize", Some(&init_args), ANSWER)?)?;
        self.handshake(pid)?;
        tracing::info!("the debugger follows evcxr's new process {pid}");
        Ok(())
    }

    /// The stack, its frames in the running cell's library pointed at the cell's own file and
    /// lines; frames with no source (the C library's) are left out, as the panel needs one.
    fn stack_trace(&mut self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(frames) = r["body"]["stackFrames"].as_array_mut() {
            frames.retain(|f| f["source"]["path"].is_string());
            let n = frames.len();
            r["body"]["totalFrames"] = json!(n);
        }
        let Some(l) = &self.loaded else { return r };
        for f in r["body"]["stackFrames"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .filter(|f| f["source"]["path"] == json!(l.lib))
        {
            let lib_line = f["line"].as_u64().unwrap_or(0);
            let at = match l.earlier_cell_line(&self.dumped, lib_line as usize) {
                Some((path, line)) => Some((path.to_string(), line)),
                None => l.cell_line(lib_line).map(|line| (l.cell.clone(), line)),
            };
            if let Some((path, line)) = at {
                f["line"] = json!(line);
                f["source"] = json!({"path": path, "name": Path::new(&path).file_name().map(|n| n.to_string_lossy().into_owned())});
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
    fn resume(&mut self, req: &Value) -> Value {
        let thread = req["arguments"]["threadId"].as_i64();
        // lldb-dap's continue resumes every thread; a step, the one it names.
        let all = req["command"] == "continue" || thread.is_none();
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
            self.tell(json!({"type": "event", "seq": 0, "event": "continued", "body": {"threadId": tid, "allThreadsContinued": all}}));
        }
        let r = self.forward(req);
        if r["success"] != true && self.started() && !resumed.is_empty() {
            // Still stopped where it was: the panel is told so again.
            lock(&self.shared.stopped).extend(&resumed);
            let why = r["message"].as_str().unwrap_or("lldb-dap refused").to_string();
            self.tell(json!({"type": "event", "seq": 0, "event": "stopped", "body": {"reason": "pause", "threadId": tid, "allThreadsStopped": true, "description": why}}));
        }
        r
    }

    /// Sends an event to the panel (a `debug_event` under the latest debug request).
    fn tell(&self, e: Value) {
        if let Some(events) = lock(&self.shared.events).clone() {
            events(e);
        }
    }

    /// A scope's or a value's variables, less evcxr's own (its variable store).
    fn without_evcxrs(&mut self, req: &Value) -> Value {
        let mut r = self.forward(req);
        if let Some(vars) = r["body"]["variables"].as_array_mut() {
            vars.retain(|v| !v["name"].as_str().is_some_and(|n| n.starts_with("evcxr_")));
        }
        r
    }

    fn set_breakpoints(&mut self, args: &Value) -> Result<Value, String> {
        let path = args["source"]["path"]
            .as_str()
            .ok_or("setBreakpoints: `arguments.source.path` must name the cell's file")?;
        let bps = args.get("breakpoints").cloned().unwrap_or(json!([]));
        self.breakpoints.insert(path.to_string(), bps.clone());
        if self.started() && self.loaded.is_some() {
            return self.push_breakpoints(path);
        }
        // Kept until the cell is built while the debugger is on.
        Ok(
            json!({"breakpoints": bps.as_array().into_iter().flatten().map(|b| json!({"verified": false, "line": b["line"], "source": {"path": path}})).collect::<Vec<_>>()}),
        )
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
            events(
                json!({"type": "event", "seq": 0, "event": "continued", "body": {"threadId": 0, "allThreadsContinued": true}}),
            );
            events(json!({"type": "event", "seq": 0, "event": "terminated", "body": {}}));
        }
    }

    /// Detaches (the process that runs cells goes on, its variables kept) and stops lldb-dap.
    fn disconnect(&mut self) -> Value {
        if let (Some(a), true) = (&self.adapter, self.attached) {
            let _ = a.request("disconnect", Some(&json!({"terminateDebuggee": false})), GOODBYE);
        }
        self.end();
        *lock(&self.shared.events) = None;
        json!({})
    }

    /// Ends the debugging session: lldb-dap is stopped and cells build as without it.
    fn end(&mut self) {
        self.adapter = None;
        self.shared.pid.store(0, std::sync::atomic::Ordering::SeqCst);
        self.attached = false;
        self.following = false;
        self.loaded = None;
        self.state.set_debugging(false);
        lock(&self.shared.stopped).clear();
    }

    /// Ends the session after lldb-dap failed (`why`), and the panel hears it.
    fn lost(&mut self, why: &str) {
        tracing::warn!("{why}");
        self.end();
        mend(self.pid);
        tell_lost(&self.shared, why);
    }

    /// Ends the session if lldb-dap has exited (the panel heard it then), unless it ended with
    /// the process it was attached to: then the next cell's process gets a new one.
    fn reap(&mut self) {
        if self.adapter.as_ref().is_some_and(Adapter::gone) {
            if self.attached && self.shared.debuggee_gone() {
                self.adapter = None;
                self.attached = false;
                self.loaded = None;
                self.following = true;
            } else {
                self.end();
            }
        }
    }

    /// A request to lldb-dap; one it does not answer (it hangs or has exited) ends the session.
    fn call(&mut self, command: &str, arguments: Option<&Value>) -> Result<Value, String> {
        let a = self.adapter.as_ref().ok_or("the debugger is not started")?;
        a.request(command, arguments, ANSWER).map_err(|e| {
            let why = format!("{e}: the debugging session has ended (turn the debugger on again to start a new one)");
            self.lost(&why);
            why
        })
    }

    fn forward(&mut self, req: &Value) -> Value {
        let command = req["command"].as_str().unwrap_or("");
        match self.call(command, req.get("arguments")) {
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

/// Mends process `pid` (0: none) after its debugger died: the breakpoints it left would kill it.
fn mend(pid: u32) {
    if pid == 0 {
        return;
    }
    match traps::lift(pid, Duration::from_secs(3)) {
        Ok(n) => tracing::info!("process {pid}: {n} breakpoints left by the dead debugger lifted"),
        Err(e) => tracing::warn!("process {pid}: the breakpoints left by the dead debugger were not lifted: {e}"),
    }
}

/// Tells the panel that the session ended unasked, and why (an `output` it shows, then
/// `terminated`).
fn tell_lost(shared: &Shared, why: &str) {
    lock(&shared.stopped).clear();
    if let Some(events) = lock(&shared.events).clone() {
        events(
            json!({"type": "event", "seq": 0, "event": "output", "body": {"category": "important", "output": format!("{why}\n")}}),
        );
        events(json!({"type": "event", "seq": 0, "event": "terminated", "body": {}}));
    }
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

/// What lldb-dap says unasked: `stopped` is tracked (the bridge says `continued` itself),
/// `initialized` ends the attach handshake; its console output (the formatters' set-up), its
/// news of evcxr's libraries and of their breakpoints (on lines of evcxr's source, which the
/// panel does not know) and the end of the process (evcxr starts another, which the next cell
/// attaches to) stay here; the rest goes to the panel.
fn on_event(shared: &Shared, e: Value) {
    match e["event"].as_str().unwrap_or("") {
        "initialized" => {
            if let Some(tx) = lock(&shared.initialized).take() {
                let _ = tx.send(());
            }
            return;
        }
        "exited" | "terminated" => {
            shared.debuggee_ended.store(true, std::sync::atomic::Ordering::SeqCst);
            lock(&shared.stopped).clear();
            return;
        }
        "output" | "module" | "breakpoint" | "process" => return,
        "stopped" => {
            if let Some(t) = e["body"]["threadId"].as_i64() {
                lock(&shared.stopped).insert(t);
            }
        }
        // The bridge tells the panel itself when a thread goes on (`Debugger::resume`). lldb-dap
        // says it from its event thread after it has answered, under load after the cell's
        // idle, and the panel would then empty its Variables for good.
        "continued" => return,
        _ => {}
    }
    if let Some(events) = lock(&shared.events).clone() {
        events(e);
    }
}

/// The toolchain's LLDB formatters for Rust values (what `rust-lldb` loads), when found.
fn rust_formatters() -> Vec<String> {
    let sysroot = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok());
    let Some(etc) =
        sysroot.map(|s| Path::new(s.trim()).join("lib/rustlib/etc")).filter(|e| e.join("lldb_lookup.py").is_file())
    else {
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
