//! Sweeps: many object definitions trained in parallel, each trained object added to a repo
//! with the metrics its training returned, so `%repo get` and selectors compare them after.
//! Locally each definition trains in a sandbox, as many at once as the pool allows
//! ([`sweep`]); on Slurm, as one task of a job array (`%%sweep --on slurm`, [`task_main`]),
//! each task adding its own object, so a notebook that dies mid-sweep loses nothing.

use crate::compute::{Compute, ComputeError};
use crate::context::{ContextError, Requests};
use crate::fs::{write_atomic, Durability};
use crate::object::{Object, ObjectDef};
use crate::repo::Repo;
use crate::slurm::job::{JobDir, DIR_ENV};
use crate::slurm::{self, JobState};
use serde::Serialize;
use serde_json::{json, Value};
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
    pub metrics: Value,
    pub seconds: f64,
}

/// One definition of a sweep and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub index: usize,
    pub def: ObjectDef,
    pub result: Result<Trained, String>,
}

/// A finished sweep: every task, in the order of the definitions.
#[derive(Clone, PartialEq)]
pub struct Report {
    pub tasks: Vec<Task>,
    pub repo: PathBuf,
    pub seconds: f64,
    /// The Slurm job array, for a sweep that ran there.
    pub job: Option<u64>,
}

impl Report {
    pub fn done(&self) -> usize {
        self.tasks.iter().filter(|t| t.result.is_ok()).count()
    }
    pub fn failed(&self) -> usize {
        self.tasks.len() - self.done()
    }
}

impl fmt::Debug for Report {
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
pub fn train<T: Object, M: Serialize>(def: &ObjectDef, repo: &Path, f: impl FnOnce(&mut T) -> M) -> Result<Trained, String> {
    let t0 = Instant::now();
    let built = def.build().map_err(|e| e.to_string())?;
    let mut obj = built.downcast::<T>().map_err(|o| {
        format!("{def} builds a {}, not the {} the closure takes", o.type_name(), std::any::type_name::<T>())
    })?;
    obj.load_compute().map_err(|e| format!("load_compute: {e}"))?;
    let metrics = f(&mut obj);
    obj.save_compute().map_err(|e| format!("save_compute: {e}"))?;
    let metrics = serde_json::to_value(&metrics).map_err(|e| format!("the metrics do not serialize: {e}"))?;
    obj.meta_mut().metrics = Some(metrics.clone());
    let mut repo = Repo::open(repo).map_err(|e| e.to_string())?;
    let id = repo.add(&*obj).map_err(|e| e.to_string())?;
    Ok(Trained { id, metrics, seconds: t0.elapsed().as_secs_f64() })
}

fn open_or_create(repo: &Path) -> Result<(), ComputeError> {
    match Repo::open(repo) {
        Ok(_) => Ok(()),
        Err(crate::repo::RepoError::NotARepo(_)) if !repo.exists() => {
            Repo::create(repo).map(|_| ()).map_err(|e| ComputeError::Failed(e.to_string()))
        }
        Err(e) => Err(ComputeError::Failed(e.to_string())),
    }
}

/// Shows a sweep's counts in place.
struct Progress {
    id: String,
    shown: String,
}

impl Progress {
    fn new(id: String) -> Progress {
        Progress { id, shown: String::new() }
    }

