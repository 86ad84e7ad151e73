//! lldb-dap's side of a debugging session: starting it, the attach handshake to evcxr's
//! child (again after the child was replaced), forwarding requests, what it says unasked, and
//! ending it (asked, lost, or on an interrupt), mending the process it leaves.

use super::*;

impl Debugger {
    /// A new lldb-dap, its events going to the panel.
    pub(super) fn start_adapter(&mut self) -> Result<(), String> {
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

    pub(super) fn initialize(&mut self, req: &Value) -> Value {
        self.init_args = req.get("arguments").cloned().unwrap_or_else(dap::empty);
        if self.adapter.is_none() {
            if let Err(e) = self.start_adapter() {
                return response(req, Err(e));
            }
        }
        let mut reply = self.forward(req);
        // lldb-dap offers C++ exception filters, which mean nothing in Rust.
        if let Some(body) = reply.get_mut("body").and_then(Value::as_object_mut) {
            body.insert("exceptionBreakpointFilters".into(), Value::Array(Vec::new()));
        }
        reply
    }

    /// Attaches lldb-dap to the process that runs cells, with Rust's formatters, and ends the
    /// DAP handshake itself (the panel sends `attach` with no arguments and no
    /// `configurationDone`): attach, `initialized`, the breakpoints, `configurationDone`.
    pub(super) fn attach(&mut self) -> Result<Value, String> {
        if self.adapter.is_none() {
            return Err("attach: send `initialize` first".into());
        }
        if self.attached {
            return Ok(dap::empty());
        }
        let pid = self.state.child_pid();
        if pid == 0 {
            return Err("attach: no process runs cells yet (the kernel is starting)".into());
        }
        self.handshake(pid).inspect_err(|_| {
            self.end();
            mend(pid);
        })?;
        Ok(dap::empty())
    }

    /// The attach handshake with the started lldb-dap (initialized).
    pub(super) fn handshake(&mut self, pid: u32) -> Result<(), String> {
        let adapter = self.adapter.as_ref().ok_or("lldb-dap is not started")?;
        // The process to mend if lldb-dap fails from here on.
        self.pid = pid;
        self.shared.pid.store(pid, std::sync::atomic::Ordering::SeqCst);
        self.shared.debuggee_ended.store(false, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = channel();
        *lock(&self.shared.initialized) = Some(tx);
        // An interrupt reaches a running cell as SIGINT, which LLDB would stop on.
        let post = ["process handle SIGINT --pass true --stop false --notify false"];
        let args = dap::value(&dap::Attach { pid, init_commands: rust_formatters(), post_run_commands: &post });
        let attach = adapter.send("attach", Some(&args))?;
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
    pub(super) fn reattach(&mut self, pid: u32) -> Result<(), String> {
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
            events(Event::Continued { thread_id: Some(0), all_threads_continued: true }.to_value());
            events(Event::Terminated {}.to_value());
        }
    }

    /// Detaches (the process that runs cells goes on, its variables kept) and stops lldb-dap.
    pub(super) fn disconnect(&mut self) -> Value {
        if let (Some(a), true) = (&self.adapter, self.attached) {
            let args = dap::value(&dap::Disconnect { terminate_debuggee: false });
            let _ = a.request("disconnect", Some(&args), GOODBYE);
        }
        self.end();
        *lock(&self.shared.events) = None;
        dap::empty()
    }

    /// Ends the debugging session: lldb-dap is stopped and cells build as without it.
    pub(super) fn end(&mut self) {
        self.adapter = None;
        self.shared.pid.store(0, std::sync::atomic::Ordering::SeqCst);
        self.attached = false;
        self.following = false;
        self.loaded = None;
        self.state.set_debugging(false);
        lock(&self.shared.stopped).clear();
    }

    /// Ends the session after lldb-dap failed (`why`), and the panel hears it.
    pub(super) fn lost(&mut self, why: &str) {
        tracing::warn!("{why}");
        self.end();
        mend(self.pid);
        tell_lost(&self.shared, why);
    }

    /// Ends the session if lldb-dap has exited (the panel heard it then), unless it ended with
    /// the process it was attached to: then the next cell's process gets a new one.
    pub(super) fn reap(&mut self) {
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
    pub(super) fn call(&mut self, command: &str, arguments: Option<&Value>) -> Result<Value, String> {
        let a = self.adapter.as_ref().ok_or("the debugger is not started")?;
        a.request(command, arguments, ANSWER).map_err(|e| {
            let why = format!("{e}: the debugging session has ended (turn the debugger on again to start a new one)");
            self.lost(&why);
            why
        })
    }

    pub(super) fn forward(&mut self, req: &Value) -> Value {
        let command = req["command"].as_str().unwrap_or("");
        match self.call(command, req.get("arguments")) {
            Ok(mut r) => {
                // The panel's numbering, not lldb-dap's.
                r["request_seq"] = req["seq"].clone();
                r["seq"] = 0.into();
                r
            }
            Err(e) => response(req, Err(e)),
        }
    }
}

/// Mends process `pid` (0: none) after its debugger died: the breakpoints it left would kill it.
pub(super) fn mend(pid: u32) {
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
pub(super) fn tell_lost(shared: &Shared, why: &str) {
    lock(&shared.stopped).clear();
    shared.tell(Event::Output { category: "important", output: format!("{why}\n") });
    shared.tell(Event::Terminated {});
}

/// What lldb-dap says unasked: `stopped` is tracked (the bridge says `continued` itself),
/// `initialized` ends the attach handshake; its console output (the formatters' set-up), its
/// news of evcxr's libraries and of their breakpoints (on lines of evcxr's source, which the
/// panel does not know) and the end of the process (evcxr starts another, which the next cell
/// attaches to) stay here; the rest goes to the panel.
pub(super) fn on_event(shared: &Shared, e: Value) {
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
pub(super) fn rust_formatters() -> Vec<String> {
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
