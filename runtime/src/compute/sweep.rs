//! Sweeps: many object definitions trained in parallel, each trained object added to a repo
//! with the metrics its training returned, so `%repo get` and selectors compare them after.
//! Locally each definition trains in a sandbox, as many at once as the pool allows
//! ([`Compute::sweep`]); on Slurm, as one task of a job array (`.on(Slurm).sweep(..)`, or
//! `%%sweep --on slurm`), each task adding its own object, so a notebook that dies mid-sweep
//! loses nothing.
//!
//! ```
//! # use dryml::objects::{Build, Meta};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct Args { lr: f64 }
//! # #[derive(dryml::Object)] struct Fit { args: Args, meta: Meta, loss: f64 }
//! # impl Build for Fit { type Args = Args; fn build(args: Args, meta: Meta) -> Self { Fit { args, meta, loss: 0.0 } } }
//! use dryml::compute::context::Requests;
//! use dryml::{Compute, ObjectDef};
//!
//! let defs: Vec<ObjectDef> = [0.1, 0.01].iter().map(|lr| ObjectDef::new("Fit", &Args { lr: *lr }).unwrap()).collect();
//! let repo = std::env::temp_dir().join(format!("dryml-doc-sweep-{}", std::process::id()));
//! // Each definition trains in its own sandbox; what the closure returns is kept as metrics.
//! let report = Compute::new(&Requests::parse("num_cpus=1").unwrap())
//!     .sweep(&defs, &repo, |fit: &mut Fit| {
//!         fit.loss = fit.args.lr * 2.0;
//!         serde_json::json!({ "loss": fit.loss })
//!     })
//!     .unwrap();
//! assert_eq!(report.done(), 2);
//! # std::fs::remove_dir_all(&repo).unwrap();
//! ```

use crate::compute::context::ContextError;
use crate::compute::{Compute, ComputeError};
use crate::objects::Repo;
use crate::objects::{Build, Object, ObjectDef, ObjectError};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one definition's training gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Trained {
    /// The trained object's id in the repo.
    pub id: String,
    /// What the training closure returned, as JSON.
    pub metrics: Value,
    /// How long it took.
    pub seconds: f64,
}

/// One definition of a sweep and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Its place among the definitions.
    pub index: usize,
    /// The definition.
    pub def: ObjectDef,
    /// Its training, or why it failed.
    pub result: Result<Trained, String>,
}

/// A finished sweep: every task, in the order of the definitions.
#[derive(Clone, PartialEq)]
pub struct SweepReport {
    /// Every task, in the order of the definitions.
    pub tasks: Vec<Task>,
    /// The repo the trained objects went to.
    pub repo: PathBuf,
    /// How long it took.
    pub seconds: f64,
    /// The Slurm job array, for a sweep that ran there.
    pub job: Option<u64>,
}

impl SweepReport {
    /// How many tasks trained.
    pub fn done(&self) -> usize {
        self.tasks.iter().filter(|t| t.result.is_ok()).count()
    }
    /// How many tasks failed.
    pub fn failed(&self) -> usize {
        self.tasks.len() - self.done()
    }
}

impl fmt::Debug for SweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(id), true) = (self.job, self.tasks.is_empty()) {
            return write!(f, "Sweep {id} (detached): `%jobs` shows its progress, `%jobs wait {id}` follows it to its end; objects go to {}", self.repo.display());
        }
        writeln!(
            f,
            "Sweep of {} definitions: {} trained, {} failed, in {:.1} s; objects in {}",
            self.tasks.len(),
            self.done(),
            self.failed(),
            self.seconds,
            self.repo.display()
        )?;
        for t in &self.tasks {
            match &t.result {
                Ok(r) => writeln!(f, "  {:>3}  {}  -> {}  {}  ({:.1} s)", t.index, t.def, r.id, r.metrics, r.seconds)?,
                Err(e) => writeln!(f, "  {:>3}  {}  FAILED: {e}", t.index, t.def)?,
            }
        }
        Ok(())
    }
}

