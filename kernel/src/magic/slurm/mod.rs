//! Slurm from the notebook: `%slurm` (where and how jobs go), `%%compute --on slurm` (the
//! cell built as a program, written to a job directory with its batch script, submitted and
//! followed by the notebook's process) and `%jobs` (the notebook's jobs, read from their
//! directories, so a new kernel finds an old one's).

pub mod build;

use super::Host;
use crate::protocol::ErrorContent;
use build::{Program, Var};
use dryml::slurm::job::JobDir;
use dryml_magics::{ComputeOptions, JobsCall, SlurmCall, SlurmJob, SlurmSetting, SweepOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The settings jobs are submitted with: the environment's (`DRYML_SLURM_*`), then `%slurm`'s.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub dir: Option<String>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub time: Option<f64>,
    pub mem: Option<u64>,
    pub shards_per_gpu: Option<u32>,
    pub sbatch: Vec<String>,
}

fn env(key: &str) -> Option<String> {
    std::env::var(format!("DRYML_SLURM_{}", key.to_ascii_uppercase())).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    fn from_env() -> Settings {
        Settings {
            dir: env("dir"),
            partition: env("partition"),
            account: env("account"),
            qos: env("qos"),
            time: env("time").and_then(|t| dryml_magics::parse_seconds(&t)),
            mem: env("mem").and_then(|m| dryml_magics::parse_size(&m).ok()),
            shards_per_gpu: env("shards_per_gpu").and_then(|n| n.parse().ok()),
            sbatch: env("sbatch").map(|s| s.split_whitespace().map(str::to_string).collect()).unwrap_or_default(),
        }
    }

    fn apply(&mut self, s: &SlurmSetting) {
        let base = Settings::from_env();
        match s {
            SlurmSetting::Dir(v) => self.dir = v.clone().or(base.dir),
            SlurmSetting::Partition(v) => self.partition = v.clone().or(base.partition),
            SlurmSetting::Account(v) => self.account = v.clone().or(base.account),
            SlurmSetting::Qos(v) => self.qos = v.clone().or(base.qos),
            SlurmSetting::Time(v) => self.time = (*v).or(base.time),
            SlurmSetting::Mem(v) => self.mem = (*v).or(base.mem),
            SlurmSetting::ShardsPerGpu(v) => self.shards_per_gpu = (*v).or(base.shards_per_gpu),
            SlurmSetting::Sbatch(v) => self.sbatch = if v.is_empty() { base.sbatch } else { v.clone() },
        }
    }

    /// The jobs' root directory: `dir`, else `~/dryml-jobs`.
    pub fn root(&self) -> PathBuf {
        match &self.dir {
            Some(d) => PathBuf::from(d),
            None => dirs::home_dir().unwrap_or_else(std::env::temp_dir).join("dryml-jobs"),
        }
    }
}

/// This notebook's folder under the root: JupyterLab names the notebook to its kernels
/// (`JPY_SESSION_NAME`); other front ends share `notebook`.
fn notebook_name() -> String {
    let name = std::env::var("JPY_SESSION_NAME").ok().and_then(|p| {
        Path::new(&p).file_stem().map(|s| s.to_string_lossy().into_owned())
    });
    let name = name.unwrap_or_else(|| "notebook".into());
    let slug: String = name.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if slug.is_empty() || slug.starts_with('.') { "notebook".into() } else { slug }
}

#[derive(Default)]
pub struct SlurmMagic {
    settings: Option<Settings>,
}

fn slurm_error(e: impl std::fmt::Display) -> ErrorContent {
    ErrorContent::new("SlurmError", e.to_string())
}

impl SlurmMagic {
    pub fn settings(&mut self) -> &mut Settings {
        self.settings.get_or_insert_with(Settings::from_env)
    }

    fn notebook_dir(&mut self) -> PathBuf {
        self.settings().root().join(notebook_name())
    }

