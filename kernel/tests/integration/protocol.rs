//! The protocol layer against a toy handler: message order, replies matched to requests, bad
//! frames dropped, interrupt and shutdown on control, iopub's welcome, stdin round trips.

use crate::frontend::{connection_info, parent_id, Frontend, Sock};
use dryml_kernel::protocol::outbox::InputError;
use dryml_kernel::protocol::published::StreamName;
use dryml_kernel::protocol::replies::{Completions, History, Inspection, IsComplete, KernelInfo, LanguageInfo, Reply};
use dryml_kernel::protocol::{self, ErrorContent, ExecuteOutcome, ExecuteRequest, Handler, Io};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Runs cells written in a tiny language: `print TEXT`, `fail`, `result`, `input PROMPT`,
/// `block` (until interrupted), `panic` (a bug in the handler; `is_complete` and `complete` of
/// `panic` too).
#[derive(Default)]
struct Toy {
    interrupted: Mutex<bool>,
    wake: Condvar,
    interrupts: AtomicUsize,
    shutdown: Mutex<Option<bool>>,
    started: AtomicBool,
    settles: AtomicUsize,
    dormants: AtomicUsize,
}

impl Handler for Toy {
    fn start(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    fn kernel_info(&self) -> Reply<KernelInfo> {
        Reply::Ok(KernelInfo {
            protocol_version: "5.4",
            implementation: "toy",
            implementation_version: "0",
            language_info: LanguageInfo {
                name: "toy",
                version: "1".into(),
                mimetype: "text/plain",
                file_extension: ".toy",
                pygments_lexer: "text",
                codemirror_mode: "text",
            },
            banner: "toy".into(),
            help_links: Vec::new(),
            debugger: false,
            supported_features: Vec::new(),
        })
    }

    fn execute(&self, req: &ExecuteRequest, io: &Io) -> ExecuteOutcome {
        let mut error = None;
        let (verb, arg) = req.code.split_once(' ').unwrap_or((req.code.as_str(), ""));
        match verb {
            "print" => io.stream(StreamName::Stdout, arg),
            "result" => io.execute_result(json!({"text/plain": "42"})),
            "fail" => error = Some(ErrorContent::new("ToyError", "asked to fail")),
            "panic" => panic!("the toy's bug"),
            "input" => match io.input(arg, false) {
                Ok(line) => io.stream(StreamName::Stdout, &format!("got {line}")),
                Err(InputError::Interrupted) => error = Some(ErrorContent::new("KeyboardInterrupt", "no input")),
                Err(e) => error = Some(ErrorContent::new("StdinNotAllowed", e.to_string())),
            },
            "block" => {
                let mut stopped = self.interrupted.lock().unwrap();
                while !*stopped {
                    stopped = self.wake.wait(stopped).unwrap();
                }
                *stopped = false;
                error = Some(ErrorContent::new("KeyboardInterrupt", "interrupted"));
            }
            _ => {}
        }
        let mut user_expressions = Map::new();
        for name in req.user_expressions.keys() {
            user_expressions.insert(name.clone(), json!({"status": "ok", "data": {"text/plain": name}}));
        }
        ExecuteOutcome { payload: vec![], user_expressions, error }
    }

    fn complete(&self, code: &str, cursor_pos: usize) -> Reply<Completions> {
        assert_ne!(code, "panic", "the toy's bug");
        let matches = vec![format!("{code}!")];
        Reply::Ok(Completions { matches, cursor_start: 0, cursor_end: cursor_pos, metadata: json!({}) })
    }

    fn inspect(&self, _code: &str, _cursor_pos: usize, _detail_level: u64) -> Reply<Inspection> {
        Reply::Ok(Inspection::none())
    }

    fn is_complete(&self, code: &str) -> IsComplete {
        assert_ne!(code, "panic", "the toy's bug");
        if code.ends_with('{') {
            IsComplete::Incomplete { indent: String::new() }
        } else {
            IsComplete::Complete
        }
    }

    fn history(&self, _request: &dryml_kernel::protocol::HistoryRequest) -> Reply<History> {
        Reply::Ok(History { history: json!([[0, 1, "print hi"]]) })
    }

    fn interrupt(&self) {
        self.interrupts.fetch_add(1, Ordering::SeqCst);
        *self.interrupted.lock().unwrap() = true;
        self.wake.notify_all();
    }

    fn shutdown(&self, restart: bool) {
        *self.shutdown.lock().unwrap() = Some(restart);
    }

    fn settled(&self) {
        self.settles.fetch_add(1, Ordering::SeqCst);
    }

    fn dormant_after(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_millis(2500))
    }

