//! The one thread that runs execute, complete and inspect requests, in shell order: the
//! execute discipline (busy, `execute_input`, the handler, `error`, reply, idle), execution
//! counts, and `stop_on_error` aborts.

use super::messages::Request;
use super::outbox::{Io, Outbox};
use super::published::{ExecutionState, Published};
use super::replies::{ExecuteReply, Reply};
use super::wire::Message;
use super::{guarded, panic_text, ErrorContent, ExecuteOutcome, ExecuteRequest, Handler};
use crossbeam_channel::RecvTimeoutError;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// After the start and after each request, the handler's idle work waits this long for the
/// next one: Run All sends cells back to back, and idle work begun between two of them would
/// only be stopped again (and would compete with them for the machine meanwhile).
const IDLE_AFTER: Duration = Duration::from_millis(1000);

/// The worker's queue, and whether it is still in [`Handler::start`].
#[derive(Clone)]
pub(crate) struct Queue {
    tx: crossbeam_channel::Sender<Work>,
    starting: Arc<Starting>,
    /// The execute request the worker runs, from its `busy` until just before its `idle`.
    running: Arc<Mutex<Option<Message>>>,
}

/// A queued request: the message (for its replies) and what the shell read it as, once.
struct Work {
    msg: Message,
    request: Request,
}

#[derive(Default)]
struct Starting {
    now: AtomicBool,
    interrupted: AtomicBool,
}

impl Queue {
    pub(crate) fn send(&self, msg: Message, request: Request) {
        let _ = self.tx.send(Work { msg, request });
    }

    /// Says again that the kernel is busy with the running execute, if one runs: a request
    /// answered beside it has just published its own `idle`, which JupyterLab reads as the
    /// kernel's. The worker clears the execute under the same lock before its `idle`, so this
    /// `busy` never follows that `idle`.
    pub(crate) fn busy_again(&self, out: &Outbox) {
        if let Some(parent) = &*self.running.lock().unwrap_or_else(PoisonError::into_inner) {
            out.status(parent, ExecutionState::Busy);
        }
    }

    /// An interrupt while the handler starts: the executes queued behind the start-up are the
    /// cells the user meant to stop, so they end as interrupted instead of running.
    pub(crate) fn interrupted(&self) {
        if self.starting.now.load(Ordering::SeqCst) {
            self.starting.interrupted.store(true, Ordering::SeqCst);
        }
    }
}

/// The worker's stack: 1 GiB of address space, of which a cell uses what its nesting needs.
pub const WORKER_STACK_BYTES: usize = 1 << 30;

/// Starts the worker: it calls [`Handler::start`], then serves the queue until every sender is
/// gone.
pub(crate) fn spawn<H: Handler>(handler: Arc<H>, out: Outbox) -> std::io::Result<Queue> {
    let (tx, rx) = crossbeam_channel::unbounded::<Work>();
    let starting = Arc::new(Starting { now: AtomicBool::new(true), interrupted: AtomicBool::new(false) });
    let running = Arc::new(Mutex::new(None));
    let queue = Queue { tx, starting: starting.clone(), running: running.clone() };
    // Handlers parse users' code (evcxr's parser recurses once per level of nesting): a large
    // stack, reserved rather than committed, keeps deep code from aborting the process.
    std::thread::Builder::new().name("dryml-shell-worker".into()).stack_size(WORKER_STACK_BYTES).spawn(move || {
        if let Err(p) = std::panic::catch_unwind(AssertUnwindSafe(|| handler.start())) {
            tracing::error!("the handler panicked while starting: {}", panic_text(&*p));
        }
        starting.now.store(false, Ordering::SeqCst);
        // The first idle work waits as well: Run All's cells come right after the start.
        let last_done = Some(Instant::now());
        let dormant_after = handler.dormant_after();
        let mut worker = Worker {
            handler,
            out,
            rx,
            pending: VecDeque::new(),
            execution_count: 0,
            idle_work: true,
            settle_owed: false,
            dormant_owed: dormant_after.is_some(),
            dormant_after,
            last_done,
            running,
        };
        if starting.interrupted.load(Ordering::SeqCst) {
            let mut queued = worker.take_queued_executes().into_iter();
            if let Some(first) = queued.next() {
                // The first becomes the interrupted cell; the rest are aborted, as after an error.
                let error = ErrorContent::new(
                    "KeyboardInterrupt",
                    "interrupted while the kernel was starting; the cell did not run",
                );
                worker.execute_with(&first.msg, |_, _| ExecuteOutcome {
                    payload: Vec::new(),
                    user_expressions: Default::default(),
                    error: Some(error),
                });
                for w in queued {
                    worker.out.answer(&w.msg, || ExecuteReply::Aborted { execution_count: worker.execution_count });
                }
            }
        }
        worker.run();
    })?;
    Ok(queue)
}

