//! Slurm from the notebook: `%slurm` (where and how jobs go), `%%compute --on slurm` and
//! `%%sweep --on slurm` (the cell as a function of its own library, which the notebook's process
//! sends to a job directory with its batch script, submits and follows, as `Compute::on(Slurm)`
//! does with a closure) and `%jobs` (the notebook's jobs, read from their directories, so a new
//! kernel finds an old one's).

use super::cell::Cell;
use super::codegen::{self, Var};
use super::Host;
use crate::protocol::ErrorContent;
use crate::session::errors::CellLines;
use dryml::__kernel::slurm::job::JobDir;
use dryml::__kernel::slurm::JobOptions;
use dryml_magics::{ComputeOptions, JobsCall, SlurmCall, SlurmJob, SlurmSetting, SweepOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `%slurm`, `%%compute --on slurm`, `%%sweep --on slurm` and `%jobs`. The settings live in
/// the notebook's process as `DRYML_SLURM_*` variables (`%slurm` sets them there), so the
/// magics and a cell's own `Compute::on(Slurm)` submit alike.
#[derive(Default)]
pub struct SlurmMagic;

fn slurm_error(e: impl std::fmt::Display) -> ErrorContent {
    ErrorContent::new("SlurmError", e.to_string())
}

impl SlurmMagic {
    /// The settings as the notebook's process has them.
    fn settings(host: &Host<'_>) -> JobOptions {
        JobOptions::from_lookup(|name| host.session.child_env(name))
    }

    pub fn run(&mut self, host: &mut Host<'_>, call: &SlurmCall) -> Result<(), ErrorContent> {
        if let SlurmCall::Set(list) = call {
            let vars = list.iter().map(|s| {
                let (key, value) = setting_value(s);
                let name = dryml::__kernel::slurm::setting_var(key);
                // An empty value goes back to the kernel's own environment.
                let value = value.or_else(|| std::env::var(&name).ok());
                (name, value)
            });
            host.session.set_env(vars.collect())?;
        }
        let s = Self::settings(host);
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "(Slurm's default)".into());
        let rows: Vec<Vec<String>> = vec![
            vec![
                "dir".into(),
                format!("{} (this notebook: {})", s.root().display(), dryml::__kernel::slurm::notebook_name()),
            ],
            vec!["partition".into(), opt(&s.partition)],
            vec!["account".into(), opt(&s.account)],
            vec!["qos".into(), opt(&s.qos)],
            vec![
                "time".into(),
                s.time
                    .map(|t| dryml::__kernel::slurm::slurm_time(std::time::Duration::from_secs_f64(t)))
                    .unwrap_or_else(|| "(the partition's limit)".into()),
            ],
            vec!["mem".into(), s.mem.map(dryml_sys::units::size).unwrap_or_else(|| "(the cluster's default)".into())],
            vec![
                "shards_per_gpu".into(),
                s.shards_per_gpu.map(|n| n.to_string()).unwrap_or_else(|| "(read from the cluster)".into()),
            ],
            vec!["sbatch".into(), if s.sbatch.is_empty() { "(none)".into() } else { s.sbatch.join(" ") }],
        ];
        let cluster = match std::process::Command::new("sinfo").args(["-h", "-o", "%P %a %D %G"]).output() {
            Ok(o) if o.status.success() => {
                format!("the cluster answers: {}", String::from_utf8_lossy(&o.stdout).trim().replace('\n', "; "))
            }
            Ok(o) => format!("the cluster does not answer: {}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(_) => {
                "sinfo was not found: install Slurm's client tools and point SLURM_CONF at the cluster's slurm.conf"
                    .into()
            }
        };
        let (text, html) = crate::display_table::render(
            &format!("Slurm settings for %%compute --on slurm ({cluster})"),
            &["key", "value"],
            &rows,
        );
        host.show(crate::protocol::published::Bundle::html(text, html));
        Ok(())
    }

    pub fn jobs(&mut self, host: &mut Host<'_>, call: &JobsCall) -> Result<(), ErrorContent> {
        // Every subcommand but the list is about one job: its directory is found once.
        let dir = match call {
            JobsCall::List => PathBuf::new(),
            JobsCall::Wait(id) | JobsCall::Cancel(id) | JobsCall::Result { id, .. } => {
                Self::settings(host).find_job(*id).map_err(|e| ErrorContent::new("KeyError", e))?
            }
        };
        match call {
            JobsCall::List => {
                let settings = Self::settings(host);
                let nb = settings.notebook_dir();
                let rows: Vec<Vec<String>> = settings
                    .job_dirs()
                    .into_iter()
                    .map(|d| {
                        let jd = JobDir::new(&d);
                        let req = jd.request().unwrap_or(Value::Null);
                        let first = req["body"]
                            .as_str()
                            .unwrap_or("")
                            .lines()
                            .find(|l| !l.trim().is_empty())
                            .unwrap_or("")
                            .to_string();
                        vec![
                            jd.slurm_id().map(|i| i.to_string()).unwrap_or_else(|| "-".into()),
                            if is_sweep(&d) {
                                dryml::__kernel::slurm::array::status(&jd)
                            } else {
                                dryml::__kernel::slurm::follow::status(&jd)
                            },
                            req["created"]
                                .as_str()
                                .unwrap_or("")
                                .chars()
                                .take(19)
                                .collect::<String>()
                                .replace('T', " "),
                            first,
                            d.display().to_string(),
                        ]
                    })
                    .collect();
                let head = format!("{} Slurm job(s) of this notebook in {}", rows.len(), nb.display());
                let (text, html) =
                    crate::display_table::render(&head, &["job", "state", "submitted", "cell", "directory"], &rows);
                host.show(crate::protocol::published::Bundle::html(text, html));
                Ok(())
            }
            JobsCall::Cancel(id) => {
                dryml::__kernel::slurm::cancel(*id).map_err(slurm_error)?;
                host.print(&format!("dryml: cancelled Slurm job {id}\n"));
                Ok(())
            }
            JobsCall::Wait(_) | JobsCall::Result { .. } if is_sweep(&dir) => {
                run_shown(host, &codegen::sweep_wait(&dir.display().to_string()))
            }
            JobsCall::Wait(_) => run_shown(host, &codegen::job_wait(&dir.display().to_string())),
            JobsCall::Result { id, var } => {
                let req = JobDir::new(&dir).request().map_err(|e| slurm_error(format!("{}: {e}", dir.display())))?;
                if req["from"] == "code" {
                    // Its value's type is the code's to name.
                    return Err(ErrorContent::new(
                        crate::protocol::MAGIC_ERROR,
                        format!("%jobs result {id}: job {id} was submitted from code; its value comes back with `dryml::SlurmJob::<T>::attach({id})?.wait()?` (`%jobs wait {id}` shows its output)"),
                    ));
                }
                let updates: Vec<Var> = req["updates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|u| Var {
                        name: u["name"].as_str().unwrap_or_default().into(),
                        ty: u["type"].as_str().unwrap_or_default().into(),
                    })
                    .collect();
                let names: Vec<(String, &Var)> = match var {
                    Some(v) if updates.len() == 1 => vec![(v.clone(), &updates[0])],
                    Some(v) => {
                        let had = updates.iter().map(|u| format!("`{}`", u.name)).collect::<Vec<_>>().join(", ");
                        return Err(ErrorContent::new(
                            crate::protocol::MAGIC_ERROR,
                            format!("%jobs result {id} as {v}: `as` names the one --update variable of a job, and job {id} has {} ({})", updates.len(), if had.is_empty() { "none".into() } else { had }),
                        ));
                    }
                    None => updates.iter().map(|u| (u.name.clone(), u)).collect(),
                };
                // First the wait, which ends the cell with the job's error if it has one; then the
                // variables, which are defined only when the job has delivered them.
                let d = dir.display().to_string();
                let wanted: Vec<&str> = names.iter().map(|(_, u)| u.name.as_str()).collect();
                run_shown(host, &codegen::job_wait_for(&d, &wanted))?;
                if !names.is_empty() {
                    let code: String = names.iter().map(|(name, u)| codegen::job_update(name, u, &d)).collect();
                    host.session.set_cell_lines(None);
                    host.session.eval_user(&code, host.io)?;
                    let got: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
                    host.print(&format!("dryml: job {id}'s result is in {}\n", got.join(", ")));
                }
                Ok(())
            }
        }
    }
}

