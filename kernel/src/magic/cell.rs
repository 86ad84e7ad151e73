//! How a parsed cell runs: its line magics in order, then its cell magic's handler around the
//! body (or the body alone). A cell magic is a [`CellMagic`], found for its typed call as a line
//! magic is ([`super::run_line`]); what watches every cell (the experiment and the cell logger)
//! is a [`CellObserver`], which the engine calls once before the cell and once after it.

use super::{Host, Magics};
use crate::protocol::ErrorContent;
use dryml_magics::{CellCall, Invocation, ParsedCell};
use serde_json::Value;

/// One cell, split into its magics and its body.
pub struct Cell<'a> {
    pub parsed: &'a ParsedCell,
    /// Lines above the body (its magic lines), so compile errors name the cell's own lines.
    pub magic_lines: usize,
}

impl<'a> Cell<'a> {
    /// `code` is the cell as written, `parsed` what `dryml_magics::parse_cell` made of it.
    pub fn new(code: &str, parsed: &'a ParsedCell) -> Cell<'a> {
        let magic_lines = code[..code.len() - parsed.body.len()].matches('\n').count();
        Cell { parsed, magic_lines }
    }

    pub fn body(&self) -> &'a str {
        &self.parsed.body
    }
}

/// What a body's evaluation gives: its `execute_result` bundle, if it has a value.
pub type BodyResult = Result<Option<Value>, ErrorContent>;

/// How a cell ended, besides the output it published.
#[derive(Default)]
pub struct Outcome {
    /// `page` payloads (`%name?` help).
    pub payload: Vec<Value>,
    pub error: Option<ErrorContent>,
    /// The body's value, for `execute_result` (None when the request is silent).
    pub result: Option<Value>,
}

/// A `%%name` magic: what it does around the cell's body. Each step has the plain cell's
/// behaviour by default.
pub trait CellMagic {
    /// Before the body (a timer, an experiment); an error ends the cell before its body.
    fn before(&mut self, _magics: &mut Magics, _host: &mut Host<'_>) -> Result<(), ErrorContent> {
        Ok(())
    }

    /// The code evcxr runs for a body that is not blank: the body itself, whose compile errors
    /// name the cell's lines.
    fn code(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
        host.session.set_cell_lines(Some(crate::session::errors::CellLines::body(cell.magic_lines)));
        Ok(cell.body().to_string())
    }

    /// After the body, whether or not it failed, before its value is shown.
    fn after(&mut self, _host: &Host<'_>) {}

    /// Where the body runs when not in the notebook's process (the debugger cannot stop it
    /// there), said as "a ... cell runs its body in ...".
    fn runs_elsewhere(&self) -> Option<&'static str> {
        None
    }
}

/// What watches every cell: once before anything of the cell runs, once after all of it (its
/// value shown), and around its body's evaluation, which it runs.
pub trait CellObserver {
    /// Before the cell's line magics and body.
    fn before(&mut self, host: &mut Host<'_>);

    /// Runs the body's evaluation, `eval` (its code made and run), watching it.
    fn watch_body(&mut self, host: &mut Host<'_>, body: &str, eval: &mut dyn FnMut(&mut Host<'_>) -> BodyResult) -> BodyResult;

    /// After the cell, however it ended.
    fn after(&mut self, host: &mut Host<'_>, outcome: &Outcome);
}

/// A cell without a cell magic.
struct Plain;

impl CellMagic for Plain {}

/// The handler of a cell magic's call: one per `%%` magic, found by an exhaustive match, so a
/// cell magic without one does not compile.
fn handler<'a>(magics: &Magics, inv: &'a Invocation, call: &'a CellCall) -> Box<dyn CellMagic + 'a> {
    match call {
        CellCall::Time => Box::<super::time::TimeCell>::default(),
        CellCall::Experiment { name, keep, preload } => Box::new(super::experiment::ExperimentCell { name, keep, preload: *preload }),
        CellCall::Compute(opts) => Box::new(super::compute::ComputeCell { inv, opts, devices: magics.contexts.devices() }),
        CellCall::Sweep(opts) => Box::new(super::compute::SweepCell { inv, opts, devices: magics.contexts.devices() }),
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
    if let (Some(why), true) = (handler.runs_elsewhere(), host.state.debugging.load(std::sync::atomic::Ordering::SeqCst)) {
        if let Some(note) = host.state.debug_hook.get().and_then(|hook| hook.elsewhere(why)) {
            host.state.stream("stderr", &note);
        }
    }
    if !cell.body().trim().is_empty() {
        let ran = magics.observer().watch_body(host, cell.body(), &mut |host| {
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
