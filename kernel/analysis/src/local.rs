//! A notebook's crate in a host of this process: its requests, and the thread that loads a
//! changed workspace ahead of need and then primes the first inference.

use crate::beside::{Beside, LastCell, Shared};
use crate::host::{abs, Host};
use crate::queries;
use anyhow::Result;
use evcxr::{Completions, VariableInfo};
use ra_ap_paths::AbsPathBuf;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The stack of a thread that analyses, reserved rather than committed: the trait solver
/// recurses with the types (a notebook of polars types overflowed 2 MiB, ci22).
pub(crate) const STACK_BYTES: usize = 1 << 30;

/// Work done in this process: each answer, and each priming after one. The server trims its
/// heap once this stops moving.
pub(crate) static ACTIVITY: AtomicU64 = AtomicU64::new(0);

/// Priming threads under way: a garbage collection now would cancel them.
pub(crate) static PRIMING: AtomicUsize = AtomicUsize::new(0);

/// What a first inference needs (the standard library's names, the prelude: about 3 s),
/// worked out by hovering `evcxr_priming` on a snapshot.
const PRIMING_SOURCE: &str = "fn evcxr_analysis_wrapper() {\n\
    let evcxr_priming = vec![String::from(\"a\")];\n\
    let evcxr_primed = evcxr_priming.iter().map(|s| s.len()).sum::<usize>();\n\
}\n";

/// [`PRIMING_SOURCE`] naming each dependency in `toml` too: a path into a crate makes its names
/// (about 1 s for ndarray's). Until they are made the analysis is not ready, and a new `let`'s
/// type is rustc's, not a wait. Not `dryml`'s, there from the start: making them beside a
/// notebook's first cells slowed each by 30 ms.
fn priming_source(toml: &[u8]) -> String {
    let toml = String::from_utf8_lossy(toml);
    let mut section = "";
    let mut paths = String::new();
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if let Some((key, _)) = line.split_once('=').filter(|_| section == "[dependencies]") {
            let name = key.trim().replace('-', "_");
            if !name.is_empty() && name != "dryml" && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                paths.push_str(&format!("    let _ = {name}::evcxr_priming;\n"));
            }
        }
    }
    PRIMING_SOURCE.replacen("}\n", &format!("{paths}}}\n"), 1)
}

/// One notebook's crate in a host that may hold others' too (a clone is the same crate's).
#[derive(Clone)]
pub struct Local {
    host: Arc<Mutex<Host>>,
    root: AbsPathBuf,
    /// The Cargo.toml last handed to a loading thread.
    requested: Arc<Mutex<Option<Vec<u8>>>>,
    /// Loading threads not yet done (loading, or priming on their snapshot).
    busy: Arc<AtomicUsize>,
    /// False once detached (read and cleared under the host's lock), so that a loading thread
    /// still under way cannot add the crate back.
    attached: Arc<AtomicBool>,
    last: LastCell,
}

impl Local {
    /// The analysis of the crate in `root`, in a host of its own.
    pub fn new(root: &Path) -> Result<Local> {
        let host = Arc::new(Mutex::new(Host::new(root)?));
        Local::attach(host, root)
    }

    /// `root`'s crate in a host shared with others. It is added by its first request: the
    /// host may be busy with another's, which a connecting kernel must not wait for.
    pub(crate) fn attach(host: Arc<Mutex<Host>>, root: &Path) -> Result<Local> {
        Ok(Local {
            host,
            root: abs(root)?,
            requested: Arc::default(),
            busy: Arc::default(),
            attached: Arc::new(AtomicBool::new(true)),
            last: LastCell::default(),
        })
    }

    #[cfg(test)]
    pub(crate) fn host(&self) -> Arc<Mutex<Host>> {
        self.host.clone()
    }

    /// Takes this crate out of the host it shares with others.
    pub(crate) fn detach(self) {
        let mut host = self.host.lock().unwrap_or_else(PoisonError::into_inner);
        self.attached.store(false, Ordering::SeqCst);
        host.remove(&self.root);
    }

    #[cfg(test)]
    pub(crate) fn without_sysroot(&self) {
        self.host.lock().unwrap().with_sysroot = false;
    }

