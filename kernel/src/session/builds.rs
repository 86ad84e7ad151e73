//! evcxr's cell builds without cargo: `dryml_builds` behind evcxr's `CellBuilder` hook.

use dryml_builds::{Builds, Outcome};
use evcxr::CellBuild;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};

/// Where, in the cell crate's directory, the wrapper records the crate's rustc command.
const RECORD_FILE: &str = ".dryml-rustc.json";

/// The cell crate's builds (rustc alone while the command cargo last ran for it stays good; a
/// build directory of its own while another kernel's build holds the shared one), held by evcxr
/// as its `CellBuilder` and by the session, which settles a cargo build.
#[derive(Clone, Default)]
pub(crate) struct CellBuilds(Arc<Mutex<Option<Held>>>);

/// The builds, whether the last ran rustc alone, and those aside.
type Held = (Builds, bool, super::aside::Aside);

impl CellBuilds {
    /// Starts the builds of the crate `name` in `crate_dir` (`stop`: whether an interrupt stops
    /// them); returns the builds' environment that records them.
    pub(crate) fn start(
        &self,
        crate_dir: &Path,
        name: &str,
        stop: super::aside::Stop,
    ) -> std::io::Result<[(&'static str, String); 3]> {
        let record = crate_dir.join(RECORD_FILE);
        let env = dryml_builds::build_env(&std::env::current_exe()?, name, &record);
        *self.lock() = Some((Builds::new(record), false, super::aside::Aside::new(name, stop)));
        Ok(env)
    }

    /// After a cell: reads what a cargo build of it recorded, so the next cell need not.
    pub(crate) fn settle(&self) {
        if let Some((builds, _, _)) = self.lock().as_mut() {
            builds.settle();
        }
    }

    /// Whether the last build ran rustc alone (a cell's phases say which).
    pub(crate) fn built_alone(&self) -> bool {
        self.lock().as_ref().is_some_and(|(_, alone, _)| *alone)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl evcxr::CellBuilder for CellBuilds {
    fn build(&mut self, cargo: &Command) -> CellBuild {
        let mut held = self.lock();
        let Some((builds, alone, aside)) = held.as_mut() else { return CellBuild::Cargo };
        let outcome = builds.build(cargo);
        *alone = matches!(outcome, Outcome::Built(_));
        match outcome {
            Outcome::Built(library) => CellBuild::Built(library),
            Outcome::Failed(output) => CellBuild::Failed(output),
            // Cargo builds it (the wrapper records its command again), aside while another
            // kernel's build holds the shared directory.
            Outcome::Stale => aside.build(cargo).unwrap_or(CellBuild::Cargo),
        }
    }
}

/// `DRYML_DEBUG_CELLS` for a cell: unoptimised while debugging, unless the user chose a level.
pub fn debug_builds(debugging: bool, user_opt: bool) -> &'static str {
    match (debugging, user_opt) {
        (false, _) => "0",
        (true, false) => "1",
        (true, true) => "keep-opt",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_builds_are_unoptimised_unless_the_user_chose_a_level() {
        assert_eq!(
            [(false, false), (false, true), (true, false), (true, true)].map(|(d, u)| debug_builds(d, u)),
            ["0", "0", "1", "keep-opt"]
        );
    }
}
