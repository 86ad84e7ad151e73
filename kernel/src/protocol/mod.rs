//! The Jupyter messaging protocol over ZeroMQ, apart from any engine: sockets, signing, the
//! busy/idle and reply discipline, stdin round trips and interrupts. It never names evcxr; the
//! engine plugs in through [`Handler`], and a toy handler drives it in the protocol tests.
//!
//! One task per socket, as ark's amalthea has it: [`shell`] (and control, the same code on its
//! own socket) receive, verify and dispatch; [`iopub`] publishes and greets subscribers;
//! [`stdin`] carries `input_request`/`input_reply`; [`heartbeat`] echoes; [`parent`] ends the
//! kernel when the process that started it is gone. Requests that run user code go, in order,
//! to one worker thread ([`worker`]); the rest are answered at once.

pub mod flow;
pub mod heartbeat;
pub mod iopub;
pub mod messages;
pub mod outbox;
pub mod parent;
pub mod published;
pub mod replies;
pub mod shell;
pub mod stdin;
pub mod wire;
mod worker;

pub use messages::{CommOp, CommRequest, ConnectionInfo, HistoryRequest, Request};
pub use outbox::{Io, Outbox};
pub use wire::{Message, Signer, WireError, PROTOCOL_VERSION};

use anyhow::{Context, Result};
use published::Published;
use replies::{Completions, History, Inspection, IsComplete, KernelInfo, Reply};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::unbounded_channel;
use zeromq::Socket;

/// One `execute_request`, read once from its content.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    pub code: String,
    pub silent: bool,
    /// False for silent requests too, as the protocol says.
    pub store_history: bool,
    pub allow_stdin: bool,
    pub stop_on_error: bool,
    pub user_expressions: Map<String, Value>,
    /// The count this request runs under (raised before the call when it stores history).
    pub execution_count: i64,
}

impl ExecuteRequest {
    fn from_content(c: &Value, count: i64) -> Self {
        let silent = c["silent"].as_bool().unwrap_or(false);
        ExecuteRequest {
            code: c["code"].as_str().unwrap_or("").to_string(),
            silent,
            store_history: c["store_history"].as_bool().unwrap_or(true) && !silent,
            allow_stdin: c["allow_stdin"].as_bool().unwrap_or(true),
            stop_on_error: c["stop_on_error"].as_bool().unwrap_or(true),
            user_expressions: c["user_expressions"].as_object().cloned().unwrap_or_default(),
            execution_count: count,
        }
    }
}

/// Jupyter's `error` content: also what a failed cell's reply carries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorContent {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

/// The error name of everything a magic refuses (a bad line, a missing resource).
pub const MAGIC_ERROR: &str = "MagicError";

impl ErrorContent {
    /// An error whose traceback is its one line, `ename: evalue`.
    pub fn new(ename: &str, evalue: impl Into<String>) -> Self {
        let evalue = evalue.into();
        ErrorContent { ename: ename.into(), traceback: vec![format!("{ename}: {evalue}")], evalue }
    }
}

/// Runs a handler call; a panic in it (a bug of ours) becomes an `InternalError` for this
/// request, and the worker goes on serving the next one.
pub(crate) fn guarded<T>(call: impl FnOnce() -> T, on_panic: impl FnOnce(ErrorContent) -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|p| {
        let what = panic_text(&*p);
        tracing::error!("a request panicked: {what}");
        on_panic(ErrorContent::new(
            "InternalError",
            format!("the kernel hit a bug while handling this request ({what}); it recovered and keeps the notebook's variables"),
        ))
    })
}

pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    dryml_sys::panic_message(p).unwrap_or_else(|| "a panic".into())
}

/// How a cell ended. Output (streams, displays, `execute_result`) went out through [`Io`] while
/// it ran; the protocol publishes the error and sends the reply.
#[derive(Debug, Clone)]
pub struct ExecuteOutcome {
    pub payload: Vec<Value>,
    /// The evaluated `user_expressions` (only on success, as the protocol says).
    pub user_expressions: Map<String, Value>,
    pub error: Option<ErrorContent>,
}

/// What the protocol asks of a kernel. Execute, complete and inspect run one at a time on the
/// worker thread, in the order they arrived on shell; the rest are called from the socket tasks
/// at once, even while a cell runs, so they must not wait for it.
/// Publishes a DAP event as a `debug_event` on iopub.
pub type DebugEvents = std::sync::Arc<dyn Fn(Value) + Send + Sync>;

