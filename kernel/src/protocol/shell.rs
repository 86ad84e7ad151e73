//! The shell and control sockets (both ROUTERs, served by the same code): each message is
//! verified before use, requests that run user code are queued for the worker, the rest
//! (kernel_info, is_complete, history, comms, debug requests, interrupt, shutdown) are answered
//! at once; so are completion and inspection while a cell runs ([`Handler::beside`]).

use super::messages::Request;
use super::outbox::Outbox;
use super::published::{ExecutionState, Published};
use super::replies::{CommInfo, Completions, Done, Inspection, IsComplete, Reply, Shutdown};
use super::wire::{Message, Signer};
use super::worker::Queue;
use super::{guarded, panic_text, Beside, Handler};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use zeromq::{SocketRecv, SocketSend, ZmqMessage};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Channel {
    Shell,
    Control,
}

/// Answers one socket's requests.
pub struct Dispatch<H> {
    handler: Arc<H>,
    out: Outbox,
    channel: Channel,
    work: Queue,
    /// Completions and inspections being answered beside the running cell.
    beside: Arc<AtomicUsize>,
}

/// At most this many are answered beside a running cell at once (they may all wait for the
/// analyzer while the cell builds); more get an empty answer at once.
const BESIDE_AT_ONCE: usize = 4;

impl<H: Handler> Dispatch<H> {
    pub(crate) fn new(handler: Arc<H>, out: Outbox, channel: Channel, work: Queue) -> Self {
        Dispatch { handler, out, channel, work, beside: Arc::default() }
    }

    /// Handles one verified message. Returns `Some(restart)` when the kernel should exit.
    fn handle(&self, msg: Message) -> Option<bool> {
        let h = &self.handler;
        match Request::read(msg.msg_type(), &msg.content) {
            work if work.is_work() => {
                let beside = if matches!(work, Request::Execute) { None } else { h.beside() };
                match beside {
                    Some(beside) => self.answer_beside(msg, work, beside),
                    None => {
                        self.work.send(msg, work);
                        h.work_arrived();
                    }
                }
            }
            Request::KernelInfo => self.out.answer(&msg, || guarded(|| h.kernel_info(), Reply::Error)),
            Request::IsComplete { code } => {
                self.out.answer(&msg, || guarded(|| h.is_complete(&code), IsComplete::Error))
            }
            Request::History(req) => self.out.answer(&msg, || guarded(|| h.history(&req), Reply::Error)),
            Request::Debug(request) => {
                let (out, parent) = (self.out.clone(), msg.clone());
                let events: super::DebugEvents = Arc::new(move |e| out.publish(&parent, Published::DebugEvent(e)));
                let failed = |e: super::ErrorContent| super::dap_response(&request, Err(e.evalue));
                self.out.answer(&msg, || guarded(|| h.debug(&request, events), failed));
            }
            Request::CommInfo { target_name } => self.out.answer(&msg, || {
                let comms = guarded(|| h.comm_info(target_name.as_deref()), |_| json!({}));
                Reply::Ok(CommInfo { comms })
            }),
            Request::Comm(request) => {
                // Handled here, not queued: a widget moved while a cell runs reaches it at once.
                self.out.status(&msg, ExecutionState::Busy);
                let io = super::Io::new(self.out.clone(), msg.clone(), false, 0);
                guarded(|| h.comm(request, &io), |e| tracing::error!("a comm message: {}", e.evalue));
                self.out.status(&msg, ExecutionState::Idle);
                self.work.busy_again(&self.out);
            }
            Request::Interrupt => self.out.answer(&msg, || {
                guarded(
                    || {
                        h.interrupt();
                        self.work.interrupted();
                        // After the handler's interrupt, so a cell waiting for input knows why
                        // its wait ended.
                        self.out.cancel_input();
                        Reply::Ok(Done {})
                    },
                    Reply::Error,
                )
            }),
            Request::Shutdown { restart } => {
                self.out.answer(&msg, || Reply::Ok(Shutdown { restart }));
                return Some(restart);
            }
            // usage_request and unknown types: no reply is owed.
            other => {
                if let Request::Unknown(kind) = other {
                    tracing::warn!("{:?}: no handler for {kind}", self.channel);
                }
                self.out.status(&msg, ExecutionState::Busy);
                self.out.status(&msg, ExecutionState::Idle);
            }
        }
        None
    }
}

