//! The evcxr session: starts evcxr's child, sets each new child up (the stdout flusher, `%env`
//! settings), adds the `dryml` and `tch` dependencies a cell needs ([`deps`]), and evaluates
//! code, the user's or the kernel's own (hidden, or with its stdout captured). Its submodules
//! hold the running cell's state, the child's output listener, interrupts, error reports and
//! the build cache; the engine and the magics both use the session, and it uses neither.

mod aside;
pub mod beside;
mod borrows;
mod builds;
pub mod cache;
pub mod comms;
mod config;
pub mod deps;
pub mod display;
mod ends;
pub mod env;
pub mod errors;
mod eval;
mod hooks;
pub mod interrupt;
mod loads;
mod lockfile;
pub mod named;
pub mod output;
pub mod provenance;
mod source;
pub mod startup;
pub mod state;
mod times;
mod warm;

use crate::protocol::published::StreamName;
use cache::{BuildCache, Claim};
use dryml_sys::protocol::{STATE_DIR_ENV, STREAM_ENV};
use evcxr::CommandContext;
use state::CellState;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// rustc's optimisation level for cells (`:opt` changes it per notebook). See README for the
/// latency/speed trade-off behind the choice.
pub const DEFAULT_OPT_LEVEL: &str = "1";

pub struct Session {
    ctx: CommandContext,
    /// Which lines of the next user code are its cell's (see [`errors::Source`]).
    cell_lines: Option<errors::CellLines>,
    state: Arc<CellState>,
    /// The syncs that say a cell end's stdout and stderr are published.
    ends: ends::Ends,
    /// The child that was last set up.
    setup_pid: u32,
    /// A child replaced since the last [`Session::take_replaced`] (after a crash or restart).
    replaced: bool,
    /// The child has no stdout flusher yet; it rides along with the next user cell.
    flusher_pending: bool,
    /// What evcxr's `EVCXR_DEBUG_CELLS` build env is: cells are built for the debugger.
    debug_builds: &'static str,
    /// The user chose the optimisation level (`:opt`, `DRYML_OPT_LEVEL`): the debugger keeps it.
    user_opt: bool,
    /// The start-up library every child loads (the flusher), if there is one.
    startup_lib: Option<std::path::PathBuf>,
    dryml_added: bool,
    /// Whether cells' values are asked for a table (`deps::Session::show_tables`).
    tables: display::Tables,
    /// The copy of the runtime's sources that `dryml` is built from, held while in use.
    sources: Option<source::Copy>,
    /// The frameworks added with `dryml`'s features for them.
    frameworks: deps::Frameworks,
    /// `%env` settings and the working directory, re-applied to every new child.
    child_env: env::ChildEnv,
    /// The machine's build cache, or why this kernel builds without it.
    cache: Result<Option<BuildCache>, String>,
    /// This kernel's crate names in the cache, held while it runs.
    claim: Option<Claim>,
    /// Completion and hover beside a running cell, from the analysis evcxr asks, and the
    /// kernel's hold on that analysis between cells.
    beside: Option<dryml_analysis::Beside>,
    standby: Option<Box<dyn dryml_analysis::Standby>>,
    /// The notebook's borrows of its variables (made again in each cell that names them), what
    /// its types were built from, how the last cell was built.
    hooks: hooks::Shared,
    /// The comm manager, which the output listener and the shell task share.
    comms: Arc<comms::Comms>,
    /// How long the last user code took to build and run, while `:timing` is on.
    took: Option<Duration>,
    /// evcxr's start-up files, not loaded yet (see [`config`]).
    config: Option<std::path::PathBuf>,
    /// The kernel's part of how results are made, written before each cell runs.
    provenance: Arc<provenance::Recorder>,
}