/// The code a `%%compute --on slurm` cell runs in the notebook's process.
pub fn compute_cell(host: &mut Host<'_>, opts: &ComputeOptions, cell: &Cell<'_>) -> Result<String, ErrorContent> {
    let job = Job {
        requests: &opts.requests,
        timeout: opts.timeout,
        mem: opts.mem_limit,
        slurm: opts.slurm.clone().unwrap_or_default(),
        update: &opts.update,
        sweep: None,
    };
    job_code(host, &job, cell)
}

/// The code a `%%sweep --on slurm` cell runs: the definitions written, the array submitted.
pub fn sweep_cell(host: &mut Host<'_>, opts: &SweepOptions, cell: &Cell<'_>) -> Result<String, ErrorContent> {
    let job = Job {
        requests: &opts.requests,
        timeout: opts.timeout,
        mem: opts.mem_limit,
        slurm: opts.slurm.clone().unwrap_or_default(),
        update: &[],
        sweep: Some(opts),
    };
    job_code(host, &job, cell)
}

/// A Slurm cell's `request.json` as the kernel knows it (the notebook's process adds the rest).
#[derive(serde::Serialize)]
struct JobRequest<'a> {
    kind: &'static str,
    options: std::collections::BTreeMap<&'static str, String>,
    requests: String,
    body: &'a str,
    inputs: &'a [Var],
    updates: &'a [Var],
    shows: bool,
    kernel_pid: u32,
    body_lines: usize,
    body_offset: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    defs_variable: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    repo: Option<&'a String>,
}

