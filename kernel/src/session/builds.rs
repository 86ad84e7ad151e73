//! evcxr's cell builds without cargo: `dryml_builds` behind evcxr's `CellBuilder` hook.

use dryml_builds::{Builds, Outcome};
use evcxr::CellBuild;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where, in the cell crate's directory, the wrapper records the crate's rustc command.
const RECORD_FILE: &str = ".dryml-rustc.json";

/// The cell crate's builds: rustc alone while the command cargo last ran for it stays good.
pub(crate) struct RustcAlone {
    builds: Builds,
    /// Whether the last build ran rustc alone (a cell's phases say which).
    alone: Arc<AtomicBool>,
}

impl RustcAlone {
    /// The builds of the crate `name` in `crate_dir`, each telling `alone` how it went, and the
    /// builds' environment that records them.
    pub(crate) fn new(
        crate_dir: &Path,
        name: &str,
        alone: &Arc<AtomicBool>,
    ) -> std::io::Result<(RustcAlone, [(&'static str, String); 3])> {
        let record = crate_dir.join(RECORD_FILE);
        let env = dryml_builds::build_env(&std::env::current_exe()?, name, &record);
        Ok((RustcAlone { builds: Builds::new(record), alone: alone.clone() }, env))
    }
}

impl evcxr::CellBuilder for RustcAlone {
    fn build(&mut self, cargo: &Command) -> CellBuild {
        let outcome = self.builds.build(cargo);
        self.alone.store(matches!(outcome, Outcome::Built(_)), Ordering::SeqCst);
        match outcome {
            Outcome::Built(library) => CellBuild::Built(library),
            Outcome::Failed(output) => CellBuild::Failed(output),
            // Cargo builds it, and the wrapper records its command again.
            Outcome::Stale => CellBuild::Cargo,
        }
    }
}