struct Worker<H> {
    handler: Arc<H>,
    out: Outbox,
    rx: crossbeam_channel::Receiver<Work>,
    /// Requests taken off the queue while looking for executes to abort.
    pending: VecDeque<Work>,
    execution_count: i64,
    /// The handler may still have optional work ([`Handler::idle`]).
    idle_work: bool,
    /// Requests were done since the handler last heard it had settled ([`Handler::settled`]).
    settle_owed: bool,
    /// Requests were done since the handler last went dormant ([`Handler::dormant`]).
    dormant_owed: bool,
    dormant_after: Option<Duration>,
    /// When the last request was done.
    last_done: Option<Instant>,
    /// The execute under way ([`Queue::busy_again`]).
    running: Arc<Mutex<Option<Message>>>,
}

impl<H: Handler> Worker<H> {
    fn run(mut self) {
        loop {
            let Work { msg, request } = match self.pending.pop_front() {
                Some(m) => m,
                None if self.idle_work || self.settle_owed || self.dormant_owed => {
                    let after = match self.dormant_after {
                        Some(dormant_after) if !self.idle_work && !self.settle_owed => dormant_after,
                        _ => IDLE_AFTER,
                    };
                    let quiet = self.last_done.map_or(Duration::ZERO, |t| after.saturating_sub(t.elapsed()));
                    match self.rx.recv_timeout(quiet) {
                        Ok(m) => m,
                        Err(RecvTimeoutError::Timeout) if self.idle_work => {
                            self.idle_work = guarded(
                                || self.handler.idle(),
                                |e| {
                                    tracing::warn!("the handler's idle work failed: {}", e.evalue);
                                    false
                                },
                            );
                            self.settle_owed |= !self.idle_work;
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) if self.settle_owed => {
                            self.settle_owed = false;
                            guarded(|| self.handler.settled(), |e| tracing::warn!("settling failed: {}", e.evalue));
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {
                            self.dormant_owed = false;
                            guarded(
                                || self.handler.dormant(),
                                |e| tracing::warn!("going dormant failed: {}", e.evalue),
                            );
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                None => match self.rx.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                },
            };
            match request {
                Request::Execute => self.execute(&msg),
                Request::Complete { code, cursor_pos } => {
                    self.out.answer(&msg, || guarded(|| self.handler.complete(&code, cursor_pos), Reply::Error));
                }
                Request::Inspect { code, cursor_pos, detail_level } => self
                    .out
                    .answer(&msg, || guarded(|| self.handler.inspect(&code, cursor_pos, detail_level), Reply::Error)),
                other => tracing::warn!("worker: {other:?} is not queued work"),
            }
            self.last_done = Some(Instant::now());
            self.settle_owed = true;
            self.dormant_owed = self.dormant_after.is_some();
        }
    }

    fn execute(&mut self, msg: &Message) {
        let handler = self.handler.clone();
        self.execute_with(msg, |req, io| handler.execute(req, io));
    }

    /// The execute discipline around `run`, which makes the outcome.
    fn execute_with(&mut self, msg: &Message, run: impl FnOnce(&ExecuteRequest, &Io) -> ExecuteOutcome) {
        self.out.status(msg, ExecutionState::Busy);
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(msg.clone());
        let mut req = ExecuteRequest::from_content(&msg.content, self.execution_count);
        if req.store_history {
            self.execution_count += 1;
            req.execution_count = self.execution_count;
        }
        if !req.silent {
            self.out
                .publish(msg, Published::ExecuteInput { code: req.code.clone(), execution_count: req.execution_count });
        }
        let io = Io::new(self.out.clone(), msg.clone(), req.allow_stdin, req.execution_count);
        let outcome = guarded(
            || run(&req, &io),
            |e| ExecuteOutcome { payload: Vec::new(), user_expressions: Default::default(), error: Some(e) },
        );
        let execution_count = req.execution_count;
        let reply = match outcome.error.clone() {
            Some(error) => {
                if !req.silent {
                    io.publish(Published::Error(error.clone()));
                }
                ExecuteReply::Error { execution_count, payload: outcome.payload, user_expressions: json!({}), error }
            }
            None => ExecuteReply::Ok {
                execution_count,
                payload: outcome.payload,
                user_expressions: Value::Object(outcome.user_expressions),
            },
        };
        // Only what was queued before the error's reply is aborted: a client that waits for
        // the reply and then sends more must not see it aborted.
        let aborted =
            if outcome.error.is_some() && req.stop_on_error { self.take_queued_executes() } else { Vec::new() };
        self.out.reply_after_output(msg, reply);
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.out.status(msg, ExecutionState::Idle);
        for w in aborted {
            self.out.answer(&w.msg, || ExecuteReply::Aborted { execution_count: self.execution_count });
        }
    }

    /// After an error, executes already queued are answered `aborted`, as ipykernel does.
    fn take_queued_executes(&mut self) -> Vec<Work> {
        let mut executes = Vec::new();
        while let Ok(w) = self.rx.try_recv() {
            if matches!(w.request, Request::Execute) {
                executes.push(w);
            } else {
                self.pending.push_back(w);
            }
        }
        executes
    }
}

#[cfg(test)]
mod tests {
    use super::super::flow::{Flow, Limits, Queued};
    use super::super::published::StreamName;
    use super::super::replies::{Completions, History, Inspection, IsComplete, KernelInfo};
    use super::super::HistoryRequest;
    use super::*;
    use tokio::sync::mpsc::unbounded_channel;

    /// Prints, then ends as interrupted: the cell jupyter_console lost its error for.
    struct Interrupted;

    impl Handler for Interrupted {
        fn kernel_info(&self) -> Reply<KernelInfo> {
            unreachable!()
        }
        fn execute(&self, _: &ExecuteRequest, io: &Io) -> ExecuteOutcome {
            io.stream(StreamName::Stdout, "looping\n");
            let error = Some(ErrorContent::new("KeyboardInterrupt", "interrupted; variables kept"));
            ExecuteOutcome { payload: Vec::new(), user_expressions: Default::default(), error }
        }
        fn complete(&self, _: &str, _: usize) -> Reply<Completions> {
            unreachable!()
        }
        fn inspect(&self, _: &str, _: usize, _: u64) -> Reply<Inspection> {
            unreachable!()
        }
        fn is_complete(&self, _: &str) -> IsComplete {
            IsComplete::Complete
        }
        fn history(&self, _: &HistoryRequest) -> Reply<History> {
            unreachable!()
        }
        fn interrupt(&self) {}
        fn shutdown(&self, _: bool) {}
    }

    #[test]
    fn an_execute_reply_leaves_after_its_output_is_on_a_slow_socket() {
        let (iopub_tx, mut iopub_rx) = unbounded_channel::<Queued>();
        let (replies_tx, mut replies_rx) = unbounded_channel::<Message>();
        let (stdin_tx, _stdin_rx) = unbounded_channel::<Message>();
        let (_input_tx, input_rx) = crossbeam_channel::unbounded();
        let out = Outbox::new(Flow::new(iopub_tx, Limits::default()), replies_tx, stdin_tx, input_rx);
        // The socket: 30 ms a message, as a frontend busy elsewhere reads them; a message is
        // sent (and stops counting as queued) once taken and dropped.
        let socket = std::thread::spawn(move || {
            let mut sent = Vec::new();
            while let Some(q) = iopub_rx.blocking_recv() {
                std::thread::sleep(Duration::from_millis(30));
                sent.push((q.msg.msg_type().to_string(), Instant::now()));
                let idle = q.msg.content["execution_state"] == "idle";
                drop(q);
                if idle {
                    return sent;
                }
            }
            sent
        });
        let queue = spawn(Arc::new(Interrupted), out).expect("the worker starts");
        let header = super::super::wire::new_header("execute_request", "console");
        let msg = Message {
            identities: vec![],
            header,
            parent_header: json!({}),
            metadata: json!({}),
            content: json!({"code": "loop", "silent": false}),
            buffers: vec![],
        };
        queue.send(msg, Request::Execute);
        let reply = replies_rx.blocking_recv().expect("a reply");
        let replied = Instant::now();
        assert_eq!(reply.content["status"], "error");
        let sent = socket.join().expect("the socket thread");
        let before: Vec<&str> = sent.iter().filter(|(_, at)| *at < replied).map(|(t, _)| t.as_str()).collect();
        assert_eq!(before, ["status", "execute_input", "stream", "error"], "sent: {sent:?}");
    }
}
