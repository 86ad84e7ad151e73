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
}

impl RealKernel {
    fn start() -> RealKernel {
        let dir = tempfile::tempdir().unwrap();
        let info = connection_info(dir.path());
        let file = dir.path().join("connection.json");
        std::fs::write(&file, serde_json::to_vec(&info).unwrap()).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_dryml-kernel"))
            .arg("-f")
            .arg(&file)
            .env("DRYML_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .env("DRYML_HISTORY_FILE", dir.path().join("history.sqlite"))
            .env("DRYML_NO_WARM_UP", "1")
            .spawn()
            .unwrap();
        // Its ipc endpoints exist once it has bound them.
        let t0 = Instant::now();
        while !(1..=5).all(|p| dir.path().join(format!("k-{p}")).exists()) {
            assert!(t0.elapsed() < Duration::from_secs(30), "the kernel did not bind its sockets");
            std::thread::sleep(Duration::from_millis(50));
        }
        RealKernel { f: Frontend::connect(&info), child, _dir: dir, seq: 0 }
    }

    /// Runs a cell; its `execute_result` text (or stdout), and whether it went well.
    fn run(&mut self, code: &str) -> (String, Value) {
        let id = self.f.send_execute_request(code);
        let mut text = String::new();
        loop {
            let m = self.f.recv_iopub_within(FIRST_CELL);
            if parent_id(&m) != id {
                continue; // debug events under the latest debug request
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
        let id = self.f.send(Sock::Control, "debug_request", json!({"seq": self.seq, "type": "request", "command": command, "arguments": arguments}));
        let mut states = Vec::new();
        let reply = self.f.recv_control_reply(&id, "debug_reply");
        while states.last().map(String::as_str) != Some("idle") {
            let m = self.f.recv_iopub();
            if parent_id(&m) == id && m.msg_type() == "status" {
                states.push(m.content["execution_state"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(states, ["busy", "idle"], "{command}: the panel waits for the idle");
        assert_eq!((reply["request_seq"].clone(), reply["command"].clone()), (json!(self.seq), json!(command)), "{reply}");
        reply
    }

    /// Reads what iopub still holds (lldb-dap's late events), so the frontend ends drained.
    fn drain(&mut self) {
        while let Ok(m) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.f.recv_iopub_within(Duration::from_millis(300)))) {
            assert_eq!(m.msg_type(), "debug_event", "only debug events are left: {:?}", m.content);
        }
    }
}

impl Drop for RealKernel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_panel_inspects_dumps_attaches_and_detaches_while_cells_run_and_keep_their_variables() {
    assert!(dryml_kernel::debug::adapter::find().is_some(), "lldb-dap is missing: install Debian's lldb-19 (tests/run.sh does)");
    let mut k = RealKernel::start();
    let (_, reply) = k.run("let x = 5;\nlet v = vec![1.5f32, 2.5];");
    assert_eq!(reply["status"], "ok", "{reply}");

    let info = k.debug("debugInfo", json!({}));
    let body = &info["body"];
    assert_eq!((body["isStarted"].clone(), body["hashMethod"].clone(), body["hashSeed"].clone(), body["tmpFileSuffix"].clone()), (json!(false), json!("Murmur2"), json!(HASH_SEED), json!(".rs")));
    let prefix = body["tmpFilePrefix"].as_str().unwrap().to_string();

    // The Variables panel, while no cell is stopped: what the last cell left.
    let vars = k.debug("inspectVariables", json!({}))["body"]["variables"].clone();
    let named: Vec<(String, String)> = vars.as_array().unwrap().iter().map(|v| (v["name"].as_str().unwrap().into(), v["type"].as_str().unwrap().into())).collect();
    assert_eq!(named, [("v".to_string(), "Vec<f32>".to_string()), ("x".to_string(), "i32".to_string())]);

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
    let ids: Vec<i64> = threads["body"]["threads"].as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect();
    assert!(!ids.is_empty() && !ids.contains(&kernel_pid), "the child's threads, not the kernel's: {ids:?}");

    // Cells run under the debugger, and the panel's requests are answered while they do.
    let (text, reply) = k.run(code);
    assert_eq!((reply["status"].as_str(), text.as_str()), (Some("ok"), "6"), "{reply}");
    assert_eq!(k.debug("configurationDone", json!({}))["success"], true, "answered here, never resuming anything");

    let bye = k.debug("disconnect", json!({"restart": false, "terminateDebuggee": false}));
    assert_eq!(bye["success"], true, "{bye}");
    let (text, _) = k.run("format!(\"{} {:?}\", y, v)");
    assert_eq!(text, "\"6 [1.5, 2.5]\"", "the variables outlive the debugging session");
    k.drain();
}
