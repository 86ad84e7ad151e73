//! evcxr's cell builds without cargo: `dryml_builds` behind evcxr's `CellBuilder` hook.

use dryml_builds::{DirectRustc, Outcome};
use evcxr::CellBuild;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

/// The command cargo last ran for the cell crate, while it stays good.
#[derive(Default)]
pub(crate) struct RustcAlone(Option<DirectRustc>);

impl evcxr::CellBuilder for RustcAlone {
    fn build(&mut self, cargo: &Command) -> CellBuild {
        match self.0.as_ref().map_or(Outcome::Stale, |direct| direct.build(cargo)) {
            Outcome::Built(library) => CellBuild::Built(library),
            Outcome::Failed(output) => CellBuild::Failed(output),
            Outcome::Stale => {
                // Cargo records the command again.
                self.0 = None;
                CellBuild::Cargo
            }
        }
    }

    fn cargo_built(&mut self, cargo: &Command, record: &Path, started: SystemTime) {
        self.0 = DirectRustc::load(record, cargo, started);
    }
}
