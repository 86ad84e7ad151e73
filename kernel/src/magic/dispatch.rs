//! How a parsed cell runs: its line magics in order, then its cell magic's handler around the
//! body (or the body alone). A cell magic's handler is found for its typed call as a line
//! magic's is ([`super::run_line`]).

use super::cell::{Cell, CellMagic, Outcome};
use super::{Host, Magics};
use crate::protocol::published::StreamName;
use dryml_magics::{CellCall, Invocation};

/// A cell without a cell magic.
struct Plain;

impl CellMagic for Plain {}

/// The handler of a cell magic's call: one per `%%` magic, found by an exhaustive match, so a
/// cell magic without one does not compile.
fn handler<'a>(magics: &Magics, inv: &'a Invocation, call: &'a CellCall) -> Box<dyn CellMagic + 'a> {
    match call {
        CellCall::Time => Box::<super::time::TimeCell>::default(),
        CellCall::Parameters => Box::new(super::parameters::ParametersCell),
        CellCall::Experiment { name, keep, preload, tensorboard, mlflow } => {
            let outputs = super::experiment::Outputs { tensorboard: tensorboard.as_deref(), mlflow: mlflow.as_deref() };
            Box::new(super::experiment::ExperimentCell { name, keep, preload: *preload, outputs })
        }
        CellCall::Compute(opts) => {
            Box::new(super::compute::ComputeCell { inv, opts, devices: magics.contexts.devices() })
        }
        CellCall::Sweep(opts) => {
            Box::new(super::compute::SweepCell { inv, opts, devices: magics.contexts.devices(), tracked: None })
        }
        CellCall::Script { shell, raise_error } => {
            Box::new(super::habits::ScriptCell { shell: *shell, raise_error: *raise_error })
        }
        CellCall::WriteFile { append, path } => Box::new(super::habits::WriteFileCell { append: *append, path }),
        // `parse_cell` made the body the timed closure.
        CellCall::Timeit(_) => Box::new(Plain),
    }
}

/// Runs a cell's line magics, then its cell magic (or none) around the body; the first error
/// ends it. The observer's `before` and `after` are the caller's, around this.
pub fn run(magics: &mut Magics, host: &mut Host<'_>, cell: &Cell<'_>) -> Outcome {
    let mut out = Outcome::default();
    for inv in &cell.parsed.line_magics {
        if let Err(e) = super::run_line(magics, host, inv, &mut out.payload) {
            out.error = Some(e);
            return out;
        }
        // `%context --restart` and `%experiment` change what the rest of the cell sees.
        host.has_context = magics.contexts.is_set();
    }
    let mut handler = match &cell.parsed.cell_magic {
        None => Box::new(Plain),
        Some(inv) => match inv.cell_call() {
            Some(call) => handler(magics, inv, call),
            // `%%name?`: its help, and the body is not run.
            None => {
                out.payload.push(super::page(&inv.spec.help_text()));
                return out;
            }
        },
    };
    if let Err(e) = handler.before(magics, host) {
        out.error = Some(e);
        return out;
    }
    if let (Some(why), true) = (handler.runs_elsewhere(), host.state.debugging()) {
        if let Some(note) = host.state.debug_hook().and_then(|hook| hook.elsewhere(why)) {
            host.state.stream(StreamName::Stderr, &note);
        }
    }
    if let Some(done) = handler.own_body(host, cell) {
        out.error = done.err();
    } else if !cell.body().trim().is_empty() {
        let ran = magics.observer().watch_body(host, cell, &mut |host| {
            let code = handler.code(host, cell)?;
            host.session.eval_user(&code, host.io)
        });
        match ran {
            Ok(data) => out.result = data.filter(|_| !host.state.quiet()),
            Err(e) => out.error = Some(e),
        }
    }
    handler.after(host);
    out
}