/// A DAP response (the debug adapter protocol's own message, which a `debug_reply` carries).
#[derive(serde::Serialize)]
struct DapResponse<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: u64,
    request_seq: &'a Value,
    command: &'a Value,
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// The DAP response to `request`: `success` with its body, or a failure that says why.
pub fn dap_response(request: &Value, body: Result<Value, String>) -> Value {
    let (request_seq, command) = (&request["seq"], &request["command"]);
    let (success, body, message) = match body {
        Ok(b) => (true, Some(b), None),
        Err(m) => (false, None, Some(m)),
    };
    let response = DapResponse { kind: "response", seq: 0, request_seq, command, success, body, message };
    serde_json::to_value(response).expect("a DAP response serialises")
}

/// Completion and inspection beside a running cell ([`Handler::beside`]).
pub trait Beside: Send {
    fn complete(&self, code: &str, cursor_pos: usize) -> Reply<Completions>;
    fn inspect(&self, code: &str, cursor_pos: usize, detail_level: u64) -> Reply<Inspection>;
}

pub trait Handler: Send + Sync + 'static {
    /// Called once on the worker thread before any request: slow start-up goes here, while the
    /// sockets already answer `kernel_info`.
    fn start(&self) {}
    /// Optional work (a warm-up) done on the worker while no request waits, one step per call;
    /// returns whether more remains. A step gives way when [`Handler::work_arrived`] is called.
    fn idle(&self) -> bool {
        false
    }
    /// The worker has been idle a while since its last request (and its idle work is over):
    /// the time to give memory back. Called once per quiet spell.
    fn settled(&self) {}
    /// How long the worker stays quiet after its last request before [`Handler::dormant`];
    /// None: never.
    fn dormant_after(&self) -> Option<Duration> {
        None
    }
    /// The worker has been quiet for [`Handler::dormant_after`]: what costs memory and can be
    /// had again on demand may go. Called once per quiet spell.
    fn dormant(&self) {}
    /// A request was queued for the worker (called from the socket task, at once): optional
    /// work under way should stop, so that the request does not wait for it.
    fn work_arrived(&self) {}
    /// The `kernel_info_reply` content.
    fn kernel_info(&self) -> Reply<KernelInfo>;
    fn execute(&self, req: &ExecuteRequest, io: &Io) -> ExecuteOutcome;
    /// The `complete_reply` content; `cursor_pos` counts characters, as Jupyter does.
    fn complete(&self, code: &str, cursor_pos: usize) -> Reply<Completions>;
    /// The `inspect_reply` content.
    fn inspect(&self, code: &str, cursor_pos: usize, detail_level: u64) -> Reply<Inspection>;
    /// The `is_complete_reply` content.
    fn is_complete(&self, code: &str) -> IsComplete;
    /// The `history_reply` content for a `history_request`.
    fn history(&self, request: &HistoryRequest) -> Reply<History>;
    /// A `debug_request`'s DAP request: its DAP response (the `debug_reply`). `events`
    /// publishes `debug_event`s on iopub, now or later, from any thread. By default there is
    /// no debugger: a failed response that says so.
    fn debug(&self, request: &Value, events: DebugEvents) -> Value {
        let _ = events;
        dap_response(request, Err("this kernel has no debugger".into()))
    }
    /// A comm message from the frontend, handled at once, while a cell runs too; what it causes
    /// is published through `io`, whose parent is the message. By default there are no comm
    /// targets: a `comm_open` is closed at once, as ipykernel closes one to an unknown target.
    fn comm(&self, request: CommRequest, io: &Io) {
        if matches!(request.op, CommOp::Open { .. }) {
            io.publish(Published::CommClose { comm_id: request.comm_id.clone(), data: json!({}) });
        }
    }
    /// The open comms for a `comm_info_request` (`{id: {"target_name": ..}}`), of one target
    /// when it names one.
    fn comm_info(&self, target_name: Option<&str>) -> Value {
        let _ = target_name;
        json!({})
    }
    /// While a cell runs: what answers `complete_request` and `inspect_request` at once, on a
    /// thread of their own, from the notebook as that cell found it, so a long training does not
    /// hold up Tab. `None` (the default, and whenever no cell runs) queues them for the worker,
    /// in shell order.
    fn beside(&self) -> Option<Box<dyn Beside>> {
        None
    }
    /// Stop the running cell, if any.
    fn interrupt(&self);
    /// The kernel is about to exit (after the reply and the final idle have left).
    fn shutdown(&self, restart: bool);
}

