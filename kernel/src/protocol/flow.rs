//! The iopub queue, paced: stream text is coalesced into few messages, and what waits for a slow
//! frontend is bounded, so no amount of output grows the kernel. Past the bound the oldest stream
//! text and intermediate display updates are dropped, and the output says so in one line.

use super::published::{Published, StreamName};
use super::wire::Message;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// A message on its way to the iopub socket. Its bytes count as queued until it is dropped:
/// sent, or thrown away with the queue.
pub struct Queued {
    pub msg: Message,
    size: usize,
    queued: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.size, Ordering::SeqCst);
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Stream text waits this long for more before it goes (one message per line was 15k
    /// messages a second, and the queue grew a gigabyte in 20 s).
    pub delay: Duration,
    /// A stream message carries at most about this much text.
    pub chunk: usize,
    /// Above this many bytes waiting for the socket, output that may be dropped is.
    pub queued: usize,
    /// While over that limit, the newest this-many bytes of stream text are kept.
    pub tail: usize,
    /// Display updates held back (the newest per display id) while over the limit.
    pub held: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { delay: Duration::from_millis(20), chunk: 256 << 10, queued: 32 << 20, tail: 1 << 20, held: 64 }
    }
}

/// Stream text not sent yet: one request's, one stream's.
struct Pending {
    parent: Message,
    name: StreamName,
    text: String,
    since: Instant,
    skipped_lines: u64,
    skipped_bytes: u64,
}

impl Pending {
    /// Drops the oldest text beyond `keep` bytes, at a line boundary where there is one.
    fn keep_tail(&mut self, keep: usize) {
        if self.text.len() <= keep {
            return;
        }
        let mut cut = self.text.len() - keep;
        while !self.text.is_char_boundary(cut) {
            cut += 1;
        }
        if let Some(i) = self.text[cut..].find('\n').filter(|&i| i + 1 < self.text.len() - cut) {
            cut += i + 1;
        }
        self.skipped_lines += self.text[..cut].matches('\n').count() as u64;
        self.skipped_bytes += cut as u64;
        self.text.drain(..cut);
    }
}

#[derive(Default)]
struct State {
    pending: Option<Pending>,
    /// The newest update of each display whose updates were held back.
    held: Vec<(String, Message)>,
    /// Displays (and updates beyond `held`) dropped, and the request they belonged to.
    dropped_displays: u64,
    dropped_parent: Option<Message>,
}

/// The kernel's one iopub queue; [`super::Outbox`] publishes through it.
pub struct Flow {
    tx: UnboundedSender<Queued>,
    queued: Arc<AtomicUsize>,
    state: Mutex<State>,
    wake: Condvar,
    limits: Limits,
}

impl Flow {
    /// A queue feeding `tx`, with a thread that sends stream text once it has waited `delay`.
    pub fn new(tx: UnboundedSender<Queued>, limits: Limits) -> Arc<Flow> {
        let flow = Arc::new(Flow { tx, queued: Arc::default(), state: Mutex::default(), wake: Condvar::new(), limits });
        let f = flow.clone();
        let spawned = std::thread::Builder::new().name("dryml-iopub-flush".into()).spawn(move || f.flusher());
        if let Err(e) = spawned {
            tracing::error!("no iopub flusher thread ({e}): stream text goes out with the next message");
        }
        flow
    }

