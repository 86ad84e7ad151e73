//! `--mlflow URI` of `%experiment`, `%%experiment` and `%%sweep`: the experiment's (or sweep's)
//! run, which every network trained meanwhile nests its own under (`dryml::track::ambient`),
//! and the kernel's sender, a thread that sends every queued call (`dryml::track::send`) each
//! second while any wait, so a server that was down gets them when it is back.

use super::Host;
use dryml::track::send::{self, Pass};
use dryml::track::{Ambient, Run};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How long the end of an experiment or sweep waits for its calls to reach the server.
const FLUSH: Duration = Duration::from_secs(15);

/// An open experiment's or sweep's run.
pub struct Tracked {
    run: Run,
    uri: String,
}

impl Tracked {
    /// Opens the run `name` in the MLflow experiment `experiment` on `uri`, with how it is made
    /// as tags, and makes it the ambient run of the notebook's processes.
    pub fn start(host: &Host<'_>, uri: &str, experiment: &str, name: &str) -> Result<Tracked, String> {
        let mlflow = dryml::track::mlflow(uri);
        let run = mlflow.start_run(experiment, name).map_err(|e| format!("--mlflow {uri}: {e}"))?;
        run.log_provenance(&host.provenance()).map_err(|e| format!("--mlflow {uri}: {e}"))?;
        let ambient =
            Ambient { uri: mlflow.uri().to_string(), experiment: experiment.to_string(), parent: run.key().into() };
        dryml::track::set_ambient(host.state_dir, Some(&ambient))
            .map_err(|e| format!("--mlflow {uri}: the notebook's processes cannot be told the run: {e}"))?;
        sender().own(mlflow.uri());
        Ok(Tracked { run, uri: mlflow.uri().to_string() })
    }

    /// The run, to log the experiment's own figures to before [`Tracked::end`].
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Ends the run (`FAILED` when `failed`), stops the ambient run, and waits (at most 15 s)
    /// for the queue to reach the server: what did not is said, and stays queued.
    pub fn end(self, host: &Host<'_>, failed: bool) {
        if let Err(e) = dryml::track::set_ambient(host.state_dir, None) {
            host.warn(&format!("dryml: the MLflow run stays the notebook's ambient run: {e}\n"));
        }
        let ended = if failed { self.run.fail() } else { self.run.end() };
        if let Err(e) = ended {
            host.warn(&format!("dryml: {e}\n"));
        }
        let s = sender();
        s.report(host, s.flush(FLUSH).into_iter().filter(|p| p.uri == self.uri).collect());
    }
}

/// The kernel's one sender.
pub fn sender() -> &'static Sender {
    static SENDER: OnceLock<Sender> = OnceLock::new();
    SENDER.get_or_init(Sender::default)
}

/// The sending thread's state: passes asked for and done, the last passes' outcome.
#[derive(Default)]
struct State {
    wanted: u64,
    done: u64,
    /// Each server's last pass (a queue sent whole has none after it: its last says so).
    last: BTreeMap<String, Pass>,
    started: bool,
}

/// Sends the queue in a thread of its own; tells the notebook of what its cells queued.
#[derive(Default)]
pub struct Sender {
    state: Arc<(Mutex<State>, Condvar)>,
    /// The servers this kernel's cells logged to (the queue may hold others', sent quietly).
    own: Mutex<BTreeSet<String>>,
    /// Servers said to be down, and not yet said to be back.
    said_down: Mutex<BTreeSet<String>>,
}

impl Sender {
    fn own(&self, uri: &str) {
        self.own.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(uri.to_string());
        self.start();
    }

    fn start(&self) {
        let mut g = self.state.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if std::mem::replace(&mut g.started, true) {
            return;
        }
        let state = Arc::clone(&self.state);
        let spawned = std::thread::Builder::new().name("mlflow sender".into()).spawn(move || loop {
            let (lock, wake) = &*state;
            let target = {
                let g = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let (g, _) =
                    wake.wait_timeout(g, Duration::from_secs(1)).unwrap_or_else(std::sync::PoisonError::into_inner);
                g.wanted
            };
            let passes = send::send_all(&dryml::track::spool::dir(), FLUSH);
            let mut g = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            g.last.extend(passes.into_iter().map(|p| (p.uri.clone(), p)));
            g.done = g.done.max(target);
            wake.notify_all();
        });
        if let Err(e) = spawned {
            tracing::warn!("no MLflow sender: {e}");
            g.started = false;
        }
    }

    /// Asks for a pass and waits for it, at most `timeout`; the passes' outcome.
    fn flush(&self, timeout: Duration) -> Vec<Pass> {
        self.start();
        let (lock, wake) = &*self.state;
        let mut g = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.wanted += 1;
        let target = g.wanted;
        wake.notify_all();
        let until = Instant::now() + timeout;
        while g.done < target {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return vec![Pass {
                    down: Some(format!("no answer within {} s", timeout.as_secs())),
                    ..Pass::default()
                }];
            }
            g = wake.wait_timeout(g, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        g.last.values().cloned().collect()
    }

    /// After a cell: starts the sender when calls are queued (a cell's `dryml::track`, or an
    /// earlier kernel's), and says what changed for this kernel's servers since the last cell.
    pub fn after_cell(&self, host: &Host<'_>, cell_began: SystemTime) {
        let dir = dryml::track::spool::dir();
        let queued = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"));
        let mut any = false;
        for e in queued {
            any = true;
            // A queue this cell wrote to is this kernel's to tell of.
            if e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= cell_began) {
                if let Some(uri) = first_uri(&e.path()) {
                    self.own.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(uri);
                }
            }
        }
        let started = self.state.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).started;
        if !any && !started {
            return;
        }
        self.start();
        let last =
            self.state.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last.values().cloned().collect();
        self.report(host, last);
    }

    /// Says, once each, which of this kernel's servers did not take their calls, which got
    /// them once back, and calls a server rejected.
    fn report(&self, host: &Host<'_>, passes: Vec<Pass>) {
        let own = self.own.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let mut said = self.said_down.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = dryml::track::spool::dir();
        for p in passes.iter().filter(|p| p.uri.is_empty() || own.contains(&p.uri)) {
            for r in &p.rejected {
                host.warn(&format!("dryml: MLflow: {r}\n"));
            }
            match &p.down {
                Some(why) if said.insert(p.uri.clone()) => host.warn(&format!(
                    "dryml: MLflow: {why}; {} calls stay queued in {} and are sent when it answers\n",
                    p.pending,
                    dir.display()
                )),
                None if p.pending == 0 && said.remove(&p.uri) => {
                    host.warn(&format!("dryml: MLflow: {} answers again; the queued calls were sent\n", p.uri))
                }
                _ => {}
            }
        }
    }
}

/// The server a queue file is for, from its first line.
fn first_uri(file: &std::path::Path) -> Option<String> {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(file).ok()?).read_line(&mut line).ok()?;
    let v: serde_json::Value = serde_json::from_str(&line).ok()?;
    v["uri"].as_str().map(str::to_string)
}