/// How a connection file's transport and port become a ZeroMQ endpoint.
pub fn endpoint(info: &ConnectionInfo, port: u16) -> String {
    if info.transport == "ipc" {
        format!("ipc://{}-{}", info.ip, port)
    } else {
        format!("tcp://{}:{}", info.ip, port)
    }
}

/// Binds the five sockets and serves until a `shutdown_request` (or until the process that
/// started the kernel is gone: [`parent`]); then calls
/// [`Handler::shutdown`] and returns. Blocks the calling thread (it runs its own tokio runtime).
pub fn serve<H: Handler>(info: &ConnectionInfo, handler: Arc<H>) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("dryml-protocol")
        .enable_all()
        .build()?;
    rt.block_on(serve_async(info, handler))
}

async fn serve_async<H: Handler>(info: &ConnectionInfo, handler: Arc<H>) -> Result<()> {
    if info.signature_scheme != "hmac-sha256" && !info.key.is_empty() {
        anyhow::bail!("unsupported signature_scheme {:?}; only hmac-sha256 is supported", info.signature_scheme);
    }
    let signer = Signer::new(&info.key);
    let (iopub_tx, iopub_rx) = unbounded_channel::<flow::Queued>();
    let (shell_tx, shell_rx) = unbounded_channel::<Message>();
    let (control_tx, control_rx) = unbounded_channel::<Message>();
    let (stdin_tx, stdin_rx) = unbounded_channel::<Message>();
    let (reply_tx, reply_rx) = crossbeam_channel::unbounded::<outbox::InputReply>();
    let out = Outbox::new(flow::Flow::new(iopub_tx, flow::Limits::default()), shell_tx, stdin_tx, reply_rx);

    let mut shell = zeromq::RouterSocket::new();
    shell.bind(&endpoint(info, info.shell_port)).await.context("binding shell")?;
    let mut control = zeromq::RouterSocket::new();
    control.bind(&endpoint(info, info.control_port)).await.context("binding control")?;
    let mut stdin = zeromq::RouterSocket::new();
    stdin.bind(&endpoint(info, info.stdin_port)).await.context("binding stdin")?;
    let mut iopub = zeromq::XPubSocket::new();
    iopub.bind(&endpoint(info, info.iopub_port)).await.context("binding iopub")?;
    let mut hb = zeromq::RepSocket::new();
    hb.bind(&endpoint(info, info.hb_port)).await.context("binding heartbeat")?;

    let work = worker::spawn(handler.clone(), out.clone())?;
    tokio::spawn(iopub::task(iopub, iopub_rx, signer.clone()));
    tokio::spawn(heartbeat::task(hb));
    tokio::spawn(stdin::task(stdin, stdin_rx, reply_tx, signer.clone()));
    tokio::spawn(interrupt_on_sigint(handler.clone(), out.clone(), work.clone()));

    let (exit_tx, mut exit_rx) = unbounded_channel::<bool>();
    if let Some(parent) = parent::from_env() {
        tokio::spawn(parent::watch(parent, exit_tx.clone()));
    }
    let shell_side = shell::Dispatch::new(handler.clone(), out.clone(), shell::Channel::Shell, work.clone());
    let control_side = shell::Dispatch::new(handler.clone(), out.with_shell(control_tx), shell::Channel::Control, work);
    shell::spawn(shell, shell_rx, shell_side, signer.clone(), exit_tx.clone());
    shell::spawn(control, control_rx, control_side, signer, exit_tx);
    let restart = exit_rx.recv().await.unwrap_or(false);
    // Let the shutdown reply and the final idle status leave.
    tokio::time::sleep(Duration::from_millis(150)).await;
    handler.shutdown(restart);
    Ok(())
}

/// SIGINT to the kernel process (a terminal's Ctrl-C, or a client's `interrupt_mode: signal`).
async fn interrupt_on_sigint<H: Handler>(handler: Arc<H>, out: Outbox, work: worker::Queue) {
    let Ok(mut sig) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) else {
        return;
    };
    while sig.recv().await.is_some() {
        tracing::info!("SIGINT: interrupting the running cell");
        handler.interrupt();
        work.interrupted();
        out.cancel_input();
    }
}
