//! `%experiment`, `%%experiment` and `%cell_logger`: opening and finishing experiments (which
//! delete the variables they made and report memory), and measuring each cell while the logger
//! is on or an experiment is open, as the engine's [`CellObserver`]. The figures and reports
//! are [`report`]'s, the cell logger's [`logger`]'s, TensorBoard's runs [`tensorboard`]'s; a
//! cell's measure is `cells.rs`'s.

mod cells;
pub mod logger;
mod render;
pub mod report;
pub mod tensorboard;

use super::cell::{BodyResult, Cell, CellMagic, CellObserver, Outcome};
use super::mlflow::{self as tracking, Tracked};
use super::{Host, Magics};
use crate::measure::gpu::Gpu;
use crate::protocol::ErrorContent;
use cells::{settled, CellMeasure};
use dryml_magics::{ExperimentCall, LoggerCall, Preload};
use logger::{CellLogger, LoggerMode};
use report::{self as exp, Experiment};

#[derive(Default)]
pub struct Experiments {
    open: Option<Experiment>,
    logger: CellLogger,
    /// The cell under way's measure, from the observer's `before` to its `after`.
    measure: Option<CellMeasure>,
    /// The open experiment is a `%%experiment` cell's, and ends with the cell.
    ends_with_cell: bool,
    /// The open experiment's `--tensorboard` directory.
    tensorboard: Option<std::path::PathBuf>,
    /// The open experiment's `--mlflow` run.
    mlflow: Option<Tracked>,
    /// When the cell under way began: a tracking queue it wrote to is this kernel's to tell of.
    cell_began: Option<std::time::SystemTime>,
    /// The `%%experiment` cell's body failed: its MLflow run ends `FAILED`.
    body_failed: bool,
}

/// Where an experiment's figures go besides its report.
#[derive(Default, Clone, Copy)]
pub struct Outputs<'a> {
    pub tensorboard: Option<&'a str>,
    pub mlflow: Option<&'a str>,
}

impl Experiments {
    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    pub fn run(&mut self, host: &mut Host<'_>, call: &ExperimentCall) -> Result<(), ErrorContent> {
        if let ExperimentCall::Start { name, preload, tensorboard, mlflow } = call {
            let outputs = Outputs { tensorboard: tensorboard.as_deref(), mlflow: mlflow.as_deref() };
            return self.start(host, name.clone(), Vec::new(), *preload, outputs);
        }
        let Some(e) = self.open.as_mut() else {
            let sub = call.name();
            return Err(ErrorContent::new(
                crate::protocol::MAGIC_ERROR,
                format!("%experiment {sub}: no experiment is open (start one with %experiment start [NAME])"),
            ));
        };
        match call {
            ExperimentCall::Start { .. } => unreachable!("handled above"),
            ExperimentCall::Keep(names) => e.keep(names),
            ExperimentCall::Data => {
                let (pids, gpus) = (e.pids().to_vec(), e.gpus().to_vec());
                let now = host.meter.sample(&pids, &gpus, false);
                e.observe(&now);
                host.show(render::report_bundle(&e.so_far(&now), false, None));
            }
            ExperimentCall::Finish => self.finish(host),
        }
        Ok(())
    }

    pub fn run_logger(&mut self, host: &mut Host<'_>, call: LoggerCall) {
        match call {
            LoggerCall::On => self.logger.mode = LoggerMode::On,
            LoggerCall::Compact => self.logger.mode = LoggerMode::Compact,
            LoggerCall::Off => self.logger.mode = LoggerMode::Off,
            LoggerCall::Reset => self.logger.log.clear(),
            LoggerCall::Data => host.show(self.logger.data()),
            LoggerCall::Plot => host.show(self.logger.plot()),
        }
    }