    fn dormant(&self) {
        self.dormants.fetch_add(1, Ordering::SeqCst);
    }
}

/// A toy kernel serving on its own thread, and a frontend connected to it.
struct Rig {
    toy: Arc<Toy>,
    f: Frontend,
    server: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// Runs the toy's `print hi` and reads all it publishes and replies.
    fn print_hi(&mut self) {
        let id = self.f.send_execute_request("print hi");
        self.f.recv_iopub_busy(&id);
        self.f.recv_iopub_execute_input(&id);
        assert_eq!(self.f.recv_iopub_stream(&id), "hi");
        self.f.recv_iopub_idle(&id);
        self.f.recv_shell_execute_reply(&id);
    }

    fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let info = connection_info(dir.path());
        let toy = Arc::new(Toy::default());
        let (t, i) = (toy.clone(), info.clone());
        let server = std::thread::spawn(move || protocol::serve(&i, t));
        let f = Frontend::connect(&info);
        Rig { toy, f, server: Some(server), _dir: dir }
    }

    /// Shuts the kernel down on control and waits for `serve` to return.
    fn shutdown(&mut self, restart: bool) {
        let id = self.f.send(Sock::Control, "shutdown_request", json!({"restart": restart}));
        self.f.recv_iopub_busy(&id);
        let reply = self.f.recv_control_reply(&id, "shutdown_reply");
        assert_eq!(reply, json!({"status": "ok", "restart": restart}));
        self.f.recv_iopub_idle(&id);
        let result = self.server.take().unwrap().join().expect("serve did not panic");
        result.expect("serve returned Ok");
        assert_eq!(*self.toy.shutdown.lock().unwrap(), Some(restart), "the handler heard of it");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.server.is_some() && !std::thread::panicking() {
            self.shutdown(false);
        }
    }
}

#[test]
fn kernel_info_is_busy_reply_idle() {
    let mut r = Rig::new();
    let id = r.f.send(Sock::Shell, "kernel_info_request", json!({}));
    r.f.recv_iopub_busy(&id);
    let reply = r.f.recv_shell_reply(&id, "kernel_info_reply");
    assert_eq!(reply["implementation"], "toy");
    r.f.recv_iopub_idle(&id);
    // The same on control, answered there.
    let id = r.f.send(Sock::Control, "kernel_info_request", json!({}));
    r.f.recv_iopub_busy(&id);
    assert_eq!(r.f.recv_control_reply(&id, "kernel_info_reply")["implementation"], "toy");
    r.f.recv_iopub_idle(&id);
    assert!(r.toy.started.load(Ordering::SeqCst), "start ran on the worker");
}

#[test]
fn execute_publishes_input_output_and_counts() {
    let mut r = Rig::new();
    for count in 1..=2 {
        let id = r.f.send_execute_request("print hi");
        r.f.recv_iopub_busy(&id);
        let input = r.f.recv_iopub_execute_input(&id);
        assert_eq!(input.content, json!({"code": "print hi", "execution_count": count}));
        assert_eq!(r.f.recv_iopub_stream(&id), "hi");
        r.f.recv_iopub_idle(&id);
        let reply = r.f.recv_shell_execute_reply(&id);
        assert_eq!((reply["status"].as_str(), reply["execution_count"].as_i64()), (Some("ok"), Some(count)));
    }
    // A result carries the count; silent requests publish nothing of their own and count nothing.
    let id = r.f.send_execute_request("result");
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_execute_input(&id);
    let result = r.f.recv_iopub_of(&id, "execute_result");
    assert_eq!(result.content["execution_count"], 3);
    r.f.recv_iopub_idle(&id);
    r.f.recv_shell_execute_reply(&id);
    let id = r.f.send_execute_request_with("print quiet", json!({"silent": true, "user_expressions": {"x": "x"}}));
    r.f.recv_iopub_busy(&id);
    assert_eq!(r.f.recv_iopub_stream(&id), "quiet", "the handler decides what a silent cell shows");
    r.f.recv_iopub_idle(&id);
    let reply = r.f.recv_shell_execute_reply(&id);
    assert_eq!(reply["execution_count"], 3);
    assert_eq!(reply["user_expressions"]["x"]["status"], "ok");
}

