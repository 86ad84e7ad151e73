//! The debugger bridge in the real kernel (evcxr's child runs the cells) with a real lldb-dap,
//! driven over ZeroMQ as JupyterLab drives it: `debugInfo`, `dumpCell` at the path the panel
//! computes, the Variables panel while not stopped, `initialize` and `attach` to the process
//! that runs cells, cells run while attached, `disconnect` with the variables kept.

use crate::frontend::{connection_info, parent_id, Frontend, Sock};
use dryml_kernel::debug::{murmur2::murmur2, HASH_SEED};
use serde_json::{json, Value};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const FIRST_CELL: Duration = Duration::from_secs(300);

struct RealKernel {
    f: Frontend,
    child: Child,
    _dir: tempfile::TempDir,
    seq: i64,
    /// The `debug_event`s read so far, in order.
    events: Vec<Value>,
}

impl RealKernel {
    fn start() -> RealKernel {
        let dir = tempfile::tempdir().unwrap();
        let info = connection_info(dir.path());
        let file = dir.path().join("connection.json");
        std::fs::write(&file, serde_json::to_vec(&info).unwrap()).unwrap();
        let child = Command::new(super::own_bin("dryml-kernel", env!("CARGO_BIN_EXE_dryml-kernel")))
            .arg("-f")
            .arg(&file)
            .env("DRYML_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .env("DRYML_HISTORY_FILE", dir.path().join("history.sqlite"))
            .env("DRYML_NO_WARM_UP", "1")
            // Its own analysis process, as each kernel of tests/conftest.py: these tests run
            // at once, and a kernel's analysis waits behind another's in a shared one.
            .env("DRYML_ANALYSIS_DIR", dir.path())
            .env("DRYML_LOG", "info,salsa=warn")
            .stderr(std::fs::File::create(dir.path().join("kernel.log")).unwrap())
            .spawn()
            .unwrap();
        // Its ipc endpoints exist once it has bound them.
        let t0 = Instant::now();
        while !(1..=5).all(|p| dir.path().join(format!("k-{p}")).exists()) {
            assert!(t0.elapsed() < Duration::from_secs(30), "the kernel did not bind its sockets");
            std::thread::sleep(Duration::from_millis(50));
        }
        RealKernel { f: Frontend::connect(&info), child, _dir: dir, seq: 0, events: Vec::new() }
    }

    /// Runs a cell; its `execute_result` text (or stdout), and whether it went well.
    fn run(&mut self, code: &str) -> (String, Value) {
        let id = self.f.send_execute_request(code);
        let mut text = String::new();
        loop {
            let m = self.f.recv_iopub_within(FIRST_CELL);
            if m.msg_type() == "debug_event" {
                self.events.push(m.content.clone());
            }
            if parent_id(&m) != id {
                continue;
            }
            match m.msg_type() {
                "execute_result" => text.push_str(m.content["data"]["text/plain"].as_str().unwrap_or("")),
                "stream" => text.push_str(m.content["text"].as_str().unwrap_or("")),
                "status" if m.content["execution_state"] == "idle" => break,
                _ => {}
            }
        }
        let reply = self.f.recv_shell_execute_reply(&id);
        (text, reply)
    }

    /// A DAP request on control, as the panel sends it: busy, its `debug_reply`, idle.
    fn debug(&mut self, command: &str, arguments: Value) -> Value {
        self.seq += 1;
        let id = self.f.send(
            Sock::Control,
            "debug_request",
            json!({"seq": self.seq, "type": "request", "command": command, "arguments": arguments}),
        );
        let mut states = Vec::new();
        let reply = self.f.recv_control_reply(&id, "debug_reply");
        while states.last().map(String::as_str) != Some("idle") {
            let m = self.f.recv_iopub();
            if m.msg_type() == "debug_event" {
                self.events.push(m.content.clone());
            }
            if parent_id(&m) == id && m.msg_type() == "status" {
                states.push(m.content["execution_state"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(states, ["busy", "idle"], "{command}: the panel waits for the idle");
        assert_eq!(
            (reply["request_seq"].clone(), reply["command"].clone()),
            (json!(self.seq), json!(command)),
            "{reply}"
        );
        reply
    }

    /// The next `event` lldb-dap sends (one already read counts), skipping other iopub
    /// messages (a running cell's).
    fn wait_event(&mut self, event: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["event"] == event) {
            return self.events.remove(i);
        }
        loop {
            let m = self.f.recv_iopub_within(FIRST_CELL);
            if m.msg_type() == "debug_event" {
                if m.content["event"] == event {
                    return m.content;
                }
                self.events.push(m.content.clone());
            }
            // A cell that ends before it stops will not stop: say so now, not after a wait.
            let cell_ended = m.msg_type() == "status"
                && m.content["execution_state"] == "idle"
                && m.parent_header["msg_type"] == "execute_request";
            assert!(!(event == "stopped" && cell_ended), "the cell ended without stopping; events: {:?}", self.events);
        }
    }

    /// On a failure: the logs (the kernel's, its analysis process's) and the kernel's processes
    /// (cargo, rustc, lldb-dap, the one that runs cells: stopped or not), for CI's output.
    fn tell_state(&self) {
        let logs = std::fs::read_dir(self._dir.path()).into_iter().flatten().flatten().map(|e| e.path());
        for log in logs.filter(|p| p.extension().is_some_and(|x| x == "log")) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("--- {}, last 40 lines:\n{tail}", log.display());
        }
        let ps = Command::new("ps").args(["-eo", "pid=,ppid=,stat=,etimes=,wchan:20=,args="]).output();
        let ps = ps.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        let rows: Vec<(u32, u32, &str)> = ps
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?, l))
            })
            .collect();
        let mut ours = vec![self.child.id()];
        let mut i = 0;
        while i < ours.len() {
            let parent = ours[i];
            ours.extend(rows.iter().filter(|r| r.1 == parent).map(|r| r.0));
            i += 1;
        }
        let tree: Vec<&str> = rows.iter().filter(|r| ours.contains(&r.0)).map(|r| r.2).collect();
        eprintln!("--- its processes (pid ppid stat seconds wchan args):\n{}", tree.join("\n"));
    }

    /// Reads what iopub still holds (lldb-dap's late events), so the frontend ends drained.
    fn drain(&mut self) {
        while let Ok(m) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.f.recv_iopub_within(Duration::from_millis(300))
        })) {
            assert_eq!(m.msg_type(), "debug_event", "only debug events are left: {:?}", m.content);
        }
    }
}

