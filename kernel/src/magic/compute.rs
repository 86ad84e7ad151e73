//! `%%compute` and `%%sweep`: the cell's body run away from the notebook's process, in
//! sandboxes holding a context (here) or as a Slurm job (`--on slurm`). Each handler only
//! chooses where; the code is [`codegen`]'s, shared by both.

use super::cell::{Cell, CellMagic};
use super::codegen;
use super::Host;
use crate::protocol::ErrorContent;
use dryml_magics::{ComputeOptions, Invocation, SweepOptions};

/// `%%compute`.
pub struct ComputeCell<'a> {
    pub inv: &'a Invocation,
    pub opts: &'a ComputeOptions,
    /// The pool's CPU and GPU counts, for requests naming a device the machine lacks.
    pub devices: (usize, usize),
}

impl CellMagic for ComputeCell<'_> {
    fn code(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
        host.session.set_cell_lines(None);
        let (opts, body) = (self.opts, cell.body());
        if opts.slurm.is_some() {
            return super::slurm::compute_cell(host, opts, cell);
        }
        self.inv.check_devices(&opts.requests, self.devices.0, self.devices.1).map_err(|e| super::error(&e))?;
        host.session.ensure_child_setup();
        let code = codegen::compute(opts, cell, &host.session.variables())
            .map_err(|m| ErrorContent::new(crate::protocol::MAGIC_ERROR, format!("%%compute: {m}")))?;
        body_lines(host, &code, body, cell.magic_lines);
        Ok(code)
    }

    fn runs_elsewhere(&self) -> Option<&'static str> {
        Some(if self.opts.slurm.is_some() {
            "a `%%compute --on slurm` cell runs its body in a Slurm job"
        } else {
            "a `%%compute` cell runs its body in a sandbox process"
        })
    }
}

/// `%%sweep`.
pub struct SweepCell<'a> {
    pub inv: &'a Invocation,
    pub opts: &'a SweepOptions,
    pub devices: (usize, usize),
    /// The sweep's MLflow run (`--mlflow`), from before the body to after it.
    pub tracked: Option<super::mlflow::Tracked>,
}

impl CellMagic for SweepCell<'_> {
    /// With `--mlflow`: the sweep's run, in the MLflow experiment named as the repo's folder;
    /// each definition's trial is a run nested in it.
    fn before(&mut self, _magics: &mut super::Magics, host: &mut Host<'_>) -> Result<(), ErrorContent> {
        let Some(uri) = &self.opts.mlflow else { return Ok(()) };
        let repo = std::path::Path::new(&self.opts.repo);
        let experiment = repo.file_name().map_or_else(|| self.opts.repo.clone(), |n| n.to_string_lossy().into_owned());
        let name = format!("sweep {}", self.opts.defs);
        let t = super::mlflow::Tracked::start(host, uri, &experiment, &name)
            .map_err(|e| ErrorContent::new(crate::protocol::MAGIC_ERROR, format!("%%sweep: {e}")))?;
        self.tracked = Some(t);
        Ok(())
    }

    fn after(&mut self, host: &Host<'_>) {
        if let Some(t) = self.tracked.take() {
            t.end(host, false);
        }
    }

    fn code(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
        host.session.set_cell_lines(None);
        let (opts, body) = (self.opts, cell.body());
        if opts.slurm.is_some() {
            return super::slurm::sweep_cell(host, opts, cell);
        }
        self.inv.check_devices(&opts.requests, self.devices.0, self.devices.1).map_err(|e| super::error(&e))?;
        host.session.ensure_child_setup();
        let code = codegen::sweep(opts, body);
        body_lines(host, &code, body, cell.magic_lines);
        Ok(code)
    }

    fn runs_elsewhere(&self) -> Option<&'static str> {
        Some(if self.opts.slurm.is_some() {
            "a `%%sweep --on slurm` cell runs its body in Slurm jobs"
        } else {
            "a `%%sweep` cell runs its body in sandbox processes"
        })
    }
}

/// The body's compile errors name the cell's lines; those only in the code around it say so
/// in a line.
fn body_lines(host: &mut Host<'_>, code: &str, body: &str, magic_lines: usize) {
    let starts = codegen::body_starts(code, body);
    let count = body.lines().count().max(1);
    host.session.set_cell_lines(Some(crate::session::errors::CellLines::within(&starts, count, magic_lines)));
}