#[test]
fn the_handler_settles_once_after_each_quiet_spell() {
    let mut r = Rig::new();
    let settles = |r: &Rig, n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while r.toy.settles.load(Ordering::SeqCst) < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        r.toy.settles.load(Ordering::SeqCst)
    };
    // Once after the start's idle work, once after each spell of requests, never in a spell.
    assert_eq!(settles(&r, 1), 1);
    for _ in 0..2 {
        r.print_hi();
    }
    assert_eq!(settles(&r, 2), 2);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(r.toy.settles.load(Ordering::SeqCst), 2, "a quiet kernel settles once");
    r.shutdown(false);
}

#[test]
fn the_handler_goes_dormant_once_after_each_long_quiet_spell() {
    let mut r = Rig::new();
    let count = |r: &Rig| r.toy.dormants.load(Ordering::SeqCst);
    let dormants = |r: &Rig, n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while count(r) < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        count(r)
    };
    // After the start's quiet spell, after settling; then again only after another request.
    assert_eq!(dormants(&r, 1), 1);
    assert!(r.toy.settles.load(Ordering::SeqCst) >= 1, "settled before going dormant");
    std::thread::sleep(std::time::Duration::from_millis(3000));
    assert_eq!(count(&r), 1, "a quiet kernel goes dormant once");
    r.print_hi();
    assert_eq!(dormants(&r, 2), 2);
    r.shutdown(false);
}

#[test]
fn errors_are_published_and_abort_what_was_queued() {
    let mut r = Rig::new();
    // A blocked cell holds the worker until everything below is on its queue (shell answers
    // the history request after forwarding what came before it); without it, a loaded machine
    // could finish the failing cell before the next request arrived, and nothing was queued.
    let blocker = r.f.send_execute_request_with("block", json!({"stop_on_error": false}));
    r.f.recv_iopub_busy(&blocker);
    r.f.recv_iopub_execute_input(&blocker);
    let failing = r.f.send_execute_request("fail");
    let queued = r.f.send_execute_request("print never");
    let completion = r.f.send(Sock::Shell, "complete_request", json!({"code": "pri", "cursor_pos": 3}));
    let hist = r.f.send(Sock::Shell, "history_request", json!({"hist_access_type": "tail", "n": 1}));
    r.f.recv_iopub_busy(&hist);
    r.f.recv_shell_reply(&hist, "history_reply");
    r.f.recv_iopub_idle(&hist);
    let int = r.f.send(Sock::Control, "interrupt_request", json!({}));
    r.f.recv_control_reply(&int, "interrupt_reply");
    // The control task and the worker publish at once: each request's messages stay in order.
    let seen = r.f.recv_iopub_until_idle(&[&int, &blocker, &failing, &queued, &completion]);
    let types = |v: &Vec<(String, Value)>| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(types(&seen[2]), ["status", "execute_input", "error", "status"]);
    assert_eq!(seen[2][2].1["ename"], "ToyError");
    assert_eq!(types(&seen[3]), ["status", "status"], "the aborted cell: busy and idle only");
    assert_eq!(r.f.recv_shell_execute_reply(&blocker)["ename"], "KeyboardInterrupt");
    let reply = r.f.recv_shell_execute_reply(&failing);
    assert_eq!((reply["status"].as_str(), reply["ename"].as_str()), (Some("error"), Some("ToyError")));
    assert_eq!(reply["traceback"], json!(["ToyError: asked to fail"]));
    // The queued execute is aborted, never run; the completion request still gets its answer.
    assert_eq!(r.f.recv_shell_execute_reply(&queued)["status"], "aborted");
    assert_eq!(r.f.recv_shell_reply(&completion, "complete_reply")["matches"], json!(["pri!"]));
    // stop_on_error false: the next one runs.
    let a = r.f.send_execute_request_with("fail", json!({"stop_on_error": false}));
    let b = r.f.send_execute_request("print ran");
    for _ in 0..4 {
        r.f.recv_iopub(); // a: busy, input, error, idle
    }
    assert_eq!(r.f.recv_shell_execute_reply(&a)["status"], "error");
    r.f.recv_iopub_busy(&b);
    r.f.recv_iopub_execute_input(&b);
    assert_eq!(r.f.recv_iopub_stream(&b), "ran");
    r.f.recv_iopub_idle(&b);
    assert_eq!(r.f.recv_shell_execute_reply(&b)["status"], "ok");
}