impl Drop for RealKernel {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.tell_state();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_panel_inspects_dumps_attaches_and_detaches_while_cells_run_and_keep_their_variables() {
    assert!(
        dryml_kernel::debug::adapter::find().is_some(),
        "lldb-dap is missing: install Debian's lldb-19 (tests/run.sh does)"
    );
    let mut k = RealKernel::start();
    let (_, reply) = k.run("let x = 5;\nlet v = vec![1.5f32, 2.5];");
    assert_eq!(reply["status"], "ok", "{reply}");

    let info = k.debug("debugInfo", json!({}));
    let body = &info["body"];
    assert_eq!(
        (
            body["isStarted"].clone(),
            body["hashMethod"].clone(),
            body["hashSeed"].clone(),
            body["tmpFileSuffix"].clone()
        ),
        (json!(false), json!("Murmur2"), json!(HASH_SEED), json!(".rs"))
    );
    let prefix = body["tmpFilePrefix"].as_str().unwrap().to_string();

    // The Variables panel, while no cell is stopped: what the last cell left.
    let vars = k.debug("inspectVariables", json!({}))["body"]["variables"].clone();
    let named: Vec<(String, String)> = vars
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().into(), v["type"].as_str().unwrap().into()))
        .collect();
    assert_eq!(named, [("v".to_string(), "Vec<f32>".to_string()), ("x".to_string(), "i32".to_string())]);
    // A value of the notebook's own type, to outlive the debugger's build flags.
    assert_eq!(k.run("struct G(u32);\nlet g = G(7);").1["status"], "ok");

    // The cell's file where the panel looks for it.
    let code = "let y = x + 1;\ny";
    let dumped = k.debug("dumpCell", json!({"code": code}));
    let path = format!("{prefix}{}.rs", murmur2(code.as_bytes(), HASH_SEED));
    assert_eq!(dumped["body"]["sourcePath"], json!(path));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), code);

    // The bug icon: initialize, attach (to evcxr's child, not the kernel).
    let init = k.debug("initialize", json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true, "supportsVariableType": true}));
    assert_eq!(init["success"], true, "{init}");
    let attach = k.debug("attach", json!({}));
    assert_eq!(attach["success"], true, "{attach}");
    assert_eq!(k.debug("debugInfo", json!({}))["body"]["isStarted"], true);
    let threads = k.debug("threads", json!({}));
    let kernel_pid = i64::from(k.child.id());
    let ids: Vec<i64> =
        threads["body"]["threads"].as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect();
    assert!(!ids.is_empty() && !ids.contains(&kernel_pid), "the child's threads, not the kernel's: {ids:?}");

    // Cells run under the debugger, and the panel's requests are answered while they do.
    let (text, reply) = k.run(code);
    assert_eq!((reply["status"].as_str(), text.as_str()), (Some("ok"), "6"), "{reply}");
    assert_eq!(k.debug("configurationDone", json!({}))["success"], true, "answered here, never resuming anything");
    assert_eq!(k.run("g.0").0, "7", "built for the debugger, the cell reads the notebook's own type");

    let bye = k.debug("disconnect", json!({"restart": false, "terminateDebuggee": false}));
    assert_eq!(bye["success"], true, "{bye}");
    let (text, _) = k.run("format!(\"{} {:?} {}\", y, v, g.0)");
    assert_eq!(text, "\"6 [1.5, 2.5] 7\"", "the variables outlive the debugging session");
    k.drain();
}

