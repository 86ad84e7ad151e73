use super::*;
use serde_json::json;
use std::sync::mpsc::Receiver;

fn debugger() -> (Debugger, DebugEvents, Receiver<Value>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let events: DebugEvents = Arc::new(move |e| {
        let _ = lock(&tx).send(e);
    });
    (Debugger::new(Arc::new(CellState::default()), Arc::default()), events, rx)
}

fn request(seq: i64, command: &str, arguments: Value) -> Value {
    json!({"seq": seq, "type": "request", "command": command, "arguments": arguments})
}

#[test]
fn jupyter_requests_are_answered_here_without_a_debugger() {
    let (mut d, events, _) = debugger();
    let info = d.handle(&json!({"seq": 0, "type": "request", "command": "debugInfo"}), events.clone());
    assert_eq!(
        (info["success"].clone(), info["request_seq"].clone(), info["command"].clone()),
        (json!(true), json!(0), json!("debugInfo"))
    );
    let body = &info["body"];
    assert_eq!(
        (body["isStarted"].clone(), body["hashMethod"].clone(), body["hashSeed"].clone()),
        (json!(false), json!("Murmur2"), json!(3339675911u32))
    );
    let prefix = body["tmpFilePrefix"].as_str().unwrap().to_string();
    assert!(prefix.ends_with(&format!("dryml_debug_{}/", std::process::id())), "{prefix}");

    // The cell's file, at the path the panel computes: prefix + murmur2(code) + suffix.
    let code = "let x = 42;\nprintln!(\"{}\", x);";
    let dumped = d.handle(&request(1, "dumpCell", json!({"code": code})), events.clone());
    let path = format!("{prefix}2381545989.rs");
    assert_eq!(dumped["body"]["sourcePath"], json!(path));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), code);
    let shown = d.handle(&request(2, "source", json!({"source": {"path": path}})), events.clone());
    assert_eq!(shown["body"]["content"], json!(code));

    // Breakpoints set before the debugger starts are kept and listed.
    let set = d.handle(
        &request(3, "setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": 2}]})),
        events.clone(),
    );
    assert_eq!(set["body"]["breakpoints"], json!([{"verified": false, "line": 2, "source": {"path": path}}]));
    let info = d.handle(&request(4, "debugInfo", json!({})), events.clone());
    assert_eq!(info["body"]["breakpoints"], json!([{"source": path, "breakpoints": [{"line": 2}]}]));

    // The variables the last cell left, read without the engine.
    let mut vars = crate::session::state::Variables::default();
    vars.types.insert("v".into(), "Vec<f32>".into());
    vars.types.insert("model".into(), "Net".into());
    vars.values.insert("v".into(), "[1.5] (len 1)".into());
    d.variables.set(vars);
    let vars = d.handle(&request(5, "inspectVariables", json!({})), events.clone());
    assert_eq!(
        vars["body"]["variables"],
        json!([{"name": "model", "type": "Net", "value": "", "variablesReference": 0}, {"name": "v", "type": "Vec<f32>", "value": "[1.5] (len 1)", "variablesReference": 0}])
    );

    // What cannot be done says so, and what needs lldb-dap says that.
    for (command, says) in [
        ("richInspectVariables", "not supported for Rust"),
        ("next", "the debugger is not started: `next` needs it"),
        ("dumpCell", "dumpCell: `arguments.code` must be"),
    ] {
        let r = d.handle(&request(6, command, json!({})), events.clone());
        assert_eq!(r["success"], false, "{r}");
        assert!(r["message"].as_str().unwrap().contains(says), "{r}");
    }
    assert_eq!(
        d.handle(&request(7, "configurationDone", json!({})), events.clone())["success"],
        true,
        "answered here, as often as it comes"
    );
    drop(d);
    assert!(!Path::new(&prefix).exists(), "the cell files go with the kernel");
}

