//! The five Jupyter channels over ZeroMQ: binds them, verifies every message before use,
//! answers what needs no evcxr directly, and queues the rest for the engine thread.

use crate::engine::{Engine, EngineParts, Request};
use crate::history::History;
use crate::is_complete::{is_complete, Completeness};
use crate::outbox::{Outbox, Shared};
use crate::wire::{new_header, Message, Signer, PROTOCOL_VERSION};
use anyhow::{Context, Result};
use jupyter_protocol::ConnectionInfo;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use zeromq::{Socket, SocketRecv, SocketSend, ZmqMessage};

fn endpoint(info: &ConnectionInfo, port: u16) -> String {
    let transport = serde_json::to_value(&info.transport)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "tcp".into());
    if transport == "ipc" {
        format!("ipc://{}-{}", info.ip, port)
    } else {
        format!("tcp://{}:{}", info.ip, port)
    }
}

fn to_zmq(frames: Vec<bytes::Bytes>) -> Option<ZmqMessage> {
    ZmqMessage::try_from(frames).ok()
}

/// This kernel's scratch directory, `<tmp>/dryml-kernel-<uid>/<pid>`: the output socket and,
/// unless the user set `EVCXR_TMPDIR`, evcxr's build directory. Directories left by kernels that
/// were killed (their pid is gone) are removed at start, since a SIGKILL leaves no chance to clean.
fn scratch_dir() -> Result<std::path::PathBuf> {
    let base = std::env::temp_dir().join(format!("dryml-kernel-{}", unsafe { libc::getuid() }));
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let stale = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

pub fn run(info: ConnectionInfo) -> Result<()> {
    let scratch = scratch_dir()?;
    if std::env::var_os("EVCXR_TMPDIR").is_none() {
        let evcxr_dir = scratch.join("evcxr");
        std::fs::create_dir_all(&evcxr_dir)?;
        // Still single-threaded: the runtime and the engine start below.
        std::env::set_var("EVCXR_TMPDIR", &evcxr_dir);
    }
    let result = run_in(info, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn run_in(info: ConnectionInfo, scratch: &std::path::Path) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(info, scratch))
}

async fn serve(info: ConnectionInfo, scratch: &std::path::Path) -> Result<()> {
    if info.signature_scheme != "hmac-sha256" && !info.key.is_empty() {
        anyhow::bail!(
            "unsupported signature_scheme {:?}; only hmac-sha256 is supported",
            info.signature_scheme
        );
    }
    let signer = Signer::new(&info.key);
    let (iopub_tx, iopub_rx) = unbounded_channel::<Message>();
    let (shell_tx, shell_rx) = unbounded_channel::<Message>();
    let (stdin_tx, stdin_rx) = unbounded_channel::<Message>();
    let (control_tx, control_rx) = unbounded_channel::<Message>();
    let out = Outbox {
        iopub: iopub_tx,
        shell: shell_tx,
        stdin: stdin_tx,
    };

    let mut shell = zeromq::RouterSocket::new();
    shell.bind(&endpoint(&info, info.shell_port)).await.context("binding shell")?;
    let mut control = zeromq::RouterSocket::new();
    control.bind(&endpoint(&info, info.control_port)).await.context("binding control")?;
    let mut stdin = zeromq::RouterSocket::new();
    stdin.bind(&endpoint(&info, info.stdin_port)).await.context("binding stdin")?;
    let mut iopub = zeromq::XPubSocket::new();
    iopub.bind(&endpoint(&info, info.iopub_port)).await.context("binding iopub")?;
    let mut hb = zeromq::RepSocket::new();
    hb.bind(&endpoint(&info, info.hb_port)).await.context("binding heartbeat")?;

    let shared = Arc::new(Shared::default());
    let history_path = crate::history::default_path();
    let history = Arc::new(Mutex::new(match History::open(&history_path) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!("history kept in memory only: {e:#}");
            History::in_memory()?
        }
    }));

    let stream_socket = scratch.join("stream.sock");
    let (sync_tx, sync_rx) = crossbeam_channel::unbounded();
    crate::stream::listen(&stream_socket, shared.clone(), out.clone(), sync_tx)?;
    let (input_tx, input_rx) = crossbeam_channel::unbounded::<String>();
    let (engine_tx, engine_rx) = crossbeam_channel::unbounded::<Request>();

    // evcxr's start (first compile included) runs on the engine thread while sockets serve.
    let parts = EngineParts {
        out: out.clone(),
        shared: shared.clone(),
        sync_rx,
        input_rx,
        history: history.clone(),
        stream_socket,
        scratch: scratch.to_path_buf(),
    };
    let engine_out = out.clone();
    std::thread::Builder::new()
        .name("dryml-engine".into())
        .spawn(move || match Engine::start(parts) {
            Ok(engine) => engine.run(engine_rx),
            Err(e) => {
                tracing::error!("the evcxr engine failed to start: {e:#}");
                fail_requests(engine_rx, &engine_out, &format!("{e:#}"));
            }
        })?;

    tokio::spawn(iopub_task(iopub, iopub_rx, signer.clone()));
    tokio::spawn(heartbeat_task(hb));
    tokio::spawn(stdin_task(stdin, stdin_rx, input_tx, signer.clone()));
    tokio::spawn(interrupt_on_sigint(shared.clone()));

    let (shell_send, shell_recv) = shell.split();
    tokio::spawn(sender_task(shell_send, shell_rx, signer.clone()));
    let (control_send, control_recv) = control.split();
    tokio::spawn(sender_task(control_send, control_rx, signer.clone()));

    let ctx = Arc::new(Dispatch {
        out: out.clone(),
        control_out: control_tx,
        shared,
        history,
        engine: engine_tx,
        signer,
    });
    let (exit_tx, mut exit_rx) = unbounded_channel::<()>();
    tokio::spawn(recv_task(shell_recv, ctx.clone(), Channel::Shell, exit_tx.clone()));
    tokio::spawn(recv_task(control_recv, ctx.clone(), Channel::Control, exit_tx));
    let _ = exit_rx.recv().await;
    // Let the shutdown reply and the final idle status leave.
    tokio::time::sleep(Duration::from_millis(150)).await;
    kill_child(&ctx.shared);
    Ok(())
}