#[test]
fn a_breakpoint_in_a_cell_stops_it_on_its_line_with_its_variables_then_steps_and_continues() {
    let mut k = RealKernel::start();
    let (_, reply) = k.run("let greeting = String::from(\"hi\");");
    assert_eq!(reply["status"], "ok", "{reply}");
    assert_eq!(k.debug("initialize", json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true}))["success"], true);
    assert_eq!(k.debug("attach", json!({}))["success"], true);

    // The panel: the cell's file, a breakpoint in its gutter on line 3, then the cell runs.
    let code = "let x = 5;\nlet v = vec![1.5f32, 2.5];\nlet y = x + 1;\nlet z = y * 2;\nz";
    let path = k.debug("dumpCell", json!({"code": code}))["body"]["sourcePath"].as_str().unwrap().to_string();
    let set = k.debug(
        "setBreakpoints",
        json!({"source": {"path": path}, "breakpoints": [{"line": 3}], "sourceModified": false}),
    );
    assert_eq!(set["body"]["breakpoints"][0]["line"], 3, "{set}");
    let id = k.f.send_execute_request(code);
    let stopped = k.wait_event("stopped");
    assert_eq!(stopped["body"]["reason"], "breakpoint", "{stopped}");
    let tid = stopped["body"]["threadId"].clone();

    // Where it stopped: the cell's own file and line, in the cell's function.
    let trace = k.debug("stackTrace", json!({"threadId": tid}));
    let top = trace["body"]["stackFrames"][0].clone();
    assert_eq!((top["source"]["path"].as_str(), top["line"].as_u64()), (Some(path.as_str()), Some(3)), "{trace}");
    assert!(top["name"].as_str().unwrap().contains("run_user_code"), "{top}");
    let scopes = k.debug("scopes", json!({"frameId": top["id"]}))["body"]["scopes"].clone();
    assert_eq!(scopes.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(), ["Locals"]);
    let locals = k.debug("variables", json!({"variablesReference": scopes[0]["variablesReference"]}))["body"]
        ["variables"]
        .clone();
    let local = |name: &str| {
        locals
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no local {name}: {locals}"))
    };
    assert_eq!(local("x")["value"], "5");
    let v = local("v");
    // LLDB names Rust types in its C-like way (`alloc::vec::Vec<float, ...>`).
    assert!(v["type"].as_str().unwrap().contains("Vec<") && v["value"] == "size=2", "{v}");
    let items =
        k.debug("variables", json!({"variablesReference": v["variablesReference"]}))["body"]["variables"].clone();
    let values: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["1.5", "2.5"], "the Vec's elements, through Rust's formatters: {items}");

    // A step to line 4, then on to the end.
    assert_eq!(k.debug("next", json!({"threadId": tid}))["success"], true);
    let stepped = k.wait_event("stopped");
    let trace = k.debug("stackTrace", json!({"threadId": stepped["body"]["threadId"]}));
    assert_eq!(trace["body"]["stackFrames"][0]["line"], 4, "{trace}");
    assert_eq!(k.debug("continue", json!({"threadId": tid}))["success"], true);
    let (text, reply) = k.finish(&id);
    assert_eq!((reply["status"].as_str(), text.as_str()), (Some("ok"), "12"));

    // Interrupted while stopped: the debugger lets go, and the cell ends.
    let code = "let w = x * 100;\nlet w2 = w + 1;\nw2";
    let path = k.debug("dumpCell", json!({"code": code}))["body"]["sourcePath"].as_str().unwrap().to_string();
    k.debug("setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": 2}]}));
    let id = k.f.send_execute_request(code);
    k.wait_event("stopped");
    let int = k.f.send(Sock::Control, "interrupt_request", json!({}));
    let reply = loop {
        let m = k.f.recv_iopub_within(FIRST_CELL);
        if m.msg_type() == "debug_event" {
            k.events.push(m.content.clone());
        }
        if parent_id(&m) == id && m.msg_type() == "status" && m.content["execution_state"] == "idle" {
            break k.f.recv_shell_execute_reply(&id);
        }
    };
    assert!(reply["status"] == "ok" || reply["ename"] == "KeyboardInterrupt", "the cell ended: {reply}");
    let _ = k.f.recv_control_reply(&int, "interrupt_reply");
    while let Ok(m) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| k.f.recv_iopub_within(Duration::from_millis(500))))
    {
        assert!(parent_id(&m) == int || m.msg_type() == "debug_event", "{:?}", m.content);
        if m.msg_type() == "debug_event" {
            k.events.push(m.content.clone());
        }
    }
    assert!(k.events.iter().any(|e| e["event"] == "terminated"), "the panel hears that the session ended");
    assert_eq!(k.debug("debugInfo", json!({}))["body"]["isStarted"], false);
    // The panel may still say goodbye.
    assert_eq!(k.debug("disconnect", json!({"restart": false, "terminateDebuggee": false}))["success"], true);
    let (text, reply) = k.run("format!(\"{} {}\", x + z, greeting)");
    assert_eq!((reply["status"].as_str(), text.as_str()), (Some("ok"), "\"17 hi\""), "the variables, kept: {reply}");
    k.drain();
}

