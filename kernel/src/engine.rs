//! The engine thread: owns the evcxr context, runs cells (magics first), and publishes their
//! output. User code only ever runs in evcxr's child process, never in the kernel.

use crate::child::{FLUSHER_CELL, STREAM_ENV};
use crate::history::History;
use crate::experiment::{self as exp, CellLogger, Experiment, LoggerMode};
use crate::meter::{Meter, Sample};
use crate::outbox::{Outbox, Shared};
use crate::wire::Message;
use dryml_magics::{Invocation, MagicError};
use evcxr::{CommandContext, EvalCallbacks, Error as EvcxrError};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// rustc's optimisation level for cells (`:opt` changes it per notebook). See README for the
/// latency/speed trade-off behind the choice.
pub const DEFAULT_OPT_LEVEL: &str = "1";

/// Work for the engine, in shell order.
pub enum Request {
    Execute(Message),
    Complete(Message),
    Inspect(Message),
}

/// A failed cell, as Jupyter's `error` content.
#[derive(Debug, Clone)]
pub struct CellError {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

impl CellError {
    fn new(ename: &str, evalue: impl Into<String>) -> Self {
        let evalue = evalue.into();
        CellError {
            ename: ename.into(),
            traceback: vec![format!("{ename}: {evalue}")],
            evalue,
        }
    }

    fn from_magic(e: &MagicError) -> Self {
        let mut tb = vec![e.caret()];
        tb.push(format!("MagicError: {e}"));
        CellError {
            ename: "MagicError".into(),
            evalue: e.to_string(),
            traceback: tb,
        }
    }
}

struct CellRun {
    payload: Vec<Value>,
    error: Option<CellError>,
    result_text: Option<String>,
}

pub struct Engine {
    ctx: CommandContext,
    out: Outbox,
    shared: Arc<Shared>,
    sync_rx: crossbeam_channel::Receiver<()>,
    input_rx: crossbeam_channel::Receiver<String>,
    history: Arc<Mutex<History>>,
    execution_count: i64,
    setup_pid: u32,
    /// The child has no stdout flusher yet; it rides along with the next user cell.
    flusher_pending: bool,
    dryml_added: bool,
    /// `dryml` was added with its `torch` feature, and `tch` beside it.
    torch_added: bool,
    env_overrides: BTreeMap<String, Option<String>>,
    runtime_path: PathBuf,
    pending: VecDeque<Request>,
    meter: Meter,
    experiment: Option<Experiment>,
    logger: CellLogger,
    /// The kernel's scratch directory, where cells find `dryml::experiment::last()`'s file
    /// and the resource pool's files.
    state_dir: PathBuf,
    /// What `%context` asked for the notebook's process, re-claimed when the process restarts.
    context_reqs: Option<dryml::context::Requests>,
    /// The environment names the context set in the child (to drop them on `--restart`).
    context_env: Vec<String>,
    /// The pool's CPU and GPU counts, for errors at the token that names a missing device.
    devices: (usize, usize),
    /// The repo `%repo open` opened.
    repo: Option<dryml::repo::Repo>,
}

/// Everything `Engine::start` needs from the server.
pub struct EngineParts {
    pub out: Outbox,
    pub shared: Arc<Shared>,
    pub sync_rx: crossbeam_channel::Receiver<()>,
    pub input_rx: crossbeam_channel::Receiver<String>,
    pub history: Arc<Mutex<History>>,
    pub stream_socket: PathBuf,
    pub scratch: PathBuf,
}

/// Where the `dryml` crate's sources are: `$DRYML_RUNTIME_PATH`, else this checkout's `runtime/`.
pub fn runtime_path() -> PathBuf {
    std::env::var_os("DRYML_RUNTIME_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../runtime")))
}

impl Engine {
    /// Creates the evcxr context (which starts the child) and the start-up state.
    pub fn start(parts: EngineParts) -> anyhow::Result<Engine> {
        let exe = std::env::current_exe()?;
        let mut cmd = std::process::Command::new(exe);
        cmd.env(STREAM_ENV, &parts.stream_socket);
        cmd.env(dryml::experiment::STATE_DIR_ENV, &parts.scratch);
        // CUDA then numbers GPUs as NVML and the reports do (IPyExperiments issue #2).
        if std::env::var_os("CUDA_DEVICE_ORDER").is_none() {
            cmd.env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        }
        let (eval_ctx, outputs) = evcxr::EvalContext::with_subprocess_command(cmd)
            .map_err(|e| anyhow::anyhow!("starting evcxr: {e}"))?;
        let mut ctx = CommandContext::with_eval_context(eval_ctx);
        let opt = std::env::var("DRYML_OPT_LEVEL").unwrap_or_else(|_| DEFAULT_OPT_LEVEL.to_string());
        if let Err(e) = ctx.set_opt_level(&opt) {
            tracing::warn!("DRYML_OPT_LEVEL={opt:?} ignored: {e}");
        }
        // evcxr's stderr arrives line by line; forward it as it comes.
        {
            let shared = parts.shared.clone();
            let out = parts.out.clone();
            let stderr = outputs.stderr;
            std::thread::Builder::new()
                .name("dryml-stderr".into())
                .spawn(move || {
                    while let Ok(line) = stderr.recv() {
                        shared.stderr_tail.lock().unwrap().push(line.clone());
                        out.stream(&shared, "stderr", &format!("{line}\n"));
                    }
                })?;
        }
        // evcxr sends stdout here only when the pump could not reach the kernel's socket.
        {
            let shared = parts.shared.clone();
            let out = parts.out.clone();
            let stdout = outputs.stdout;
            std::thread::spawn(move || {
                while let Ok(line) = stdout.recv() {
                    out.stream(&shared, "stdout", &format!("{line}\n"));
                }
            });
        }
        let mut engine = Engine {
            ctx,
            out: parts.out,
            shared: parts.shared,
            sync_rx: parts.sync_rx,
            input_rx: parts.input_rx,
            history: parts.history,
            execution_count: 0,
            setup_pid: 0,
            flusher_pending: true,
            dryml_added: false,
            torch_added: false,
            env_overrides: BTreeMap::new(),
            runtime_path: runtime_path(),
            pending: VecDeque::new(),
            meter: Meter::default(),
            experiment: None,
            logger: CellLogger::new(),
            state_dir: parts.scratch,
            context_reqs: None,
            context_env: Vec::new(),
            devices: (0, 0),
            repo: None,
        };
        engine.write_machine();
        engine.ensure_child_setup();
        Ok(engine)
    }