    pub fn run(&mut self, host: &mut Host<'_>, call: &SlurmCall) -> Result<(), ErrorContent> {
        if let SlurmCall::Set(list) = call {
            for s in list {
                self.settings().apply(s);
            }
        }
        let s = self.settings().clone();
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "(Slurm's default)".into());
        let rows: Vec<Vec<String>> = vec![
            vec!["dir".into(), format!("{} (this notebook: {})", s.root().display(), notebook_name())],
            vec!["partition".into(), opt(&s.partition)],
            vec!["account".into(), opt(&s.account)],
            vec!["qos".into(), opt(&s.qos)],
            vec!["time".into(), s.time.map(|t| dryml::slurm::slurm_time(std::time::Duration::from_secs_f64(t))).unwrap_or_else(|| "(the partition's limit)".into())],
            vec!["mem".into(), s.mem.map(dryml::compute::size).unwrap_or_else(|| "(the cluster's default)".into())],
            vec!["shards_per_gpu".into(), s.shards_per_gpu.map(|n| n.to_string()).unwrap_or_else(|| "(read from the cluster)".into())],
            vec!["sbatch".into(), if s.sbatch.is_empty() { "(none)".into() } else { s.sbatch.join(" ") }],
        ];
        let cluster = match std::process::Command::new("sinfo").args(["-h", "-o", "%P %a %D %G"]).output() {
            Ok(o) if o.status.success() => format!("the cluster answers: {}", String::from_utf8_lossy(&o.stdout).trim().replace('\n', "; ")),
            Ok(o) => format!("the cluster does not answer: {}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(_) => "sinfo was not found: install Slurm's client tools and point SLURM_CONF at the cluster's slurm.conf".into(),
        };
        let (text, html) = crate::table::render(&format!("Slurm settings for %%compute --on slurm ({cluster})"), &["key", "value"], &rows);
        host.show(json!({"text/plain": text, "text/html": html}));
        Ok(())
    }

    /// The code a `%%compute --on slurm` cell runs in the notebook's process, after its program
    /// is built and its directory written.
    pub fn compute_cell(&mut self, host: &mut Host<'_>, opts: &ComputeOptions, body: &str, body_offset: usize) -> Result<String, ErrorContent> {
        let job = Job {
            kind: "compute",
            requests: &opts.requests,
            timeout: opts.timeout,
            mem: opts.mem_limit,
            slurm: opts.slurm.clone().unwrap_or_default(),
            update: &opts.update,
            extra: Value::Null,
        };
        let p = self.prepare(host, &job, body, body_offset)?;
        Ok(submit_code(&p.dir, &p.inputs, &p.updates, p.shows, job.slurm.detach))
    }

    /// The code a `%%sweep --on slurm` cell runs: the definitions written, the array submitted.
    pub fn sweep_cell(&mut self, host: &mut Host<'_>, opts: &SweepOptions, body: &str, body_offset: usize) -> Result<String, ErrorContent> {
        let job = Job {
            kind: "sweep",
            requests: &opts.requests,
            timeout: opts.timeout,
            mem: opts.mem_limit,
            slurm: opts.slurm.clone().unwrap_or_default(),
            update: &[],
            extra: json!({"defs_variable": opts.defs, "repo": opts.repo}),
        };
        let p = self.prepare(host, &job, body, body_offset)?;
        let mut c = inputs_code(&p.dir, &p.inputs);
        c.push_str(&format!(
            "match ::dryml::sweep::submit(__dryml_job, &{defs}, {repo:?}, {detach}) {{\nOk(r) => ::dryml::compute::Shown(format!(\"{{r:?}}\")),\nErr(e) => {{ ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }}\n}}\n}}",
            defs = opts.defs,
            repo = opts.repo,
            detach = job.slurm.detach
        ));
        Ok(c)
    }

