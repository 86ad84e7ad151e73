//! The scheduler's own tools called and their output read: `sbatch --parsable`, `scontrol show
//! job` (a job's state, its array's tasks), `sinfo` (GPU shards), `scancel`.

use super::*;

/// A job's state as Slurm names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Configuring,
    Running,
    Completing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    OutOfMemory,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    Suspended,
    Requeued,
    Other(String),
}

impl JobState {
    /// From `squeue`'s `%T` or `scontrol`'s `JobState=` (`CANCELLED by 0` is cancelled).
    pub fn parse(s: &str) -> JobState {
        match s.split_whitespace().next().unwrap_or("").trim_end_matches('+') {
            "PENDING" | "PD" => JobState::Pending,
            "CONFIGURING" | "CF" => JobState::Configuring,
            "RUNNING" | "R" => JobState::Running,
            "COMPLETING" | "CG" => JobState::Completing,
            "COMPLETED" | "CD" => JobState::Completed,
            "FAILED" | "F" => JobState::Failed,
            "CANCELLED" | "CA" => JobState::Cancelled,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "PREEMPTED" | "PR" => JobState::Preempted,
            "BOOT_FAIL" | "BF" => JobState::BootFail,
            "DEADLINE" | "DL" => JobState::Deadline,
            "SUSPENDED" | "S" => JobState::Suspended,
            "REQUEUED" | "RQ" => JobState::Requeued,
            other => JobState::Other(other.to_string()),
        }
    }

    /// The job will not run again (`COMPLETING` still has processes on the node).
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            JobState::Pending
                | JobState::Configuring
                | JobState::Running
                | JobState::Completing
                | JobState::Suspended
                | JobState::Requeued
        )
    }
}

/// What `scontrol show job` says of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: u64,
    pub state: JobState,
    /// Why it waits (`Priority`, `Resources`, ...), or why it ended (`NonZeroExitCode`).
    pub reason: String,
    /// The nodes it runs or ran on (empty while pending).
    pub nodes: String,
    /// The batch script's exit code and the signal that ended it (`ExitCode=3:0`).
    pub exit_code: Option<(i32, i32)>,
}

/// Parses `scontrol show job`'s `Key=Value` pairs into a job.
pub fn parse_job(text: &str) -> Option<Job> {
    let fields = key_values(text);
    let id = fields.get("JobId")?.parse().ok()?;
    let state = JobState::parse(fields.get("JobState")?);
    let field = |k: &str| fields.get(k).filter(|v| *v != "(null)").cloned().unwrap_or_default();
    let exit_code = fields.get("ExitCode").and_then(|e| {
        let (code, sig) = e.split_once(':')?;
        Some((code.parse().ok()?, sig.parse().ok()?))
    });
    Some(Job { id, state, reason: field("Reason"), nodes: field("NodeList"), exit_code })
}

/// `Key=Value` tokens, split on whitespace (as `scontrol` prints one job).
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace().filter_map(|t| t.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The job id `sbatch --parsable` printed (`123`, or `123;cluster` on a federation).
pub fn parse_job_id(out: &str) -> Option<u64> {
    out.trim().split(';').next()?.trim().parse().ok()
}

fn run(tool: &str, args: &[String]) -> Result<String, SlurmError> {
    let command = format!("{tool} {}", args.join(" "));
    let out = Command::new(tool).args(args).output().map_err(|e| {
        SlurmError::NotConfigured(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{tool}` was not found on PATH: running on Slurm needs its client tools (sbatch, scontrol, \
                 scancel) and the cluster's slurm.conf (in /etc/slurm, or named by SLURM_CONF)"
            )
        } else {
            format!("running `{tool}`: {e}")
        })
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(SlurmError::Refused { command, stderr: String::from_utf8_lossy(&out.stderr).into_owned() });
    }
    Ok(stdout)
}

/// Submits a batch script with `sbatch --parsable`; returns the job id.
pub fn submit(script: &Path, args: &[String]) -> Result<u64, SlurmError> {
    let mut all = vec!["--parsable".to_string()];
    all.extend(args.iter().cloned());
    all.push(script.display().to_string());
    let out = run("sbatch", &all)?;
    parse_job_id(&out).ok_or_else(|| SlurmError::Unexpected { command: "sbatch --parsable".into(), output: out })
}

/// The job as the controller knows it; `None` once the controller has forgotten it
/// (`MinJobAge` after it ended).
pub fn job(id: u64) -> Result<Option<Job>, SlurmError> {
    match run("scontrol", &["show".into(), "job".into(), id.to_string()]) {
        Ok(out) => parse_job(&out)
            .map(Some)
            .ok_or_else(|| SlurmError::Unexpected { command: format!("scontrol show job {id}"), output: out }),
        Err(SlurmError::Refused { stderr, .. }) if stderr.contains("Invalid job id") => Ok(None),
        Err(e) => Err(e),
    }
}

/// GPUs and GPU shards per node, as `sinfo -o %G` lists them (`gpu:2,shard:8`, or
/// `gpu:a100:4(S:0-1)`): the most any node has of each.
pub fn parse_gres(sinfo: &str) -> (u32, u32) {
    let (mut gpus, mut shards) = (0, 0);
    for line in sinfo.lines() {
        let (mut g, mut s) = (0, 0);
        for item in line.split(',') {
            let item = item.split('(').next().unwrap_or("").trim();
            let mut parts = item.split(':');
            let name = parts.next().unwrap_or("");
            let count = item.rsplit(':').next().and_then(|c| c.parse::<u32>().ok()).unwrap_or(0);
            match name {
                "gpu" => g += count,
                "shard" => s += count,
                _ => {}
            }
        }
        gpus = gpus.max(g);
        shards = shards.max(s);
    }
    (gpus, shards)
}

/// The cluster's shards per GPU (for GPU shares), from `sinfo`; an error where no node has
/// shards (`gres.conf`'s `Name=shard`).
pub fn shards_per_gpu() -> Result<u32, SlurmError> {
    let out = run("sinfo", &["-h".into(), "-o".into(), "%G".into()])?;
    match parse_gres(&out) {
        (g, s) if g > 0 && s > 0 => Ok((s / g).max(1)),
        _ => Err(SlurmError::BadRequest(format!(
            "GPU shares need Slurm's GPU sharding, and no node of this cluster has shards (sinfo lists gres {:?}): \
             ask for whole GPUs (num_gpus), or have `Name=shard` added to gres.conf",
            out.trim()
        ))),
    }
}

/// The tasks of job array `id` the controller still lists (`squeue -r`): index and state.
/// Empty once they have all ended and been forgotten.
pub fn array_tasks(id: u64) -> Result<Vec<(usize, JobState)>, SlurmError> {
    match run("squeue", &["-h".into(), "-r".into(), "-j".into(), id.to_string(), "-o".into(), "%K %T".into()]) {
        Ok(out) => Ok(parse_array_tasks(&out)),
        Err(SlurmError::Refused { stderr, .. }) if stderr.contains("Invalid job id") => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// `squeue -r -o "%K %T"` lines: `3 RUNNING`.
pub fn parse_array_tasks(out: &str) -> Vec<(usize, JobState)> {
    out.lines()
        .filter_map(|l| {
            let (i, s) = l.trim().split_once(' ')?;
            Some((i.parse().ok()?, JobState::parse(s)))
        })
        .collect()
}

/// Cancels a job (pending or running).
pub fn cancel(id: u64) -> Result<(), SlurmError> {
    run("scancel", &[id.to_string()]).map(|_| ())
}