    pub fn run(mut self, rx: crossbeam_channel::Receiver<Request>) {
        loop {
            let req = match self.pending.pop_front() {
                Some(r) => r,
                None => match rx.recv() {
                    Ok(r) => r,
                    Err(_) => return,
                },
            };
            match req {
                Request::Execute(msg) => {
                    let (failed, reply) = self.execute(&msg);
                    let stop = msg.content["stop_on_error"].as_bool().unwrap_or(true);
                    // Only what was queued before the error's reply is aborted: a client that
                    // waits for the reply and then sends more must not see it aborted.
                    let queued = if failed && stop { self.take_queued(&rx) } else { Vec::new() };
                    self.out.reply(Message::reply_to(&msg, "execute_reply", reply));
                    self.out.status(&msg, "idle");
                    self.abort(queued);
                }
                Request::Complete(msg) => self.with_status(&msg, Self::complete),
                Request::Inspect(msg) => self.with_status(&msg, Self::inspect),
            }
        }
    }

    fn with_status(&mut self, msg: &Message, f: fn(&mut Self, &Message) -> Value) {
        self.out.status(msg, "busy");
        let content = f(self, msg);
        let reply_type = msg.msg_type().replace("_request", "_reply");
        self.out.reply(Message::reply_to(msg, &reply_type, content));
        self.out.status(msg, "idle");
    }

    /// After an error, executes already queued are answered `aborted`, as ipykernel does.
    fn take_queued(&mut self, rx: &crossbeam_channel::Receiver<Request>) -> Vec<Message> {
        let mut executes = Vec::new();
        while let Ok(req) = rx.try_recv() {
            match req {
                Request::Execute(msg) => executes.push(msg),
                other => self.pending.push_back(other),
            }
        }
        executes
    }

    fn abort(&mut self, executes: Vec<Message>) {
        for msg in executes {
            self.out.status(&msg, "busy");
            self.out.reply(Message::reply_to(
                &msg,
                "execute_reply",
                json!({"status": "aborted", "execution_count": self.execution_count}),
            ));
            self.out.status(&msg, "idle");
        }
    }

    /// Runs one execute_request up to its reply: returns whether the cell failed, and the
    /// reply content for the caller to send (then idle).
    fn execute(&mut self, msg: &Message) -> (bool, Value) {
        let c = &msg.content;
        let code = c["code"].as_str().unwrap_or("").to_string();
        let silent = c["silent"].as_bool().unwrap_or(false);
        let store_history = c["store_history"].as_bool().unwrap_or(true) && !silent;
        self.out.status(msg, "busy");
        *self.shared.parent.lock().unwrap() = Some(msg.clone());
        self.shared.quiet.store(silent, Ordering::SeqCst);
        if store_history {
            self.execution_count += 1;
        }
        let count = self.execution_count;
        if !silent {
            self.out.publish(
                msg,
                "execute_input",
                json!({"code": code, "execution_count": count}),
            );
        }
        if store_history {
            if let Err(e) = self.history.lock().unwrap().store(count, &code) {
                tracing::warn!("history not saved: {e:#}");
            }
        }
        let allow_stdin = c["allow_stdin"].as_bool().unwrap_or(true);
        let run = self.run_cell(&code, msg, allow_stdin);
        let mut reply = json!({
            "execution_count": count,
            "payload": run.payload,
            "user_expressions": {},
        });
        let failed = run.error.is_some();
        match &run.error {
            Some(err) => {
                if !silent {
                    self.out.publish(
                        msg,
                        "error",
                        json!({"ename": err.ename, "evalue": err.evalue, "traceback": err.traceback}),
                    );
                }
                reply["status"] = json!("error");
                reply["ename"] = json!(err.ename);
                reply["evalue"] = json!(err.evalue);
                reply["traceback"] = json!(err.traceback);
            }
            None => {
                reply["status"] = json!("ok");
                if store_history {
                    if let Some(text) = &run.result_text {
                        let _ = self.history.lock().unwrap().store_output(count, text);
                    }
                }
                if let Some(exprs) = c["user_expressions"].as_object() {
                    reply["user_expressions"] = self.user_expressions(exprs);
                }
            }
        }
        self.shared.quiet.store(false, Ordering::SeqCst);
        (failed, reply)
    }

    fn user_expressions(&mut self, exprs: &Map<String, Value>) -> Value {
        let mut out = Map::new();
        for (name, expr) in exprs {
            let expr = expr.as_str().unwrap_or("");
            let value = match self.eval_quiet(expr) {
                Ok(data) => json!({"status": "ok", "data": data, "metadata": {}}),
                Err(e) => json!({"status": "error", "ename": e.ename, "evalue": e.evalue, "traceback": e.traceback}),
            };
            out.insert(name.clone(), value);
        }
        Value::Object(out)
    }