/// Trains one definition: builds it, moves it into compute (`load_compute`), runs `f`, moves
/// the trained state back (`save_compute`) and adds it to the repo at `repo` with `f`'s value
/// as its metrics.
pub(crate) fn train<T: Object + Build, M: Serialize>(
    def: &ObjectDef,
    repo: &Path,
    f: impl FnOnce(&mut T) -> M,
) -> Result<Trained, String> {
    let t0 = Instant::now();
    // Built as the closure's type: a generic model of a notebook's network is in no registry.
    let mut obj = def.build_as::<T>().map_err(|e| match e {
        ObjectError::Args(_, m) if m.starts_with("the definition is a") => {
            format!("{def}: {m}, which the closure takes")
        }
        e => e.to_string(),
    })?;
    Object::load_compute(&mut obj).map_err(|e| format!("load_compute: {e}"))?;
    // A child run of the sweep's, when `%%sweep --mlflow` asked: a network trained by `f` logs
    // its epochs there; the trial adds its definition, metrics and model.
    let trial = crate::track::ambient().and_then(|a| {
        a.start_child(&def.to_string()).map_err(|e| eprintln!("dryml: {e}; the trial goes on without it")).ok()
    });
    let metrics = match &trial {
        Some(run) => crate::track::with_active(run, || f(&mut obj)),
        None => f(&mut obj),
    };
    Object::save_compute(&mut obj).map_err(|e| format!("save_compute: {e}"))?;
    let metrics = serde_json::to_value(&metrics).map_err(|e| format!("the metrics do not serialize: {e}"))?;
    obj.meta_mut().metrics = Some(metrics.clone());
    let mut repo = Repo::open(repo).map_err(|e| e.to_string())?;
    let id = repo.add(&obj).map_err(|e| e.to_string())?;
    if let Some(run) = trial {
        let logged = run.log_object(&obj, 0).and_then(|()| run.log_model(&obj)).and_then(|()| run.end());
        if let Err(e) = logged {
            eprintln!("dryml: {e}; the trial's object is in the repo as {id}");
        }
    }
    Ok(Trained { id, metrics, seconds: t0.elapsed().as_secs_f64() })
}

pub(crate) fn open_or_create(repo: &Path) -> Result<(), ComputeError> {
    match Repo::open(repo) {
        Ok(_) => Ok(()),
        Err(crate::objects::RepoError::NotARepo(_)) if !repo.exists() => {
            Repo::create(repo).map(|_| ()).map_err(|e| ComputeError::Failed(e.to_string()))
        }
        Err(e) => Err(ComputeError::Failed(e.to_string())),
    }
}

/// Shows a sweep's counts in place: a widget where the frontend renders widgets, else HTML.
pub(crate) struct Progress {
    id: String,
    shown: String,
    widget: Option<crate::widgets::ProgressBar>,
}

impl Progress {
    pub(crate) fn new(id: String) -> Progress {
        Progress { id, shown: String::new(), widget: None }
    }

    pub(crate) fn show(&mut self, head: &str, pending: usize, running: usize, done: usize, failed: usize) {
        let total = pending + running + done + failed;
        let text = format!("{head}: {done}/{total} done, {running} running, {pending} pending, {failed} failed");
        if text != self.shown && crate::widgets::available() {
            let bar = self.widget.get_or_insert_with(|| crate::widgets::ProgressBar::new(Some(total as u64), head));
            bar.set_postfix(&format!("{running} running, {pending} pending, {failed} failed"));
            let ended = (done + failed) as u64;
            if ended == total as u64 {
                // Red when any failed: the bar ends short of its total.
                bar.finish(done as u64);
            } else {
                bar.redraw(ended);
            }
            self.shown = text;
        } else if text != self.shown {
            let pct = ((done + failed) * 100).checked_div(total).unwrap_or(0);
            let html = format!(
                "<div style=\"font-family: monospace\"><progress value=\"{pct}\" max=\"100\"></progress> {}</div>",
                crate::display::wire::escape_html(&text)
            );
            crate::display::display(
                &[("text/plain", &text), ("text/html", &html)],
                crate::display::Update::InPlace(&self.id),
            );
            self.shown = text;
        }
    }
}

