//! A kernel's side of the analysis process: a connection made when first needed, one JSON
//! line each way per request, and a process started again where it died or never listened.
//! The process is started only once the notebook asks for what rustc cannot give (a Tab, a
//! hover, a closure's type); until then a cell's Cargo.toml joins one that already runs.

use crate::beside::{Beside, LastCell, Shared};
use crate::wire::{self, Request, SOCKET_ENV};
use anyhow::{bail, Context, Result};
use evcxr::{Completions, VariableInfo};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a kernel waits for a started process to listen.
const START_WAIT: Duration = Duration::from_secs(10);

/// The kernel's side: a connection to the user's analysis process, made when first needed.
#[derive(Clone)]
pub struct Client {
    connection: Arc<Mutex<Connection>>,
    last: LastCell,
    /// Set by the notebook's first request that needs the analysis; from then on each cell's
    /// Cargo.toml (re)starts the process. Plain cells are typed by rustc, and the analysis's
    /// hundreds of MiB are not spent on a notebook that never asks.
    wanted: Arc<AtomicBool>,
}

struct Connection {
    program: PathBuf,
    socket: PathBuf,
    root: PathBuf,
    running: Option<Running>,
    /// When the last try to reach a process failed: the next waits a while (types then come
    /// from rustc alone) instead of costing every cell the wait for a start.
    failed: Option<Instant>,
    /// Tries that failed in a row, and whether a try on a thread of its own is due: a notebook
    /// whose process could not start gets one back without waiting for a request.
    failures: u32,
    retry_planned: bool,
}

/// How many failed tries in a row plan another on a thread: past them, only requests try.
const PLANNED_RETRIES: u32 = 3;

/// How long after a failed start no request tries again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

struct Running {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

/// What picks the cargo and rustc that the process runs (for `cargo metadata` and the sysroot):
/// it has the environment of the kernel that started it.
const TOOLCHAIN_ENV: [&str; 6] = ["PATH", "RUSTUP_TOOLCHAIN", "RUSTUP_HOME", "CARGO_HOME", "CARGO", "RUSTC"];

/// The socket of `program`'s analysis process in `dir`: one per build of the binary (its
/// requests are its own build's) and toolchain (kernels whose environments pick another cargo
/// or rustc get another process).
fn socket_path(program: &Path, dir: &Path) -> PathBuf {
    use std::hash::Hash;
    use std::hash::Hasher;
    use std::os::unix::fs::MetadataExt;
    let mut hasher = std::hash::DefaultHasher::new();
    if let Ok(m) = std::fs::metadata(program) {
        (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()).hash(&mut hasher);
    }
    for name in TOOLCHAIN_ENV {
        std::env::var_os(name).hash(&mut hasher);
    }
    dir.join(format!("analysis-{:016x}.sock", hasher.finish()))
}

impl Connection {
    fn start(&mut self) -> Result<&mut Running> {
        if self.running.is_none() {
            let mut tries = 0;
            let (running, greeted) = loop {
                let stream = self.connect()?;
                let mut running = Running { writer: stream.try_clone()?, reader: BufReader::new(stream) };
                match running.exchange(&wire::Hello { root: self.root.clone() }) {
                    Ok(greeted) => break (running, greeted),
                    // A process that was dying still held the socket: its listener took the
                    // connection and closed it. The next try starts one.
                    Err(_) if tries < 3 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => return Err(e),
                }
            };
            if let Err(error) = wire::answer::<wire::Done>(greeted) {
                bail!("the analysis process could not add this crate: {error}");
            }
            self.running = Some(running);
        }
        Ok(self.running.as_mut().expect("just set"))
    }

