//! The session's warm-up, step by step while no request waits: the child's start-up code and
//! `dryml` built ahead of the first cell, then the build cache's collection; and what a killed
//! build left behind, removed.

use super::state::WarmUp;
use super::{cache, Session};
use crate::child::FLUSHER_CELL;
use std::time::Duration;

impl Session {
    /// One step of the warm-up, done while no request waits; returns whether more remains.
    /// A request that arrives stops the step (its build is killed; the cell then carries what
    /// it needs of it) and the step is tried again when the worker is idle. The steps: the
    /// child's start-up code (the stdout flusher) and, with the machine's cache, `dryml` (a
    /// link away there, built once per machine), in one build, so the first cell naming it
    /// costs what any cell does; then the cache's collection. It waits for the analyzer's own
    /// start-up work first.
    pub fn warm_up_step(&mut self) -> bool {
        match self.state.warm_up_begins(|| self.standby.as_ref().is_some_and(|a| a.busy())) {
            WarmUp::Stopped => return false,
            WarmUp::Later => return true,
            WarmUp::Busy => {
                std::thread::sleep(Duration::from_millis(50));
                return true;
            }
            WarmUp::Go => {}
        }
        let more = self.warm_up_next();
        let go_on = self.state.warm_up_ends();
        self.clean_killed_build();
        more && go_on
    }

    fn warm_up_next(&mut self) -> bool {
        self.flusher_pending |= self.state.take_startup_failed();
        let with_cache = matches!(self.cache, Ok(Some(_)));
        let deps = if with_cache { self.deps_for("dryml::") } else { None };
        if self.flusher_pending || deps.is_some() {
            let started = std::time::Instant::now();
            let mut code = deps.as_ref().map(|(lines, _)| format!("{lines}\n")).unwrap_or_default();
            if self.flusher_pending {
                code.push_str(FLUSHER_CELL);
            }
            match self.eval_hidden(&code) {
                Ok(_) => {
                    self.flusher_pending = false;
                    if let Some((_, frameworks)) = deps {
                        self.note_deps_added(frameworks, false);
                    }
                    tracing::info!("warm: start-up code and dryml built in {:.2?}", started.elapsed());
                    return with_cache;
                }
                // Stopped for a request: tried again once the worker is idle.
                Err(_) if self.state.work_waiting() => return true,
                Err(e) => {
                    tracing::warn!("warm-up failed, the first cell builds what it needs: {}", e.evalue);
                    return false;
                }
            }
        }
        if let Ok(Some(cache)) = &self.cache {
            if let Err(e) = cache.collect(Duration::ZERO) {
                tracing::warn!("build cache not collected: {e:#}");
            }
            match cache.remove_orphans(Duration::ZERO) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!("build cache: {} of gone kernels' crates removed", dryml_sys::units::size(n))
                }
                Err(e) => tracing::info!("build cache: gone kernels' crates left for now: {e:#}"),
            }
        }
        false
    }

    /// After an interrupt killed a build, removes what it left of the cell crate's build (see
    /// [`cache::clean_killed_build`]): in the machine's cache, or evcxr's own directory.
    pub(super) fn clean_killed_build(&mut self) {
        if !self.state.take_build_killed() {
            return;
        }
        let root = match &self.cache {
            Ok(Some(cache)) => cache.dir(),
            _ => match std::env::var_os("EVCXR_TMPDIR") {
                Some(dir) => std::path::PathBuf::from(dir),
                None => return,
            },
        };
        cache::clean_killed_build(&root, &self.cell_crate());
    }
}
