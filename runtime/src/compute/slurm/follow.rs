//! The notebook's side of a Slurm job: the variables a cell names are sent (or refused, by
//! name and type, before anything is submitted), the job is submitted, its state shown in
//! place and its output streamed while it runs; an interrupt cancels it; its end becomes the
//! cell's value or one of the sandbox's errors.

use super::job::{End, Finished, JobDir, JobError};
use super::{cancel, job, submit, Job, JobState};
use crate::compute::cell::CellResult;
use crate::compute::ComputeError;
use crate::sys::units::size;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

/// How often the job's output file is read and the interrupt flag checked.
const TICK: Duration = Duration::from_millis(100);
/// How often the controller is asked for the job's state.
const POLL: Duration = Duration::from_millis(300);
/// How long the controller may not answer before following the job gives up.
const SILENCE: Duration = Duration::from_secs(120);

/// A job from the notebook's process, its directory written (library, program, batch script,
/// request): this sends the variables and submits.
pub struct Submission {
    dir: JobDir,
    inputs: Vec<(String, Vec<u8>)>,
    refused: Vec<String>,
}

impl Submission {
    pub fn open(dir: &str) -> Submission {
        Submission { dir: JobDir::new(dir), inputs: Vec::new(), refused: Vec::new() }
    }

    pub fn input(&mut self, name: &str, ty: &str, encoded: Result<Vec<u8>, String>) {
        match encoded {
            Ok(b) => self.inputs.push((name.to_string(), b)),
            Err(why) => self.refused.push(format!("`{name}` ({ty}): {why}")),
        }
    }

    pub fn dir(&self) -> &JobDir {
        &self.dir
    }

    /// Sends the variables and submits the batch script; nothing is submitted (and the
    /// directory goes) when a variable cannot be sent.
    pub fn submit(self) -> Result<u64, ComputeError> {
        if !self.refused.is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir.path);
            return Err(ComputeError::Job {
                name: "SerializationError",
                message: format!(
                    "the job needs variables that cannot be sent to it, so nothing was submitted: {}",
                    self.refused.join("; ")
                ),
            });
        }
        let failed = |what: String| ComputeError::Failed(what);
        for (name, bytes) in &self.inputs {
            self.dir
                .write_input(name, bytes)
                .map_err(|e| failed(format!("writing `{name}` to {}: {e}", self.dir.path.display())))?;
        }
        let t0 = Instant::now();
        let id = match submit(&self.dir.file("job.sh"), &[]) {
            Ok(id) => id,
            Err(e) => {
                // Nothing was submitted: no record to keep.
                let _ = std::fs::remove_dir_all(&self.dir.path);
                return Err(ComputeError::Job { name: "SlurmError", message: e.to_string() });
            }
        };
        let submit_s = t0.elapsed().as_secs_f64();
        self.dir
            .set_slurm_id(id)
            .map_err(|e| failed(format!("recording the job id in {}: {e}", self.dir.path.display())))?;
        println!(
            "dryml: submitted Slurm job {id} in {:.0} ms; its directory is {}",
            submit_s * 1000.0,
            self.dir.path.display()
        );
        Ok(id)
    }

    /// Submits the job and, unless `detach`, follows it to its end.
    pub fn run(self, detach: bool) -> Result<CellResult, ComputeError> {
        let dir = self.dir.clone();
        let id = self.submit()?;
        if detach {
            let shown = format!("Job {id} (detached): `%jobs` shows its state, `%jobs wait {id}` its output, `%jobs result {id}` its value");
            return Ok(CellResult::new(Vec::new(), Some(shown)));
        }
        follow(&dir, id, 0).map(|f| f.result)
    }
}

