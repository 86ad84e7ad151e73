//! What a cell magic is: a [`CellMagic`] acts around a cell's body; a [`CellObserver`] (the
//! experiment, the cell logger) watches every cell, called by the engine once before the cell
//! and once after it. `dispatch.rs` runs a cell with them; the handlers name only this file.

use super::{Host, Magics};
use crate::protocol::ErrorContent;
use crate::session::named::Named;
use crate::syntax::TooDeep;
use dryml_magics::ParsedCell;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// One cell, split into its magics and its body, with what the body names: the one reading of
/// its text that every magic and observer takes its parts from.
pub struct Cell<'a> {
    pub parsed: &'a ParsedCell,
    /// Lines above the body (its magic lines), so compile errors name the cell's own lines.
    pub magic_lines: usize,
    // Each read of the body when first asked: a plain cell asks none of them.
    names: OnceLock<BTreeSet<&'a str>>,
    crates: OnceLock<Named>,
    shows: OnceLock<Result<bool, TooDeep>>,
}

impl<'a> Cell<'a> {
    /// `parsed` is what `dryml_magics::parse_cell` made of the cell.
    pub fn new(parsed: &'a ParsedCell) -> Cell<'a> {
        Cell {
            parsed,
            magic_lines: parsed.magic_lines,
            names: OnceLock::new(),
            crates: OnceLock::new(),
            shows: OnceLock::new(),
        }
    }

    pub fn body(&self) -> &'a str {
        &self.parsed.body
    }

    /// The identifiers the body mentions (over-inclusive), for the variables a `%%compute` or
    /// job body carries.
    pub fn names(&self) -> &BTreeSet<&'a str> {
        self.names.get_or_init(|| crate::syntax::identifiers(self.body()))
    }

    /// The crates the body names (an experiment preloads torch for `tch`).
    pub fn crates(&self) -> Named {
        *self.crates.get_or_init(|| Named::in_code(self.body()))
    }

    /// Whether the body ends with an expression (its value is shown) rather than a statement,
    /// parsed with syn.
    pub fn shows(&self) -> Result<bool, TooDeep> {
        *self.shows.get_or_init(|| crate::syntax::ends_with_value(self.body()))
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

    /// A body that is not Rust, which the magic takes itself (`%%writefile`'s text), even
    /// when blank; None: the body is evaluated.
    fn own_body(&mut self, _host: &mut Host<'_>, _cell: &Cell<'_>) -> Option<Result<(), ErrorContent>> {
        None
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
    fn watch_body(
        &mut self,
        host: &mut Host<'_>,
        cell: &Cell<'_>,
        eval: &mut dyn FnMut(&mut Host<'_>) -> BodyResult,
    ) -> BodyResult;

    /// After the cell, however it ended.
    fn after(&mut self, host: &mut Host<'_>, outcome: &Outcome);
}
