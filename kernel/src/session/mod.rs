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

use crate::child::FLUSHER_CELL;
use crate::protocol::published::StreamName;
use crate::protocol::{ErrorContent, Io};
use cache::{BuildCache, Claim};
use dryml_builds::DEBUG_CELLS_ENV;
use dryml_sys::protocol::{STATE_DIR_ENV, STREAM_ENV};
use evcxr::{CommandContext, Error as EvcxrError, EvalCallbacks};
use state::{CellState, Escalation, WarmUp};

use serde_json::{json, Value};
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
        let (eval_ctx, outputs) = evcxr::EvalContext::with_subprocess_command_configured(cmd, |ctx| {
            if let Some(dir) = &build_dir {
                // Cargo reads it from the environment evcxr gives each build.
                ctx.set_build_env("CARGO_BUILD_BUILD_DIR", &dir.display().to_string());
            }
            if let Err(e) = ctx.set_opt_level(&opt) {
                tracing::warn!("DRYML_OPT_LEVEL={opt:?} ignored: {e}");
            }
            filled = Some(hooks::fill(ctx, &crate_name, &shared)?);
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
    fn clean_killed_build(&mut self) {
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
        if let Err(e) = cache::clean_killed_build(&root, &self.cell_crate(), Duration::from_secs(30)) {
            tracing::warn!("after a killed build: {e:#}");
        }
    }

    /// True once after the child was replaced: what the old one held (a context) is gone.
    pub fn take_replaced(&mut self) -> bool {
        std::mem::take(&mut self.replaced)
    }

    /// The notebook's variables and their types.
    pub fn variables(&self) -> BTreeMap<String, String> {
        self.ctx.variables_and_types().map(|(n, t)| (n.to_string(), t.to_string())).collect()
    }

    /// Evaluates kernel-written code with its output suppressed.
    pub fn eval_hidden(&mut self, code: &str) -> Result<evcxr::EvalOutputs, ErrorContent> {
        let was_quiet = self.state.set_quiet(true);
        self.ends.drain();
        lockfile::seed_cell_crate(code);
        let mut r = self.ctx.execute(code);
        self.hooks.builds.settle();
        let end = r.as_mut().ok().and_then(ends::take_end);
        self.ends.settle(end, (r.is_ok() && runs_code(code)).then_some(Duration::from_millis(500)));
        self.state.set_quiet(was_quiet);
        // Variables that kernel-written code dropped (their types changed) are the user's to hear of.
        let dropped = self.hooks.origins.take_dropped();
        for (_, why) in dropped.iter().filter(|_| r.is_ok()) {
            self.state.stream(StreamName::Stderr, &format!("{why}\n"));
        }
        r.map_err(|e| errors::evcxr(errors::explained(e, &dropped), self.state.stderr_lines(), &[]))
    }

    /// Runs kernel-written code in the child and returns what it printed.
    pub fn capture_stdout(&mut self, code: &str) -> Result<String, ErrorContent> {
        self.state.start_capture();
        let r = self.eval_hidden(code);
        let text = self.state.take_capture();
        r.map(|_| text)
    }

    /// Evaluates one of a request's `user_expressions` to its mime bundle.
    pub fn eval_expression(&mut self, expr: &str) -> Result<Value, ErrorContent> {
        let outputs = self.eval_hidden(expr)?;
        Ok(output::mime_bundle(outputs).unwrap_or_else(|| json!({"text/plain": ""})))
    }

    /// Which lines of the next user code are its cell's (`None`: generated code, whose compile
    /// errors keep rustc's rendering).
    pub fn set_cell_lines(&mut self, lines: Option<errors::CellLines>) {
        self.cell_lines = lines;
    }

    /// Evaluates user code, its output going to `io`; returns the `execute_result` bundle.
    pub fn eval_user(&mut self, code: &str, io: &Io) -> Result<Option<Value>, ErrorContent> {
        self.ensure_child_setup();
        self.load_config();
        self.flusher_pending |= self.state.take_startup_failed();
        let vars_before: Vec<String> = self.variables().into_keys().collect();
        // The flusher and new dependencies are compiled with the user's cell rather than as cells
        // of their own, each of which would cost a whole extra build (and for `tch`, a load)
        // before the result. evcxr's `:` commands must start the cell, so a cell with its own
        // commands gets the flusher with the next one.
        let with_flusher = self.flusher_pending && !code.lines().any(|l| l.trim_start().starts_with(':'));
        let deps = self.deps_for(code);
        if deps.as_ref().map_or(self.frameworks.torch, |d| d.1.torch) {
            self.provenance.torch_in();
        }
        self.provenance.look_at_git(format!("/proc/{}/cwd", self.child_pid()).into());
        let notice = deps.as_ref().and_then(|(_, want)| self.rebuild_notice(*want));
        let (tables, tables_before) = self.tables_for(code, deps.is_some());
        let mut full = String::new();
        if let Some((lines, _)) = &deps {
            full.push_str(lines);
            full.push('\n');
        }
        if with_flusher {
            full.push_str(FLUSHER_CELL);
            full.push('\n');
        }
        let prefix_lines = full.matches('\n').count();
        full.push_str(code);
        let code = full;
        // While the debugger is attached, the cell crate is built with debug info (the rustc
        // wrapper's hook, the cell crate only), and the hook hears where the cell's lines went.
        self.user_opt |= code.lines().any(|l| l.trim_start().starts_with(":opt"));
        let debugging = self.state.debugging();
        let builds = builds::debug_builds(debugging, self.user_opt);
        if builds != self.debug_builds {
            self.ctx.eval_context_mut().set_build_env(DEBUG_CELLS_ENV, builds);
            self.debug_builds = builds;
        }
        let hook = if debugging { self.state.debug_hook() } else { None };
        let in_cell = self.cell_lines;
        let (cell_state, provenance) = (self.state.clone(), self.provenance.clone());
        let before_run = |lib: &std::path::Path, lines: &[usize]| {
            provenance.write(std::env::var_os("EVCXR_TMPDIR").as_deref().map(Path::new));
            // evcxr's user lines count the lines put in front; the cell's count its magics.
            let at = errors::Locations::new(lines, prefix_lines, in_cell);
            if let Some(hook) = hook {
                hook.built(lib, &at.cell_of);
            }
            cell_state.built_at(at);
        };
        self.ends.drain();
        if self.state.begin_cell() {
            self.state.end_cell();
            return Err(errors::interrupted(false, &[]));
        }
        if let Some(n) = &notice {
            self.state.stream(StreamName::Stderr, n);
        }
        self.took = None;
        let (input_io, state) = (io.clone(), self.state.clone());
        let mut callbacks = EvalCallbacks {
            input_reader: &move |req| -> String {
                state.awaiting_input(true);
                let line = input_io.input(&req.prompt, req.is_password).unwrap_or_default();
                state.awaiting_input(false);
                line
            },
            before_run: Some(&before_run),
        };
        lockfile::seed_cell_crate(&code);
        self.hooks.origins.set_cell(&code);
        let began = std::time::Instant::now();
        let mut result = self.ctx.execute_with_callbacks(&code, &mut callbacks);
        let spent = began.elapsed();
        let end = result.as_mut().ok().and_then(ends::take_end);
        // The cell's own code said why it dropped any variable, before its output; a failed
        // cell's errors say it.
        let dropped = self.hooks.origins.take_dropped();
        if let (true, Some(hook)) = (debugging, self.state.debug_hook()) {
            hook.ended();
        }
        let ended = self.state.end_cell();
        self.clean_killed_build();
        // Once the cell has ended: an interrupt's escalation waits for no build's bookkeeping.
        self.hooks.builds.settle();
        let ran = matches!(result, Ok(_) | Err(EvcxrError::TypeRedefinedVariablesLost(_)));
        if ran && with_flusher {
            self.flusher_pending = false;
        }
        if let (true, Some((_, frameworks))) = (ran, deps) {
            self.note_deps_added(frameworks, tables);
        } else if let (false, Some(before)) = (ran, tables_before) {
            // That cell did not build: its crates may not be there.
            self.set_tables(before);
        }
        self.ends.settle(end, (ran && runs_code(&code)).then_some(Duration::from_secs(2)));
        if ended >= Escalation::Interrupted {
            let killed = ended == Escalation::Killed;
            // Code that stopped on the interrupt may say what it did (a Slurm job cancelled).
            let said = self.state.take_raised().filter(|(ename, _)| ename == "KeyboardInterrupt");
            if let (false, Some((ename, evalue))) = (killed, said) {
                return Err(ErrorContent::new(&ename, evalue));
            }
            self.note_child_pid();
            return Err(errors::interrupted(killed, if killed { &vars_before } else { &[] }));
        }
        if let Some(backtrace) = self.state.take_panic() {
            return Err(errors::panic(self.state.stderr_lines(), backtrace));
        }
        if let Some((ename, evalue)) = self.state.take_raised() {
            return Err(ErrorContent::new(&ename, self.state.in_cell(&evalue)));
        }
        // The borrows it made are kept; those whose variables are gone go, saying so.
        let stored = self.variables();
        let names: Vec<&str> = stored.keys().map(String::as_str).collect();
        for gone in self.hooks.borrows.commit(result.is_ok().then_some(code.as_str()), &names) {
            self.state.stream(StreamName::Stderr, &format!("{gone}\n"));
        }
        match result {
            Ok(outputs) => {
                // evcxr's phases name where the types came from ("Types from rustc"), each try,
                // and whether cargo built the cell or rustc alone.
                let phases: Vec<_> = outputs.phases.iter().map(|p| (p.name.clone(), p.duration)).collect();
                tracing::debug!(?phases, "cell built and run");
                times::record(spent, &phases, self.hooks.builds.built_alone());
                self.took = outputs.timing;
                Ok(output::mime_bundle(outputs))
            }
            Err(e) => {
                let src = errors::Source { code: &code, added: prefix_lines, cell: self.cell_lines };
                let held = errors::moved_under_borrow(&e, src)
                    .and_then(|root| self.hooks.borrows.of_root(&root).map(|borrow| (root, borrow)));
                let mut err =
                    errors::evcxr_in(errors::explained(e, &dropped), self.state.stderr_lines(), &vars_before, src);
                if let Some((root, borrow)) = held {
                    err = errors::moved_while_borrowed(err, &root, borrow);
                }
                self.note_child_pid();
                Err(err)
            }
        }
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