/// Follows job `id` from `dir` to its end: shows its state in place, prints its output from
/// byte `from` on as it is written, cancels it on an interrupt, and returns its results or
/// the error its end maps to.
pub fn follow(dir: &JobDir, id: u64, from: u64) -> Result<Finished, ComputeError> {
    let display_id = format!("dryml-slurm-{id}-{}", std::process::id());
    let t0 = Instant::now();
    let mut offset = from;
    let mut shown = String::new();
    let mut last_poll: Option<Instant> = None;
    let mut last: Option<Job> = None;
    let mut running_since: Option<Instant> = None;
    let mut queued = 0.0;
    let mut unanswered: Option<Instant> = None;
    let mut show = |text: String| {
        if text != shown {
            crate::display::display(
                &[("text/plain", &text), ("text/html", &state_html(&text))],
                crate::display::Update::InPlace(&display_id),
            );
            shown = text;
        }
    };
    loop {
        if crate::display::interrupt::interrupted() {
            let cancelled = cancel(id);
            pump(dir, offset);
            show(format!("Slurm job {id}: CANCELLED by the interrupt"));
            let how = match cancelled {
                Ok(()) => "cancelled it (scancel)".to_string(),
                Err(e) => format!("could not cancel it: {e}"),
            };
            return Err(ComputeError::Job {
                name: "KeyboardInterrupt",
                message: format!(
                    "the interrupt stopped following Slurm job {id} and {how}; the notebook's variables are unchanged"
                ),
            });
        }
        offset = pump(dir, offset);
        // The program's own record is there before Slurm has noted the end.
        let done_by_files = dir.end().is_some_and(|e| e.exit_code == 0) && dir.file("result.json").exists();
        if done_by_files || last_poll.is_none_or(|t| t.elapsed() >= POLL) {
            last_poll = Some(Instant::now());
            let j = match job(id) {
                Ok(j) => {
                    unanswered = None;
                    j
                }
                // A controller that stops answering for a while (a restart, a network blip)
                // does not end the job: keep following, and give up only after a long silence.
                Err(e) => {
                    let since = *unanswered.get_or_insert_with(Instant::now);
                    if since.elapsed() > SILENCE {
                        return Err(ComputeError::Job {
                            name: "SlurmError",
                            message: format!("{e}; the controller has not answered for {} s. The job may still run: `%jobs wait {id}` follows it later", SILENCE.as_secs()),
                        });
                    }
                    show(format!("Slurm job {id}: the controller does not answer ({e}); retrying"));
                    std::thread::sleep(TICK);
                    continue;
                }
            };
            // Just after `sbatch`, a controller could still be filing the job.
            let forgotten = j.is_none() && (last.is_some() || t0.elapsed() > Duration::from_secs(10));
            let over = done_by_files || forgotten || j.as_ref().is_some_and(|j| j.state.is_final());
            if let Some(j) = &j {
                if running_since.is_none() && matches!(j.state, JobState::Running | JobState::Completing) {
                    running_since = Some(Instant::now());
                    queued = t0.elapsed().as_secs_f64();
                }
                if !over {
                    show(match &j.state {
                        JobState::Pending => {
                            format!("Slurm job {id}: PENDING{} for {:.0} s", reason(j), t0.elapsed().as_secs_f64())
                        }
                        JobState::Running => format!(
                            "Slurm job {id}: RUNNING on {} for {:.0} s",
                            j.nodes,
                            running_since.map_or(0.0, |t| t.elapsed().as_secs_f64())
                        ),
                        other => format!("Slurm job {id}: {}", state_name(other)),
                    });
                }
                last = Some(j.clone());
            }
            if over {
                break;
            }
        }
        std::thread::sleep(TICK);
    }
    pump(dir, offset);
    let end = dir.end();
    let finished = dir
        .finished()
        .map_err(|e| ComputeError::Failed(format!("reading the job's result in {}: {e}", dir.path.display())))?;
    let request = dir.request().unwrap_or(Value::Null);
    let out = outcome(id, last.as_ref(), end.as_ref(), dir.error(), finished, &output_tail(dir), &request);
    let node =
        end.as_ref().map(|e| e.node.clone()).or_else(|| last.as_ref().map(|j| j.nodes.clone())).unwrap_or_default();
    let state = match (&out, &last) {
        (Ok(_), _) => "COMPLETED".to_string(),
        (Err(e), Some(j)) if j.state.is_final() => format!("{} ({})", state_name(&j.state), e.name()),
        (Err(e), _) => e.name().to_string(),
    };
    let ran = end.as_ref().map_or(0.0, |e| e.seconds);
    if running_since.is_none() {
        // It started and ended between two looks: what was not running was waiting.
        queued = (t0.elapsed().as_secs_f64() - ran).max(0.0);
    }
    show(format!("Slurm job {id}: {state} on {node}, queued {queued:.1} s, ran {ran:.1} s"));
    if let Ok(f) = &out {
        println!(
            "dryml: Slurm job {id} on {node}: queued {queued:.2} s, ran {:.2} s (body {:.2} s), peak RSS {}, result back {:.2} s after submission",
            ran,
            f.seconds,
            size(f.peak_rss),
            t0.elapsed().as_secs_f64()
        );
    }
    out
}