    fn run_cell(&mut self, code: &str, msg: &Message, allow_stdin: bool) -> CellRun {
        let mut run = CellRun {
            payload: Vec::new(),
            error: None,
            result_text: None,
        };
        let parsed = match dryml_magics::parse_cell(code) {
            Ok(p) => p,
            Err(e) => {
                run.error = Some(CellError::from_magic(&e));
                return run;
            }
        };
        // While the logger is on or an experiment is open, the cell is measured.
        let spent0 = self.meter.spent;
        self.meter.begin_cell();
        let measuring = self.logger.mode != LoggerMode::Off || self.experiment.is_some();
        let gpus = if measuring { self.visible_gpus() } else { Vec::new() };
        let before = measuring.then(|| self.checkpoint(&gpus));
        for inv in &parsed.line_magics {
            if let Err(e) = self.line_magic(inv, msg, &mut run.payload) {
                run.error = Some(e);
                break;
            }
        }
        let mut timer = None;
        let mut compute = None;
        if run.error.is_none() {
            if let Some(inv) = &parsed.cell_magic {
                if inv.help {
                    run.payload.push(page(&inv.spec.help_text()));
                } else if inv.spec.name == "time" {
                    timer = Some((Instant::now(), cpu_times(self.child_pid())));
                } else if inv.spec.name == "compute" {
                    compute = Some(inv);
                } else if inv.spec.name == "experiment" {
                    let keep = inv.args.value("keep").map(dryml_magics::keep_list);
                    let keep = keep.and_then(Result::ok).unwrap_or_default();
                    self.start_experiment(msg, inv.args.positionals.first().cloned(), keep);
                }
            }
        }
        let help_only = parsed.cell_magic.as_ref().is_some_and(|i| i.help);
        let mut result = None;
        if run.error.is_none() && !help_only && !parsed.body.trim().is_empty() {
            // GPU peaks need reads while the cell runs: NVML has no high-water mark.
            // A `%experiment start` in this cell opened one after `gpus` was read.
            let gpus = if !measuring && self.experiment.is_some() { self.visible_gpus() } else { gpus.clone() };
            let watch = self.meter.watch_gpus(&gpus, self.child_pid());
            let code = match compute {
                Some(inv) => self.compute_cell(inv, &parsed.body),
                None => Ok(parsed.body.clone()),
            };
            match code.and_then(|code| self.eval_user(&code, msg, allow_stdin)) {
                Ok(data) => result = data.filter(|_| !self.shared.quiet.load(Ordering::SeqCst)),
                Err(e) => run.error = Some(e),
            }
            if let Some(w) = watch {
                let peaks = self.meter.end_watch(w);
                // Unless `%env CUDA_VISIBLE_DEVICES` changed the GPUs since the experiment began.
                if let Some(e) = self.experiment.as_mut().filter(|e| e.gpus() == gpus.as_slice()) {
                    e.observe_gpu_peaks(&peaks);
                }
            }
            if let Some(e) = &mut self.experiment {
                e.note_cell(&parsed.body);
            }
        }
        if let Some((t0, cpu0)) = timer {
            let wall = t0.elapsed();
            let cpu1 = cpu_times(self.child_pid());
            let (user, sys) = match (cpu0, cpu1) {
                (Some(a), Some(b)) => ((b.0 - a.0).max(0.0), (b.1 - a.1).max(0.0)),
                _ => (0.0, 0.0),
            };
            self.out.stream(
                &self.shared,
                "stdout",
                &format!(
                    "CPU times: user {}, sys: {}, total: {}\nWall time: {}\n",
                    fmt_secs(user),
                    fmt_secs(sys),
                    fmt_secs(user + sys),
                    fmt_secs(wall.as_secs_f64())
                ),
            );
        }
        // As in IPython, the timing comes before the result.
        if let Some(data) = result {
            run.result_text = data["text/plain"].as_str().map(str::to_string);
            self.out.publish(
                msg,
                "execute_result",
                json!({"execution_count": self.execution_count, "data": data, "metadata": {}}),
            );
        }
        // The experiment of a `%%experiment` cell ends with it, whether or not the body failed.
        let cell_experiment = parsed.cell_magic.as_ref().is_some_and(|i| i.spec.name == "experiment" && !i.help);
        if cell_experiment && self.experiment.is_some() {
            self.finish_experiment(msg);
        }
        if let Some(before) = before {
            let after = self.checkpoint(&gpus);
            if self.logger.mode != LoggerMode::Off {
                let measure = self.meter.spent - spent0;
                let peaks = (self.meter.cell_peak_cpu, self.meter.cell_peak_gpu.clone());
                let line = self.logger.record(self.execution_count, &before, &after, peaks, &gpus, measure);
                self.show(msg, line);
            }
        }
        run
    }

    /// Publishes a display bundle, unless the request is silent.
    fn show(&self, msg: &Message, data: Value) {
        if !self.shared.quiet.load(Ordering::SeqCst) {
            self.out
                .publish(msg, "display_data", json!({"data": data, "metadata": {}, "transient": {}}));
        }
    }

    /// The value of an environment variable in the child: `%env` settings over the kernel's.
    fn child_env(&self, name: &str) -> Option<String> {
        match self.env_overrides.get(name) {
            Some(v) => v.clone(),
            None => std::env::var(name).ok(),
        }
    }

    /// The GPUs measured, numbered as the child's CUDA numbers them; with a context, the
    /// pool's GPUs (numbered as `%context` does), since sandboxes may hold GPUs the notebook's
    /// own process cannot see.
    fn visible_gpus(&mut self) -> Vec<crate::gpu::Gpu> {
        let cvd = match self.context_reqs {
            Some(_) => std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            None => self.child_env("CUDA_VISIBLE_DEVICES"),
        };
        self.meter.visible_gpus(cvd.as_deref())
    }

    /// The processes that run user code: evcxr's child and its live descendants (sandboxes).
    fn measured_pids(&self) -> Vec<u32> {
        crate::meter::with_descendants(self.child_pid())
    }

    /// Samples memory, restarts the high-water mark, and feeds an open experiment.
    fn checkpoint(&mut self, gpus: &[crate::gpu::Gpu]) -> Sample {
        let s = self.meter.sample(&self.measured_pids(), gpus, true);
        if let Some(e) = &mut self.experiment {
            e.observe(&s);
        }
        s
    }