#[test]
fn replies_match_their_requests_while_a_cell_runs() {
    let mut r = Rig::new();
    let cell = r.f.send_execute_request("block");
    r.f.recv_iopub_busy(&cell);
    r.f.recv_iopub_execute_input(&cell);
    // Answered at once, although the worker is busy.
    let ic = r.f.send(Sock::Shell, "is_complete_request", json!({"code": "fn f() {"}));
    let hist = r.f.send(Sock::Shell, "history_request", json!({"hist_access_type": "tail", "n": 1}));
    r.f.recv_iopub_busy(&ic);
    assert_eq!(r.f.recv_shell_reply(&ic, "is_complete_reply")["status"], "incomplete");
    r.f.recv_iopub_idle(&ic);
    r.f.recv_iopub_busy(&hist);
    assert_eq!(r.f.recv_shell_reply(&hist, "history_reply")["history"], json!([[0, 1, "print hi"]]));
    r.f.recv_iopub_idle(&hist);
    // Interrupt on control ends the cell.
    let int = r.f.send(Sock::Control, "interrupt_request", json!({}));
    assert_eq!(r.f.recv_control_reply(&int, "interrupt_reply")["status"], "ok");
    let seen = r.f.recv_iopub_until_idle(&[&int, &cell]);
    let types = |v: &Vec<(String, Value)>| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(types(&seen[0]), ["status", "status"], "the interrupt's busy and idle");
    assert_eq!(seen[0][0].1["execution_state"], "busy");
    assert_eq!(types(&seen[1]), ["error", "status"], "the cell's error, then its idle");
    assert_eq!(seen[1][0].1["ename"], "KeyboardInterrupt");
    assert_eq!(r.f.recv_shell_execute_reply(&cell)["ename"], "KeyboardInterrupt");
    assert_eq!(r.toy.interrupts.load(Ordering::SeqCst), 1);
}