/// ` (Resources)`, or nothing for Slurm's `None`.
fn reason(j: &Job) -> String {
    if j.reason.is_empty() || j.reason == "None" {
        String::new()
    } else {
        format!(" ({})", j.reason)
    }
}

fn state_name(s: &JobState) -> String {
    match s {
        JobState::Other(o) => o.clone(),
        s => format!("{s:?}")
            .to_uppercase()
            .replace("OUTOFMEMORY", "OUT_OF_MEMORY")
            .replace("NODEFAIL", "NODE_FAIL")
            .replace("BOOTFAIL", "BOOT_FAIL"),
    }
}

fn state_html(text: &str) -> String {
    let esc = crate::display::wire::escape_html(text);
    format!("<div class=\"dryml-slurm\" style=\"font-family: monospace; padding: 2px 0\">{esc}</div>")
}

/// Prints what the job wrote to its output since `offset`; returns the new offset.
fn pump(dir: &JobDir, offset: u64) -> u64 {
    let Ok(mut f) = std::fs::File::open(dir.output()) else { return offset };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return offset;
    }
    let mut buf = Vec::new();
    let _ = f.take(4 << 20).read_to_end(&mut buf);
    if !buf.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&buf);
        let _ = out.flush();
    }
    offset + buf.len() as u64
}