impl<H: Handler> Dispatch<H> {
    /// Answers a completion or inspection beside the running cell, on a thread of its own (the
    /// analyzer may be held by the cell's build for a while). Its `idle` is owed (JupyterLab's
    /// completer waits for it), and the running cell's `busy` is said again after it.
    fn answer_beside(&self, msg: Message, request: Request, beside: Box<dyn Beside>) {
        if self.beside.fetch_add(1, Ordering::SeqCst) >= BESIDE_AT_ONCE {
            self.beside.fetch_sub(1, Ordering::SeqCst);
            self.out.answer(&msg, || nothing_found(&request));
            return self.work.busy_again(&self.out);
        }
        let (out, work, count) = (self.out.clone(), self.work.clone(), self.beside.clone());
        let (unanswered, kind) = (msg.clone(), nothing_found(&request));
        let answer = move || {
            out.answer(&msg, || {
                guarded(
                    || match &request {
                        Request::Complete { code, cursor_pos } => to_value(beside.complete(code, *cursor_pos)),
                        Request::Inspect { code, cursor_pos, detail_level } => {
                            to_value(beside.inspect(code, *cursor_pos, *detail_level))
                        }
                        _ => nothing_found(&request),
                    },
                    |e| to_value(Reply::<Done>::Error(e)),
                )
            });
            work.busy_again(&out);
            count.fetch_sub(1, Ordering::SeqCst);
        };
        // Code is parsed there, as on the worker: the same reserved stack for deep nesting.
        let spawned = std::thread::Builder::new()
            .name("dryml-beside".into())
            .stack_size(super::worker::WORKER_STACK_BYTES)
            .spawn(answer);
        if let Err(e) = spawned {
            tracing::error!("no thread to answer beside the running cell: {e}");
            self.beside.fetch_sub(1, Ordering::SeqCst);
            self.out.answer(&unanswered, || kind);
            self.work.busy_again(&self.out);
        }
    }
}

/// An empty `complete_reply` or `inspect_reply`.
fn nothing_found(request: &Request) -> serde_json::Value {
    match request {
        Request::Inspect { .. } => to_value(Reply::Ok(Inspection::none())),
        _ => to_value(Reply::Ok(Completions::none())),
    }
}

/// A reply's content, where one answer may be either of two kinds.
fn to_value(reply: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(reply).expect("reply content serialises")
}

/// Splits a ROUTER into its receive task (verify, dispatch) and its send task (replies from any
/// thread, through the channel).
pub(crate) fn spawn<H: Handler>(
    sock: zeromq::RouterSocket,
    replies: UnboundedReceiver<Message>,
    dispatch: Dispatch<H>,
    signer: Signer,
    exit: UnboundedSender<bool>,
) {
    let (send, recv) = sock.split();
    tokio::spawn(sender_task(send, replies, signer.clone()));
    tokio::spawn(recv_task(recv, dispatch, signer, exit));
}

async fn recv_task<H: Handler>(
    mut sock: zeromq::RouterRecvHalf,
    dispatch: Dispatch<H>,
    signer: Signer,
    exit: UnboundedSender<bool>,
) {
    let channel = dispatch.channel;
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
        match Message::decode(frames, &signer) {
            // Dropped before any JSON is trusted; the kernel keeps serving.
            Err(e) => tracing::warn!("{channel:?}: dropped a message: {e}"),
            Ok(msg) => {
                // Handlers are guarded one by one; this keeps the socket served whatever else.
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch.handle(msg))) {
                    Ok(Some(restart)) => {
                        let _ = exit.send(restart);
                        return;
                    }
                    Ok(None) => {}
                    Err(p) => tracing::error!("{channel:?}: a message's handling panicked: {}", panic_text(&*p)),
                }
            }
        }
    }
}

async fn sender_task(mut sock: zeromq::RouterSendHalf, mut rx: UnboundedReceiver<Message>, signer: Signer) {
    while let Some(m) = rx.recv().await {
        send_encoded(&mut sock, &m, &signer).await;
    }
}

/// Signs and sends; a message ZeroMQ cannot frame or send is logged and dropped.
pub(crate) async fn send_encoded<S: SocketSend>(sock: &mut S, m: &Message, signer: &Signer) {
    if let Ok(z) = ZmqMessage::try_from(m.encode(signer)) {
        if let Err(e) = sock.send(z).await {
            tracing::warn!("send failed: {e}");
        }
    }
}
