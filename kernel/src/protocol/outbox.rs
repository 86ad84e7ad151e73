//! The outbox through which any thread sends to the iopub, shell (or control) and stdin
//! sockets, and [`Io`]: the outbox bound to one request, which is all a handler needs to
//! publish a cell's output and read its input.

use super::flow::Flow;
use super::published::{ExecutionState, Published, StreamName, Transient};
use super::wire::Message;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// An `input_request`'s content: the kernel asks the frontend for a line.
#[derive(serde::Serialize)]
struct InputRequest<'a> {
    prompt: &'a str,
    password: bool,
}

#[derive(Clone)]
pub struct Outbox {
    iopub: Arc<Flow>,
    /// Replies: the shell socket's, or control's for control requests.
    replies: UnboundedSender<Message>,
    stdin: UnboundedSender<Message>,
    /// `input_reply`s, in the order they arrive on stdin.
    input: crossbeam_channel::Receiver<InputReply>,
    /// An interrupt ends the wait for input.
    cancel: (crossbeam_channel::Sender<()>, crossbeam_channel::Receiver<()>),
}

/// One `input_reply` from the stdin socket.
pub struct InputReply {
    /// The `input_request` it answers, from its parent header (jupyter_client sends none).
    pub answers: Option<String>,
    pub value: String,
}

impl Outbox {
    pub(crate) fn new(
        iopub: Arc<Flow>,
        replies: UnboundedSender<Message>,
        stdin: UnboundedSender<Message>,
        input: crossbeam_channel::Receiver<InputReply>,
    ) -> Self {
        Outbox { iopub, replies, stdin, input, cancel: crossbeam_channel::bounded(1) }
    }

    /// Ends the wait of a request waiting for input (an interrupt): it gets
    /// [`InputError::Interrupted`]. Nothing happens when none waits.
    pub fn cancel_input(&self) {
        let _ = self.cancel.0.try_send(());
    }

    /// The same outbox with replies going to another socket (control's).
    pub(crate) fn with_shell(&self, replies: UnboundedSender<Message>) -> Self {
        Outbox { replies, ..self.clone() }
    }

    pub fn publish(&self, parent: &Message, message: Published) {
        self.publish_with(parent, message, json!({}));
    }

    /// [`Outbox::publish`] with the message's own `metadata` (a comm's, which ipywidgets reads
    /// its protocol version from).
    pub fn publish_with(&self, parent: &Message, message: Published, metadata: Value) {
        let msg_type = message.msg_type();
        let mut m = Message::reply_to(parent, msg_type, message.content());
        m.metadata = metadata;
        // iopub topics: the message type, as ipykernel uses.
        m.identities = vec![bytes::Bytes::from(format!("kernel.{msg_type}"))];
        self.iopub.publish(m);
    }

    /// Stream text, coalesced with the text around it (see [`Flow`]).
    pub fn stream(&self, parent: &Message, name: StreamName, text: &str) {
        self.iopub.stream(parent, name, text);
    }

    pub fn status(&self, parent: &Message, execution_state: ExecutionState) {
        self.publish(parent, Published::Status { execution_state });
    }

    /// The reply to `parent`, its content one of [`super::replies`]' types (or a DAP message).
    pub fn reply(&self, parent: &Message, content: impl serde::Serialize) {
        let reply_type = parent.msg_type().replace("_request", "_reply");
        let content = serde_json::to_value(content).expect("reply content serialises");
        let _ = self.replies.send(Message::reply_to(parent, &reply_type, content));
    }

    /// The reply to an execute request, sent once the output published before it is on the
    /// wire (at most 2 s later, as ipykernel's flush waits): jupyter_console leaves its output
    /// loop at an interrupt's own `idle`, then takes only what iopub holds when the reply comes.
    pub fn reply_after_output(&self, parent: &Message, content: impl serde::Serialize) {
        self.iopub.settle(Duration::from_secs(2));
        self.reply(parent, content);
    }

    /// `busy`, the reply `f` makes, `idle`: the shape of every request but execute.
    pub fn answer<T: serde::Serialize>(&self, parent: &Message, f: impl FnOnce() -> T) {
        self.status(parent, ExecutionState::Busy);
        self.reply(parent, f());
        self.status(parent, ExecutionState::Idle);
    }
}

/// Why [`Io::input`] got no line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputError {
    #[error("this request does not allow stdin (allow_stdin is false)")]
    NotAllowed,
    #[error("the kernel is shutting down")]
    Closed,
    #[error("interrupted while waiting for input")]
    Interrupted,
}

/// The outbox bound to one request: what a handler publishes goes out with that request as its
/// parent. Cheap to clone, so output threads can keep the running cell's.
#[derive(Clone)]
pub struct Io {
    out: Outbox,
    parent: Message,
    allow_stdin: bool,
    execution_count: i64,
}

impl Io {
    pub(crate) fn new(out: Outbox, parent: Message, allow_stdin: bool, execution_count: i64) -> Self {
        Io { out, parent, allow_stdin, execution_count }
    }

    pub fn parent(&self) -> &Message {
        &self.parent
    }

    pub fn publish(&self, message: Published) {
        self.out.publish(&self.parent, message);
    }

    /// Publishes with the message's own `metadata`.
    pub fn publish_with(&self, message: Published, metadata: Value) {
        self.out.publish_with(&self.parent, message, metadata);
    }

    pub fn stream(&self, name: StreamName, text: &str) {
        self.out.stream(&self.parent, name, text);
    }

    pub fn display(&self, data: Value) {
        self.publish(Published::DisplayData { data, metadata: json!({}), transient: Transient::default() });
    }

    /// The cell's value, under the request's execution count.
    pub fn execute_result(&self, data: Value) {
        self.publish(Published::ExecuteResult { execution_count: self.execution_count, data, metadata: json!({}) });
    }

    /// Asks the frontend for a line (`input_request` on stdin) and waits for its `input_reply`.
    pub fn input(&self, prompt: &str, password: bool) -> Result<String, InputError> {
        if !self.allow_stdin {
            return Err(InputError::NotAllowed);
        }
        // An answer left from an earlier request that gave up waiting is not this one's, nor is
        // an interrupt that came when nothing waited.
        while self.out.input.try_recv().is_ok() {}
        while self.out.cancel.1.try_recv().is_ok() {}
        let request = serde_json::to_value(InputRequest { prompt, password }).expect("an input request serialises");
        let m = Message::reply_to(&self.parent, "input_request", request);
        let id = m.header["msg_id"].as_str().unwrap_or_default().to_string();
        self.out.stdin.send(m).map_err(|_| InputError::Closed)?;
        loop {
            crossbeam_channel::select! {
                recv(self.out.input) -> r => match r {
                    // A late answer to an earlier request names that request: it is not this one's.
                    Ok(r) if r.answers.as_ref().is_some_and(|a| *a != id) => {
                        tracing::warn!("stdin: ignored an input_reply to an earlier input_request");
                    }
                    Ok(r) => return Ok(r.value),
                    Err(_) => return Err(InputError::Closed),
                },
                recv(self.out.cancel.1) -> _ => return Err(InputError::Interrupted),
                default(Duration::from_secs(1)) => {
                    if self.out.stdin.is_closed() {
                        return Err(InputError::Closed);
                    }
                }
            }
        }
    }
}
