//! Slurm's side: DRYML's requests as `sbatch` options, and the scheduler's own tools
//! (`sbatch --parsable`, `scontrol show job`, `scancel`) called, their output parsed.
//!
//! States come from `scontrol` while the controller knows the job, so nothing here needs
//! `slurmdbd` (without it `sacct` answers "accounting storage is disabled").

mod tools;

use crate::compute::context::Requests;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
pub use tools::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmError {
    /// The client tools are missing or cannot reach a controller.
    NotConfigured(String),
    /// A request with no Slurm equivalent, found before anything was submitted.
    BadRequest(String),
    /// A tool ran and refused (its stderr).
    Refused { command: String, stderr: String },
    /// A tool's output was not what Slurm prints.
    Unexpected { command: String, output: String },
}

impl fmt::Display for SlurmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlurmError::NotConfigured(m) | SlurmError::BadRequest(m) => f.write_str(m),
            SlurmError::Refused { command, stderr } => write!(f, "{command} failed: {}", stderr.trim()),
            SlurmError::Unexpected { command, output } => {
                write!(f, "{command} printed {:?}, not what Slurm prints", output.trim())
            }
        }
    }
}

impl std::error::Error for SlurmError {}

/// The `sbatch` options for `reqs` under `opts`: CPUs to `--cpus-per-task`, whole GPUs to
/// `--gres=gpu:N`, GPU shares to `--gres=shard:N` (of `shards_per_gpu`, else 4, per GPU), then
/// `--mem`, `--time`, partition, account, QOS and the pass-through options.
pub fn sbatch_options(reqs: &Requests, opts: &JobOptions) -> Result<Vec<String>, SlurmError> {
    let shards_per_gpu = opts.shards_per_gpu.unwrap_or(4);
    let (mut cpus, mut cpu_share, mut gpus, mut shards) = (0i64, 0f64, 0i64, 0u32);
    for (name, r) in &reqs.frameworks {
        for (what, n) in [("num_cpus", r.num_cpus), ("num_gpus", r.num_gpus)] {
            if n == Some(-1) {
                return Err(SlurmError::BadRequest(format!(
                    "{name} {what}=-1 (all that are free) has no Slurm equivalent: ask for a number"
                )));
            }
        }
        cpus += r.num_cpus.unwrap_or(0);
        gpus += r.num_gpus.unwrap_or(0);
        cpu_share += r.cpus.values().sum::<f64>();
        for share in r.gpus.values() {
            if *share >= 1.0 {
                gpus += 1;
            } else {
                shards += (share * shards_per_gpu as f64).ceil().max(1.0) as u32;
            }
        }
    }
    // A job has at least one CPU; fractions of CPUs round up.
    let cpus = (cpus + cpu_share.ceil() as i64).max(1);
    let mut args = vec![format!("--cpus-per-task={cpus}")];
    if gpus > 0 && shards > 0 {
        // Slurm refuses such a job ("Invalid generic resource (gres) specification").
        return Err(SlurmError::BadRequest(format!(
            "{gpus} whole GPU(s) and GPU shares ({shards} shards) cannot be asked for in one Slurm job: \
             ask for whole GPUs only (num_gpus) or shares only (gpu/<i>=fraction)"
        )));
    }
    let mut gres = Vec::new();
    if gpus > 0 {
        gres.push(format!("gpu:{gpus}"));
    }
    if shards > 0 {
        gres.push(format!("shard:{shards}"));
    }
    if !gres.is_empty() {
        args.push(format!("--gres={}", gres.join(",")));
    }
    if let Some(m) = opts.mem {
        args.push(format!("--mem={}M", m.div_ceil(1 << 20).max(1)));
    }
    if let Some(t) = opts.time {
        args.push(format!("--time={}", slurm_time(Duration::from_secs_f64(t))));
    }
    for (flag, v) in [("partition", &opts.partition), ("account", &opts.account), ("qos", &opts.qos)] {
        if let Some(v) = v {
            args.push(format!("--{flag}={v}"));
        }
    }
    args.extend(opts.sbatch.iter().cloned());
    Ok(args)
}