fn kill_child(shared: &Shared) {
    let pid = shared.child_pid.load(Ordering::SeqCst);
    if pid > 0 {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

/// If evcxr cannot start, every request still gets an answer that says why.
fn fail_requests(rx: crossbeam_channel::Receiver<Request>, out: &Outbox, why: &str) {
    while let Ok(req) = rx.recv() {
        let msg = match &req {
            Request::Execute(m) | Request::Complete(m) | Request::Inspect(m) => m,
        };
        out.status(msg, "busy");
        let reply_type = msg.msg_type().replace("_request", "_reply");
        out.reply(Message::reply_to(
            msg,
            &reply_type,
            json!({"status": "error", "ename": "EngineError", "evalue": why, "traceback": [why]}),
        ));
        out.status(msg, "idle");
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Channel {
    Shell,
    Control,
}

struct Dispatch {
    out: Outbox,
    control_out: UnboundedSender<Message>,
    shared: Arc<Shared>,
    history: Arc<Mutex<History>>,
    engine: crossbeam_channel::Sender<Request>,
    signer: Signer,
}

async fn recv_task(
    mut sock: zeromq::RouterRecvHalf,
    ctx: Arc<Dispatch>,
    channel: Channel,
    exit: UnboundedSender<()>,
) {
    loop {
        let frames = match sock.recv().await {
            Ok(m) => m.into_vec(),
            Err(e) => {
                tracing::warn!("{channel:?}: receive failed: {e}");
                // A broken peer must not turn this loop into a spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let msg = match Message::decode(frames, &ctx.signer) {
            Ok(m) => m,
            Err(e) => {
                // Dropped before any JSON is trusted; the kernel keeps serving.
                tracing::warn!("{channel:?}: dropped a message: {e}");
                continue;
            }
        };
        if ctx.handle(msg, channel) {
            let _ = exit.send(());
            return;
        }
    }
}

impl Dispatch {
    fn reply(&self, channel: Channel, m: Message) {
        match channel {
            Channel::Shell => self.out.reply(m),
            Channel::Control => {
                let _ = self.control_out.send(m);
            }
        }
    }

    /// Handles one verified message. Returns true when the kernel should exit.
    fn handle(&self, msg: Message, channel: Channel) -> bool {
        let msg_type = msg.msg_type().to_string();
        match msg_type.as_str() {
            "execute_request" => {
                let _ = self.engine.send(Request::Execute(msg));
                return false;
            }
            "complete_request" => {
                let _ = self.engine.send(Request::Complete(msg));
                return false;
            }
            "inspect_request" => {
                let _ = self.engine.send(Request::Inspect(msg));
                return false;
            }
            _ => {}
        }
        self.out.status(&msg, "busy");
        let mut exit = false;
        let reply = match msg_type.as_str() {
            "kernel_info_request" => Some(("kernel_info_reply", kernel_info())),
            "is_complete_request" => {
                let code = msg.content["code"].as_str().unwrap_or("");
                Some(("is_complete_reply", match is_complete(code) {
                    Completeness::Incomplete { indent } => json!({"status": "incomplete", "indent": indent}),
                    other => json!({"status": other.status()}),
                }))
            }
            "history_request" => {
                let content = match self.history.lock().unwrap().query(&msg.content) {
                    Ok(h) => json!({"status": "ok", "history": h}),
                    Err(e) => json!({"status": "error", "ename": "HistoryError", "evalue": format!("{e:#}"), "traceback": []}),
                };
                Some(("history_reply", content))
            }
            "comm_info_request" => Some(("comm_info_reply", json!({"status": "ok", "comms": {}}))),
            "comm_open" => {
                // No comm targets yet: close it at once, as ipykernel does for unknown targets.
                let id = msg.content["comm_id"].clone();
                self.out.publish(&msg, "comm_close", json!({"comm_id": id, "data": {}}));
                None
            }
            "comm_msg" | "comm_close" => None,
            "interrupt_request" => {
                interrupt(&self.shared);
                Some(("interrupt_reply", json!({"status": "ok"})))
            }
            "shutdown_request" => {
                exit = true;
                let restart = msg.content["restart"].as_bool().unwrap_or(false);
                Some(("shutdown_reply", json!({"status": "ok", "restart": restart})))
            }
            "usage_request" => None,
            other => {
                tracing::warn!("{channel:?}: no handler for {other}");
                None
            }
        };
        if let Some((reply_type, content)) = reply {
            self.reply(channel, Message::reply_to(&msg, reply_type, content));
        }
        self.out.status(&msg, "idle");
        exit
    }
}

fn kernel_info() -> Value {
    json!({
        "status": "ok",
        "protocol_version": PROTOCOL_VERSION,
        "implementation": "dryml-rust",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": {
            "name": "rust",
            "version": rustc_version(),
            "mimetype": "text/rust",
            "file_extension": ".rs",
            "pygments_lexer": "rust",
            "codemirror_mode": "rust",
        },
        "banner": format!("DRYML Rust {} — Rust notebooks on evcxr", env!("CARGO_PKG_VERSION")),
        "help_links": [
            {"text": "The Rust Book", "url": "https://doc.rust-lang.org/book/"},
            {"text": "Rust standard library", "url": "https://doc.rust-lang.org/std/"},
            {"text": "evcxr commands", "url": "https://github.com/evcxr/evcxr/blob/main/COMMON.md"},
        ],
        "debugger": false,
        "supported_features": [],
    })
}

fn rustc_version() -> String {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION
        .get_or_init(|| {
            std::process::Command::new("rustc")
                .arg("--version")
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.split_whitespace().nth(1).map(str::to_string))
                .unwrap_or_else(|| "unknown".into())
        })
        .clone()
}

/// How long a cell has to stop after SIGINT before the child is killed; a cell in a loop that
/// stops between steps (`DRYML_POLLING`) gets longer, for its current step to end.
const GRACE: Duration = Duration::from_millis(1000);
const GRACE_POLLING: Duration = Duration::from_secs(60);

/// Stops the running cell: kills a compile in progress (variables kept), else sends SIGINT to
/// the child and, if the cell has not ended after a grace period, kills the child. A second
/// interrupt while the first is pending kills the child at once.
pub fn interrupt(shared: &Arc<Shared>) {
    if !shared.running.load(Ordering::SeqCst) {
        return;
    }
    shared.interrupted.store(true, Ordering::SeqCst);
    let child = shared.child_pid.load(Ordering::SeqCst);
    let builds = build_processes(std::process::id(), child);
    if !builds.is_empty() {
        for pid in builds {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        return;
    }
    if child == 0 {
        return;
    }
    // Only after a SIGINT to the child: a second press just after a build was killed must not
    // take the notebook's variables with it.
    if shared.signalled.swap(true, Ordering::SeqCst) {
        shared.killed.store(true, Ordering::SeqCst);
        unsafe { libc::kill(child as i32, libc::SIGKILL) };
        return;
    }
    unsafe { libc::kill(child as i32, libc::SIGINT) };
    let shared = shared.clone();
    let cell = shared.cell_seq.load(Ordering::SeqCst);
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let same_cell = || shared.running.load(Ordering::SeqCst) && shared.cell_seq.load(Ordering::SeqCst) == cell;
        loop {
            if !same_cell() {
                return;
            }
            let grace = if shared.polling.load(Ordering::SeqCst) > 0 { GRACE_POLLING } else { GRACE };
            if start.elapsed() >= grace {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if same_cell() {
            shared.killed.store(true, Ordering::SeqCst);
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
        }
    });
}

/// The kernel's descendant processes other than the evcxr child: cargo and rustc mid-build.
fn build_processes(kernel: u32, child: u32) -> Vec<i32> {
    let mut parents: std::collections::HashMap<i32, Vec<i32>> = Default::default();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let Some(close) = stat.rfind(')') else { continue };
            let ppid = stat[close + 2..]
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<i32>().ok())
                .unwrap_or(0);
            parents.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo: Vec<i32> = parents
        .get(&(kernel as i32))
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| *p != child as i32)
        .collect();
    while let Some(p) = todo.pop() {
        out.push(p);
        if let Some(kids) = parents.get(&p) {
            todo.extend(kids);
        }
    }
    out
}

async fn interrupt_on_sigint(shared: Arc<Shared>) {
    let Ok(mut sig) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    else {
        return;
    };
    while sig.recv().await.is_some() {
        tracing::info!("SIGINT: interrupting the running cell");
        interrupt(&shared);
    }
}

async fn sender_task(
    mut sock: zeromq::RouterSendHalf,
    mut rx: UnboundedReceiver<Message>,
    signer: Signer,
) {
    while let Some(m) = rx.recv().await {
        send_encoded(&mut sock, &m, &signer).await;
    }
}

async fn iopub_task(mut sock: zeromq::XPubSocket, mut rx: UnboundedReceiver<Message>, signer: Signer) {
    loop {
        tokio::select! {
            m = rx.recv() => {
                let Some(m) = m else { return };
                send_encoded(&mut sock, &m, &signer).await;
            }
            sub = sock.recv() => {
                // JEP 65: greet each new subscriber so clients know iopub is connected.
                if let Ok(sub) = sub {
                    let frame = sub.get(0).cloned().unwrap_or_default();
                    if frame.first() == Some(&1) {
                        let topic = String::from_utf8_lossy(&frame[1..]).into_owned();
                        let welcome = Message {
                            identities: vec![bytes::Bytes::from("iopub_welcome")],
                            header: new_header("iopub_welcome", ""),
                            parent_header: json!({}),
                            metadata: json!({}),
                            content: json!({"subscription": topic}),
                            buffers: vec![],
                        };
                        send_encoded(&mut sock, &welcome, &signer).await;
                    }
                }
            }
        }
    }
}

async fn send_encoded<S: SocketSend>(sock: &mut S, m: &Message, signer: &Signer) {
    if let Some(z) = to_zmq(m.encode(signer)) {
        if let Err(e) = sock.send(z).await {
            tracing::warn!("send failed: {e}");
        }
    }
}

async fn heartbeat_task(mut sock: zeromq::RepSocket) {
    while let Ok(m) = sock.recv().await {
        if sock.send(m).await.is_err() {
            break;
        }
    }
}

async fn stdin_task(
    mut sock: zeromq::RouterSocket,
    mut rx: UnboundedReceiver<Message>,
    input_tx: crossbeam_channel::Sender<String>,
    signer: Signer,
) {
    loop {
        tokio::select! {
            m = rx.recv() => {
                let Some(m) = m else { return };
                send_encoded(&mut sock, &m, &signer).await;
            }
            r = sock.recv() => {
                let Ok(r) = r else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                match Message::decode(r.into_vec(), &signer) {
                    Ok(m) if m.msg_type() == "input_reply" => {
                        let value = m.content["value"].as_str().unwrap_or("").to_string();
                        let _ = input_tx.send(value);
                    }
                    Ok(m) => tracing::warn!("stdin: ignored {}", m.msg_type()),
                    Err(e) => tracing::warn!("stdin: dropped a message: {e}"),
                }
            }
        }
    }
}