/// The cell as code that ships its library as a job (see [`codegen::Job`]); what can be
/// checked before the cell compiles (the variables, the requests against the settings) is.
fn job_code(host: &mut Host<'_>, job: &Job<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
    let (body, magic_lines) = (cell.body(), cell.magic_lines);
    let what = if job.kind() == "sweep" { "%%sweep" } else { "%%compute" };
    host.session.ensure_child_setup();
    let vars = host.session.variables();
    for u in job.update {
        if !vars.contains_key(u) {
            return Err(ErrorContent::new(
                crate::protocol::MAGIC_ERROR,
                format!("{what}: --update {u}: the notebook has no variable `{u}` to update"),
            ));
        }
    }
    let inputs: Vec<Var> = vars
        .iter()
        .filter(|(n, _)| cell.names().contains(n.as_str()) || job.update.contains(n))
        .map(|(n, t)| Var { name: n.clone(), ty: t.clone() })
        .collect();
    let updates: Vec<Var> = inputs.iter().filter(|v| job.update.contains(&v.name)).cloned().collect();
    let shows = job.kind() == "compute"
        && cell.shows().map_err(|deep| {
            ErrorContent::new(crate::protocol::MAGIC_ERROR, format!("{what}: {deep}; split the cell"))
        })?;
    let own = JobOptions { time: job.timeout, mem: job.mem, ..job.slurm.options.clone() };
    // A request Slurm cannot take is said before the cell compiles; the notebook's process
    // merges the same settings again when it submits.
    own.over(&SlurmMagic::settings(host)).sbatch_args(job.requests).map_err(slurm_error)?;
    let body_lines = body.lines().count().max(1);
    let request = serde_json::to_value(JobRequest {
        kind: job.kind(),
        options: own.settings().into_iter().collect(),
        requests: job.requests.to_text(),
        body,
        inputs: &inputs,
        updates: &updates,
        shows,
        kernel_pid: std::process::id(),
        body_lines,
        body_offset: magic_lines,
        defs_variable: job.sweep.map(|o| &o.defs),
        repo: job.sweep.map(|o| &o.repo),
    })
    .expect("a job's request serialises");
    let code = codegen::Job {
        request: &request,
        body,
        inputs: &inputs,
        updates: &updates,
        shows,
        sweep: job.sweep,
        detach: job.slurm.detach,
    }
    .code();
    // The body's compile errors name the cell's lines.
    host.session.set_cell_lines(Some(CellLines::within(&[code.body_line], body_lines, magic_lines)));
    Ok(code.code)
}

/// A `%slurm` setting as its key and the value its variable takes (`None`: the environment's).
fn setting_value(s: &SlurmSetting) -> (&'static str, Option<String>) {
    match s {
        SlurmSetting::Dir(v) => ("dir", v.clone()),
        SlurmSetting::Partition(v) => ("partition", v.clone()),
        SlurmSetting::Account(v) => ("account", v.clone()),
        SlurmSetting::Qos(v) => ("qos", v.clone()),
        SlurmSetting::Time(v) => ("time", v.map(|t| t.to_string())),
        SlurmSetting::Mem(v) => ("mem", v.map(|m| m.to_string())),
        SlurmSetting::ShardsPerGpu(v) => ("shards_per_gpu", v.map(|n| n.to_string())),
        SlurmSetting::Sbatch(v) => ("sbatch", (!v.is_empty()).then(|| v.join(" "))),
    }
}

fn is_sweep(dir: &Path) -> bool {
    JobDir::new(dir).request().is_ok_and(|r| r["kind"] == "sweep")
}

/// Runs `code` in the notebook's process and shows its value.
fn run_shown(host: &mut Host<'_>, code: &str) -> Result<(), ErrorContent> {
    host.session.set_cell_lines(None);
    if let Some(data) = host.session.eval_user(code, host.io)? {
        if data["text/plain"].as_str().is_some_and(|t| !t.is_empty()) {
            host.show(data);
        }
    }
    Ok(())
}

/// What a job is, for [`job_code`].
struct Job<'a> {
    requests: &'a dryml::compute::context::Requests,
    timeout: Option<f64>,
    mem: Option<u64>,
    slurm: SlurmJob,
    update: &'a [String],
    sweep: Option<&'a SweepOptions>,
}

impl Job<'_> {
    /// What the job is, as its request file names it.
    fn kind(&self) -> &'static str {
        if self.sweep.is_some() {
            "sweep"
        } else {
            "compute"
        }
    }
}