    fn variables(&self) -> BTreeMap<String, String> {
        self.ctx
            .variables_and_types()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    /// Starts an experiment, finishing an open one first (as IPyExperiments does).
    fn start_experiment(&mut self, msg: &Message, name: Option<String>, keep: Vec<String>) {
        if self.experiment.is_some() {
            self.finish_experiment(msg);
        }
        self.note_child_pid();
        let gpus = self.visible_gpus();
        let s = self.meter.sample(&self.measured_pids(), &gpus, true);
        let name = name.unwrap_or_else(|| format!("#{}", self.execution_count));
        let note = self.meter.gpu_note();
        self.show(msg, exp::start_banner(&name, &s, &gpus, note.as_deref()));
        let vars = self.variables();
        self.experiment = Some(Experiment::start(name, s, gpus, vars, keep));
    }

    /// Deletes the experiment's variables, trims the child's heap, and reports.
    fn finish_experiment(&mut self, msg: &Message) {
        let Some(mut e) = self.experiment.take() else { return };
        self.note_child_pid();
        let pids = self.measured_pids();
        let before = self.meter.sample(&pids, e.gpus(), true);
        e.observe(&before);
        let plan = e.cleanup(&self.variables());
        let doomed: Vec<String> = plan.delete.iter().chain(&plan.reassigned).cloned().collect();
        let mut notes = Vec::new();
        if self.eval_hidden(&exp::cleanup_code(&doomed)).is_err() && !doomed.is_empty() {
            // One variable at a time, so one that cannot be dropped does not keep the rest.
            for name in &doomed {
                if let Err(err) = self.eval_hidden(&exp::cleanup_code(std::slice::from_ref(name))) {
                    notes.push(format!("deleting {name}: {}", err.evalue));
                }
            }
        }
        let left = self.variables();
        let failed: Vec<String> = doomed.into_iter().filter(|n| left.contains_key(n)).collect();
        let after = self.meter.sample(&pids, e.gpus(), true);
        if let Some(n) = self.meter.gpu_note() {
            notes.push(n);
        }
        let report = e.report(&before, &after, plan, failed, notes);
        let path = self.state_dir.join(dryml::experiment::LAST_FILE);
        if let Err(err) = crate::write_atomic(&path, report.to_record().as_bytes()) {
            tracing::warn!("experiment report not saved to {}: {err}", path.display());
        }
        // The GPU note, if any, is already among the report's notes.
        let state = exp::state_block(&after, e.gpus(), None);
        self.show(msg, exp::report_bundle(&report, true, Some(state)));
    }

    fn experiment_magic(&mut self, inv: &Invocation, msg: &Message) -> Result<(), CellError> {
        let sub = inv.args.positionals[0].as_str();
        let rest = &inv.args.positionals[1..];
        if sub == "start" {
            self.start_experiment(msg, rest.first().cloned(), Vec::new());
            return Ok(());
        }
        if self.experiment.is_none() {
            return Err(CellError::new(
                "MagicError",
                format!("%experiment {sub}: no experiment is open (start one with %experiment start [NAME])"),
            ));
        }
        match sub {
            "keep" => {
                self.experiment.as_mut().unwrap().keep(rest);
                Ok(())
            }
            "data" => {
                let e = self.experiment.as_ref().unwrap();
                let (pids, gpus) = (e.pids().to_vec(), e.gpus().to_vec());
                let now = self.meter.sample(&pids, &gpus, false);
                let e = self.experiment.as_mut().unwrap();
                e.observe(&now);
                let r = e.so_far(&now);
                self.show(msg, exp::report_bundle(&r, false, None));
                Ok(())
            }
            _ => {
                self.finish_experiment(msg);
                Ok(())
            }
        }
    }

    fn cell_logger_magic(&mut self, inv: &Invocation, msg: &Message) {
        match inv.args.positionals[0].as_str() {
            "on" => self.logger.mode = LoggerMode::On,
            "compact" => self.logger.mode = LoggerMode::Compact,
            "off" => self.logger.mode = LoggerMode::Off,
            "reset" => self.logger.log.clear(),
            "data" => self.show(msg, self.logger.data()),
            _ => self.show(msg, self.logger.plot()),
        }
    }

    fn line_magic(
        &mut self,
        inv: &Invocation,
        msg: &Message,
        payload: &mut Vec<Value>,
    ) -> Result<(), CellError> {
        if inv.help {
            payload.push(page(&inv.spec.help_text()));
            return Ok(());
        }
        match inv.spec.name {
            "lsmagic" => {
                self.out.publish(
                    msg,
                    "display_data",
                    json!({"data": {"text/plain": dryml_magics::lsmagic_text()}, "metadata": {}, "transient": {}}),
                );
                Ok(())
            }
            "env" => self.env_magic(inv),
            "experiment" => self.experiment_magic(inv, msg),
            "cell_logger" => {
                self.cell_logger_magic(inv, msg);
                Ok(())
            }
            "context" => self.context_magic(inv, msg),
            "repo" => self.repo_magic(inv, msg),
            other => Err(CellError::new(
                "MagicError",
                format!("%{other} is registered but this kernel has no handler for it"),
            )),
        }
    }

    /// Writes the pool's machine record (CPUs and GPUs) where cells and sandboxes read it.
    fn write_machine(&mut self) {
        let gpus = self.meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
        let totals: Vec<u64> = self.meter.sample(&[], &gpus, false).gpus.iter().map(|g| g.total).collect();
        let machine = crate::contexts::machine(&gpus, &totals);
        self.devices = (machine.cpus as usize, machine.gpus.len());
        if let Err(e) = machine.save(&self.state_dir) {
            tracing::warn!("resource pool disabled: writing {}: {e}", self.state_dir.display());
        }
    }

    fn pool(&self) -> Result<dryml::pool::Pool, CellError> {
        dryml::pool::Pool::open_dir(&self.state_dir)
            .map_err(|e| CellError::new("ResourcesUnavailableError", format!("the resource pool: {e}")))
    }

    /// The context the notebook's process holds: the one `%context` put in its environment.
    fn notebook_context(&self) -> Option<dryml::context::Context> {
        dryml::context::Context::decode(&self.child_env(dryml::context::CONTEXT_ENV)?).ok()
    }

    /// Claims `reqs` for the child and applies them: environment and CPU affinity.
    fn claim_context(&mut self, reqs: &dryml::context::Requests) -> Result<dryml::context::Context, CellError> {
        let pid = self.note_child_pid();
        let mut pool = self.pool()?;
        pool.release(pid);
        let ctx = pool
            .allocate(reqs)
            .map_err(|e| CellError::new("ResourcesUnavailableError", e))?;
        pool.claim(pid, "notebook", &ctx)
            .and_then(|_| {
                let machine = pool.machine.clone();
                pool.commit().map(|_| machine)
            })
            .map(|machine| {
                for name in std::mem::take(&mut self.context_env) {
                    self.env_overrides.remove(&name);
                }
                for (k, v) in ctx.env(&machine) {
                    self.context_env.push(k.clone());
                    self.env_overrides.insert(k, Some(v));
                }
            })
            .map_err(|e| CellError::new("ResourcesUnavailableError", format!("the resource pool: {e}")))?;
        let names = self.context_env.clone();
        self.apply_env(&names)?;
        crate::contexts::pin(pid, &ctx);
        Ok(ctx)
    }

    fn context_magic(&mut self, inv: &Invocation, msg: &Message) -> Result<(), CellError> {
        use dryml_magics::ContextCommand;
        let tokens = dryml_magics::tokenize(&inv.args.raw).unwrap_or_default();
        let cmd = dryml_magics::context_command(&inv.args, &tokens)
            .map_err(|(m, _)| CellError::new("MagicError", format!("%context: {m}")))?;
        if let ContextCommand::Set { requests: r, .. } | ContextCommand::Check(r) = &cmd {
            inv.check_devices(r, self.devices.0, self.devices.1).map_err(|e| CellError::from_magic(&e))?;
        }
        self.ensure_child_setup();
        let current = self.notebook_context();
        match cmd {
            ContextCommand::Show => {
                let pool = self.pool()?;
                self.show(msg, crate::contexts::pool_table(&pool, self.child_pid(), current.as_ref()));
                Ok(())
            }
            ContextCommand::Check(reqs) => {
                let ctx = current.ok_or_else(|| ctx_error(dryml::context::ContextError::NoContext))?;
                match ctx.unmet(&reqs) {
                    None => {
                        self.out.stream(&self.shared, "stdout", &format!("The context ({ctx}) satisfies {reqs}\n"));
                        Ok(())
                    }
                    Some(why) => Err(ctx_error(dryml::context::ContextError::Incompatible {
                        requirements: reqs.to_string(),
                        context: ctx.to_string(),
                        why,
                    })),
                }
            }
            ContextCommand::Set { requests, restart } => {
                if let (Some(ctx), false) = (&current, restart) {
                    return Err(ctx_error(dryml::context::ContextError::AlreadyActive { context: ctx.to_string() }));
                }
                if restart {
                    let vars: Vec<String> = self.variables().into_keys().collect();
                    let lost = if vars.is_empty() { "none".to_string() } else { vars.join(", ") };
                    self.out.stream(
                        &self.shared,
                        "stderr",
                        &format!("Warning: restarting the notebook's process for the new context; its variables are lost ({lost}).\n"),
                    );
                    // Frees the old context: its claims die with the process.
                    self.context_reqs = None;
                    self.eval_hidden(":restart")?;
                    self.ensure_child_setup();
                }
                let ctx = self.claim_context(&requests)?;
                self.context_reqs = Some(requests);
                let machine = self.pool()?.machine.clone();
                let env: Vec<String> = ctx.env(&machine).into_iter().map(|(k, v)| format!("{k}={v}")).collect();
                let pin = ctx.cpu_set();
                self.out.stream(
                    &self.shared,
                    "stdout",
                    &format!(
                        "Context set for the notebook's process (pid {}): {ctx}\nApplied: {}; CPU affinity: {}\n\
                         Enforced: the GPUs CUDA can see and the CPUs the process may run on. Advisory: GPU memory shares \
                         (read them with dryml::context::current()), and thread counts for libraries started before now.\n",
                        self.child_pid(),
                        env.join(" "),
                        if pin.is_empty() { "unchanged".to_string() } else { format!("{pin:?}") }
                    ),
                );
                Ok(())
            }
        }
    }

    fn repo_magic(&mut self, inv: &Invocation, msg: &Message) -> Result<(), CellError> {
        let repo_error = |e: dryml::repo::RepoError| CellError::new("RepoError", e.to_string());
        let sub = inv.args.positionals[0].as_str();
        let rest = &inv.args.positionals[1..];
        if sub == "open" {
            let dir = std::path::Path::new(&rest[0]);
            let exists = dir.join("dryml-repo").exists();
            let repo = if inv.args.flag("create") && !exists {
                dryml::repo::Repo::create(dir)
            } else {
                dryml::repo::Repo::open(dir)
            }
            .map_err(repo_error)?;
            let verb = if exists { "Opened" } else { "Created" };
            let n = repo.len();
            self.out.stream(&self.shared, "stdout", &format!("{verb} repo {}: {n} objects\n", repo.dir().display()));
            self.repo = Some(repo);
            return Ok(());
        }
        let Some(repo) = self.repo.as_mut() else {
            return Err(CellError::new("RepoError", format!("%repo {sub}: no repo is open (use %repo open DIR [--create])")));
        };
        // Other processes (sandboxes, other notebooks) may have added objects.
        repo.reload().map_err(repo_error)?;
        let entry = |repo: &dryml::repo::Repo, id: &str| {
            repo.find(&dryml::repo::Selector::id(id))
                .first()
                .map(|e| (*e).clone())
                .ok_or_else(|| CellError::new("RepoError", format!("no object with id `{id}` in {}", repo.dir().display())))
        };
        match sub {
            "ls" => {
                let all = repo.entries();
                let title = format!("{}: {} objects", repo.dir().display(), all.len());
                let bundle = crate::repo::table(&title, &all);
                self.show(msg, bundle);
            }
            "get" => {
                let sel = crate::repo::selector(rest).map_err(|m| CellError::new("MagicError", format!("%repo get: {m}")))?;
                let found = repo.find(&sel);
                let title = format!("{} matching {sel}", found.len());
                let bundle = crate::repo::table(&title, &found);
                self.show(msg, bundle);
            }
            "show" => {
                let e = entry(repo, &rest[0])?;
                let bundle = crate::repo::show(repo, &e);
                self.show(msg, bundle);
            }
            "rm" => {
                entry(repo, &rest[0])?;
                repo.delete(&rest[0]).map_err(repo_error)?;
                self.out.stream(&self.shared, "stdout", &format!("Deleted {}\n", rest[0]));
            }
            "load" => {
                let (id, var) = (&rest[0], &rest[2]);
                let e = entry(repo, id)?;
                let dir = repo.dir().to_string_lossy().into_owned();
                // evcxr names a variable's type from what is in scope, hence the `use`.
                let code = format!(
                    "use dryml::Object;\nlet {var}: Box<dyn dryml::Object> = dryml::Repo::open({dir:?}).and_then(|r| r.by_id({id:?})).unwrap_or_else(|e| panic!(\"{{e}}\"));"
                );
                self.eval_user(&code, msg, false)?;
                self.out.stream(
                    &self.shared,
                    "stdout",
                    &format!("{var} = {} {id} (downcast with {var}.downcast_ref::<{}>())\n", e.def, e.def.type_name),
                );
            }
            _ => unreachable!("checked by the registry"),
        }
        Ok(())
    }

    /// The code a `%%compute` cell runs (see `contexts::compute_code`).
    fn compute_cell(&mut self, inv: &Invocation, body: &str) -> Result<String, CellError> {
        let tokens = dryml_magics::tokenize(&inv.args.raw).unwrap_or_default();
        let opts = dryml_magics::compute_options(&inv.args, &tokens)
            .map_err(|(m, _)| CellError::new("MagicError", format!("%%compute: {m}")))?;
        inv.check_devices(&opts.requests, self.devices.0, self.devices.1).map_err(|e| CellError::from_magic(&e))?;
        self.ensure_child_setup();
        crate::contexts::compute_code(&opts, body, &self.variables())
            .map_err(|m| CellError::new("MagicError", format!("%%compute: {m}")))
    }

    fn env_magic(&mut self, inv: &Invocation) -> Result<(), CellError> {
        let args = &inv.args;
        if args.flag("unset") {
            for name in &args.positionals {
                self.env_overrides.insert(name.clone(), None);
            }
            self.apply_env(&args.positionals)?;
            self.out.stream(
                &self.shared,
                "stdout",
                &format!("unset {}\n", args.positionals.join(", ")),
            );
            return Ok(());
        }
        let set = match args.positionals.as_slice() {
            [one] if one.contains('=') => {
                let (n, v) = one.split_once('=').unwrap();
                Some((n.to_string(), v.to_string()))
            }
            [n, v] => Some((n.clone(), v.clone())),
            _ => None,
        };
        if let Some((name, value)) = set {
            self.env_overrides.insert(name.clone(), Some(value.clone()));
            self.apply_env(std::slice::from_ref(&name))?;
            self.out
                .stream(&self.shared, "stdout", &format!("env: {name}={value}\n"));
            return Ok(());
        }
        // Show: read the child's live environment, not the kernel's.
        let filter = args.positionals.first().cloned();
        let code = match &filter {
            Some(n) => format!(
                "match std::env::var_os({n:?}) {{ Some(v) => println!(\"{{}}\", v.to_string_lossy()), None => println!(\"DRYML_ENV_UNSET\") }}"
            ),
            None => "{ let mut v: Vec<_> = std::env::vars_os().map(|(k, v)| format!(\"{}={}\", k.to_string_lossy(), v.to_string_lossy())).collect(); v.sort(); for l in v { println!(\"{}\", l); } }".to_string(),
        };
        let text = self.capture_stdout(&code)?;
        match filter {
            Some(n) if text.trim() == "DRYML_ENV_UNSET" => {
                Err(CellError::new("KeyError", format!("environment variable {n} is not set")))
            }
            _ => {
                self.out.stream(&self.shared, "stdout", &text);
                Ok(())
            }
        }
    }

    /// Pushes the remembered `%env` settings for `names` into the child.
    fn apply_env(&mut self, names: &[String]) -> Result<(), CellError> {
        // set_var is unsafe from edition 2024 on; the fn's allow covers older editions.
        let mut code = String::from("#[allow(unused_unsafe)]\nfn dryml_apply_env() { unsafe {\n");
        for n in names {
            match self.env_overrides.get(n) {
                Some(Some(v)) => code.push_str(&format!("std::env::set_var({n:?}, {v:?});\n")),
                _ => code.push_str(&format!("std::env::remove_var({n:?});\n")),
            }
        }
        code.push_str("} }\ndryml_apply_env();\n");
        self.eval_hidden(&code).map(|_| ())
    }

    fn child_pid(&self) -> u32 {
        self.shared.child_pid.load(Ordering::SeqCst)
    }

    /// Notes a new child (first start or after a crash): its flusher is pending and the
    /// `%env` settings are re-applied.
    fn ensure_child_setup(&mut self) {
        let pid = self.note_child_pid();
        if pid == self.setup_pid {
            return;
        }
        let first = self.setup_pid == 0;
        self.setup_pid = pid;
        self.flusher_pending = true;
        if !self.env_overrides.is_empty() {
            let names: Vec<String> = self.env_overrides.keys().cloned().collect();
            let _ = self.apply_env(&names);
        }
        // A new process (after a crash or restart) claims the notebook's context again.
        if let (false, Some(reqs)) = (first, self.context_reqs.clone()) {
            if let Err(e) = self.claim_context(&reqs) {
                self.context_reqs = None;
                let names = std::mem::take(&mut self.context_env);
                for n in &names {
                    self.env_overrides.insert(n.clone(), None);
                }
                let _ = self.apply_env(&names);
                self.out.stream(
                    &self.shared,
                    "stderr",
                    &format!("dryml: the restarted process has no context: {}\n", e.evalue),
                );
            }
        }
    }

    /// Evaluates kernel-written code with its output suppressed.
    fn eval_hidden(&mut self, code: &str) -> Result<evcxr::EvalOutputs, CellError> {
        let was_quiet = self.shared.quiet.swap(true, Ordering::SeqCst);
        self.drain_syncs();
        let r = self.ctx.execute(code);
        if r.is_ok() && runs_code(code) {
            self.wait_sync(Duration::from_millis(500));
        }
        self.shared.quiet.store(was_quiet, Ordering::SeqCst);
        r.map_err(|e| self.map_error(e, &[]))
    }

    /// Runs code in the child and returns what it printed.
    fn capture_stdout(&mut self, code: &str) -> Result<String, CellError> {
        self.shared.capture.lock().unwrap().replace(String::new());
        let r = self.eval_hidden(code);
        let text = self.shared.capture.lock().unwrap().take().unwrap_or_default();
        r.map(|_| text)
    }

    /// Evaluates an expression for `user_expressions`, returning its mime bundle.
    fn eval_quiet(&mut self, expr: &str) -> Result<Value, CellError> {
        let outputs = self.eval_hidden(expr)?;
        Ok(mime_bundle(outputs).unwrap_or_else(|| json!({"text/plain": ""})))
    }

    fn drain_syncs(&self) {
        while self.sync_rx.try_recv().is_ok() {}
    }

    fn wait_sync(&self, limit: Duration) -> bool {
        self.sync_rx.recv_timeout(limit).is_ok()
    }

    /// Evaluates user code; returns the execute_result bundle, if any.
    fn eval_user(
        &mut self,
        code: &str,
        msg: &Message,
        allow_stdin: bool,
    ) -> Result<Option<Value>, CellError> {
        self.ensure_child_setup();
        // A cell naming `tch` gets it (and dryml's torch support) when the venv has libtorch.
        let torch = !self.torch_added && uses_tch(code) && crate::torch::available().is_some();
        if torch || (!self.dryml_added && uses_dryml(code)) {
            let path = self.runtime_path.to_string_lossy();
            let dep = if torch || self.torch_added {
                format!(":dep dryml = {{ path = {path:?}, features = [\"torch\"] }}\n:dep tch = \"={TCH_VERSION}\"")
            } else {
                format!(":dep dryml = {{ path = {path:?} }}")
            };
            self.eval_hidden(&dep)?;
            self.dryml_added = true;
            self.torch_added |= torch;
        }
        let vars_before: Vec<String> = self
            .ctx
            .variables_and_types()
            .map(|(n, _)| n.to_string())
            .collect();
        // The flusher is compiled with the user's first cell rather than as a cell of its own,
        // which would cost a whole extra compile before the first result. evcxr's `:` commands
        // must start the cell, so such cells wait for the next one.
        let with_flusher = self.flusher_pending
            && !code.lines().any(|l| l.trim_start().starts_with(':'));
        let code = if with_flusher {
            format!("{FLUSHER_CELL}\n{code}")
        } else {
            code.to_string()
        };
        self.drain_syncs();
        self.shared.stderr_tail.lock().unwrap().clear();
        self.shared.panicked.store(false, Ordering::SeqCst);
        self.shared.raised.lock().unwrap().take();
        self.shared.interrupted.store(false, Ordering::SeqCst);
        self.shared.killed.store(false, Ordering::SeqCst);
        self.shared.polling.store(0, Ordering::SeqCst);
        self.shared.signalled.store(false, Ordering::SeqCst);
        self.shared.cell_seq.fetch_add(1, Ordering::SeqCst);
        self.shared.running.store(true, Ordering::SeqCst);
        let out = self.out.clone();
        let input_rx = self.input_rx.clone();
        let parent = msg.clone();
        let mut callbacks = EvalCallbacks {
            input_reader: &move |req| -> String {
                if !allow_stdin {
                    return String::new();
                }
                out.input_request(&parent, &req.prompt, req.is_password);
                input_rx.recv().unwrap_or_default()
            },
        };
        let result = self.ctx.execute_with_callbacks(&code, &mut callbacks);
        self.shared.running.store(false, Ordering::SeqCst);
        let ran = matches!(
            result,
            Ok(_) | Err(EvcxrError::TypeRedefinedVariablesLost(_))
        );
        if ran && with_flusher {
            self.flusher_pending = false;
        }
        if ran && runs_code(&code) {
            self.wait_sync(Duration::from_secs(2));
        }
        if self.shared.interrupted.load(Ordering::SeqCst) {
            let killed = self.shared.killed.load(Ordering::SeqCst);
            // Keep the error, then report the interrupt in its place.
            let lost = if killed { vars_before.clone() } else { Vec::new() };
            self.note_child_pid();
            return Err(interrupt_error(killed, &lost));
        }
        if self.shared.panicked.load(Ordering::SeqCst) {
            return Err(self.panic_error());
        }
        if let Some((ename, evalue)) = self.shared.raised.lock().unwrap().take() {
            return Err(CellError::new(&ename, evalue));
        }
        match result {
            Ok(outputs) => Ok(mime_bundle(outputs)),
            Err(e) => {
                let err = self.map_error(e, &vars_before);
                self.note_child_pid();
                Err(err)
            }
        }
    }

    /// Publishes the child's pid (evcxr replaces the child after a crash or kill) for the
    /// interrupter and hooks. Set-up of a new child waits for the next cell.
    fn note_child_pid(&self) -> u32 {
        let pid = self.ctx.process_handle().lock().unwrap().id();
        self.shared.child_pid.store(pid, Ordering::SeqCst);
        pid
    }

    fn panic_error(&self) -> CellError {
        let tail = self.shared.stderr_tail.lock().unwrap().clone();
        let start = tail.iter().position(|l| l.contains("panicked at"));
        let (evalue, traceback) = match start {
            Some(i) => {
                let msg_lines: Vec<&String> = tail[i + 1..]
                    .iter()
                    .take_while(|l| !l.starts_with("note:") && !l.starts_with("stack backtrace"))
                    .collect();
                let evalue = msg_lines
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                (evalue, tail[i..].to_vec())
            }
            None => ("the cell panicked".to_string(), tail.clone()),
        };
        let mut traceback = traceback;
        traceback.push(
            "Variables defined before this cell are kept; those it created are gone.".into(),
        );
        CellError {
            ename: "panic".into(),
            evalue,
            traceback,
        }
    }

    fn map_error(&self, e: EvcxrError, vars_before: &[String]) -> CellError {
        match e {
            EvcxrError::CompilationErrors(errors) => {
                let first = errors
                    .iter()
                    .find(|e| e.level() == "error")
                    .or(errors.first());
                let evalue = first
                    .map(|e| match e.code() {
                        Some(code) => format!("[{code}] {}", e.message()),
                        None => e.message(),
                    })
                    .unwrap_or_else(|| "compilation failed".into());
                let traceback = errors.iter().map(|e| e.rendered()).collect();
                CellError {
                    ename: "CompilationError".into(),
                    evalue,
                    traceback,
                }
            }
            EvcxrError::SubprocessTerminated(text) => {
                let tail = self.shared.stderr_tail.lock().unwrap().join("\n");
                let cause = crash_cause(&format!("{tail}\n{text}"));
                let lost = if vars_before.is_empty() {
                    "none were defined".to_string()
                } else {
                    vars_before.join(", ")
                };
                let mut tb: Vec<String> =
                    self.shared.stderr_tail.lock().unwrap().iter().cloned().collect();
                tb.push(text.clone());
                tb.push(format!(
                    "The child process was restarted; its variables were lost: {lost}."
                ));
                CellError {
                    ename: "ChildProcessDied".into(),
                    evalue: format!("{cause}; variables lost: {lost}"),
                    traceback: tb,
                }
            }
            EvcxrError::TypeRedefinedVariablesLost(vars) => CellError::new(
                "VariablesLost",
                format!(
                    "a type was redefined, so these variables were dropped: {}",
                    vars.join(", ")
                ),
            ),
            EvcxrError::Message(m) => CellError::new("EvcxrError", m),
        }
    }

    fn complete(&mut self, msg: &Message) -> Value {
        let (code, byte_pos) = code_and_cursor(msg);
        let line_start = code[..byte_pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_prefix = &code[line_start..byte_pos];
        let mut matches: Vec<String> = Vec::new();
        let (mut start, mut end) = (byte_pos, byte_pos);
        if line_prefix.trim_start().starts_with('%') && !line_prefix.contains(' ') {
            let word = line_prefix.trim_start();
            matches = dryml_magics::complete(word);
            start = byte_pos - word.len();
        } else {
            match self.ctx.completions(code, byte_pos) {
                Ok(c) if !c.completions.is_empty() => {
                    start = c.start_offset;
                    end = c.end_offset;
                    let mut seen = std::collections::HashSet::new();
                    for comp in c.completions {
                        if seen.insert(comp.code.clone()) {
                            matches.push(comp.code);
                        }
                    }
                }
                _ => {
                    // rust-analyzer had nothing: offer the notebook's own names.
                    let word_start = ident_start(code, byte_pos);
                    let word = &code[word_start..byte_pos];
                    if !word.is_empty() {
                        let mut names: Vec<String> = self
                            .ctx
                            .variables_and_types()
                            .map(|(n, _)| n.to_string())
                            .chain(self.ctx.defined_item_names().map(str::to_string))
                            .filter(|n| n.starts_with(word))
                            .collect();
                        names.sort();
                        names.dedup();
                        matches = names;
                        start = word_start;
                    }
                }
            }
        }
        json!({
            "status": "ok",
            "matches": matches,
            "cursor_start": byte_to_char(code, start),
            "cursor_end": byte_to_char(code, end),
            "metadata": {},
        })
    }

    fn inspect(&mut self, msg: &Message) -> Value {
        let (code, byte_pos) = code_and_cursor(msg);
        // Magic help, as `%name?` gives it.
        let line_start = code[..byte_pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line = code[line_start..].lines().next().unwrap_or("").trim();
        if line.starts_with('%') {
            let name = line.trim_start_matches('%');
            let name = name.split(|c: char| c.is_whitespace() || c == '?').next().unwrap_or("");
            let kind = if line.starts_with("%%") {
                dryml_magics::MagicKind::Cell
            } else {
                dryml_magics::MagicKind::Line
            };
            if let Some(spec) = dryml_magics::lookup(name, kind) {
                return json!({"status": "ok", "found": true,
                    "data": {"text/plain": spec.help_text()}, "metadata": {}});
            }
        }
        // Extend to the end of the identifier under the cursor.
        let end = code[byte_pos..]
            .find(|c: char| !is_ident_char(c))
            .map(|i| byte_pos + i)
            .unwrap_or(code.len());
        let word = &code[ident_start(code, end)..end];
        if let Some((_, ty)) = self.ctx.variables_and_types().find(|(n, _)| *n == word) {
            let text = format!("{word}: {ty}");
            return json!({"status": "ok", "found": true, "data": {"text/plain": text}, "metadata": {}});
        }
        match self.ctx.hover_at(code, end) {
            Ok((plain, html)) if !plain.is_empty() && plain != "No documentation found" => json!({
                "status": "ok", "found": true,
                "data": {"text/plain": plain, "text/html": html}, "metadata": {}
            }),
            _ => json!({"status": "ok", "found": false, "data": {}, "metadata": {}}),
        }
    }
}

/// A `page` payload, which frontends show in their pager.
fn page(text: &str) -> Value {
    json!({"source": "page", "data": {"text/plain": text}, "start": 0})
}

/// evcxr's mime outputs as a Jupyter bundle; `text/plain` is added when a value shows only HTML.
fn mime_bundle(outputs: evcxr::EvalOutputs) -> Option<Value> {
    if outputs.content_by_mime_type.is_empty() {
        return None;
    }
    let mut data = Map::new();
    for (mime, content) in outputs.content_by_mime_type {
        let value = if mime.ends_with("json") {
            serde_json::from_str(&content).unwrap_or(Value::String(content))
        } else {
            Value::String(content)
        };
        data.insert(mime, value);
    }
    if !data.contains_key("text/plain") {
        let fallback = data
            .get("text/html")
            .and_then(Value::as_str)
            .map(dryml::display::strip_tags)
            .unwrap_or_else(|| format!("<{}>", data.keys().cloned().collect::<Vec<_>>().join(", ")));
        data.insert("text/plain".into(), Value::String(fallback));
    }
    Some(Value::Object(data))
}

/// False when a cell holds only evcxr `:` commands, which run nothing in the child (so no
/// end-of-cell sync will come).
fn runs_code(code: &str) -> bool {
    code.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with(':') && !l.starts_with("//"))
}

/// True when a cell names the `dryml` crate, so the dependency is added only for those.
/// A context error as a cell error, under DRYML's exception name.
fn ctx_error(e: dryml::context::ContextError) -> CellError {
    CellError::new(e.name(), e.message())
}

/// The `tch` the runtime's `torch` feature is built against (libtorch 2.13.0).
const TCH_VERSION: &str = "0.26.0";

fn uses_tch(code: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"\btch\s*::|\buse\s+tch\b").expect("static regex"))
        .is_match(code)
}

