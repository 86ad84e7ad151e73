//! The shell and control sockets (both ROUTERs, served by the same code): each message is
//! verified before use, requests that run user code are queued for the worker, the rest
//! (kernel_info, is_complete, history, comms, debug requests, interrupt, shutdown) are answered
//! at once.

use super::messages::Request;
use super::outbox::Outbox;
use super::wire::{Message, Signer};
use super::worker::Queue;
use super::{guarded, panic_text, Handler};
use serde_json::json;
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
}

impl<H: Handler> Dispatch<H> {
    pub(crate) fn new(handler: Arc<H>, out: Outbox, channel: Channel, work: Queue) -> Self {
        Dispatch { handler, out, channel, work }
    }

    /// Handles one verified message. Returns `Some(restart)` when the kernel should exit.
    fn handle(&self, msg: Message) -> Option<bool> {
        let h = &self.handler;
        match Request::read(msg.msg_type(), &msg.content) {
            work if work.is_work() => {
                self.work.send(msg, work);
                h.work_arrived();
            }
            Request::KernelInfo => self.out.answer(&msg, || guarded(|| h.kernel_info(), |e| e.reply())),
            Request::IsComplete { code } => self.out.answer(&msg, || guarded(|| h.is_complete(&code), |e| e.reply())),
            Request::History(req) => self.out.answer(&msg, || guarded(|| h.history(&req), |e| e.reply())),
            Request::Debug(request) => {
                let (out, parent) = (self.out.clone(), msg.clone());
                let events: super::DebugEvents = Arc::new(move |e| out.publish(&parent, "debug_event", e));
                let failed = |e: super::ErrorContent| super::dap_response(&request, Err(e.evalue));
                self.out.answer(&msg, || guarded(|| h.debug(&request, events), failed));
            }
            Request::CommInfo { target_name } => self.out.answer(&msg, || {
                let comms = guarded(|| h.comm_info(target_name.as_deref()), |_| json!({}));
                json!({"status": "ok", "comms": comms})
            }),
            Request::Comm(request) => {
                // Handled here, not queued: a widget moved while a cell runs reaches it at once.
                self.out.status(&msg, "busy");
                let io = super::Io::new(self.out.clone(), msg.clone(), false, 0);
                guarded(|| h.comm(request, &io), |e| tracing::error!("a comm message: {}", e.evalue));
                self.out.status(&msg, "idle");
            }
            Request::Interrupt => self.out.answer(&msg, || {
                guarded(
                    || {
                        h.interrupt();
                        self.work.interrupted();
                        // After the handler's interrupt, so a cell waiting for input knows why
                        // its wait ended.
                        self.out.cancel_input();
                        json!({"status": "ok"})
                    },
                    |e| e.reply(),
                )
            }),
            Request::Shutdown { restart } => {
                self.out.answer(&msg, || json!({"status": "ok", "restart": restart}));
                return Some(restart);
            }
            // usage_request and unknown types: no reply is owed.
            other => {
                if let Request::Unknown(kind) = other {
                    tracing::warn!("{:?}: no handler for {kind}", self.channel);
                }
                self.out.status(&msg, "busy");
                self.out.status(&msg, "idle");
            }
        }
        None
    }
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