/// Where and how a Slurm job goes, beyond its resource requests: the one options type for
/// `%slurm`'s settings (the `DRYML_SLURM_*` variables: `DIR`, `PARTITION`, `ACCOUNT`, `QOS`,
/// `TIME`, `MEM`, `SHARDS_PER_GPU`, `SBATCH`, which `%slurm key=value` sets in the notebook's
/// process, so a cell's code and the magics submit alike), for a job's own choices
/// (`%%compute --on slurm --partition ...`, [`crate::Slurm`]'s builder) and for the two merged
/// ([`JobOptions::over`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobOptions {
    /// The root of the job directories, shared with the nodes.
    pub dir: Option<String>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// `--time`, seconds: the job is ended (state TIMEOUT) after this.
    pub time: Option<f64>,
    /// `--mem`, bytes (rounded up to whole MiB).
    pub mem: Option<u64>,
    /// How many shards the cluster splits a GPU into (`gres.conf`'s `Name=shard Count`, per
    /// GPU): a `gpu/<i>=0.5` share asks for half of them.
    pub shards_per_gpu: Option<u32>,
    /// Passed to `sbatch` as they are, after the options made from the fields.
    pub sbatch: Vec<String>,
}

/// A job's `sbatch` options, and the time limit and memory they give it (for its record).
#[derive(Debug, Clone, PartialEq)]
pub struct SbatchArgs {
    pub args: Vec<String>,
    pub time: Option<Duration>,
    /// Bytes.
    pub mem: Option<u64>,
}

/// The environment variable that holds setting `key` (`dir` → `DRYML_SLURM_DIR`).
pub fn setting_var(key: &str) -> String {
    format!("DRYML_SLURM_{}", key.to_ascii_uppercase())
}

impl JobOptions {
    /// The settings of this process's environment.
    pub fn from_env() -> JobOptions {
        JobOptions::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings as `get` gives the variables (the kernel asks for its child's).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> JobOptions {
        JobOptions::from_settings(|key| get(&setting_var(key)))
    }

    /// The options as `get` gives each setting's text by its key (`partition`, `time`, ...).
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> JobOptions {
        let var = |key: &str| get(key).filter(|v| !v.trim().is_empty());
        JobOptions {
            dir: var("dir"),
            partition: var("partition"),
            account: var("account"),
            qos: var("qos"),
            time: var("time").and_then(|t| crate::sys::units::parse_seconds(&t)),
            mem: var("mem").and_then(|m| crate::sys::units::parse_size(&m).ok()),
            shards_per_gpu: var("shards_per_gpu").and_then(|n| n.trim().parse().ok()),
            sbatch: var("sbatch").map(|s| s.split_whitespace().map(str::to_string).collect()).unwrap_or_default(),
        }
    }

    /// The options that are set, as (key, text) settings that [`JobOptions::from_settings`]
    /// reads back: how the kernel hands a cell's own options to the code it generates.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let texts =
            [("dir", &self.dir), ("partition", &self.partition), ("account", &self.account), ("qos", &self.qos)];
        out.extend(texts.into_iter().filter_map(|(k, v)| v.clone().map(|v| (k, v))));
        out.extend(self.time.map(|t| ("time", t.to_string())));
        out.extend(self.mem.map(|m| ("mem", m.to_string())));
        out.extend(self.shards_per_gpu.map(|n| ("shards_per_gpu", n.to_string())));
        if !self.sbatch.is_empty() {
            out.push(("sbatch", self.sbatch.join(" ")));
        }
        out
    }