/// A real lldb-dap attached to a real process (a `sleep`, standing in for evcxr's child).
#[test]
fn lldb_dap_attaches_stops_continues_and_detaches_leaving_the_process_running() {
    assert!(
        adapter::find().is_some(),
        "lldb-dap is missing: install Debian's lldb-19 (tests/run.sh does) or set DRYML_LLDB_DAP"
    );
    let mut target = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let (mut d, events, rx) = debugger();
    d.state.set_child_pid(target.id());
    let init = d.handle(&request(1, "initialize", json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true})), events.clone());
    assert_eq!(init["success"], true, "{init}");
    assert_eq!(
        (init["request_seq"].clone(), init["body"]["exceptionBreakpointFilters"].clone()),
        (json!(1), json!([]))
    );
    let attach = d.handle(&request(2, "attach", json!({})), events.clone());
    assert_eq!(attach["success"], true, "{attach}");
    assert_eq!(d.handle(&request(3, "debugInfo", json!({})), events.clone())["body"]["isStarted"], true);
    let threads = d.handle(&request(4, "threads", json!({})), events.clone());
    assert_eq!(threads["request_seq"], 4);
    let tid = threads["body"]["threads"][0]["id"].as_i64().unwrap();
    assert_eq!(tid, i64::from(target.id()), "lldb's thread ids are the OS's");

    // Paused: a `stopped` event reaches the panel and the thread is listed as stopped. (A pause
    // that lands before lldb-dap has resumed the process after the attach stops nothing: asked
    // again.)
    let stopped = (0..5)
        .find_map(|_| {
            assert_eq!(d.handle(&request(5, "pause", json!({"threadId": tid})), events.clone())["success"], true);
            (0..10).find_map(|_| rx.recv_timeout(Duration::from_millis(200)).ok().filter(|e| e["event"] == "stopped"))
        })
        .expect("a stopped event");
    assert_eq!(stopped["body"]["threadId"], tid);
    assert_eq!(d.handle(&request(6, "debugInfo", json!({})), events.clone())["body"]["stoppedThreads"], json!([tid]));
    let trace = d.handle(&request(7, "stackTrace", json!({"threadId": tid})), events.clone());
    assert!(trace["body"]["stackFrames"].as_array().is_some_and(|f| !f.is_empty()), "{trace}");
    assert_eq!(d.handle(&request(8, "continue", json!({"threadId": tid})), events.clone())["success"], true);

    let bye =
        d.handle(&request(9, "disconnect", json!({"restart": false, "terminateDebuggee": false})), events.clone());
    assert_eq!(bye["success"], true);
    assert_eq!(d.handle(&request(10, "debugInfo", json!({})), events)["body"]["isStarted"], false);
    std::thread::sleep(Duration::from_millis(200));
    assert!(target.try_wait().unwrap().is_none(), "the process that runs cells goes on");
    target.kill().unwrap();
}

/// Started on a `sleep` as the panel starts it; the adapter's pid.
fn attached(d: &mut Debugger, events: &DebugEvents, target: u32) -> u32 {
    d.state.set_child_pid(target);
    let init = d.handle(
        &request(
            1,
            "initialize",
            json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true}),
        ),
        events.clone(),
    );
    assert_eq!(init["success"], true, "{init}");
    assert_eq!(d.handle(&request(2, "attach", json!({})), events.clone())["success"], true);
    d.adapter.as_ref().unwrap().pid()
}

/// The events that came within `wait`.
fn events_within(rx: &Receiver<Value>, wait: Duration) -> Vec<String> {
    let t0 = std::time::Instant::now();
    let mut got = Vec::new();
    while let Some(left) = wait.checked_sub(t0.elapsed()) {
        match rx.recv_timeout(left) {
            Ok(e) => got.push(e["event"].as_str().unwrap_or("").to_string()),
            Err(_) => break,
        }
    }
    got
}