    /// A connection to the process, started where none listens (again where one started
    /// leaves at once: it met another that was ending).
    fn connect(&self) -> Result<UnixStream> {
        let deadline = Instant::now() + START_WAIT;
        let mut child: Option<std::process::Child> = None;
        loop {
            match UnixStream::connect(&self.socket) {
                Ok(stream) => {
                    if let Some(child) = child {
                        reap(child);
                    }
                    return Ok(stream);
                }
                Err(e) if Instant::now() > deadline => {
                    if let Some(child) = child {
                        reap(child);
                    }
                    return Err(e).with_context(|| format!("connecting to {:?}", self.socket));
                }
                Err(_) => {}
            }
            let gone = match &mut child {
                None => true,
                Some(child) => match child.try_wait()? {
                    // It met a process that holds the socket's lock: one that is ending.
                    Some(status) if status.success() => true,
                    Some(status) => bail!(
                        "the analysis process for {:?} failed ({status}); see {:?}",
                        self.socket,
                        self.socket.with_extension("log")
                    ),
                    None => false,
                },
            };
            if gone {
                // Again and again only while one that is ending holds the lock: not a storm.
                if child.is_some() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                child = Some(self.spawn()?);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn spawn(&self) -> Result<std::process::Child> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.socket.with_extension("log"))?;
        let mut command = Command::new(&self.program);
        command.env(SOCKET_ENV, &self.socket).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        // Not the kernel's process group: an interrupt or a kill sent to that is not for the
        // process other kernels use.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command.spawn().with_context(|| format!("starting the analysis process {:?}", self.program))
    }

    /// The process's answer, or why there was none (it could not start, or died).
    fn exchange(&mut self, request: &Request) -> Result<Value> {
        if self.running.is_none() && self.failed.is_some_and(|at| at.elapsed() < RETRY_AFTER) {
            bail!("the analysis process could not be reached lately; see {:?}", self.socket.with_extension("log"));
        }
        let answer = self.start().and_then(|running| running.exchange(request));
        if answer.is_err() && self.running.is_none() {
            self.failed = Some(Instant::now());
            self.failures += 1;
        } else if answer.is_ok() {
            self.failed = None;
            self.failures = 0;
        }
        answer
    }

    /// The answer to `request`; a process that died is started again for one more try.
    fn ask<T: serde::de::DeserializeOwned>(&mut self, request: &Request) -> Result<T> {
        let answer = match self.exchange(request) {
            Ok(answer) => answer,
            // The process it was connected to died: one more try, with a new one. (Where none
            // was connected, that try was the start that failed.)
            Err(e) if self.running.is_some() => {
                eprintln!("dryml-analysis: no answer from the analysis process ({e:#}); starting it again");
                self.running = None;
                self.exchange(request)
                    .inspect_err(|e| eprintln!("dryml-analysis: the analysis process did not start again ({e:#})"))?
            }
            Err(e) => return Err(e),
        };
        wire::answer(answer)
    }
}

/// Waits for a started process on a thread of its own, so that it leaves no zombie whenever it
/// ends: it serves other kernels after this one.
fn reap(mut child: std::process::Child) {
    let _ = std::thread::Builder::new().name("dryml-analysis-reap".into()).spawn(move || child.wait());
}

impl Running {
    fn exchange(&mut self, request: &impl serde::Serialize) -> Result<Value> {
        writeln!(self.writer, "{}", wire::to_value(request))?;
        self.writer.flush()?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the analysis process ended");
        }
        Ok(serde_json::from_str(&line)?)
    }
}

impl Client {
    /// `socket_dir`: where the user's kernels meet (private to the user); None keeps the
    /// process to this kernel (its socket in the crate's directory).
    pub fn new(program: PathBuf, socket_dir: Option<PathBuf>, root: &Path) -> Client {
        let socket = socket_path(&program, socket_dir.as_deref().unwrap_or(root));
        let connection = Connection {
            program,
            socket,
            root: root.to_owned(),
            running: None,
            failed: None,
            failures: 0,
            retry_planned: false,
        };
        Client {
            connection: Arc::new(Mutex::new(connection)),
            last: LastCell::default(),
            wanted: Arc::new(AtomicBool::new(false)),
        }
    }

    fn ask<T: serde::de::DeserializeOwned>(&self, request: Request) -> Result<T> {
        let mut connection = self.connection.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = connection.ask(&request);
        if answer.is_err()
            && connection.failed.is_some()
            && connection.failures <= PLANNED_RETRIES
            && !connection.retry_planned
        {
            // Tried again once the wait is over, with no request needed.
            connection.retry_planned = true;
            let client = self.clone();
            let _ = std::thread::Builder::new().name("dryml-analysis-retry".into()).spawn(move || {
                std::thread::sleep(RETRY_AFTER);
                client.connection.lock().unwrap_or_else(PoisonError::into_inner).retry_planned = false;
                client.load();
            });
        }
        answer
    }

    /// The answer where the process runs and no other request is under way; None otherwise.
    fn ask_now<T: serde::de::DeserializeOwned>(&self, request: Request) -> Option<T> {
        let mut connection = self.connection.try_lock().ok()?;
        connection.running.as_ref()?;
        connection.ask(&request).ok()
    }