/// The last 16 KiB of the job's output: Slurm's own lines about memory and cancellation.
fn output_tail(dir: &JobDir) -> String {
    let Ok(mut f) = std::fs::File::open(dir.output()) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(16 << 10)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// What a job's end means for the cell: its results, or the sandbox error (or Slurm's) that
/// fits, from Slurm's last word (`job`, if the controller still knew it) and the records in
/// its directory.
pub fn outcome(
    id: u64,
    job: Option<&Job>,
    end: Option<&End>,
    error: Option<JobError>,
    finished: Option<Finished>,
    output_tail: &str,
    request: &Value,
) -> Result<Finished, ComputeError> {
    if let Some(f) = finished {
        return Ok(f);
    }
    let err = |name: &'static str, message: String| Err(ComputeError::Job { name, message });
    let state = job.map(|j| j.state.clone());
    let over_memory = output_tail.contains("Exceeded job memory limit")
        || output_tail.contains("oom-kill")
        || output_tail.contains("oom_kill");
    if state == Some(JobState::OutOfMemory) || over_memory {
        let mem = request["mem"].as_u64().map(|m| format!(" of {}", size(m))).unwrap_or_default();
        return err(
            "SandboxOutOfMemory",
            format!("Slurm stopped job {id} for going over its memory limit{mem} (--mem)"),
        );
    }
    if state == Some(JobState::Timeout) {
        let limit = request["time"].as_str().map(|t| format!(" ({t})")).unwrap_or_default();
        return err("SandboxTimedOut", format!("Slurm stopped job {id} at its time limit{limit}"));
    }
    if let Some(e) = error {
        let e = match e {
            JobError::Panic(m) => JobError::Panic(in_cell_lines(&m, request)),
            other => other,
        };
        return match e {
            JobError::Panic(m) => err("SandboxPanicked", format!("Slurm job {id} panicked: {m}")),
            JobError::Error(m) => err("SandboxFailed", format!("Slurm job {id}: the cell returned an error: {m}")),
        };
    }
    let reason = job.map(reason).unwrap_or_default();
    match state {
        Some(JobState::Cancelled) => {
            return err(
                "SlurmJobCancelled",
                format!("Slurm job {id} was cancelled (scancel, or by an administrator){reason}"),
            )
        }
        Some(JobState::NodeFail) => {
            let node = job.map(|j| j.nodes.as_str()).filter(|n| !n.is_empty()).unwrap_or("its node");
            return err("SlurmNodeFail", format!("Slurm job {id} ended because {node} failed"));
        }
        _ => {}
    }
    if let Some(e) = end {
        if let Some(sig) = e.signal {
            let by = if e.terminated { ", after Slurm sent SIGTERM (time limit, cancel or preemption)" } else { "" };
            return err("SandboxKilled", format!("Slurm job {id}'s program was killed by signal {sig}{by}"));
        }
        if e.exit_code != 0 {
            return err(
                "SandboxExited",
                format!("Slurm job {id}'s program exited with code {} before returning", e.exit_code),
            );
        }
    }
    let what = match (&state, job) {
        (Some(s), Some(_)) => format!("ended as {}{reason}", state_name(s)),
        _ => "is no longer known to the controller and left no end record".to_string(),
    };
    err("SlurmJobEnded", format!("Slurm job {id} {what}, without a result"))
}

/// `src/lib.rs:L:C` in a message, as `cell line N, column C` where L is in the cell's body
/// (`request.json` says where the body starts in the cell's library's source).
fn in_cell_lines(message: &str, request: &Value) -> String {
    let (Some(first), Some(offset), Some(len)) =
        (request["body_line"].as_u64(), request["body_offset"].as_u64(), request["body_lines"].as_u64())
    else {
        return message.to_string();
    };
    const AT: &str = "src/lib.rs:";
    let Some(at) = message.find(AT) else { return message.to_string() };
    let rest = &message[at + AT.len()..];
    let mut parts = rest.splitn(3, |c: char| !c.is_ascii_digit());
    let (Some(l), Some(c)) =
        (parts.next().and_then(|l| l.parse::<u64>().ok()), parts.next().and_then(|c| c.parse::<u64>().ok()))
    else {
        return message.to_string();
    };
    if l < first || l >= first + len.max(1) {
        return message.to_string();
    }
    let used = AT.len() + l.to_string().len() + 1 + c.to_string().len();
    format!("{}cell line {}, column {c}{}", &message[..at], l - first + 1 + offset, &message[at + used..])
}

/// A job's state for `%jobs`, from its records first and the controller otherwise.
pub fn status(dir: &JobDir) -> String {
    let Some(id) = dir.slurm_id() else { return "not submitted".into() };
    if dir.file("result.json").exists() {
        return "COMPLETED".into();
    }
    match job(id) {
        Ok(Some(j)) if !j.state.is_final() => match j.state {
            JobState::Pending => format!("PENDING{}", reason(&j)),
            JobState::Running => format!("RUNNING on {}", j.nodes),
            s => state_name(&s),
        },
        Ok(j) => {
            let out = outcome(
                id,
                j.as_ref(),
                dir.end().as_ref(),
                dir.error(),
                None,
                &output_tail(dir),
                &dir.request().unwrap_or(Value::Null),
            );
            match out {
                Err(e) => e.name().to_string(),
                Ok(_) => "COMPLETED".into(),
            }
        }
        Err(e) => format!("unknown ({e})"),
    }
}

/// Waits for a job the directory records (`%jobs wait`, `%jobs result`): its output from the
/// start, then its results.
pub fn wait(dir: &str) -> Result<CellResult, ComputeError> {
    wait_for(dir, &[])
}

/// [`wait`], and an error unless the job sent back each of `updates`.
pub fn wait_for(dir: &str, updates: &[&str]) -> Result<CellResult, ComputeError> {
    let dir = JobDir::new(dir);
    let id = dir
        .slurm_id()
        .ok_or_else(|| ComputeError::Failed(format!("{} records no submitted job", dir.path.display())))?;
    let r = follow(&dir, id, 0)?.result;
    for u in updates {
        if !r.has(u) {
            return Err(ComputeError::Failed(format!("Slurm job {id} sent no value for `{u}`")));
        }
    }
    Ok(r)
}

/// The bytes of an `--update` variable of a finished job (after [`wait_for`] checked it is
/// there), for [`crate::compute::carry::In`] to read.
pub fn update_bytes(dir: &str, name: &str) -> Vec<u8> {
    let dir = JobDir::new(dir);
    let taken = dir
        .finished()
        .map_err(|e| ComputeError::Failed(e.to_string()))
        .and_then(|f| f.ok_or_else(|| ComputeError::Failed("the job has no result".into())))
        .and_then(|mut f| f.result.take_bytes(name));
    match taken {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests;