fn uses_dryml(code: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"\bdryml\s*::|\buse\s+dryml\b|\bextern\s+crate\s+dryml\b")
            .expect("static regex")
    })
    .is_match(code)
}

fn interrupt_error(killed: bool, lost: &[String]) -> CellError {
    let evalue = if killed {
        let lost = if lost.is_empty() {
            "none were defined".to_string()
        } else {
            lost.join(", ")
        };
        format!("the cell did not stop within the grace period, so its process was restarted; variables lost: {lost}")
    } else {
        "the cell was interrupted; variables are kept".to_string()
    };
    CellError::new("KeyboardInterrupt", evalue)
}

/// Names the cause of a child's death from evcxr's termination text.
fn crash_cause(text: &str) -> String {
    let sig = regex::Regex::new(r"signal: (\d+)")
        .expect("static regex")
        .captures(text)
        .and_then(|c| c[1].parse::<i32>().ok());
    let base = match sig {
        Some(libc::SIGABRT) => "the child process aborted (SIGABRT)".to_string(),
        // evcxr's SIGSEGV handler prints "Segmentation fault." unless the stack is exhausted.
        Some(libc::SIGSEGV) if !text.contains("Segmentation fault") => {
            "the child process crashed with a segmentation fault (SIGSEGV), most likely a stack overflow".to_string()
        }
        Some(libc::SIGSEGV) => "the child process crashed with a segmentation fault (SIGSEGV)".to_string(),
        Some(libc::SIGKILL) => "the child process was killed (SIGKILL), typically by the out-of-memory killer".to_string(),
        Some(libc::SIGBUS) => "the child process crashed with a bus error (SIGBUS)".to_string(),
        Some(libc::SIGILL) => "the child process hit an illegal instruction (SIGILL)".to_string(),
        Some(n) => format!("the child process was terminated by signal {n}"),
        None => {
            let code = regex::Regex::new(r"exit status: (\d+)")
                .expect("static regex")
                .captures(text)
                .map(|c| c[1].to_string());
            match code {
                Some(c) => format!("the child process exited with status {c}"),
                None => "the child process ended".to_string(),
            }
        }
    };
    if text.contains("Segmentation fault") {
        return "the child process crashed with a segmentation fault".to_string();
    }
    if text.contains("overflowed its stack") {
        format!("{base}: stack overflow")
    } else {
        base
    }
}