    /// Bytes waiting for the socket now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// Sends the stream text waiting, then waits (at most `within`) until everything queued is
    /// on the socket: a reply sent after this follows its request's output onto the wire.
    pub fn settle(&self, within: Duration) {
        self.flush(&mut self.lock());
        let deadline = Instant::now() + within;
        while self.queued() > 0 && Instant::now() < deadline && !self.tx.is_closed() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn over(&self) -> bool {
        self.queued() > self.limits.queued
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Any message but stream text. Displays may be dropped while the queue is over its limit;
    /// everything else goes, after the stream text before it.
    pub fn publish(&self, msg: Message) {
        let mut st = self.lock();
        let kind = msg.msg_type().to_string();
        if self.over() && (kind == "display_data" || kind == "update_display_data") {
            let id = msg.content["transient"]["display_id"].as_str().map(str::to_string);
            // The request the display answered, for the note that says it was dropped.
            let parent = Message {
                identities: vec![],
                header: msg.parent_header.clone(),
                parent_header: json!({}),
                metadata: json!({}),
                content: json!({}),
                buffers: vec![],
            };
            match id {
                Some(id) if kind == "update_display_data" => match st.held.iter().position(|(h, _)| *h == id) {
                    Some(i) => st.held[i].1 = msg,
                    None if st.held.len() < self.limits.held => st.held.push((id, msg)),
                    None => st.dropped_displays += 1,
                },
                _ => st.dropped_displays += 1,
            }
            if st.dropped_displays > 0 {
                st.dropped_parent = Some(parent);
            }
            return;
        }
        self.flush(&mut st);
        self.send(msg);
    }

    /// Stream text for `parent`'s request; it goes out within `delay`, with what follows it.
    pub fn stream(&self, parent: &Message, name: StreamName, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut st = self.lock();
        if st.pending.as_ref().is_some_and(|p| p.name != name || p.parent.header["msg_id"] != parent.header["msg_id"]) {
            self.flush_text(&mut st);
        }
        let p = st.pending.get_or_insert_with(|| Pending {
            parent: parent.clone(),
            name,
            text: String::new(),
            since: Instant::now(),
            skipped_lines: 0,
            skipped_bytes: 0,
        });
        p.text.push_str(text);
        if self.over() {
            p.keep_tail(self.limits.tail);
        } else if p.text.len() >= self.limits.chunk {
            self.flush_text(&mut st);
        }
        self.wake.notify_one();
    }

    fn flush(&self, st: &mut State) {
        self.flush_text(st);
        if let Some(parent) = st.dropped_parent.take() {
            let n = std::mem::take(&mut st.dropped_displays);
            let note =
                format!("[dryml: {n} display(s) not shown: the frontend read output slower than the cell made it]\n");
            self.send(stream_message(&parent, StreamName::Stderr, &note));
        }
        for (_, update) in std::mem::take(&mut st.held) {
            self.send(update);
        }
    }

    fn flush_text(&self, st: &mut State) {
        let Some(p) = st.pending.take() else { return };
        let text = if p.skipped_bytes > 0 {
            format!(
                "[dryml: {} lines ({}) of {} not shown: the frontend read output slower than the cell wrote it; the newest follow]\n{}",
                p.skipped_lines,
                dryml_sys::units::size(p.skipped_bytes),
                p.name.as_str(),
                p.text
            )
        } else {
            p.text
        };
        self.send(stream_message(&p.parent, p.name, &text));
    }

    fn send(&self, msg: Message) {
        let size = 512 + weight(&msg.content);
        self.queued.fetch_add(size, Ordering::SeqCst);
        // A closed channel (the kernel is stopping) drops the message, and its count with it.
        let _ = self.tx.send(Queued { msg, size, queued: self.queued.clone() });
    }

    /// Sends stream text that has waited `delay`, and what was held back once the queue drains.
    fn flusher(&self) {
        let mut st = self.lock();
        while !self.tx.is_closed() {
            let now = Instant::now();
            let wait = match &st.pending {
                _ if self.over() => self.limits.delay,
                Some(p) if now < p.since + self.limits.delay => p.since + self.limits.delay - now,
                None if st.held.is_empty() && st.dropped_parent.is_none() => Duration::from_secs(1),
                _ => {
                    self.flush(&mut st);
                    continue;
                }
            };
            st = self.wake.wait_timeout(st, wait).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// A `stream` message with iopub's topic.
pub fn stream_message(parent: &Message, name: StreamName, text: &str) -> Message {
    let content = Published::Stream { name, text: text.to_string() }.content();
    let mut m = Message::reply_to(parent, "stream", content);
    m.identities = vec![bytes::Bytes::from("kernel.stream")];
    m
}

/// About how many bytes a message's content takes on the wire.
fn weight(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(weight).sum::<usize>() + 2,
        Value::Object(o) => o.iter().map(|(k, v)| k.len() + 3 + weight(v)).sum::<usize>() + 2,
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(id: &str) -> Message {
        Message {
            identities: vec![],
            header: json!({"msg_id": id, "msg_type": "execute_request", "session": "s"}),
            parent_header: json!({}),
            metadata: json!({}),
            content: json!({}),
            buffers: vec![],
        }
    }

    fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Queued>) -> Vec<Message> {
        let mut got = Vec::new();
        while let Ok(q) = rx.try_recv() {
            got.push(q.msg.clone());
        }
        got
    }

    fn texts(msgs: &[Message]) -> Vec<String> {
        msgs.iter()
            .filter(|m| m.msg_type() == "stream")
            .map(|m| m.content["text"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn lines_coalesce_and_keep_their_order_with_other_messages() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let flow = Flow::new(tx, Limits { delay: Duration::from_secs(3600), ..Limits::default() });
        let p = parent("a");
        for i in 0..1000 {
            flow.stream(&p, StreamName::Stdout, &format!("line {i}\n"));
        }
        flow.stream(&p, StreamName::Stderr, "warn\n");
        flow.stream(&p, StreamName::Stdout, "more\n");
        flow.publish(Message::reply_to(&p, "status", json!({"execution_state": "idle"})));
        let got = drain(&mut rx);
        let kinds: Vec<&str> = got.iter().map(|m| m.msg_type()).collect();
        assert_eq!(kinds, ["stream", "stream", "stream", "status"]);
        let t = texts(&got);
        assert!(t[0].starts_with("line 0\nline 1\n") && t[0].ends_with("line 999\n"), "{}", &t[0][..40]);
        assert_eq!(t[1..], ["warn\n", "more\n"]);
        assert_eq!(flow.queued(), 0, "sent messages no longer count");
    }

    #[test]
    fn the_flusher_sends_text_after_its_delay() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let flow = Flow::new(tx, Limits { delay: Duration::from_millis(10), ..Limits::default() });
        flow.stream(&parent("a"), StreamName::Stdout, "tick\n");
        let q = rx.blocking_recv().expect("the flushed text");
        assert_eq!(q.msg.content["text"], "tick\n");
    }

    #[test]
    fn a_backed_up_queue_keeps_the_newest_text_and_says_what_it_dropped() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let limits = Limits { delay: Duration::from_secs(3600), chunk: 1000, queued: 10_000, tail: 2_000, held: 2 };
        let flow = Flow::new(tx, limits);
        let p = parent("a");
        // Nobody reads the queue: it fills past its limit, then text is cut to the newest.
        for i in 0..100_000 {
            flow.stream(&p, StreamName::Stderr, &format!("warning {i}\n"));
        }
        for i in 0..50 {
            let update = json!({"data": {"text/plain": format!("{i}/50")}, "transient": {"display_id": "bar"}});
            flow.publish(Message::reply_to(&p, "update_display_data", update));
        }
        flow.publish(Message::reply_to(&p, "display_data", json!({"data": {}, "transient": {}})));
        assert!(flow.queued() < 10_000 + 2 * 1500, "queued {}", flow.queued());
        flow.publish(Message::reply_to(&p, "status", json!({"execution_state": "idle"})));
        let got = drain(&mut rx);
        let t = texts(&got);
        let note = t.iter().find(|t| t.starts_with("[dryml: ") && t.contains("of stderr not shown")).expect("the note");
        assert!(note.ends_with("warning 99999\n"), "the newest lines follow the note");
        assert!(note.len() < 2_000 + 200);
        let shown: u64 = t.iter().flat_map(|t| t.lines()).filter(|l| l.starts_with("warning")).count() as u64;
        let said: u64 = note.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(shown + said, 100_000, "every line is shown or counted");
        assert!(t.iter().any(|t| t.contains("1 display(s) not shown")), "{t:?}");
        let updates: Vec<&Message> = got.iter().filter(|m| m.msg_type() == "update_display_data").collect();
        assert_eq!(updates.last().unwrap().content["data"]["text/plain"], "49/50", "the newest update is kept");
        assert_eq!(got.last().unwrap().msg_type(), "status");
    }

    #[test]
    fn a_tail_cut_never_splits_a_character() {
        let mut p = Pending {
            parent: parent("a"),
            name: StreamName::Stdout,
            text: "é".repeat(1000),
            since: Instant::now(),
            skipped_lines: 0,
            skipped_bytes: 0,
        };
        p.keep_tail(101);
        assert!(p.text.len() <= 101 && p.text.chars().all(|c| c == 'é'));
        assert_eq!(p.skipped_bytes as usize + p.text.len(), 2000);
    }
}
