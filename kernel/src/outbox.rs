//! State shared between the engine, the stream listener and the socket tasks, and the outbox
//! through which any thread sends messages to the iopub, shell and stdin sockets.

use crate::wire::Message;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

#[derive(Default)]
pub struct Shared {
    /// The execute_request whose output is flowing now (kept after the cell for late output).
    pub parent: Mutex<Option<Message>>,
    /// A cell's user code is running in the child.
    pub running: AtomicBool,
    pub child_pid: AtomicU32,
    /// An interrupt hit the running cell; `killed` when the child had to be killed.
    pub interrupted: AtomicBool,
    pub killed: AtomicBool,
    /// The running cell's child got SIGINT (a second interrupt then kills it).
    pub signalled: AtomicBool,
    /// Counts cells run, so a late interrupt timer cannot kill the child under a later cell.
    pub cell_seq: std::sync::atomic::AtomicU64,
    /// How many loops that stop between steps on interrupt the running cell is in
    /// (`DRYML_POLLING`; loops nest).
    pub polling: std::sync::atomic::AtomicU32,
    pub panicked: AtomicBool,
    /// An error a cell raised through `dryml::display::raise_error` (ename, evalue).
    pub raised: Mutex<Option<(String, String)>>,
    /// Suppress stream output (hidden kernel-written evals, silent executes).
    pub quiet: AtomicBool,
    /// When set, stdout is collected here instead of published.
    pub capture: Mutex<Option<String>>,
    /// The current cell's stderr lines, to explain panics and crashes.
    pub stderr_tail: Mutex<Vec<String>>,
}

#[derive(Clone)]
pub struct Outbox {
    pub iopub: UnboundedSender<Message>,
    pub shell: UnboundedSender<Message>,
    pub stdin: UnboundedSender<Message>,
}

impl Outbox {
    pub fn publish(&self, parent: &Message, msg_type: &str, content: Value) {
        let mut m = Message::reply_to(parent, msg_type, content);
        // iopub topics: the message type, as ipykernel uses.
        m.identities = vec![bytes::Bytes::from(format!("kernel.{msg_type}"))];
        let _ = self.iopub.send(m);
    }

    pub fn status(&self, parent: &Message, state: &str) {
        self.publish(parent, "status", json!({"execution_state": state}));
    }

    pub fn reply(&self, m: Message) {
        let _ = self.shell.send(m);
    }

    /// Publishes stream text for the current cell, or captures it for a hidden eval.
    pub fn stream(&self, shared: &Shared, name: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        if name == "stdout" {
            if let Some(buf) = shared.capture.lock().unwrap().as_mut() {
                buf.push_str(text);
                return;
            }
        }
        if shared.quiet.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let parent = shared.parent.lock().unwrap().clone();
        if let Some(p) = parent {
            self.publish(&p, "stream", json!({"name": name, "text": text}));
        }
    }

    pub fn input_request(&self, parent: &Message, prompt: &str, password: bool) {
        let m = Message::reply_to(
            parent,
            "input_request",
            json!({"prompt": prompt, "password": password}),
        );
        let _ = self.stdin.send(m);
    }
}