    /// Starts an experiment, finishing an open one first (as IPyExperiments does), after
    /// preloading a framework when asked to; the networks trained until the finish write their
    /// runs to its `outputs` (a TensorBoard directory, an MLflow server).
    fn start(
        &mut self,
        host: &mut Host<'_>,
        name: Option<String>,
        keep: Vec<String>,
        preload: Option<Preload>,
        outputs: Outputs<'_>,
    ) -> Result<(), ErrorContent> {
        if self.open.is_some() {
            self.finish(host);
        }
        let tensorboard = outputs
            .tensorboard
            .map(tensorboard::prepare)
            .transpose()
            .map_err(|e| ErrorContent::new(crate::protocol::MAGIC_ERROR, e))?;
        let name = name.unwrap_or_else(|| format!("#{}", host.execution_count));
        host.session.note_child_pid();
        let gpus = host.visible_gpus();
        if let Some(p) = preload {
            self.preload(host, p, &gpus, "before the experiment's starting sample")?;
        }
        // Opened last of what can fail, so a failed start leaves no run open on the server.
        if let Some(uri) = outputs.mlflow {
            let t = Tracked::start(host, uri, &name, &name)
                .map_err(|e| ErrorContent::new(crate::protocol::MAGIC_ERROR, e))?;
            self.mlflow = Some(t);
        }
        let s = host.meter.sample(&dryml_sys::procfs::with_descendants(host.child_pid()), &gpus, true);
        let note = host.meter.gpu_note();
        host.show(render::start_banner(&name, &s, &gpus, note.as_deref()));
        let vars = host.session.variables();
        self.open = Some(Experiment::start(name, s, gpus, vars, keep));
        if let Some(dir) = &tensorboard {
            use std::os::unix::ffi::OsStrExt;
            if !host.session.comms().set_tensorboard(dir.as_os_str().as_bytes()) {
                host.warn("dryml: the notebook's process could not be told the TensorBoard directory\n");
            }
        }
        self.tensorboard = tensorboard;
        Ok(())
    }

    /// Starts the experiment of a `%%experiment` cell, which ends with the cell.
    fn start_for_cell(
        &mut self,
        host: &mut Host<'_>,
        name: Option<String>,
        keep: Vec<String>,
        preload: Option<Preload>,
        outputs: Outputs<'_>,
    ) -> Result<(), ErrorContent> {
        self.start(host, name, keep, preload, outputs)?;
        self.ends_with_cell = true;
        Ok(())
    }

    /// Loads a framework into the child and says what that took, so it is not mistaken for the
    /// experiment's: libtorch's code and CUDA's context stay for the process's life.
    fn preload(&mut self, host: &mut Host<'_>, p: Preload, gpus: &[Gpu], when: &str) -> Result<(), ErrorContent> {
        let Preload::Torch = p;
        let pids = dryml_sys::procfs::with_descendants(host.child_pid());
        let before = host.meter.sample(&pids, gpus, true);
        let t0 = std::time::Instant::now();
        let device = host.session.preload_torch()?;
        let after = settled(host, gpus);
        let mut took = vec![format!("{} MiB of RAM", render::mib(after.cpu.rss as f64 - before.cpu.rss as f64))];
        for (g, (a, b)) in gpus.iter().zip(after.gpus.iter().zip(&before.gpus)) {
            took.push(format!("{} MiB on {}", render::mib(a.used_by_us as f64 - b.used_by_us as f64), g.label));
        }
        host.print(&format!(
            "dryml: preloaded torch ({device}) in {:.1} s {when}: {} stay with the kernel and are not counted\n",
            t0.elapsed().as_secs_f64(),
            took.join(", ")
        ));
        Ok(())
    }

    /// Before an experiment's first cell runs: a body that names `tch` gets torch preloaded
    /// first (unless the child has it), and the experiment starts over from after the preload.
    fn before_body(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) {
        let Some(e) = &self.open else { return };
        if e.cells() > 0 || host.session.torch_loaded() || crate::torch::available().is_none() || !cell.crates().tch {
            return;
        }
        let gpus = e.gpus().to_vec();
        match self.preload(host, Preload::Torch, &gpus, "as the experiment's first cell names `tch`") {
            Ok(()) => {
                let s = host.meter.sample(&dryml_sys::procfs::with_descendants(host.child_pid()), &gpus, true);
                if let Some(e) = &mut self.open {
                    e.rebase(s);
                }
            }
            Err(err) => host.warn(&format!("dryml: torch was not preloaded: {}\n", err.evalue)),
        }
    }

