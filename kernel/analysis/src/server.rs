//! The analysis process: the embedder's binary, started with [`crate::SOCKET_ENV`] set, serves
//! every kernel of its user that connects to that Unix socket from one host, so what their
//! crates share (the sysroot, common dependencies: most of the hundreds of MiB a load holds) is
//! held and worked out once. A first line names the kernel's crate, then one JSON request and
//! one JSON answer per line; the process ends a few seconds after its last connection, so a
//! restarted kernel finds its analysis warm.

use crate::beside::Shared;
use crate::host::Host;
use crate::local::{Local, ACTIVITY, PRIMING, STACK_BYTES};
use crate::wire;
use crate::Standby;
use anyhow::{Context, Result};
use evcxr::{Analysis, TypeName};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use wire::{Failed, Request};

/// The analysis process: serves each kernel that connects to `socket`, until none is left.
pub fn serve(socket: &Path) -> ! {
    // Not the folder of the kernel that started it, which may go while this serves others.
    let _ = std::env::set_current_dir("/");
    let code = match serve_until_alone(socket) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("dryml-analysis: the analysis process failed: {e:#}");
            1
        }
    };
    std::process::exit(code)
}

/// The host shared by the connected kernels, created with the first one's crate.
#[derive(Default)]
struct Clients {
    host: Option<Arc<Mutex<Host>>>,
    clients: usize,
    /// How many times the last client left: a wait begun at one ends nothing after another.
    emptied: u64,
}

/// How long the process waits for a kernel once the last has left: a restart's new kernel
/// (the old one's shutdown, its start, its first Cargo.toml) joins within it.
const LINGER: Duration = Duration::from_secs(5);

fn serve_until_alone(socket: &Path) -> Result<()> {
    // An interrupt signalled to a kernel's process group is its cell's, not this process's.
    // SAFETY: ignoring a signal installs no handler.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    // One process per socket: the lock is held for this one's life, so a second started at the
    // same moment leaves (its kernel connects to this one), and a socket file left by a
    // process that died is stale.
    let lock = std::fs::File::create(socket.with_extension("lock"))?;
    if !dryml_sys::lock::try_exclusive(&lock) {
        return Ok(());
    }
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).with_context(|| format!("listening on {socket:?}"))?;
    let bound = socket_file(socket).context("the socket just bound")?;
    let clients = Arc::new(Mutex::new(Clients::default()));
    let trimmed = clients.clone();
    let watched = socket.to_owned();
    std::thread::Builder::new()
        .name("dryml-analysis-trim".into())
        .stack_size(STACK_BYTES)
        .spawn(move || trim_when_quiet(&trimmed, &watched, bound))?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // Out of descriptors, say: wait for a client to leave rather than spin.
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        clients.lock().unwrap_or_else(PoisonError::into_inner).clients += 1;
        let left = Left(clients.clone(), socket.to_owned());
        std::thread::Builder::new().name("dryml-analysis-client".into()).stack_size(STACK_BYTES).spawn(move || {
            if let Err(e) = serve_client(stream, &left.0) {
                eprintln!("dryml-analysis: an analysis client failed: {e:#}");
            }
        })?;
    }
    Ok(())
}

/// Counts a client out when its thread ends, a panic included; [`LINGER`] after the last one,
/// with no other come meanwhile, the process ends.
struct Left(Arc<Mutex<Clients>>, PathBuf);

impl Drop for Left {
    fn drop(&mut self) {
        let mut clients = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        clients.clients -= 1;
        if clients.clients > 0 {
            return;
        }
        clients.emptied += 1;
        let (emptied, shared, socket) = (clients.emptied, self.0.clone(), self.1.clone());
        let linger = move || {
            std::thread::sleep(LINGER);
            let clients = shared.lock().unwrap_or_else(PoisonError::into_inner);
            if clients.clients == 0 && clients.emptied == emptied {
                end(&socket);
            }
        };
        if std::thread::Builder::new().name("dryml-analysis-linger".into()).spawn(linger).is_err() {
            end(&self.1);
        }
    }
}

/// Ends the process, its socket unlinked first: a kernel connecting now starts a new one. At
/// once, with no destructor or exit handler run: `process::exit` from a client's thread once
/// left the process alive with the socket's lock held, listening on the unlinked socket, so no
/// kernel of the build could reach one again. Called with the clients' lock held, so no client
/// is counted in meanwhile.
fn end(socket: &Path) -> ! {
    let _ = std::fs::remove_file(socket);
    // SAFETY: _exit ends the process; nothing after it runs.
    unsafe { libc::_exit(0) }
}