    /// Loaded and primed, so an inference now would not wait (false while another thread holds
    /// the host).
    pub fn ready(&self) -> bool {
        if crate::Standby::busy(self) {
            return false;
        }
        let locked = match self.host.try_lock() {
            Ok(host) => host,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let mut host = locked;
        host.select(&self.root, false).is_ok() && host.ws.loaded_toml.is_some()
    }

    /// The analysis's state of this crate, for a log line.
    pub(crate) fn describe(&self) -> String {
        match Host::locked(&self.host, &self.root, false) {
            Ok(host) => host.describe(),
            Err(_) => format!("{} is not analysed here", self.root),
        }
    }

    /// Why the top-level `let`s of `function` that the last analysis found no type for have
    /// none, for a log line.
    pub(crate) fn why_unknown(&self, function: &str) -> Vec<String> {
        match Host::locked(&self.host, &self.root, false) {
            // A crate never loaded has no text in the database to read (ci48: a panic, then the
            // kernel's connection gone).
            Ok(host) if host.ws.loaded_toml.is_some() => queries::why_unknown(&host, function),
            Ok(_) => vec!["the crate was never loaded".into()],
            Err(_) => Vec::new(),
        }
    }

    /// Completion and hover of this crate from any thread.
    pub fn shared(&self) -> Arc<dyn Shared> {
        Arc::new(SharedHost(self.host.clone(), self.root.clone()))
    }

    /// Completion and hover beside a running cell.
    pub fn beside(&self) -> Beside {
        Beside { shared: self.shared(), last: self.last.clone() }
    }
}

impl evcxr::Analysis for Local {
    /// Each analysis sets its source and asks under one hold of the lock: a completion from
    /// another thread while a cell runs cannot swap the source in between.
    fn variables_in(&mut self, source: String, function: &str) -> Result<HashMap<String, VariableInfo>> {
        self.last.record(&source);
        let mut host = Host::locked(&self.host, &self.root, true)?;
        match host.set_source(source.clone(), true) {
            Ok(()) => {
                let variables = queries::variables(&host, function);
                if !variables.values().any(|v| v.type_name == evcxr::TypeName::Unknown) || host.alone() {
                    return Ok(variables);
                }
                // A miss in a host shared with others: where even the prelude has no type there,
                // the host starts again with this crate alone (the others load again at their
                // next request), and answers from that.
                // A probe that fails says nothing of the host: the answer stands.
                match queries::prelude_types(&mut host) {
                    Ok(false) => {}
                    Ok(true) => return Ok(variables),
                    Err(e) => {
                        eprintln!("dryml-analysis: the prelude probe failed ({e:#}); the answer stands");
                        return Ok(variables);
                    }
                }
                eprintln!(
                    "dryml-analysis: the prelude has no type in the shared analysis ({}); it starts again",
                    host.describe()
                );
                host.start_again()?;
                host.set_source(source, true)?;
                Ok(queries::variables(&host, function))
            }
            // A crate the analysis cannot load: the types written out, and rustc asked for the
            // others, as while a load is under way. The next request loads again.
            Err(e) => {
                eprintln!("dryml-analysis: {e:#}; rustc is asked for the types");
                crate::lets::let_variables(&source, function).ok_or(e)
            }
        }
    }

    fn variables_now(&mut self, source: &str, function: &str) -> Option<HashMap<String, VariableInfo>> {
        self.last.record(source);
        crate::lets::variables_now(source, function, || self.ready())
    }

    fn completions_in(&mut self, source: String, position: usize) -> Result<Completions> {
        self.shared().completions_in(source, position, true)
    }

    fn hover_in(&mut self, source: String, at: u32) -> Result<Option<(String, String)>> {
        self.shared().hover_in(source, at, true)
    }

    /// Loads the workspace of the Cargo.toml now on disk and primes the analysis on a thread
    /// of its own, unless that Cargo.toml was handed over already. The next request waits for
    /// the load; one that failed is done again by it.
    fn prefetch(&mut self) {
        let path = self.root.join("Cargo.toml");
        let Ok(toml) = std::fs::read(&path) else { return };
        let mut requested = self.requested.lock().unwrap_or_else(PoisonError::into_inner);
        if requested.as_ref() == Some(&toml) {
            return;
        }
        *requested = Some(toml.clone());
        drop(requested);
        let job = Priming {
            host: self.host.clone(),
            root: self.root.clone(),
            toml,
            add: self.attached.clone(),
            _counted: Counted::new(self.busy.clone()),
        };
        let _ = std::thread::Builder::new()
            .name("dryml-analysis-priming".into())
            .stack_size(STACK_BYTES)
            .spawn(move || job.run());
    }
}

impl crate::Standby for Local {
    fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) > 0
    }

    fn ready(&mut self) -> bool {
        Local::ready(self)
    }

    /// The host starts again empty; the next Cargo.toml written loads it again on its thread.
    /// False, doing nothing, while a load is under way.
    fn release(&mut self) -> Result<bool> {
        if self.busy() {
            return Ok(false);
        }
        Host::locked(&self.host, &self.root, true)?.start_again()?;
        *self.requested.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok(true)
    }
}