#[test]
fn lldb_dap_that_dies_or_hangs_ends_the_session_and_the_panel_hears_why() {
    let mut target = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let (mut d, events, rx) = debugger();

    // Killed: the panel hears it at once, and the next request says the debugger is off.
    let dap = attached(&mut d, &events, target.id());
    unsafe { libc::kill(dap as i32, libc::SIGKILL) };
    let got = events_within(&rx, Duration::from_secs(3));
    assert!(got.ends_with(&["output".to_string(), "terminated".to_string()]), "{got:?}");
    let r = d.handle(&request(3, "threads", json!({})), events.clone());
    assert!(r["success"] == false && r["message"].as_str().unwrap().contains("not started"), "{r}");
    assert!(!d.state.debugging(), "cells build as without the debugger");

    // Hung: a request waits its limit, fails saying so, and the session ends.
    let dap = attached(&mut d, &events, target.id());
    while rx.try_recv().is_ok() {}
    unsafe { libc::kill(dap as i32, libc::SIGSTOP) };
    let r = d.handle(&request(4, "threads", json!({})), events.clone());
    assert_eq!(r["success"], false);
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("did not answer `threads` within 10 s: the debugging session has ended"),
        "{r}"
    );
    assert_eq!(events_within(&rx, Duration::from_millis(500)), ["output", "terminated"]);
    assert_eq!(d.handle(&request(5, "debugInfo", json!({})), events.clone())["body"]["isStarted"], false);
    assert!(
        !Path::new(&format!("/proc/{dap}")).exists()
            || std::fs::read_to_string(format!("/proc/{dap}/stat")).unwrap().contains(") Z"),
        "the hung lldb-dap is stopped"
    );
    assert!(target.try_wait().unwrap().is_none(), "the process that runs cells lives on");

    // Turned on again, it works.
    attached(&mut d, &events, target.id());
    assert_eq!(
        d.handle(&request(6, "threads", json!({})), events.clone())["body"]["threads"][0]["id"],
        i64::from(target.id())
    );
    target.kill().unwrap();
    target.wait().unwrap();
}

#[test]
fn a_replaced_process_gets_a_new_lldb_dap_at_the_next_cell_and_one_run_elsewhere_says_so() {
    let mut old = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let (mut d, events, rx) = debugger();
    let first = attached(&mut d, &events, old.id());
    old.kill().unwrap();
    old.wait().unwrap();
    let mut new = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    d.state.set_child_pid(new.id());
    d.cell_began("let x = 1;");
    d.cell_built(Path::new("/nonexistent/lib.rs"), &[1]);
    assert_ne!(d.adapter.as_ref().map(Adapter::pid), Some(first), "a new lldb-dap");
    let threads = d.handle(&request(3, "threads", json!({})), events.clone());
    assert_eq!(threads["body"]["threads"][0]["id"], i64::from(new.id()), "{threads}");
    assert!(
        !events_within(&rx, Duration::from_millis(300)).iter().any(|e| e == "terminated" || e == "exited"),
        "the panel's session goes on"
    );
    d.cell_ended();

    // A %%compute cell with a breakpoint: not set, and the user hears why.
    let code = "%%compute\nlet y = 2;";
    d.handle(
        &request(4, "setBreakpoints", json!({"source": {"path": d.cell_path(code)}, "breakpoints": [{"line": 2}]})),
        events.clone(),
    );
    d.cell_began(code);
    let note = d.cell_elsewhere("a `%%compute` cell runs its body in a sandbox process").unwrap();
    assert!(note.contains("does not stop in this cell") && note.contains("sandbox"), "{note}");
    let bp = (0..10)
        .find_map(|_| rx.recv_timeout(Duration::from_millis(200)).ok().filter(|e| e["event"] == "breakpoint"))
        .expect("a breakpoint event");
    assert_eq!(
        (bp["body"]["breakpoint"]["verified"].clone(), bp["body"]["breakpoint"]["line"].clone()),
        (json!(false), json!(2))
    );
    d.cell_began("let z = 3;");
    assert_eq!(d.cell_elsewhere("elsewhere"), None, "a cell without breakpoints says nothing");
    new.kill().unwrap();
    new.wait().unwrap();
}