/// Answers one kernel's requests until it disconnects, then forgets its crate.
fn serve_client(stream: UnixStream, clients: &Mutex<Clients>) -> Result<()> {
    let mut writer = stream.try_clone()?;
    let mut lines = BufReader::new(stream).lines();
    let Some(hello) = lines.next() else { return Ok(()) };
    let hello: wire::Hello = serde_json::from_str(&hello?).context("no root in the first request")?;
    let root = hello.root;
    let host = {
        let mut clients = clients.lock().unwrap_or_else(PoisonError::into_inner);
        match &clients.host {
            Some(host) => host.clone(),
            None => clients.host.insert(Arc::new(Mutex::new(Host::new(&root)?))).clone(),
        }
    };
    let mut analysis = match Local::attach(host, &root) {
        Ok(analysis) => analysis,
        Err(e) => {
            writeln!(writer, "{}", wire::to_value(&Failed { error: format!("{e:#}") }))?;
            return Err(e);
        }
    };
    writeln!(writer, "{}", wire::to_value(&wire::Done {}))?;
    let shared = analysis.shared();
    let served = || -> Result<()> {
        for line in lines {
            let answer = serde_json::from_str::<Request>(&line?)
                .context("a request the analysis process cannot read")
                .and_then(|request| answer(&mut analysis, &*shared, request))
                .unwrap_or_else(|e| wire::to_value(&Failed { error: format!("{e:#}") }));
            writeln!(writer, "{answer}")?;
            writer.flush()?;
            ACTIVITY.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    };
    let served = served();
    analysis.detach();
    served
}

/// The device and inode of the file at `path`, which names this process's socket while it is it.
fn socket_file(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Once the process has done nothing for a second, drops what the analysis no longer uses
/// (`Host::collect_garbage`) and hands the heap's free pages back to the system (what a load or
/// an inference freed stays in malloc's heap otherwise). Measured with two notebooks opened at
/// once: 531 MiB in use before the collection, 272 after. The heap is trimmed once more a few
/// seconds later: rust-analyzer hands syntax trees and maps to threads of its own to drop, which
/// were still at it (with tch, a notebook's first Tab left 830 MiB, then 572). A process whose
/// socket file is gone or replaced ends.
fn trim_when_quiet(clients: &Mutex<Clients>, socket: &Path, bound: (u64, u64)) {
    let mut trimmed_at = 0;
    let mut again_at: Option<std::time::Instant> = None;
    loop {
        let before = ACTIVITY.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(1));
        // No kernel can reach this process, and it would keep the lock from the one that a
        // kernel starts.
        if socket_file(socket) != Some(bound) {
            eprintln!("dryml-analysis: the socket {socket:?} is no longer this process's; it ends");
            // SAFETY: _exit ends the process; nothing after it runs.
            unsafe { libc::_exit(0) };
        }
        if again_at.is_some_and(|at| at.elapsed() >= Duration::from_secs(3)) {
            again_at = None;
            // SAFETY: malloc_trim only releases memory malloc holds free.
            unsafe { libc::malloc_trim(0) };
        }
        let now = ACTIVITY.load(Ordering::SeqCst);
        if now == before && now != trimmed_at && PRIMING.load(Ordering::SeqCst) == 0 {
            let host = clients.lock().unwrap_or_else(PoisonError::into_inner).host.clone();
            // A request holds it: it is not quiet after all.
            if let Some(Ok(mut host)) = host.as_ref().map(|h| h.try_lock()) {
                host.collect_garbage();
            }
            // SAFETY: malloc_trim only releases memory malloc holds free.
            unsafe { libc::malloc_trim(0) };
            trimmed_at = now;
            again_at = Some(std::time::Instant::now());
        }
    }
}

fn answer(analysis: &mut Local, shared: &dyn Shared, request: Request) -> Result<serde_json::Value> {
    Ok(match request {
        Request::Busy => wire::to_value(&wire::Busy { busy: analysis.busy() }),
        Request::Ready => wire::to_value(&wire::Ready { ready: analysis.ready() }),
        Request::Prefetch => {
            analysis.prefetch();
            wire::to_value(&wire::Done {})
        }
        Request::Variables { source, function } => {
            let variables = analysis.variables_in(source, &function)?;
            let mut unknown: Vec<&String> =
                variables.iter().filter(|(_, v)| v.type_name == TypeName::Unknown).map(|(name, _)| name).collect();
            if !unknown.is_empty() {
                unknown.sort();
                let why = analysis.why_unknown(&function).join("; ");
                eprintln!("dryml-analysis: no type found for {unknown:?}; {}; {why}", analysis.describe());
            }
            wire::to_value(&wire::Variables::from(&variables))
        }
        Request::Completions { source, position, write } => {
            wire::to_value(&wire::Completed::from(&shared.completions_in(source, position, write)?))
        }
        Request::Hover { source, at, write } => wire::to_value(&wire::Hover::from(shared.hover_in(source, at, write)?)),
    })
}