#[test]
fn a_frame_claiming_2_pow_60_bytes_costs_its_sender_the_connection_not_the_kernel() {
    use std::io::Write;
    let mut r = Rig::new();
    let dir = r._dir.path().to_path_buf();
    // Any local process can do this on any port, before any signature is checked: a ZMTP
    // greeting, then the header of a frame claiming 2^60 bytes (this aborted the kernel), and
    // one claiming 255 MiB after a 2 MiB frame (over 256 MiB for the message).
    let greeting: Vec<u8> = [&[0xffu8][..], &[0; 8], &[0x7f, 3, 0], b"NULL", &[0; 48]].concat();
    assert_eq!(greeting.len(), 64);
    for (port, body) in [
        (1, [vec![0x06], (1u64 << 60).to_be_bytes().to_vec()].concat()),
        (
            4,
            [
                vec![0x03],
                (2u64 << 20).to_be_bytes().to_vec(),
                vec![0; 2 << 20],
                vec![0x02],
                (255u64 << 20).to_be_bytes().to_vec(),
            ]
            .concat(),
        ),
    ] {
        let path = format!("{}-{port}", dir.join("k").display());
        let mut raw = std::os::unix::net::UnixStream::connect(&path).expect("the kernel's socket");
        raw.write_all(&greeting).unwrap();
        let _ = raw.write_all(&body);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // The kernel serves on.
    let id = r.f.send(Sock::Shell, "kernel_info_request", json!({}));
    r.f.recv_iopub_busy(&id);
    r.f.recv_shell_reply(&id, "kernel_info_reply");
    r.f.recv_iopub_idle(&id);
}

#[test]
fn wrongly_signed_and_garbage_frames_are_dropped() {
    let mut r = Rig::new();
    let forged = {
        let m = r.f.request("execute_request", json!({"code": "print forged"}));
        m.encode(&dryml_kernel::protocol::Signer::new("not-the-key"))
    };
    r.f.send_raw(Sock::Shell, forged);
    let mut unsigned = r.f.request("kernel_info_request", json!({})).encode(&r.f.signer);
    unsigned[1] = bytes::Bytes::new();
    r.f.send_raw(Sock::Shell, unsigned);
    r.f.send_raw(Sock::Shell, vec![bytes::Bytes::from_static(b"garbage")]);
    r.f.send_raw(Sock::Control, vec![bytes::Bytes::from_static(b"<IDS|MSG>"), bytes::Bytes::from_static(b"x")]);
    // Signed correctly, but the content is not JSON.
    let header = r.f.request("kernel_info_request", json!({})).header.to_string();
    let parts: [&[u8]; 4] = [header.as_bytes(), b"{}", b"{}", b"{not json"];
    let sig = r.f.signer.sign(&parts);
    let frames = [b"<IDS|MSG>".as_slice(), sig.as_bytes(), header.as_bytes(), b"{}", b"{}", b"{not json"]
        .iter()
        .map(|b| bytes::Bytes::copy_from_slice(b))
        .collect();
    r.f.send_raw(Sock::Shell, frames);
    // None of those is answered; the kernel still serves, and answers only this.
    let id = r.f.send(Sock::Shell, "kernel_info_request", json!({}));
    let busy = r.f.recv_iopub();
    assert_eq!(parent_id(&busy), id, "the first thing published answers the good request");
    r.f.recv_shell_reply(&id, "kernel_info_reply");
    r.f.recv_iopub_idle(&id);
}

#[test]
fn stdin_round_trip_and_refusal() {
    let mut r = Rig::new();
    let id = r.f.send_execute_request("input Name?");
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_execute_input(&id);
    let req = r.f.recv_stdin();
    assert_eq!((req.msg_type(), parent_id(&req)), ("input_request", id.as_str()));
    assert_eq!(req.content, json!({"prompt": "Name?", "password": false}));
    r.f.send_input_reply("Ada");
    assert_eq!(r.f.recv_iopub_stream(&id), "got Ada");
    r.f.recv_iopub_idle(&id);
    r.f.recv_shell_execute_reply(&id);
    // A request that does not allow stdin gets no input_request, and the handler is told.
    let id = r.f.send_execute_request_with("input Name?", json!({"allow_stdin": false}));
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_execute_input(&id);
    assert_eq!(r.f.recv_iopub_of(&id, "error").content["ename"], "StdinNotAllowed");
    r.f.recv_iopub_idle(&id);
    r.f.recv_shell_execute_reply(&id);
}

#[test]
fn an_interrupt_ends_a_wait_for_input_and_a_late_answer_is_not_the_next_prompts() {
    let mut r = Rig::new();
    let id = r.f.send_execute_request("input first?");
    let first = r.f.recv_stdin();
    assert_eq!(parent_id(&first), id);
    let int = r.f.send(Sock::Control, "interrupt_request", json!({}));
    r.f.recv_control_reply(&int, "interrupt_reply");
    let seen = r.f.recv_iopub_until_idle(&[&int, &id]);
    assert!(seen[1].iter().any(|(t, c)| t == "error" && c["ename"] == "KeyboardInterrupt"), "{:?}", seen[1]);
    assert_eq!(r.f.recv_shell_execute_reply(&id)["status"], "error");
    // The next prompt is asked; the first prompt's answer arrives only now, and is ignored.
    let id = r.f.send_execute_request("input second?");
    let second = r.f.recv_stdin();
    r.f.send_input_reply_to(&first, "late");
    r.f.send_input_reply_to(&second, "Ada");
    let seen = r.f.recv_iopub_until_idle(&[&id]);
    assert!(seen[0].iter().any(|(t, c)| t == "stream" && c["text"] == "got Ada"), "{:?}", seen[0]);
    r.f.recv_shell_execute_reply(&id);
    // An interrupt while nothing waits does not cancel a later prompt.
    let int = r.f.send(Sock::Control, "interrupt_request", json!({}));
    r.f.recv_control_reply(&int, "interrupt_reply");
    r.f.recv_iopub_until_idle(&[&int]);
    let id = r.f.send_execute_request("input third?");
    r.f.recv_stdin();
    r.f.send_input_reply("Grace");
    let seen = r.f.recv_iopub_until_idle(&[&id]);
    assert!(seen[0].iter().any(|(t, c)| t == "stream" && c["text"] == "got Grace"), "{:?}", seen[0]);
    r.f.recv_shell_execute_reply(&id);
}

#[test]
fn shutdown_on_control_ends_serve_and_tells_the_handler() {
    let mut r = Rig::new();
    assert_eq!(r.f.ping("ping-1"), b"ping-1");
    r.shutdown(true);
}

#[test]
fn comms_and_unknown_messages_get_status_only() {
    let mut r = Rig::new();
    let id = r.f.send(Sock::Shell, "comm_open", json!({"comm_id": "c1", "target_name": "nope", "data": {}}));
    r.f.recv_iopub_busy(&id);
    assert_eq!(r.f.recv_iopub_of(&id, "comm_close").content["comm_id"], "c1");
    r.f.recv_iopub_idle(&id);
    let id = r.f.send(Sock::Shell, "no_such_request", json!({}));
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_idle(&id);
}

#[test]
fn a_panicking_handler_costs_one_error_reply_and_the_kernel_serves_on() {
    let mut r = Rig::new();
    let id = r.f.send_execute_request("panic");
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_execute_input(&id);
    let err = r.f.recv_iopub_of(&id, "error");
    assert_eq!(err.content["ename"], "InternalError");
    assert!(err.content["evalue"].as_str().unwrap().contains("the toy's bug"), "{}", err.content);
    r.f.recv_iopub_idle(&id);
    assert_eq!(r.f.recv_shell_execute_reply(&id)["ename"], "InternalError");
    // The worker thread is still there; so are the shell task and the other handlers.
    for (sock, msg_type, content, reply_type) in [
        (Sock::Shell, "complete_request", json!({"code": "panic", "cursor_pos": 5}), "complete_reply"),
        (Sock::Shell, "is_complete_request", json!({"code": "panic"}), "is_complete_reply"),
        (Sock::Control, "is_complete_request", json!({"code": "panic"}), "is_complete_reply"),
    ] {
        let id = r.f.send(sock, msg_type, content);
        r.f.recv_iopub_busy(&id);
        let reply = if sock == Sock::Shell {
            r.f.recv_shell_reply(&id, reply_type)
        } else {
            r.f.recv_control_reply(&id, reply_type)
        };
        assert_eq!(
            (reply["status"].as_str(), reply["ename"].as_str()),
            (Some("error"), Some("InternalError")),
            "{reply}"
        );
        r.f.recv_iopub_idle(&id);
    }
    let id = r.f.send_execute_request("print still here");
    r.f.recv_iopub_busy(&id);
    r.f.recv_iopub_execute_input(&id);
    assert_eq!(r.f.recv_iopub_stream(&id), "still here");
    r.f.recv_iopub_idle(&id);
    assert_eq!(r.f.recv_shell_execute_reply(&id)["status"], "ok");
}
