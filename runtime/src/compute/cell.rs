//! The kernel's side of a `%%compute` body in a sandbox: the values it sends back to the
//! notebook ([`Cell`]) and the notebook's view of them ([`CellResult`]).

use super::outcome::clear_report;
use super::sandbox::{decode, encode, send_frame, Place, FAIL, OK};
use crate::compute::ending;
use crate::compute::{Compute, ComputeError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;

pub struct Cell {
    pub(super) updates: Vec<(String, Vec<u8>)>,
    pub(super) shown: Option<String>,
}

/// An error a `%%compute` body returned with `?`: any error type, kept as its `Debug` text
/// (as evcxr shows a cell's `?` errors). It is not `Debug` itself, so the conversion is total.
pub struct CellError(pub(crate) String);

impl<E: fmt::Debug> From<E> for CellError {
    fn from(e: E) -> Self {
        CellError::new(format!("{e:?}"))
    }
}

impl CellError {
    /// The error a body is returning; remembered, so the sandbox or job can report it once
    /// it has ended without dropping the notebook's copies.
    pub fn new(message: String) -> CellError {
        ending::record_error(&message);
        CellError(message)
    }
}

impl Cell {
    /// Sends `value` back as the new value of the notebook's variable `name`; a value that
    /// does not serialize ends the sandbox with that error.
    pub fn update<T: Serialize>(&mut self, name: &str, value: &T) {
        match rmp_serde::to_vec(value) {
            Ok(v) => self.updates.push((name.to_string(), v)),
            Err(e) => send_frame(FAIL, format!("--update {name}: the value does not serialize: {e}").as_bytes()),
        }
    }

    /// The cell's value, shown as evcxr shows one (its `Debug` form).
    pub fn show<T: fmt::Debug>(&mut self, value: &T) {
        self.shown = Some(format!("{value:?}"));
    }

    /// Sends bytes [`crate::compute::carry::Out`] made back as the notebook's variable `name`; an error
    /// ends the sandbox with it.
    pub fn update_bytes(&mut self, name: &str, encoded: Result<Vec<u8>, String>) {
        match encoded {
            Ok(v) => self.updates.push((name.to_string(), v)),
            Err(e) => send_frame(FAIL, format!("--update {name}: {e}").as_bytes()),
        }
    }

    /// Ends the body: sends the results and exits without dropping anything.
    pub fn finish(&mut self) {
        match encode(&(&self.updates, &self.shown)) {
            Ok(b) => send_frame(OK, &b),
            Err(e) => send_frame(FAIL, e.as_bytes()),
        }
    }
}

/// The notebook side of a `%%compute` cell's results.
pub struct CellResult {
    pub(super) updates: Vec<(String, Vec<u8>)>,
    pub(super) shown: Option<String>,
}

/// A value shown as its already formatted text.
pub struct Shown(pub String);

impl fmt::Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl CellResult {
    pub(crate) fn new(updates: Vec<(String, Vec<u8>)>, shown: Option<String>) -> CellResult {
        CellResult { updates, shown }
    }

    /// The new value of the notebook's variable `name`.
    pub fn take<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, ComputeError> {
        let i = self
            .updates
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| ComputeError::Failed(format!("the sandbox sent no value for `{name}`")))?;
        let v = self.updates.swap_remove(i).1;
        rmp_serde::from_slice(&v)
            .map_err(|e| ComputeError::Failed(format!("--update {name}: the value did not deserialize: {e}")))
    }

    /// The bytes sent for the notebook's variable `name` (read with [`crate::compute::carry::In`]).
    pub fn take_bytes(&mut self, name: &str) -> Result<Vec<u8>, ComputeError> {
        let i = self
            .updates
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| ComputeError::Failed(format!("no value came back for `{name}`")))?;
        Ok(self.updates.swap_remove(i).1)
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.updates.iter().any(|(n, _)| n == name)
    }

    /// The cell's value as the sandbox showed it.
    pub fn shown(&mut self) -> Shown {
        Shown(self.shown.take().unwrap_or_default())
    }
}

/// Where a `%%compute` cell runs: `Some(context)` in this process (with `use_existing` or
/// `dont_create` and a context that fits), `None` in a sandbox.
pub fn where_to_run(compute: &Compute) -> Result<Option<crate::compute::context::Context>, ComputeError> {
    clear_report();
    Ok(match compute.place()? {
        Place::Here(ctx) => Some(ctx),
        Place::Sandbox => None,
    })
}

/// Runs a `%%compute` body in a sandbox of `compute`'s options: `body` passes updated variables
/// and the shown value through its [`Cell`] and ends with [`Cell::finish`].
pub fn run_cell(
    compute: &Compute,
    body: impl FnOnce(&mut Cell) -> Result<(), CellError>,
) -> Result<CellResult, ComputeError> {
    let bytes = compute.sandbox(|| {
        let mut cell = Cell { updates: Vec::new(), shown: None };
        match body(&mut cell) {
            Ok(()) => Err("the %%compute body returned without finishing".into()),
            Err(e) => Err(format!("the cell returned an error: {}", e.0)),
        }
    })?;
    let (updates, shown): (Vec<(String, Vec<u8>)>, Option<String>) = decode(&bytes, "the cell's results")?;
    Ok(CellResult { updates, shown })
}