    /// Writes a job's directory (request, batch script) and builds its program.
    fn prepare(&mut self, host: &mut Host<'_>, job: &Job<'_>, body: &str, body_offset: usize) -> Result<Prepared, ErrorContent> {
        let what = if job.kind == "sweep" { "%%sweep" } else { "%%compute" };
        host.session.ensure_child_setup();
        let vars = host.session.variables();
        for u in job.update {
            if !vars.contains_key(u) {
                return Err(ErrorContent::new("MagicError", format!("{what}: --update {u}: the notebook has no variable `{u}` to update")));
            }
        }
        let names = super::context::identifiers(body);
        let inputs: Vec<Var> = vars
            .iter()
            .filter(|(n, _)| names.contains(n.as_str()) || job.update.contains(n))
            .map(|(n, t)| Var { name: n.clone(), ty: t.clone() })
            .collect();
        let updates: Vec<Var> = inputs.iter().filter(|v| job.update.contains(&v.name)).cloned().collect();
        let shows = job.kind == "compute"
            && super::context::ends_with_value(body).map_err(|deep| ErrorContent::new("MagicError", format!("{what}: {deep}; split the cell")))?;
        let settings = self.settings().clone();
        let needs_shards = job.requests.frameworks.iter().any(|(_, r)| r.gpus.values().any(|s| *s < 1.0));
        let shards_per_gpu = match (settings.shards_per_gpu, needs_shards) {
            (Some(n), _) => n,
            (None, true) => dryml::slurm::shards_per_gpu().map_err(slurm_error)?,
            (None, false) => 1,
        };
        let time = job.timeout.or(settings.time).map(std::time::Duration::from_secs_f64);
        let mem = job.mem.or(settings.mem);
        let sopts = dryml::slurm::Options {
            partition: job.slurm.partition.clone().or(settings.partition.clone()),
            account: job.slurm.account.clone().or(settings.account.clone()),
            qos: job.slurm.qos.clone().or(settings.qos.clone()),
            time,
            mem,
            shards_per_gpu,
            extra: settings.sbatch.iter().chain(&job.slurm.sbatch).cloned().collect(),
        };
        let args = dryml::slurm::sbatch_options(job.requests, &sopts).map_err(slurm_error)?;
        // The directory: named by time, so `%jobs` lists jobs in order.
        let nb = self.notebook_dir();
        let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S%.3f").to_string().replace('.', "-");
        let dir = nb.join(format!("{stamp}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| slurm_error(format!("creating the job's directory {}: {e}", dir.display())))?;
        let jd = JobDir::new(&dir);
        let (items, deps) = host.session.evcxr().notebook_crate();
        let opt_level = std::env::var("DRYML_OPT_LEVEL").unwrap_or_else(|_| crate::session::DEFAULT_OPT_LEVEL.to_string());
        let name = host.session.job_crate().unwrap_or_else(|| "dryml_job".into());
        let program = Program {
            name: &name,
            items: &items,
            deps: &deps,
            body,
            inputs: &inputs,
            updates: &updates,
            shows,
            sweep: job.kind == "sweep",
            opt_level: &opt_level,
            body_offset,
        };
        let src = program.source();
        let mut request = json!({
            "kind": job.kind,
            "notebook": notebook_name(),
            "body": body,
            "requests": job.requests.to_text(),
            "sbatch": args,
            "inputs": inputs.iter().map(|v| json!({"name": v.name, "type": v.ty})).collect::<Vec<_>>(),
            "updates": updates.iter().map(|v| json!({"name": v.name, "type": v.ty})).collect::<Vec<_>>(),
            "shows": shows,
            "time": time.map(dryml::slurm::slurm_time),
            "mem": mem,
            "created": chrono::Local::now().to_rfc3339(),
            "kernel_pid": std::process::id(),
            "body_line": src.body_line,
            "body_lines": src.body_lines,
            "body_offset": body_offset,
        });
        if let Value::Object(extra) = &job.extra {
            for (k, v) in extra {
                request[k] = v.clone();
            }
        }
        let written = jd.write_request(&request).map_err(|e| slurm_error(format!("writing {}: {e}", jd.file("request.json").display()))).and_then(|()| {
            let name = format!("dryml-{}", notebook_name());
            let script = if job.kind == "sweep" {
                dryml::slurm::job::array_script(&dir, &name, &args)
            } else {
                dryml::slurm::job::batch_script(&dir, &name, &args)
            };
            dryml::fs::write_atomic(&jd.file("job.sh"), script.as_bytes(), dryml::fs::Durability::Fsync)
                .map_err(|e| slurm_error(format!("writing job.sh: {e}")))
        });
        let build_dir = match host.session.build_cache() {
            Ok(Some(c)) => Some(c.dir()),
            _ => None,
        };
        let lock = std::env::var_os("EVCXR_TMPDIR").map(|d| PathBuf::from(d).join("Cargo.lock"));
        let built = written.and_then(|()| {
            host.print("dryml: building the job's program (the notebook's items and this cell) ...\n");
            build::build(host.state, &dir, &src, build_dir, lock.as_deref(), body_offset)
        });
        match built {
            Ok(secs) => host.print(&format!("dryml: built in {secs:.1} s\n")),
            Err(e) => {
                // Nothing was submitted: no record to keep.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        }
        Ok(Prepared { dir, inputs, updates, shows })
    }

    pub fn jobs(&mut self, host: &mut Host<'_>, call: &JobsCall) -> Result<(), ErrorContent> {
        // Every subcommand but the list is about one job: its directory is found once.
        let dir = match call {
            JobsCall::List => PathBuf::new(),
            JobsCall::Wait(id) | JobsCall::Cancel(id) | JobsCall::Result { id, .. } => self.find(*id)?,
        };
        match call {
            JobsCall::List => {
                let nb = self.notebook_dir();
                let rows: Vec<Vec<String>> = job_dirs(&nb)
                    .into_iter()
                    .map(|d| {
                        let jd = JobDir::new(&d);
                        let req = jd.request().unwrap_or(Value::Null);
                        let first = req["body"].as_str().unwrap_or("").lines().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
                        vec![
                            jd.slurm_id().map(|i| i.to_string()).unwrap_or_else(|| "-".into()),
                            if is_sweep(&d) { dryml::sweep::status(&jd) } else { dryml::slurm::follow::status(&jd) },
                            req["created"].as_str().unwrap_or("").chars().take(19).collect::<String>().replace('T', " "),
                            first,
                            d.display().to_string(),
                        ]
                    })
                    .collect();
                let head = format!("{} Slurm job(s) of this notebook in {}", rows.len(), nb.display());
                let (text, html) = crate::table::render(&head, &["job", "state", "submitted", "cell", "directory"], &rows);
                host.show(json!({"text/plain": text, "text/html": html}));
                Ok(())
            }
            JobsCall::Cancel(id) => {
                dryml::slurm::cancel(*id).map_err(slurm_error)?;
                host.print(&format!("dryml: cancelled Slurm job {id}\n"));
                Ok(())
            }
            JobsCall::Wait(_) | JobsCall::Result { .. } if is_sweep(&dir) => {
                let code = format!(
                    "match ::dryml::sweep::wait({:?}) {{ Ok(r) => ::dryml::compute::Shown(format!(\"{{r:?}}\")), Err(e) => {{ ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }} }}",
                    dir.display().to_string()
                );
                run_shown(host, &code)
            }
            JobsCall::Wait(_) => {
                let code = format!(
                    "match ::dryml::slurm::follow::wait({:?}) {{ Ok(mut r) => r.shown(), Err(e) => {{ ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }} }}",
                    dir.display().to_string()
                );
                run_shown(host, &code)
            }
            JobsCall::Result { id, var } => {
                let req = JobDir::new(&dir).request().map_err(|e| slurm_error(format!("{}: {e}", dir.display())))?;
                let updates: Vec<Var> = req["updates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|u| Var { name: u["name"].as_str().unwrap_or_default().into(), ty: u["type"].as_str().unwrap_or_default().into() })
                    .collect();
                let names: Vec<(String, &Var)> = match var {
                    Some(v) if updates.len() == 1 => vec![(v.clone(), &updates[0])],
                    Some(v) => {
                        let had = updates.iter().map(|u| format!("`{}`", u.name)).collect::<Vec<_>>().join(", ");
                        return Err(ErrorContent::new(
                            "MagicError",
                            format!("%jobs result {id} as {v}: `as` names the one --update variable of a job, and job {id} has {} ({})", updates.len(), if had.is_empty() { "none".into() } else { had }),
                        ));
                    }
                    None => updates.iter().map(|u| (u.name.clone(), u)).collect(),
                };
                // First the wait, which ends the cell with the job's error if it has one; then the
                // variables, which are defined only when the job has delivered them.
                let d = dir.display().to_string();
                let wanted: Vec<String> = names.iter().map(|(_, u)| format!("{:?}", u.name)).collect();
                let code = format!(
                    "match ::dryml::slurm::follow::wait_for({d:?}, &[{}]) {{ Ok(mut r) => r.shown(), Err(e) => {{ ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }} }}",
                    wanted.join(", ")
                );
                run_shown(host, &code)?;
                if !names.is_empty() {
                    let mut code = String::new();
                    for (name, u) in &names {
                        // The traits are imported inside the block: a cell's `use` would stay in the notebook.
                        code.push_str(&format!(
                            "let {name}: {t} = {{ #[allow(unused_imports)] use ::dryml::carry::prelude::*; \
                             (&&&::dryml::carry::In::<{t}>::new()).decode(&::dryml::slurm::follow::update_bytes({d:?}, {n:?})).unwrap_or_else(|e| panic!(\"`{n}`: {{e}}\")) }};\n",
                            t = u.ty,
                            n = u.name
                        ));
                    }
                    host.session.set_cell_offset(None);
                    host.session.eval_user(&code, host.io)?;
                    let got: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
                    host.print(&format!("dryml: job {id}'s result is in {}\n", got.join(", ")));
                }
                Ok(())
            }
        }
    }

    /// The directory of job `id`: this notebook's first, then any notebook's under the root.
    fn find(&mut self, id: u64) -> Result<PathBuf, ErrorContent> {
        let root = self.settings().root();
        let mine = self.notebook_dir();
        let mut all = job_dirs(&mine);
        for nb in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            if nb.path() != mine {
                all.extend(job_dirs(&nb.path()));
            }
        }
        all.into_iter()
            .find(|d| JobDir::new(d).slurm_id() == Some(id))
            .ok_or_else(|| ErrorContent::new("KeyError", format!("no job directory under {} records Slurm job {id} (`%jobs` lists this notebook's)", root.display())))
    }
}

fn is_sweep(dir: &Path) -> bool {
    JobDir::new(dir).request().is_ok_and(|r| r["kind"] == "sweep")
}

/// Runs `code` in the notebook's process and shows its value.
fn run_shown(host: &mut Host<'_>, code: &str) -> Result<(), ErrorContent> {
    host.session.set_cell_offset(None);
    if let Some(data) = host.session.eval_user(code, host.io)? {
        if data["text/plain"].as_str().is_some_and(|t| !t.is_empty()) {
            host.show(data);
        }
    }
    Ok(())
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

/// What a job is, for [`SlurmMagic::prepare`].
struct Job<'a> {
    kind: &'static str,
    requests: &'a dryml::context::Requests,
    timeout: Option<f64>,
    mem: Option<u64>,
    slurm: SlurmJob,
    update: &'a [String],
    /// More fields for `request.json`.
    extra: Value,
}

struct Prepared {
    dir: PathBuf,
    inputs: Vec<Var>,
    updates: Vec<Var>,
    shows: bool,
}

/// Opens a block that gathers the variables a job takes (`__dryml_job`).
fn inputs_code(dir: &Path, inputs: &[Var]) -> String {
    let mut c = String::from("{\n#[allow(unused_imports)] use ::dryml::carry::prelude::*;\n");
    c.push_str(&format!("let mut __dryml_job = ::dryml::slurm::follow::Submission::open({:?});\n", dir.display().to_string()));
    for v in inputs {
        c.push_str(&format!("__dryml_job.input({n:?}, {t:?}, (&&&::dryml::carry::Out(&{n})).encode());\n", n = v.name, t = v.ty));
    }
    c
}

/// The notebook process's half: send the variables, submit, follow, take the updates back.
fn submit_code(dir: &Path, inputs: &[Var], updates: &[Var], shows: bool, detach: bool) -> String {
    let mut c = inputs_code(dir, inputs);
    c.push_str(&format!("match __dryml_job.run({detach}) {{\nOk(mut __dryml_result) => {{\n"));
    if !detach {
        for v in updates {
            c.push_str(&format!(
                "match __dryml_result.take_bytes({n:?}).map_err(|e| e.message()).and_then(|b| (&&&::dryml::carry::In::of(&{n})).decode(&b)) {{ Ok(v) => {n} = v, \
                 Err(e) => ::dryml::compute::raise(&::dryml::ComputeError::Failed(format!(\"--update {n}: {{e}}\"))) }}\n",
                n = v.name
            ));
        }
    }
    c.push_str("__dryml_result.shown()\n}\nErr(e) => { ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }\n}\n}");
    if !(shows || detach) {
        c.push(';');
    }
    c
}