    /// Deletes the experiment's variables, trims the child's heap, and reports.
    fn finish(&mut self, host: &mut Host<'_>) {
        let Some(mut e) = self.open.take() else { return };
        let tensorboard = self.tensorboard.take();
        if tensorboard.is_some() {
            host.session.comms().set_tensorboard(b"");
        }
        host.session.note_child_pid();
        let pids = dryml_sys::procfs::with_descendants(host.child_pid());
        let before = host.meter.sample(&pids, e.gpus(), true);
        e.observe(&before);
        let plan = e.cleanup(&host.session.variables());
        let doomed: Vec<String> = plan.delete.iter().chain(&plan.reassigned).cloned().collect();
        let mut notes = Vec::new();
        if host.session.eval_hidden(&exp::cleanup_code(&doomed)).is_err() && !doomed.is_empty() {
            // One variable at a time, so one that cannot be dropped does not keep the rest.
            for name in &doomed {
                if let Err(err) = host.session.eval_hidden(&exp::cleanup_code(std::slice::from_ref(name))) {
                    notes.push(format!("deleting {name}: {}", err.evalue));
                }
            }
        }
        let left = host.session.variables();
        let failed: Vec<String> = doomed.into_iter().filter(|n| left.contains_key(n)).collect();
        let after = host.meter.sample(&pids, e.gpus(), true);
        if let Some(n) = host.meter.gpu_note() {
            notes.push(n);
        }
        let mut report = e.report(&before, &after, plan, failed, notes);
        // Made where the notebook's process works (its `%cd`), with the kernel's part.
        report.provenance = Some(host.provenance());
        let path = host.state_dir.join(dryml_sys::protocol::EXPERIMENT_LAST_FILE);
        if let Err(err) =
            dryml_sys::fs::write_atomic(&path, report.to_record().as_bytes(), dryml_sys::fs::Durability::NoFsync)
        {
            tracing::warn!("experiment report not saved to {}: {err}", path.display());
        }
        // The GPU note, if any, is already among the report's notes.
        let state = render::state_block(&after, e.gpus(), None);
        let bundle = render::report_bundle(&report, true, Some(state));
        if let Some(t) = self.mlflow.take() {
            log_report(t.run(), &report, host);
            t.end(host, std::mem::take(&mut self.body_failed));
        }
        if let Some(dir) = tensorboard {
            let text = bundle["text/plain"].as_str().unwrap_or_default();
            if let Err(err) = tensorboard::write_run(&dir, &report, text, host.execution_count.max(0) as u64) {
                host.warn(&format!(
                    "dryml: the experiment's TensorBoard run was not written to {}: {err}\n",
                    dir.display()
                ));
            }
        }
        host.show(bundle);
    }
}

/// The engine's observer: a cell is measured from before its line magics to after its value is
/// shown, and an open experiment watches its body.
impl CellObserver for Experiments {
    fn before(&mut self, host: &mut Host<'_>) {
        self.ends_with_cell = false;
        self.cell_began = Some(std::time::SystemTime::now());
        self.measure = self.begin_cell(host);
    }

    fn watch_body(
        &mut self,
        host: &mut Host<'_>,
        cell: &Cell<'_>,
        eval: &mut dyn FnMut(&mut Host<'_>) -> BodyResult,
    ) -> BodyResult {
        let body = cell.body();
        self.before_body(host, cell);
        let gpus = self.gpus_to_watch(host);
        let watch = host.meter.watch_gpus(&gpus, host.child_pid());
        let result = eval(host);
        let peaks = watch.map(|w| host.meter.end_watch(w));
        self.after_body(host, body, &gpus, peaks);
        result
    }

    fn after(&mut self, host: &mut Host<'_>, outcome: &Outcome) {
        // The experiment of a `%%experiment` cell ends with it, whether or not the body failed.
        if std::mem::take(&mut self.ends_with_cell) && self.is_open() {
            self.body_failed = outcome.error.is_some();
            self.finish(host);
        }
        if let Some(m) = self.measure.take() {
            self.end_cell(host, m);
        }
        if let Some(began) = self.cell_began.take() {
            tracking::sender().after_cell(host, began);
        }
    }
}

/// `%%experiment`'s handler: an experiment opened before the body, finished by the observer
/// once the cell's value is shown.
pub struct ExperimentCell<'a> {
    pub name: &'a Option<String>,
    pub keep: &'a [String],
    pub preload: Option<Preload>,
    pub outputs: Outputs<'a>,
}

impl CellMagic for ExperimentCell<'_> {
    fn before(&mut self, magics: &mut Magics, host: &mut Host<'_>) -> Result<(), ErrorContent> {
        let (name, keep) = (self.name.clone(), self.keep.to_vec());
        magics.experiments.start_for_cell(host, name, keep, self.preload, self.outputs)
    }
}

/// The experiment's own figures on its MLflow run: memory per device (MiB) and time, at step 0.
fn log_report(run: &dryml::track::Run, report: &dryml::experiment::Report, host: &Host<'_>) {
    let mut m = vec![("time/seconds".to_string(), report.elapsed_secs)];
    for d in &report.devices {
        for (figure, bytes) in [("consumed", d.consumed), ("peaked", d.peaked), ("reclaimed", d.reclaimed)] {
            m.push((format!("memory/{}/{figure}_mib", d.device.replace('/', "_")), bytes as f64 / report::MIB));
        }
    }
    let mut logged = run.log_metrics(&m, 0);
    if let Some(p) = &report.provenance {
        logged = logged.and_then(|()| run.log_provenance(p));
    }
    if let Err(e) = logged {
        host.warn(&format!("dryml: the experiment's figures are not on its MLflow run: {e}\n"));
    }
}