/// User and system CPU seconds of a process, from /proc.
fn cpu_times(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime / tick, stime / tick))
}

fn fmt_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}

/// A request's code and its cursor as a byte offset (Jupyter counts characters).
fn code_and_cursor(msg: &Message) -> (&str, usize) {
    let code = msg.content["code"].as_str().unwrap_or("");
    let cursor = msg.content["cursor_pos"]
        .as_u64()
        .map(|c| c as usize)
        .unwrap_or(code.chars().count());
    (code, char_to_byte(code, cursor))
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Byte offset where the identifier ending at `pos` starts.
fn ident_start(code: &str, pos: usize) -> usize {
    code[..pos].rfind(|c: char| !is_ident_char(c)).map(|i| i + 1).unwrap_or(0)
}

fn char_to_byte(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map(|(i, _)| i).unwrap_or(s.len())
}

fn byte_to_char(s: &str, byte: usize) -> usize {
    s[..byte.min(s.len())].chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dryml_detection() {
        assert!(uses_dryml("use dryml::display;"));
        assert!(uses_dryml("let x = dryml :: version();"));
        assert!(!uses_dryml("let dryml_count = 1;"));
        assert!(!uses_dryml("let x = 1;"));
    }

    #[test]
    fn command_only_cells() {
        assert!(!runs_code(":vars"));
        assert!(!runs_code(":dep x = \"1\"\n\n// note\n:opt 1"));
        assert!(runs_code(":dep x = \"1\"\nlet y = 2;"));
    }

    #[test]
    fn crash_causes() {
        assert!(crash_cause("Subprocess terminated with status: signal: 6 (SIGABRT) (core dumped)").contains("aborted"));
        assert!(crash_cause("signal: 9 (SIGKILL)").contains("out-of-memory"));
        assert!(crash_cause("exit status: 3").contains("status 3"));
        assert!(crash_cause("signal: 11 (SIGSEGV)").contains("stack overflow"));
        assert!(!crash_cause("Segmentation fault.\nsignal: 11 (SIGSEGV)").contains("stack overflow"));
    }

    #[test]
    fn offsets_count_chars() {
        let s = "é = 1";
        assert_eq!(char_to_byte(s, 1), 2);
        assert_eq!(byte_to_char(s, 2), 1);
    }
}