impl Session {
    /// Starts evcxr (and so its child, our own binary re-executed) with the child's output
    /// going to `stream_socket` and its state directory at `state_dir`.
    pub fn start(
        state: Arc<CellState>,
        comms: Arc<comms::Comms>,
        stream_socket: &Path,
        state_dir: &Path,
    ) -> anyhow::Result<Session> {
        let (sync_tx, sync_rx) = crossbeam_channel::unbounded();
        output::listen(stream_socket, state.clone(), comms.clone(), sync_tx)?;
        let mut cmd = std::process::Command::new(std::env::current_exe()?);
        cmd.env(STREAM_ENV, stream_socket);
        cmd.env(STATE_DIR_ENV, state_dir);
        if let Some(v) = std::env::var_os("RUST_BACKTRACE") {
            cmd.env(crate::child::USER_BACKTRACE_ENV, v);
        }
        // Cells link std dynamically (evcxr's -Cprefer-dynamic) and find it through an rpath
        // relative to where rustc wrote them; in the shared build cache that is not where the
        // child loads them from, so the child is told where std is.
        if let Some(dir) = cache::std_lib_dir() {
            let mut paths = vec![dir];
            paths.extend(std::env::var_os("LD_LIBRARY_PATH").iter().flat_map(std::env::split_paths));
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("LD_LIBRARY_PATH", joined);
            }
        }
        // CUDA then numbers GPUs as NVML and the reports do (IPyExperiments issue #2).
        if std::env::var_os("CUDA_DEVICE_ORDER").is_none() {
            cmd.env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        }
        // The crate's name, the cache and the optimisation level are evcxr's before its first
        // build or analysis (each change after it made cargo and the analyzer start over).
        let (cache, claim) = use_build_cache();
        let crate_name = claim.as_ref().map_or_else(|| "ctx".to_string(), Claim::cell_crate);
        let build_dir = match &cache {
            Ok(Some(cache)) => Some(cache.dir()),
            _ => None,
        };
        // The child's start-up code, built once per machine; without the cache (or when it
        // cannot be built) the first cell of each child carries it.
        let startup_lib = build_dir.as_deref().and_then(|dir| {
            startup::library(dir).map_err(|e| tracing::warn!("the first cell builds the start-up code: {e:#}")).ok()
        });
        if let Some(lib) = &startup_lib {
            cmd.env(crate::child::STARTUP_LIB_ENV, lib);
        }
        let opt = std::env::var("DRYML_OPT_LEVEL").unwrap_or_else(|_| DEFAULT_OPT_LEVEL.to_string());
        let mut filled = None;
        let shared = hooks::Shared::default();
        let stopping = state.clone();
        let (eval_ctx, outputs) = evcxr::EvalContext::with_subprocess_command_configured(cmd, |ctx| {
            if let Some(dir) = &build_dir {
                // Cargo reads it from the environment evcxr gives each build.
                ctx.set_build_env("CARGO_BUILD_BUILD_DIR", &dir.display().to_string());
            }
            if let Err(e) = ctx.set_opt_level(&opt) {
                tracing::warn!("DRYML_OPT_LEVEL={opt:?} ignored: {e}");
            }
            filled = Some(hooks::fill(ctx, &crate_name, &shared, Arc::new(move || stopping.builds_stopping()))?);
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("starting evcxr: {e}"))?;
        let ctx = CommandContext::with_eval_context(eval_ctx);
        let (beside, standby) = filled.unzip();
        let ends = ends::forward_stderr(state.clone(), outputs.stderr, sync_rx)?;
        // evcxr sends stdout here only when the pump could not reach the kernel's socket.
        let (st, stdout) = (state.clone(), outputs.stdout);
        std::thread::Builder::new().name("dryml-stdout".into()).spawn(move || {
            while let Ok(line) = stdout.recv() {
                st.stream(StreamName::Stdout, &format!("{line}\n"));
            }
        })?;
        let mut session = Session {
            ctx,
            state,
            ends,
            setup_pid: 0,
            replaced: false,
            flusher_pending: startup_lib.is_none(),
            debug_builds: "0",
            user_opt: std::env::var_os("DRYML_OPT_LEVEL").is_some(),
            startup_lib,
            dryml_added: false,
            tables: display::Tables::default(),
            sources: None,
            frameworks: deps::Frameworks::default(),
            cell_lines: None,
            child_env: env::ChildEnv::default(),
            cache,
            claim,
            beside,
            standby,
            hooks: shared,
            comms,
            took: None,
            config: config::found(),
            provenance: Arc::new(provenance::Recorder::new(state_dir)),
        };
        session.ensure_child_setup();
        Ok(session)
    }

    /// Gives back the analysis's memory until the next cell loads it again (the notebook was
    /// left alone); false while it loads, or where it could not start again empty.
    pub fn release_analysis(&mut self) -> bool {
        self.standby.as_mut().is_some_and(|analysis| {
            analysis.release().unwrap_or_else(|e| {
                tracing::warn!("the analyzer was kept: {e:#}");
                false
            })
        })
    }

    /// Whether completion and hover would be answered now, without a wait for the analysis's
    /// load; where not, it is wanted and its load begins.
    pub fn analysis_ready(&mut self) -> bool {
        self.standby.as_mut().is_none_or(|analysis| analysis.ready())
    }