impl Compute {
    /// Trains every definition in a sandbox of these options, as many at once as the pool
    /// allows, each trained object (and `f`'s metrics) added to the repo at `repo` (made if
    /// missing). An interrupt stops the sandboxes running and starts no more. On Slurm the same
    /// call is `.on(Slurm::new()).sweep(defs, repo, f)`.
    pub fn sweep<T, M, F>(&self, defs: &[ObjectDef], repo: impl AsRef<Path>, f: F) -> Result<SweepReport, ComputeError>
    where
        T: Object + Build,
        M: Serialize,
        F: Fn(&mut T) -> M + Sync,
    {
        let repo = repo.as_ref();
        open_or_create(repo)?;
        let t0 = Instant::now();
        let cpus = crate::compute::pool::Pool::open().map(|p| p.machine.cpus as usize).unwrap_or(1);
        let workers = cpus.clamp(1, defs.len().max(1));
        let next = AtomicUsize::new(0);
        let running = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<Trained, String>>>> = Mutex::new(vec![None; defs.len()]);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut progress = Progress::new(format!("dryml-sweep-{}-{}", std::process::id(), crate::objects::uuid_v4()));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= defs.len() || stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let mut waited = Instant::now();
                    let outcome = loop {
                        running.fetch_add(1, Ordering::SeqCst);
                        // Back through serde as (id, metrics, seconds): the crate derives no serde.
                        let r = self
                            .run(|| train(&defs[i], repo, &f).map(|t| (t.id, t.metrics, t.seconds)))
                            .map(|r| r.map(|(id, metrics, seconds)| Trained { id, metrics, seconds }));
                        running.fetch_sub(1, Ordering::SeqCst);
                        match r {
                            Err(ComputeError::Context(ContextError::ResourcesUnavailable(why))) => {
                                // Another task holds what this one needs; when none runs for 2 s,
                                // the request cannot be met at all.
                                if running.load(Ordering::SeqCst) > 0 {
                                    waited = Instant::now();
                                } else if waited.elapsed() > Duration::from_secs(2) {
                                    break Err(format!("ResourcesUnavailableError: {why}"));
                                }
                                if crate::display::interrupt::interrupted() {
                                    break Err("interrupted".into());
                                }
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            Err(ComputeError::Interrupted) => {
                                stop.store(true, Ordering::SeqCst);
                                break Err("interrupted".into());
                            }
                            Err(e) => break Err(e.to_string()),
                            Ok(r) => break r,
                        }
                    };
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(outcome);
                });
            }
            loop {
                let (done, failed) = {
                    let r = results.lock().unwrap_or_else(|e| e.into_inner());
                    (
                        r.iter().flatten().filter(|x| x.is_ok()).count(),
                        r.iter().flatten().filter(|x| x.is_err()).count(),
                    )
                };
                let run = running.load(Ordering::SeqCst).min(defs.len() - done - failed);
                progress.show(
                    &format!("Sweep of {} on this machine", defs.len()),
                    defs.len() - done - failed - run,
                    run,
                    done,
                    failed,
                );
                if done + failed == defs.len() || (stop.load(Ordering::SeqCst) && running.load(Ordering::SeqCst) == 0) {
                    break;
                }
                if crate::display::interrupt::interrupted() {
                    stop.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        if stop.load(Ordering::SeqCst) || crate::display::interrupt::interrupted() {
            return Err(ComputeError::Interrupted);
        }
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        let tasks = defs
            .iter()
            .zip(results)
            .enumerate()
            .map(|(index, (def, r))| Task {
                index,
                def: def.clone(),
                result: r.unwrap_or_else(|| Err("not run".into())),
            })
            .collect();
        Ok(SweepReport { tasks, repo: repo.to_path_buf(), seconds: t0.elapsed().as_secs_f64(), job: None })
    }
}