/// Completion and hover of one crate, from any thread.
struct SharedHost(Arc<Mutex<Host>>, AbsPathBuf);

impl Shared for SharedHost {
    fn completions_in(&self, source: String, position: usize, write: bool) -> Result<Completions> {
        let mut host = Host::locked(&self.0, &self.1, true)?;
        host.set_source(source, write)?;
        queries::completions(&host, position)
    }

    fn hover_in(&self, source: String, at: u32, write: bool) -> Result<Option<(String, String)>> {
        let mut host = Host::locked(&self.0, &self.1, true)?;
        host.set_source(source, write)?;
        queries::hover(&host, at)
    }
}

/// Counts a loading thread in while it lives, however it ends.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(busy: Arc<AtomicUsize>) -> Counted {
        busy.fetch_add(1, Ordering::SeqCst);
        PRIMING.fetch_add(1, Ordering::SeqCst);
        Counted(busy)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        ACTIVITY.fetch_add(1, Ordering::SeqCst);
        PRIMING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A load of `toml` and the priming after it.
struct Priming {
    host: Arc<Mutex<Host>>,
    root: AbsPathBuf,
    toml: Vec<u8>,
    add: Arc<AtomicBool>,
    _counted: Counted,
}

impl Priming {
    fn run(self) {
        // Work ahead of need yields to the cell's build beside it (2 cores: a build 30% slower).
        // SAFETY: setpriority on this thread's own id reads nothing of ours.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
        }
        // One crate primes at a time: a load beside another notebook's priming cancelled it,
        // and what both had allocated stayed scattered through the heap (two notebooks opened
        // at once: +129 MiB; one after the other: +20).
        let _turn = Turn::take(self.root.clone());
        let add = self.add.load(Ordering::SeqCst);
        // Loaded already, or no longer wanted (a later thread loads what is on disk then).
        let wanted = |host: &Host| {
            host.ws.loaded_toml.as_ref() != Some(&self.toml)
                && std::fs::read(host.ws.cargo_toml()).ok().as_ref() == Some(&self.toml)
        };
        // One load at a time, a stale one skipped: each holds every file it read.
        static LOADING: Mutex<()> = Mutex::new(());
        let loading = LOADING.lock().unwrap_or_else(PoisonError::into_inner);
        let with_sysroot = match Host::locked(&self.host, &self.root, add) {
            Ok(host) if wanted(&host) => host.with_sysroot,
            _ => return,
        };
        // cargo metadata and the files read without the lock, which other notebooks' requests
        // wait for.
        let preloaded = crate::load::load(self.root.join("Cargo.toml"), with_sysroot).ok();
        let (analysis, range) = {
            let Ok(mut host) = Host::locked(&self.host, &self.root, add) else { return };
            if !wanted(&host) {
                return;
            }
            host.ws.preloaded = preloaded.map(|loaded| (self.toml.clone(), loaded));
            if host.set_source(priming_source(&self.toml), false).is_err() {
                return;
            }
            let at = PRIMING_SOURCE.find("evcxr_priming").unwrap_or(0) as u32;
            let range =
                ra_ap_ide::FileRange { file_id: host.ws.file, range: ra_ap_syntax::TextRange::empty(at.into()) };
            (host.analysis.analysis(), range)
        };
        drop(loading);
        // On a snapshot, outside the lock: a cell's analysis cancels this at once, and what was
        // worked out by then is kept. Hovering the variable infers the body.
        let _ = analysis.hover(&queries::hover_config(false), range);
    }
}

/// The crates whose priming threads are at work; a thread waits while another crate's is.
static TURNS: (Mutex<Vec<AbsPathBuf>>, Condvar) = (Mutex::new(Vec::new()), Condvar::new());

/// `root`'s turn to prime, held until dropped.
struct Turn(AbsPathBuf);

impl Turn {
    fn take(root: AbsPathBuf) -> Turn {
        let (lock, turn) = &TURNS;
        let mut at_work = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while at_work.iter().any(|other| *other != root) {
            at_work = turn.wait(at_work).unwrap_or_else(PoisonError::into_inner);
        }
        at_work.push(root.clone());
        Turn(root)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (lock, turn) = &TURNS;
        let mut at_work = lock.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = at_work.iter().position(|root| *root == self.0) {
            at_work.swap_remove(at);
        }
        turn.notify_all();
    }
}

#[cfg(test)]
mod tests;