    /// Whether the analysis's load is under way.
    pub fn analysis_loading(&self) -> bool {
        self.standby.as_ref().is_some_and(|analysis| analysis.busy())
    }

    /// The name evcxr builds this kernel's cells under.
    fn cell_crate(&self) -> String {
        self.claim.as_ref().map_or_else(|| "ctx".to_string(), Claim::cell_crate)
    }

    /// The machine's build cache, for `%cache`.
    pub fn build_cache(&self) -> Result<Option<&BuildCache>, &str> {
        self.cache.as_ref().map(Option::as_ref).map_err(String::as_str)
    }

    /// evcxr itself, for completion and inspection.
    pub fn evcxr(&mut self) -> &mut CommandContext {
        &mut self.ctx
    }

    /// What answers completion and inspection while the next cell runs.
    pub fn beside(&self) -> Option<beside::Beside> {
        Some(beside::Beside::new(self.beside.clone()?, &self.ctx))
    }

    pub fn child_pid(&self) -> u32 {
        self.state.child_pid()
    }

    /// Publishes the child's pid (evcxr replaces the child after a crash or kill) for the
    /// interrupter and the meter.
    pub fn note_child_pid(&self) -> u32 {
        let pid = self.ctx.process_handle().lock().unwrap().id();
        self.state.set_child_pid(pid);
        pid
    }

    /// Sets up a new child (first start or after a crash): its flusher is pending and the
    /// `%env` settings are re-applied.
    pub fn ensure_child_setup(&mut self) {
        let pid = self.note_child_pid();
        if pid == self.setup_pid {
            return;
        }
        self.replaced |= self.setup_pid != 0;
        self.setup_pid = pid;
        self.flusher_pending = self.startup_lib.is_none();
        self.reapply_env();
    }

    /// True once after the child was replaced: what the old one held (a context) is gone.
    pub fn take_replaced(&mut self) -> bool {
        std::mem::take(&mut self.replaced)
    }

    /// The notebook's variables and their types.
    pub fn variables(&self) -> BTreeMap<String, String> {
        self.ctx.variables_and_types().map(|(n, t)| (n.to_string(), t.to_string())).collect()
    }

    /// The comm manager: the frontend's comms with the notebook's process.
    pub fn comms(&self) -> &comms::Comms {
        &self.comms
    }

    /// The kernel's part of how results are made (`provenance`).
    pub fn provenance(&self) -> &provenance::Recorder {
        &self.provenance
    }

    /// The time `:timing` shows for the last user code, once.
    pub fn take_took(&mut self) -> Option<Duration> {
        self.took.take()
    }
}

/// The machine's build cache and this kernel's claim on crate names in it, unless the cache is
/// off or unusable (then the kernel builds in its own directory, as evcxr does, and `%cache`
/// says why).
fn use_build_cache() -> (Result<Option<BuildCache>, String>, Option<Claim>) {
    let cache = match BuildCache::from_env() {
        Ok(Some(cache)) => cache,
        Ok(None) => return (Ok(None), None),
        Err(e) => {
            tracing::warn!("build cache not used: {e:#}");
            return (Err(format!("{e:#}")), None);
        }
    };
    match cache.touch().and_then(|()| cache.claim()) {
        Ok(claim) => (Ok(Some(cache)), Some(claim)),
        Err(e) => {
            tracing::warn!("build cache {} not used: {e:#}", cache.dir().display());
            (Err(format!("{e:#}")), None)
        }
    }
}

/// Code that makes evcxr forget the variables `names`: `drop` frees a moved value at once, and
/// the `String` re-binding makes every name a moved value when evcxr stores variables after the
/// cell, so it forgets even `Copy` ones. No line starts with `:`, which evcxr reads as a command.
pub fn forget_code(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("std::mem::drop({n}); let {n} = std::string::String::new(); std::mem::drop({n});\n"))
        .collect()
}

/// False when a cell holds only evcxr `:` commands, which run nothing in the child (so no
/// end-of-cell sync will come).
fn runs_code(code: &str) -> bool {
    code.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with(':') && !l.starts_with("//"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_only_cells() {
        assert!(!runs_code(":vars"));
        assert!(!runs_code(":dep x = \"1\"\n\n// note\n:opt 1"));
        assert!(runs_code(":dep x = \"1\"\nlet y = 2;"));
    }
}