    fn show(&mut self, head: &str, pending: usize, running: usize, done: usize, failed: usize) {
        let total = pending + running + done + failed;
        let text = format!("{head}: {done}/{total} done, {running} running, {pending} pending, {failed} failed");
        if text != self.shown {
            let pct = ((done + failed) * 100).checked_div(total).unwrap_or(0);
            let html = format!(
                "<div style=\"font-family: monospace\"><progress value=\"{pct}\" max=\"100\"></progress> {}</div>",
                text.replace('&', "&amp;").replace('<', "&lt;")
            );
            crate::display::show(&[("text/plain", &text), ("text/html", &html)], &self.id);
            self.shown = text;
        }
    }
}

/// Trains every definition in a sandbox holding `reqs`, as many at once as the pool allows,
/// each trained object (and `f`'s metrics) added to the repo at `repo` (made if missing).
/// An interrupt stops the sandboxes running and starts no more.
pub fn sweep<T, M, F>(defs: &[ObjectDef], reqs: &Requests, repo: impl AsRef<Path>, f: F) -> Result<Report, ComputeError>
where
    T: Object,
    M: Serialize,
    F: Fn(&mut T) -> M + Sync,
{
    let repo = repo.as_ref();
    open_or_create(repo)?;
    let t0 = Instant::now();
    let cpus = crate::pool::Pool::open().map(|p| p.machine.cpus as usize).unwrap_or(1);
    let workers = cpus.clamp(1, defs.len().max(1));
    let next = AtomicUsize::new(0);
    let running = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Trained, String>>>> = Mutex::new(vec![None; defs.len()]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut progress = Progress::new(format!("dryml-sweep-{}-{}", std::process::id(), crate::object::uuid_v4()));
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
                    let r = Compute::new(reqs)
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
                            if crate::interrupt::interrupted() {
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
                (r.iter().flatten().filter(|x| x.is_ok()).count(), r.iter().flatten().filter(|x| x.is_err()).count())
            };
            let run = running.load(Ordering::SeqCst).min(defs.len() - done - failed);
            progress.show(&format!("Sweep of {} on this machine", defs.len()), defs.len() - done - failed - run, run, done, failed);
            if done + failed == defs.len() || (stop.load(Ordering::SeqCst) && running.load(Ordering::SeqCst) == 0) {
                break;
            }
            if crate::interrupt::interrupted() {
                stop.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    if stop.load(Ordering::SeqCst) || crate::interrupt::interrupted() {
        return Err(ComputeError::Interrupted);
    }
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let tasks = defs
        .iter()
        .zip(results)
        .enumerate()
        .map(|(index, (def, r))| Task { index, def: def.clone(), result: r.unwrap_or_else(|| Err("not run".into())) })
        .collect();
    Ok(Report { tasks, repo: repo.to_path_buf(), seconds: t0.elapsed().as_secs_f64(), job: None })
}

fn task_file(dir: &JobDir, index: usize, what: &str) -> PathBuf {
    dir.path.join("tasks").join(format!("{index}.{what}.json"))
}

/// A Slurm sweep task's program: trains definition `$SLURM_ARRAY_TASK_ID` of the sweep in
/// `$DRYML_JOB_DIR` and records the outcome there (`tasks/<i>.done.json` or `.failed.json`).
#[doc(hidden)]
pub fn task_main<T: Object, M: Serialize>(f: impl FnOnce(&mut T) -> M) {
    let fail = |m: String| -> ! {
        eprintln!("dryml: {m}");
        std::process::exit(2)
    };
    let Some(path) = std::env::var_os(DIR_ENV) else { fail(format!("{DIR_ENV} is not set: this program is started by its sweep's batch script")) };
    let dir = JobDir::new(path);
    let index: usize = std::env::var("SLURM_ARRAY_TASK_ID")
        .ok()
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| fail("SLURM_ARRAY_TASK_ID is not set: a sweep task runs as part of a Slurm job array".into()));
    let (defs, repo) = read_sweep(&dir).unwrap_or_else(|e| fail(e));
    let def = defs.get(index).unwrap_or_else(|| fail(format!("the sweep has {} definitions, not {}", defs.len(), index + 1)));
    let failed_at = task_file(&dir, index, "failed");
    let job_dir = dir.clone();
    // A panic ends the task at once (nothing unwinds), recorded for the sweep and the job.
    crate::slurm::job::end_without_unwinding(move |kind, message| {
        let error = if kind == "panic" { format!("panicked: {message}") } else { message.to_string() };
        let _ = write_atomic(&failed_at, json!({"error": error}).to_string().as_bytes(), Durability::Fsync);
        crate::slurm::job::write_error(&job_dir, kind, message);
    });
    match train(def, &repo, f) {
        Ok(t) => {
            let v = json!({"id": t.id, "metrics": t.metrics, "seconds": t.seconds});
            if let Err(e) = write_atomic(&task_file(&dir, index, "done"), v.to_string().as_bytes(), Durability::Fsync) {
                fail(format!("recording the task: {e}"));
            }
        }
        Err(e) => {
            let _ = write_atomic(&task_file(&dir, index, "failed"), json!({"error": e}).to_string().as_bytes(), Durability::Fsync);
            fail(e);
        }
    }
}

fn read_sweep(dir: &JobDir) -> Result<(Vec<ObjectDef>, PathBuf), String> {
    let text = std::fs::read_to_string(dir.file("defs.json")).map_err(|e| format!("reading defs.json: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("defs.json: {e}"))?;
    let defs = v["defs"]
        .as_array()
        .ok_or("defs.json has no `defs`")?
        .iter()
        .map(|d| ObjectDef { type_name: d["type"].as_str().unwrap_or_default().to_string(), args: d["args"].clone() })
        .collect();
    let repo = v["repo"].as_str().ok_or("defs.json has no `repo`")?;
    Ok((defs, PathBuf::from(repo)))
}

/// The notebook's side of `%%sweep --on slurm`: writes the definitions, submits the array and,
/// unless `detach`, follows it to its end.
#[doc(hidden)]
pub fn submit(job: slurm::follow::Submission, defs: &[ObjectDef], repo: &str, detach: bool) -> Result<Report, ComputeError> {
    let failed = |m: String| ComputeError::Failed(m);
    if defs.is_empty() {
        return Err(failed("the sweep has no definitions".into()));
    }
    let repo = std::path::absolute(repo).map_err(|e| failed(format!("{repo}: {e}")))?;
    open_or_create(&repo)?;
    let dir = job.dir().clone();
    let v = json!({
        "defs": defs.iter().map(|d| json!({"type": d.type_name, "args": d.args})).collect::<Vec<_>>(),
        "repo": repo.display().to_string(),
    });
    write_atomic(&dir.file("defs.json"), format!("{v:#}\n").as_bytes(), Durability::Fsync).map_err(|e| failed(format!("writing defs.json: {e}")))?;
    std::fs::create_dir_all(dir.file("tasks")).map_err(|e| failed(format!("creating tasks/: {e}")))?;
    // The array's size is known here, not to the kernel that wrote the script.
    let script = std::fs::read_to_string(dir.file("job.sh")).map_err(|e| failed(format!("reading job.sh: {e}")))?;
    let script = script.replacen('\n', &format!("\n#SBATCH --array=0-{}\n", defs.len() - 1), 1);
    write_atomic(&dir.file("job.sh"), script.as_bytes(), Durability::Fsync).map_err(|e| failed(format!("writing job.sh: {e}")))?;
    let id = job.submit()?;
    if detach {
        return Ok(Report { tasks: Vec::new(), repo, seconds: 0.0, job: Some(id) });
    }
    follow(&dir, id)
}

/// Waits for the sweep a directory records (`%jobs wait`, also from a new kernel).
#[doc(hidden)]
pub fn wait(dir: &str) -> Result<Report, ComputeError> {
    let dir = JobDir::new(dir);
    let id = dir.slurm_id().ok_or_else(|| ComputeError::Failed(format!("{} records no submitted sweep", dir.path.display())))?;
    follow(&dir, id)
}

/// The tasks' records so far: index to outcome.
fn records(dir: &JobDir, n: usize) -> Vec<Option<Result<Trained, String>>> {
    (0..n)
        .map(|i| {
            let read = |what| std::fs::read_to_string(task_file(dir, i, what)).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok());
            if let Some(v) = read("done") {
                Some(Ok(Trained {
                    id: v["id"].as_str().unwrap_or_default().to_string(),
                    metrics: v["metrics"].clone(),
                    seconds: v["seconds"].as_f64().unwrap_or(0.0),
                }))
            } else {
                read("failed").map(|v| Err(v["error"].as_str().unwrap_or("failed").to_string()))
            }
        })
        .collect()
}

/// Counts of a sweep for `%jobs`: done, failed, running, pending, from the records and the queue.
pub fn status(dir: &JobDir) -> String {
    let Ok((defs, _)) = read_sweep(dir) else { return "sweep (no definitions)".into() };
    let Some(id) = dir.slurm_id() else { return "sweep, not submitted".into() };
    let recs = records(dir, defs.len());
    let queued = slurm::array_tasks(id).unwrap_or_default();
    let done = recs.iter().flatten().filter(|r| r.is_ok()).count();
    let failed_rec = recs.iter().flatten().filter(|r| r.is_err()).count();
    let running = queued.iter().filter(|(i, s)| recs[*i].is_none() && matches!(s, JobState::Running | JobState::Completing)).count();
    let pending = queued.iter().filter(|(i, s)| recs[*i].is_none() && matches!(s, JobState::Pending | JobState::Configuring)).count();
    let lost = defs.len() - done - failed_rec - running - pending;
    format!("sweep: {done}/{} done, {running} running, {pending} pending, {} failed", defs.len(), failed_rec + lost)
}

/// Follows a sweep's array to its end: counts shown in place, an interrupt cancels it.
fn follow(dir: &JobDir, id: u64) -> Result<Report, ComputeError> {
    let (defs, repo) = read_sweep(dir).map_err(ComputeError::Failed)?;
    let n = defs.len();
    let t0 = Instant::now();
    let mut progress = Progress::new(format!("dryml-sweep-{id}-{}", std::process::id()));
    let head = format!("Sweep {id} ({n} tasks on Slurm)");
    let mut unanswered: Option<Instant> = None;
    loop {
        if crate::interrupt::interrupted() {
            let how = match slurm::cancel(id) {
                Ok(()) => "cancelled its tasks (scancel)".to_string(),
                Err(e) => format!("could not cancel it: {e}"),
            };
            return Err(ComputeError::Job {
                name: "KeyboardInterrupt",
                message: format!("the interrupt stopped following sweep {id} and {how}; the objects already trained stay in the repo"),
            });
        }
        let recs = records(dir, n);
        let queued = match slurm::array_tasks(id) {
            Ok(q) => {
                unanswered = None;
                q
            }
            // A controller that is silent for a while does not end the tasks (see `follow`).
            Err(e) => {
                if unanswered.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(120) {
                    return Err(ComputeError::Job {
                        name: "SlurmError",
                        message: format!("{e}; the controller has not answered for 120 s. The tasks may still run: `%jobs wait {id}` follows the sweep later"),
                    });
                }
                std::thread::sleep(Duration::from_millis(250));
                continue;
            }
        };
        let unrecorded: Vec<&(usize, JobState)> = queued.iter().filter(|(i, _)| *i < n && recs[*i].is_none()).collect();
        let running = unrecorded.iter().filter(|(_, s)| matches!(s, JobState::Running | JobState::Completing)).count();
        let pending = unrecorded.iter().filter(|(_, s)| !matches!(s, JobState::Running | JobState::Completing)).count();
        let done = recs.iter().flatten().filter(|r| r.is_ok()).count();
        let failed = n - done - running - pending;
        progress.show(&head, pending, running, done, failed);
        if unrecorded.is_empty() {
            // A task ended by Slurm (killed, timed out) leaves no record of its own: its log says why.
            let tasks = defs
                .iter()
                .zip(records(dir, n))
                .enumerate()
                .map(|(i, (def, r))| {
                    let result = r.unwrap_or_else(|| {
                        let log = std::fs::read_to_string(dir.path.join("tasks").join(format!("{i}.log"))).unwrap_or_default();
                        let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
                        Err(format!("ended without a record; its log's last line: {last}"))
                    });
                    Task { index: i, def: def.clone(), result }
                })
                .collect();
            return Ok(Report { tasks, repo, seconds: t0.elapsed().as_secs_f64(), job: Some(id) });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
