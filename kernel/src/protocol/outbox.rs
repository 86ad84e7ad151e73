//! The outbox through which any thread sends to the iopub, shell (or control) and stdin
//! sockets, and [`Io`]: the outbox bound to one request, which is all a handler needs to
//! publish a cell's output and read its input.

use super::flow::Flow;
use super::wire::Message;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

#[derive(Clone)]
pub struct Outbox {
    iopub: Arc<Flow>,
    /// Replies: the shell socket's, or control's for control requests.
    replies: UnboundedSender<Message>,
    stdin: UnboundedSender<Message>,
    /// `input_reply` values, in the order they arrive on stdin.
    input: crossbeam_channel::Receiver<String>,
}

impl Outbox {
    pub(crate) fn new(
        iopub: Arc<Flow>,
        replies: UnboundedSender<Message>,
        stdin: UnboundedSender<Message>,
        input: crossbeam_channel::Receiver<String>,
    ) -> Self {
        Outbox { iopub, replies, stdin, input }
    }

    /// The same outbox with replies going to another socket (control's).
    pub(crate) fn with_shell(&self, replies: UnboundedSender<Message>) -> Self {
        Outbox { replies, ..self.clone() }
    }

    pub fn publish(&self, parent: &Message, msg_type: &str, content: Value) {
        let mut m = Message::reply_to(parent, msg_type, content);
        // iopub topics: the message type, as ipykernel uses.
        m.identities = vec![bytes::Bytes::from(format!("kernel.{msg_type}"))];
        self.iopub.publish(m);
    }

    /// Stream text, coalesced with the text around it (see [`Flow`]).
    pub fn stream(&self, parent: &Message, name: &str, text: &str) {
        self.iopub.stream(parent, name, text);
    }

    pub fn status(&self, parent: &Message, state: &str) {
        self.publish(parent, "status", json!({"execution_state": state}));
    }

    pub fn reply(&self, parent: &Message, content: Value) {
        let reply_type = parent.msg_type().replace("_request", "_reply");
        let _ = self.replies.send(Message::reply_to(parent, &reply_type, content));
    }

    /// `busy`, the reply `f` makes, `idle`: the shape of every request but execute.
    pub fn answer(&self, parent: &Message, f: impl FnOnce() -> Value) {
        self.status(parent, "busy");
        self.reply(parent, f());
        self.status(parent, "idle");
    }
}

/// Why [`Io::input`] got no line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputError {
    #[error("this request does not allow stdin (allow_stdin is false)")]
    NotAllowed,
    #[error("the kernel is shutting down")]
    Closed,
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

    pub fn publish(&self, msg_type: &str, content: Value) {
        self.out.publish(&self.parent, msg_type, content);
    }

    pub fn stream(&self, name: &str, text: &str) {
        self.out.stream(&self.parent, name, text);
    }

    pub fn display(&self, data: Value) {
        self.publish("display_data", json!({"data": data, "metadata": {}, "transient": {}}));
    }

    /// The cell's value, under the request's execution count.
    pub fn execute_result(&self, data: Value) {
        self.publish(
            "execute_result",
            json!({"execution_count": self.execution_count, "data": data, "metadata": {}}),
        );
    }

    /// Asks the frontend for a line (`input_request` on stdin) and waits for its `input_reply`.
    pub fn input(&self, prompt: &str, password: bool) -> Result<String, InputError> {
        if !self.allow_stdin {
            return Err(InputError::NotAllowed);
        }
        // An answer left from an earlier request that gave up waiting is not this one's.
        while self.out.input.try_recv().is_ok() {}
        let m = Message::reply_to(&self.parent, "input_request", json!({"prompt": prompt, "password": password}));
        self.out.stdin.send(m).map_err(|_| InputError::Closed)?;
        loop {
            match self.out.input.recv_timeout(Duration::from_secs(1)) {
                Ok(line) => return Ok(line),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) if !self.out.stdin.is_closed() => continue,
                Err(_) => return Err(InputError::Closed),
            }
        }
    }
}