/// The kernel's child processes whose command line starts with `name` (lldb-dap, or evcxr's
/// child, which is the kernel's own binary).
fn children(kernel: u32, name: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{kernel}/task")).unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd)
                .split('\0')
                .next()
                .is_some_and(|c| Path::new(c).file_name().is_some_and(|f| f.to_string_lossy().starts_with(name)))
            {
                pids.push(pid);
            }
        }
    }
    pids
}

use std::path::Path;

impl RealKernel {
    fn start_debugger(&mut self) {
        assert_eq!(self.debug("initialize", json!({"clientID": "jupyterlab", "adapterID": "dryml-rust", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true}))["success"], true);
        assert_eq!(self.debug("attach", json!({}))["success"], true);
    }

    /// Runs `code` with a breakpoint on `line`: where it stopped (the top frame's file and
    /// line), then continued; and the cell's text and reply.
    fn run_to_breakpoint(&mut self, code: &str, line: u64) -> ((String, u64), String, Value) {
        let path = self.debug("dumpCell", json!({"code": code}))["body"]["sourcePath"].as_str().unwrap().to_string();
        self.debug("setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": line}]}));
        let id = self.f.send_execute_request(code);
        let stopped = self.wait_event("stopped");
        let tid = stopped["body"]["threadId"].clone();
        let top = self.debug("stackTrace", json!({"threadId": tid}))["body"]["stackFrames"][0].clone();
        let at = (
            top["source"]["path"].as_str().unwrap_or("").replace(&path, "<the cell>"),
            top["line"].as_u64().unwrap_or(0),
        );
        assert_eq!(self.debug("continue", json!({"threadId": tid}))["success"], true);
        let (text, reply) = self.finish(&id);
        (at, text, reply)
    }

    /// The rest of cell `id` (sent already): its `execute_result` text and its reply.
    fn finish(&mut self, id: &str) -> (String, Value) {
        let mut text = String::new();
        loop {
            let m = self.f.recv_iopub_within(FIRST_CELL);
            if m.msg_type() == "debug_event" {
                self.events.push(m.content.clone());
            }
            if parent_id(&m) == id && m.msg_type() == "execute_result" {
                text = m.content["data"]["text/plain"].as_str().unwrap().to_string();
            }
            if parent_id(&m) == id && m.msg_type() == "status" && m.content["execution_state"] == "idle" {
                break;
            }
        }
        (text, self.f.recv_shell_execute_reply(id))
    }
}

