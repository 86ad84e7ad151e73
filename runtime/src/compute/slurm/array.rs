//! Sweeps as Slurm job arrays: one array task per definition, each adding its own trained
//! object to the repo (`%%sweep --on slurm`, `Compute::on(Slurm).sweep`), so a notebook that
//! dies mid-sweep loses nothing; the notebook follows the array and reads the tasks' records.

use crate::compute::slurm::job::{JobDir, DIR_ENV};
use crate::compute::slurm::{self, JobState};
use crate::compute::sweep::{open_or_create, train, Progress, SweepReport, Task, Trained};
use crate::compute::ComputeError;
use crate::objects::{Object, ObjectDef};
use crate::sys::fs::{write_atomic, Durability};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn task_file(dir: &JobDir, index: usize, what: &str) -> PathBuf {
    dir.path.join("tasks").join(format!("{index}.{what}.json"))
}

/// A Slurm sweep task's program: trains definition `$SLURM_ARRAY_TASK_ID` of the sweep in
/// `$DRYML_JOB_DIR` and records the outcome there (`tasks/<i>.done.json` or `.failed.json`).
pub fn task_main<T: Object + crate::objects::Build, M: Serialize>(f: impl FnOnce(&mut T) -> M) {
    let fail = |m: String| -> ! {
        eprintln!("dryml: {m}");
        std::process::exit(2)
    };
    let Some(path) = std::env::var_os(DIR_ENV) else {
        fail(format!("{DIR_ENV} is not set: this program is started by its sweep's batch script"))
    };
    let dir = JobDir::new(path);
    let index: usize = std::env::var("SLURM_ARRAY_TASK_ID").ok().and_then(|i| i.parse().ok()).unwrap_or_else(|| {
        fail("SLURM_ARRAY_TASK_ID is not set: a sweep task runs as part of a Slurm job array".into())
    });
    let (defs, repo) = read_sweep(&dir).unwrap_or_else(|e| fail(e));
    let def =
        defs.get(index).unwrap_or_else(|| fail(format!("the sweep has {} definitions, not {}", defs.len(), index + 1)));
    let failed_at = task_file(&dir, index, "failed");
    let job_dir = dir.clone();
    // A panic ends the task at once (nothing unwinds), recorded for the sweep and the job.
    crate::compute::slurm::job::end_without_unwinding(move |kind, message| {
        let error = if kind == "panic" { format!("panicked: {message}") } else { message.to_string() };
        let _ = write_atomic(&failed_at, json!({"error": error}).to_string().as_bytes(), Durability::Fsync);
        crate::compute::slurm::job::write_error(&job_dir, kind, message);
    });
    match train(def, &repo, f) {
        Ok(t) => {
            let v = json!({"id": t.id, "metrics": t.metrics, "seconds": t.seconds});
            if let Err(e) = write_atomic(&task_file(&dir, index, "done"), v.to_string().as_bytes(), Durability::Fsync) {
                fail(format!("recording the task: {e}"));
            }
        }
        Err(e) => {
            let _ = write_atomic(
                &task_file(&dir, index, "failed"),
                json!({"error": e}).to_string().as_bytes(),
                Durability::Fsync,
            );
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
pub fn submit(
    job: slurm::follow::Submission,
    defs: &[ObjectDef],
    repo: &str,
    detach: bool,
) -> Result<SweepReport, ComputeError> {
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
    write_atomic(&dir.file("defs.json"), format!("{v:#}\n").as_bytes(), Durability::Fsync)
        .map_err(|e| failed(format!("writing defs.json: {e}")))?;
    std::fs::create_dir_all(dir.file("tasks")).map_err(|e| failed(format!("creating tasks/: {e}")))?;
    // The array's size is known here, not to the kernel that wrote the script.
    let script = std::fs::read_to_string(dir.file("job.sh")).map_err(|e| failed(format!("reading job.sh: {e}")))?;
    let script = script.replacen('\n', &format!("\n#SBATCH --array=0-{}\n", defs.len() - 1), 1);
    write_atomic(&dir.file("job.sh"), script.as_bytes(), Durability::Fsync)
        .map_err(|e| failed(format!("writing job.sh: {e}")))?;
    let id = job.submit()?;
    if detach {
        return Ok(SweepReport { tasks: Vec::new(), repo, seconds: 0.0, job: Some(id) });
    }
    follow(&dir, id)
}

/// Waits for the sweep a directory records (`%jobs wait`, also from a new kernel).
pub fn wait(dir: &str) -> Result<SweepReport, ComputeError> {
    let dir = JobDir::new(dir);
    let id = dir
        .slurm_id()
        .ok_or_else(|| ComputeError::Failed(format!("{} records no submitted sweep", dir.path.display())))?;
    follow(&dir, id)
}

/// The tasks' records so far: index to outcome.
fn records(dir: &JobDir, n: usize) -> Vec<Option<Result<Trained, String>>> {
    (0..n)
        .map(|i| {
            let read = |what| {
                std::fs::read_to_string(task_file(dir, i, what))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            };
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
    let running = queued
        .iter()
        .filter(|(i, s)| recs[*i].is_none() && matches!(s, JobState::Running | JobState::Completing))
        .count();
    let pending = queued
        .iter()
        .filter(|(i, s)| recs[*i].is_none() && matches!(s, JobState::Pending | JobState::Configuring))
        .count();
    let lost = defs.len() - done - failed_rec - running - pending;
    format!("sweep: {done}/{} done, {running} running, {pending} pending, {} failed", defs.len(), failed_rec + lost)
}

/// Follows a sweep's array to its end: counts shown in place, an interrupt cancels it.
fn follow(dir: &JobDir, id: u64) -> Result<SweepReport, ComputeError> {
    let (defs, repo) = read_sweep(dir).map_err(ComputeError::Failed)?;
    let n = defs.len();
    let t0 = Instant::now();
    let mut progress = Progress::new(format!("dryml-sweep-{id}-{}", std::process::id()));
    let head = format!("Sweep {id} ({n} tasks on Slurm)");
    let mut unanswered: Option<Instant> = None;
    loop {
        if crate::display::interrupt::interrupted() {
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
                        let log = std::fs::read_to_string(dir.path.join("tasks").join(format!("{i}.log")))
                            .unwrap_or_default();
                        let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
                        Err(format!("ended without a record; its log's last line: {last}"))
                    });
                    Task { index: i, def: def.clone(), result }
                })
                .collect();
            return Ok(SweepReport { tasks, repo, seconds: t0.elapsed().as_secs_f64(), job: Some(id) });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