    /// Whether the process is loading a workspace (a request under way counts).
    fn loading(&self) -> bool {
        match self.connection.try_lock() {
            Err(_) => true,
            Ok(connection) if connection.running.is_none() => false,
            Ok(connection) => {
                drop(connection);
                self.ask_now(Request::Busy).is_none_or(|a: wire::Busy| a.busy)
            }
        }
    }

    /// Whether an inference now would not wait for a load.
    fn ready_now(&self) -> bool {
        self.ask_now(Request::Ready).is_some_and(|a: wire::Ready| a.ready)
    }

    /// From now on the analysis is the notebook's: a request needs it.
    fn want(&self) {
        self.wanted.store(true, Ordering::SeqCst);
    }

    /// Starts the process where none runs, and its load of the Cargo.toml now on disk. Never
    /// waits: behind a request under way (a completion beside a cell), it is asked on a thread.
    /// Until the notebook wants the analysis, only a process already listening (another
    /// notebook's, or one lingering after a restart) is joined.
    fn load(&self) {
        if !self.wanted.load(Ordering::SeqCst) && !self.socket_listens() {
            return;
        }
        let ask = |client: &Client| {
            if let Err(e) = client.ask::<wire::Done>(Request::Prefetch) {
                eprintln!("dryml-analysis: the analysis process could not load the crate: {e:#}");
            }
        };
        if self.connection.try_lock().is_ok() {
            return ask(self);
        }
        let client = self.clone();
        let _ = std::thread::Builder::new().name("dryml-analysis-prefetch".into()).spawn(move || ask(&client));
    }

    /// Whether this kernel is connected, or a process's socket file is there to join (it is
    /// removed as the process ends).
    fn socket_listens(&self) -> bool {
        match self.connection.try_lock() {
            Ok(connection) => connection.running.is_some() || connection.socket.exists(),
            Err(_) => true,
        }
    }

    /// Closes the connection: the process forgets this crate, and ends a few seconds later if
    /// no other kernel is connected. The next request connects again. False while it loads or
    /// answers.
    fn close(&self) -> bool {
        if self.loading() {
            return false;
        }
        let Ok(mut connection) = self.connection.try_lock() else {
            return false;
        };
        connection.running.take().is_some()
    }
}

impl Client {
    /// Completion and hover beside a running cell.
    pub fn beside(&self) -> Beside {
        Beside { shared: Arc::new(self.clone()), last: self.last.clone() }
    }
}

impl evcxr::Analysis for Client {
    fn variables_in(&mut self, source: String, function: &str) -> Result<HashMap<String, VariableInfo>> {
        self.last.record(&source);
        // Only where rustc's types would not do (a closure, a pattern, a probe that failed).
        self.want();
        let answer: wire::Variables = self.ask(Request::Variables { source, function: function.to_string() })?;
        Ok(answer.into())
    }

    fn variables_now(&mut self, source: &str, function: &str) -> Option<HashMap<String, VariableInfo>> {
        self.last.record(source);
        crate::lets::variables_now(source, function, || self.ready_now())
    }

    fn completions_in(&mut self, source: String, position: usize) -> Result<Completions> {
        Shared::completions_in(self, source, position, true)
    }

    fn hover_in(&mut self, source: String, at: u32) -> Result<Option<(String, String)>> {
        Shared::hover_in(self, source, at, true)
    }

    fn prefetch(&mut self) {
        self.load()
    }
}

impl crate::Standby for Client {
    fn busy(&self) -> bool {
        self.loading()
    }

    fn ready(&mut self) -> bool {
        Shared::ready(self)
    }

    fn release(&mut self) -> Result<bool> {
        Ok(self.close())
    }
}

impl Shared for Client {
    fn completions_in(&self, source: String, position: usize, write: bool) -> Result<Completions> {
        self.want();
        let answer: wire::Completed = self.ask(Request::Completions { source, position, write })?;
        Ok(answer.into())
    }

    fn hover_in(&self, source: String, at: u32, write: bool) -> Result<Option<(String, String)>> {
        self.want();
        let answer: wire::Hover = self.ask(Request::Hover { source, at, write })?;
        Ok(answer.into())
    }

    fn ready(&self) -> bool {
        self.want();
        self.ready_now() || {
            self.load();
            false
        }
    }

    fn loading(&self) -> bool {
        Client::loading(self)
    }
}