    /// The jobs' root directory: `dir`, else `~/dryml-jobs`.
    pub fn root(&self) -> PathBuf {
        match &self.dir {
            Some(d) => PathBuf::from(d),
            None => std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from).join("dryml-jobs"),
        }
    }

    /// This notebook's folder of job directories under the root.
    pub fn notebook_dir(&self) -> PathBuf {
        self.root().join(notebook_name())
    }

    /// A new job directory in this notebook's folder, named by time so that listings are in
    /// submission order.
    pub fn new_job_dir(&self) -> std::io::Result<PathBuf> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let t = local_time(now.as_secs());
        let stamp =
            format!("{:04}{:02}{:02}-{:02}{:02}{:02}-{:03}", t[0], t[1], t[2], t[3], t[4], t[5], now.subsec_millis());
        let dir = self.notebook_dir().join(format!("{stamp}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// This notebook's job directories, oldest first.
    pub fn job_dirs(&self) -> Vec<PathBuf> {
        job_dirs(&self.notebook_dir())
    }

    /// The directory of job `id`: this notebook's first, then any notebook's under the root (a
    /// job is found from a new kernel, or another notebook).
    pub fn find_job(&self, id: u64) -> Result<PathBuf, String> {
        let mine = self.notebook_dir();
        let mut all = job_dirs(&mine);
        for nb in std::fs::read_dir(self.root()).into_iter().flatten().flatten() {
            if nb.path() != mine {
                all.extend(job_dirs(&nb.path()));
            }
        }
        all.into_iter().find(|d| crate::compute::slurm::job::JobDir::new(d).slurm_id() == Some(id)).ok_or_else(|| {
            format!(
                "no job directory under {} records Slurm job {id} (`%jobs` lists this notebook's)",
                self.root().display()
            )
        })
    }

    /// A job's own choices over `defaults` (the settings): each field it sets wins, and its
    /// `sbatch` options come after the defaults'.
    pub fn over(&self, defaults: &JobOptions) -> JobOptions {
        let pick = |own: &Option<String>, default: &Option<String>| own.clone().or_else(|| default.clone());
        JobOptions {
            dir: pick(&self.dir, &defaults.dir),
            partition: pick(&self.partition, &defaults.partition),
            account: pick(&self.account, &defaults.account),
            qos: pick(&self.qos, &defaults.qos),
            time: self.time.or(defaults.time),
            mem: self.mem.or(defaults.mem),
            shards_per_gpu: self.shards_per_gpu.or(defaults.shards_per_gpu),
            sbatch: defaults.sbatch.iter().chain(&self.sbatch).cloned().collect(),
        }
    }

    /// The `sbatch` options of a job asking for `reqs` under these options, shards per GPU
    /// read from the cluster when a GPU share needs them and no option says.
    pub fn sbatch_args(&self, reqs: &Requests) -> Result<SbatchArgs, SlurmError> {
        let needs_shards = reqs.frameworks.iter().any(|(_, r)| r.gpus.values().any(|s| *s < 1.0));
        let shards_per_gpu = match (self.shards_per_gpu, needs_shards) {
            (Some(n), _) => n,
            (None, true) => shards_per_gpu()?,
            (None, false) => 1,
        };
        let opts = JobOptions { shards_per_gpu: Some(shards_per_gpu), ..self.clone() };
        Ok(SbatchArgs {
            args: sbatch_options(reqs, &opts)?,
            time: self.time.map(Duration::from_secs_f64),
            mem: self.mem,
        })
    }
}

/// Job directories under a notebook's folder, oldest first.
fn job_dirs(nb: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(nb)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("request.json").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Year, month, day, hour, minute and second of a Unix time, in the machine's time zone.
fn local_time(secs: u64) -> [i64; 6] {
    let t = secs as libc::time_t;
    // SAFETY: tm is plain data that localtime_r fills.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    [
        tm.tm_year as i64 + 1900,
        tm.tm_mon as i64 + 1,
        tm.tm_mday as i64,
        tm.tm_hour as i64,
        tm.tm_min as i64,
        tm.tm_sec as i64,
    ]
}

/// Now as `2026-11-23T03:15:00` (local time), as a job's record keeps its submission.
pub fn local_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let t = local_time(secs);
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", t[0], t[1], t[2], t[3], t[4], t[5])
}

/// This notebook's folder name: JupyterLab names the notebook to its kernels
/// (`JPY_SESSION_NAME`), and the kernel's process passes it on; other front ends share
/// `notebook`.
pub fn notebook_name() -> String {
    let name = std::env::var("JPY_SESSION_NAME")
        .ok()
        .and_then(|p| Path::new(&p).file_stem().map(|s| s.to_string_lossy().into_owned()));
    let name = name.unwrap_or_else(|| "notebook".into());
    let slug: String = name.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if slug.is_empty() || slug.starts_with('.') {
        "notebook".into()
    } else {
        slug
    }
}

/// `D-HH:MM:SS`, rounded up to whole seconds (Slurm's `--time` takes no fractions).
pub fn slurm_time(t: Duration) -> String {
    let s = t.as_secs() + u64::from(t.subsec_nanos() > 0);
    let s = s.max(1);
    format!("{}-{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests;