#[test]
fn values_in_the_panel_magic_cells_a_replaced_process_and_a_dead_lldb_dap() {
    let mut k = RealKernel::start();
    let (_, reply) = k.run("let x = 5;\nlet v: Vec<f32> = (0..1000).map(|i| i as f32).collect();\nlet name = String::from(\"hi\");\nstruct Net;\nlet net = Net;");
    assert_eq!(reply["status"], "ok", "{reply}");

    // The Variables panel shows short values (read by a hidden cell while none runs).
    let vars = k.debug("inspectVariables", json!({}))["body"]["variables"].clone();
    let shown: Vec<(&str, &str)> =
        vars.as_array().unwrap().iter().map(|v| (v["name"].as_str().unwrap(), v["value"].as_str().unwrap())).collect();
    let head = (0..16).map(|i| format!("{i}.0")).collect::<Vec<_>>().join(", ");
    assert_eq!(
        shown,
        [("name", "\"hi\""), ("net", ""), ("v", format!("[{head}] (len 1000)").as_str()), ("x", "5")],
        "no Debug: no value"
    );

    // A cell under a magic line stops on its own line, in its own file.
    k.start_debugger();
    let (at, text, reply) = k.run_to_breakpoint("%%time\nlet a = x + 1;\nlet b = a * 2;\nb", 3);
    assert_eq!(
        (at, text.as_str(), reply["status"].as_str()),
        (("<the cell>".to_string(), 3), "12", Some("ok")),
        "{reply}"
    );

    // A breakpoint in a function an earlier cell defined stops the cell that calls it, and the
    // frames are told in each cell's own file and line.
    let def = "fn step(x: i32) -> i32 {\n    let doubled = x * 2;\n    doubled + 1\n}";
    let def_path = k.debug("dumpCell", json!({"code": def}))["body"]["sourcePath"].as_str().unwrap().to_string();
    assert_eq!(k.run(def).1["status"], "ok");
    k.debug("setBreakpoints", json!({"source": {"path": def_path}, "breakpoints": [{"line": 2}]}));
    let call = "let r = step(20);\nr";
    let call_path = k.debug("dumpCell", json!({"code": call}))["body"]["sourcePath"].as_str().unwrap().to_string();
    let id = k.f.send_execute_request(call);
    let tid = k.wait_event("stopped")["body"]["threadId"].clone();
    let frames = k.debug("stackTrace", json!({"threadId": tid}))["body"]["stackFrames"].clone();
    let at: Vec<(&str, u64)> = frames
        .as_array()
        .unwrap()
        .iter()
        .take(2)
        .map(|f| (f["source"]["path"].as_str().unwrap(), f["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(at, [(def_path.as_str(), 2), (call_path.as_str(), 1)], "{frames}");
    assert_eq!(k.debug("continue", json!({"threadId": tid}))["success"], true);
    assert_eq!(k.finish(&id).0, "41");

    // A %%compute cell runs in a sandbox: its breakpoints are not set, and it says so.
    let code = "%%compute\nlet c = x * 7;\nc";
    let path = k.debug("dumpCell", json!({"code": code}))["body"]["sourcePath"].as_str().unwrap().to_string();
    k.debug("setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": 2}]}));
    let (text, reply) = k.run(code);
    assert_eq!(reply["status"], "ok", "{reply}");
    assert!(
        text.contains("the debugger does not stop in this cell: a `%%compute` cell runs its body in a sandbox process")
            && text.ends_with("35"),
        "{text}"
    );

    // An interrupt stops a running cell as without the debugger: LLDB lets the SIGINT pass.
    let id = k.f.send_execute_request("println!(\"spinning\");\nlet mut spins = 0u64;\nwhile !dryml::interrupted() { spins += 1; std::thread::sleep(std::time::Duration::from_millis(5)); }");
    // Sent once it spins (the test's sockets send as they are read).
    loop {
        let m = k.f.recv_iopub_within(FIRST_CELL);
        if parent_id(&m) == id && m.content["text"].as_str().is_some_and(|t| t.contains("spinning")) {
            break;
        }
    }
    let int = k.f.send(Sock::Control, "interrupt_request", json!({}));
    let (_, reply) = k.finish(&id);
    let _ = k.f.recv_control_reply(&int, "interrupt_reply");
    assert!(reply["ename"] == "KeyboardInterrupt" && reply["evalue"].as_str().unwrap().contains("kept"), "{reply}");
    assert!(!k.events.iter().any(|e| e["event"] == "stopped"), "LLDB did not stop on it: {:?}", k.events);
    assert_eq!(k.run("x + 1").0, "6");

    // evcxr's child killed: the next cell's process is a new one, and the debugger follows it,
    // even where lldb-dap ended too once its process had (CI saw it, under load): no loss then.
    let old = children(k.child.id(), "dryml-kernel");
    assert_eq!(old.len(), 1, "one process runs cells: {old:?}");
    let running = |pid: &u32| !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z");
    let until_ended = |pid: u32| {
        let t0 = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() && running(&pid) {
            assert!(t0.elapsed() < Duration::from_secs(10), "{pid} still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    unsafe { libc::kill(old[0] as i32, libc::SIGKILL) };
    until_ended(old[0]);
    // lldb-dap may have ended with its process already; otherwise it is killed too.
    let dap = children(k.child.id(), "lldb-dap");
    assert!(dap.len() <= 1, "{dap:?}");
    for pid in dap {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        until_ended(pid);
    }
    let (_, reply) = k.run("1");
    assert_eq!(reply["status"], "error", "the crash is told: {reply}");
    let (at, text, _) = k.run_to_breakpoint("let d = 40;\nlet e = d + 2;\ne", 2);
    assert_eq!((at, text.as_str()), (("<the cell>".to_string(), 2), "42"));
    assert_ne!(children(k.child.id(), "dryml-kernel"), old);

    // lldb-dap killed between cells: the panel hears it, the cells and their variables go on.
    let dap = children(k.child.id(), "lldb-dap");
    assert_eq!(dap.len(), 1, "{dap:?}");
    unsafe { libc::kill(dap[0] as i32, libc::SIGKILL) };
    let said = k.wait_event("output");
    assert!(said["body"]["output"].as_str().unwrap().contains("lldb-dap exited"), "{said}");
    k.wait_event("terminated");
    assert_eq!(k.debug("debugInfo", json!({}))["body"]["isStarted"], false);
    let (text, reply) = k.run("let f = 2;\nf * 3");
    assert_eq!((reply["status"].as_str(), text.as_str()), (Some("ok"), "6"), "{reply}");
    k.drain();
}

/// The iopub messages of a continue, in order, as (`debug_event` name or message type, whose
/// request sent it: "cell", "continue" or ""), until the cell's idle.
fn continue_until_idle(k: &mut RealKernel, tid: &Value, id: &str) -> Vec<(String, &'static str)> {
    k.seq += 1;
    let req = k.f.send(
        Sock::Control,
        "debug_request",
        json!({"seq": k.seq, "type": "request", "command": "continue", "arguments": {"threadId": tid}}),
    );
    let mut seen = Vec::new();
    loop {
        let m = k.f.recv_iopub_within(FIRST_CELL);
        let what = match m.msg_type() {
            "debug_event" => m.content["event"].as_str().unwrap_or("").to_string(),
            "status" => m.content["execution_state"].as_str().unwrap_or("").to_string(),
            other => other.to_string(),
        };
        let whose = if parent_id(&m) == id {
            "cell"
        } else if parent_id(&m) == req {
            "continue"
        } else {
            ""
        };
        let idle = whose == "cell" && what == "idle";
        seen.push((what, whose));
        if idle {
            break;
        }
    }
    assert_eq!(k.f.recv_control_reply(&req, "debug_reply")["success"], true);
    let _ = k.f.recv_shell_execute_reply(id);
    seen
}

#[test]
fn after_continue_the_panel_hears_continued_before_the_cells_output_and_nothing_that_empties_it_after() {
    // JupyterLab empties its Variables panel on every `continued` and fills it from
    // inspectVariables after each iopub message of the cell. lldb-dap says `continued` from a
    // thread of its own, so under load it reached iopub after the continue's idle, and could
    // come after the cell's idle too, leaving the panel empty; the bridge now says it while
    // answering the continue, before the process runs.
    let mut k = RealKernel::start();
    assert_eq!(k.run("let base = 1;").1["status"], "ok");
    k.start_debugger();
    for round in 0..6 {
        let code = format!("let x = {round};\nlet v = vec![1.5f32, 2.5];\nlet y = x + base;\ny");
        let path = k.debug("dumpCell", json!({"code": code}))["body"]["sourcePath"].as_str().unwrap().to_string();
        k.debug("setBreakpoints", json!({"source": {"path": path}, "breakpoints": [{"line": 3}]}));
        let id = k.f.send_execute_request(&code);
        let tid = k.wait_event("stopped")["body"]["threadId"].clone();
        k.events.clear();
        let seen = continue_until_idle(&mut k, &tid, &id);
        let at = |what: &str, whose: &str| {
            seen.iter()
                .position(|(w, o)| w == what && *o == whose)
                .unwrap_or_else(|| panic!("round {round}: no {what} of the {whose:?}: {seen:?}"))
        };
        assert_eq!(seen.iter().filter(|(w, _)| w == "continued").count(), 1, "round {round}: one continued: {seen:?}");
        let continued = seen.iter().position(|(w, _)| w == "continued").unwrap();
        assert!(
            at("busy", "continue") < continued && continued < at("idle", "continue"),
            "round {round}: continued while the continue is answered: {seen:?}"
        );
        assert!(
            continued < at("execute_result", "cell"),
            "round {round}: continued before the cell's output: {seen:?}"
        );

        // What the panel then asks (its Variables), and all that iopub brings for a while.
        for _ in 0..2 {
            let vars = k.debug("inspectVariables", json!({}))["body"]["variables"].clone();
            assert!(
                vars.as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v["name"] == "y" && v["value"] == json!((round + 1).to_string())),
                "round {round}: {vars}"
            );
        }
        while let Ok(m) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| k.f.recv_iopub_within(Duration::from_millis(500))))
        {
            if m.msg_type() == "debug_event" {
                k.events.push(m.content.clone());
            }
        }
        let late: Vec<&Value> = k
            .events
            .iter()
            .filter(|e| ["continued", "stopped", "terminated", "exited"].contains(&e["event"].as_str().unwrap_or("")))
            .collect();
        assert!(late.is_empty(), "round {round}: after the cell's idle the panel heard {late:?}");
        k.events.clear();
    }
    k.drain();
}
