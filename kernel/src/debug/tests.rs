use super::*;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;

fn debugger() -> (Debugger, DebugEvents, Receiver<Value>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let events: DebugEvents = Arc::new(move |e| {
        let _ = lock(&tx).send(e);
    });
    (Debugger::new(Arc::new(CellState::default())), events, rx)
}

fn request(seq: i64, command: &str, arguments: Value) -> Value {
    json!({"seq": seq, "type": "request", "command": command, "arguments": arguments})
}

#[test]
fn jupyter_requests_are_answered_here_without_a_debugger() {
    let (mut d, events, _) = debugger();
    let info = d.handle(&json!({"seq": 0, "type": "request", "command": "debugInfo"}), events.clone());
    assert_eq!((info["success"].clone(), info["request_seq"].clone(), info["command"].clone()), (json!(true), json!(0), json!("debugInfo")));
    let body = &info["body"];
    assert_eq!((body["isStarted"].clone(), body["hashMethod"].clone(), body["hashSeed"].clone()), (json!(false), json!("Murmur2"), json!(3339675911u32)));
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
    let set = d.handle(&request(3, "setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": 2}]})), events.clone());
    assert_eq!(set["body"]["breakpoints"], json!([{"verified": false, "line": 2, "source": {"path": path}}]));
    let info = d.handle(&request(4, "debugInfo", json!({})), events.clone());
    assert_eq!(info["body"]["breakpoints"], json!([{"source": path, "breakpoints": [{"line": 2}]}]));

    // The variables the last cell left, read without the engine.
    d.state.variables.lock().unwrap().insert("v".into(), "Vec<f32>".into());
    let vars = d.handle(&request(5, "inspectVariables", json!({})), events.clone());
    assert_eq!(vars["body"]["variables"], json!([{"name": "v", "type": "Vec<f32>", "value": "", "variablesReference": 0}]));

    // What cannot be done says so, and what needs lldb-dap says that.
    for (command, says) in [("richInspectVariables", "not supported for Rust"), ("next", "the debugger is not started: `next` needs it"), ("dumpCell", "dumpCell: `arguments.code` must be")] {
        let r = d.handle(&request(6, command, json!({})), events.clone());
        assert_eq!(r["success"], false, "{r}");
        assert!(r["message"].as_str().unwrap().contains(says), "{r}");
    }
    assert_eq!(d.handle(&request(7, "configurationDone", json!({})), events.clone())["success"], true, "answered here, as often as it comes");
    drop(d);
    assert!(!Path::new(&prefix).exists(), "the cell files go with the kernel");
}

/// A real lldb-dap attached to a real process (a `sleep`, standing in for evcxr's child).
#[test]
fn lldb_dap_attaches_stops_continues_and_detaches_leaving_the_process_running() {
    assert!(adapter::find().is_some(), "lldb-dap is missing: install Debian's lldb-19 (tests/run.sh does) or set DRYML_LLDB_DAP");
    let mut target = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let (mut d, events, rx) = debugger();
    d.state.child_pid.store(target.id(), Ordering::SeqCst);
    let init = d.handle(&request(1, "initialize", json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true})), events.clone());
    assert_eq!(init["success"], true, "{init}");
    assert_eq!((init["request_seq"].clone(), init["body"]["exceptionBreakpointFilters"].clone()), (json!(1), json!([])));
    let attach = d.handle(&request(2, "attach", json!({})), events.clone());
    assert_eq!(attach["success"], true, "{attach}");
    assert_eq!(d.handle(&request(3, "debugInfo", json!({})), events.clone())["body"]["isStarted"], true);
    let threads = d.handle(&request(4, "threads", json!({})), events.clone());
    assert_eq!(threads["request_seq"], 4);
    let tid = threads["body"]["threads"][0]["id"].as_i64().unwrap();
    assert_eq!(tid, i64::from(target.id()), "lldb's thread ids are the OS's");

    // Paused: a `stopped` event reaches the panel and the thread is listed as stopped.
    assert_eq!(d.handle(&request(5, "pause", json!({"threadId": tid})), events.clone())["success"], true);
    let stopped = (0..50).find_map(|_| rx.recv_timeout(Duration::from_millis(200)).ok().filter(|e| e["event"] == "stopped")).expect("a stopped event");
    assert_eq!(stopped["body"]["threadId"], tid);
    assert_eq!(d.handle(&request(6, "debugInfo", json!({})), events.clone())["body"]["stoppedThreads"], json!([tid]));
    let trace = d.handle(&request(7, "stackTrace", json!({"threadId": tid})), events.clone());
    assert!(trace["body"]["stackFrames"].as_array().is_some_and(|f| !f.is_empty()), "{trace}");
    assert_eq!(d.handle(&request(8, "continue", json!({"threadId": tid})), events.clone())["success"], true);

    let bye = d.handle(&request(9, "disconnect", json!({"restart": false, "terminateDebuggee": false})), events.clone());
    assert_eq!(bye["success"], true);
    assert_eq!(d.handle(&request(10, "debugInfo", json!({})), events)["body"]["isStarted"], false);
    std::thread::sleep(Duration::from_millis(200));
    assert!(target.try_wait().unwrap().is_none(), "the process that runs cells goes on");
    target.kill().unwrap();
}
