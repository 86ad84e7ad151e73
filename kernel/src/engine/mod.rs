//! The engine runs cells and nothing else: parse the cell's magics, run them, evaluate the
//! body through the evcxr session, and say how the cell ended. It owns the session, the meter
//! and the magics' state, and lives on the protocol's worker thread; [`handler::JupyterHandler`] is
//! its face to the protocol. User code only ever runs in evcxr's child, never in the kernel.

pub mod complete;
pub mod handler;
pub mod is_complete;

use crate::history::History;
use crate::magic::cell::Cell;
use crate::magic::{self, Host, Magics};
use crate::measure::meter::Meter;
use crate::protocol::replies;
use crate::protocol::replies::{Completions, Inspection};
use crate::protocol::{ErrorContent, ExecuteOutcome, ExecuteRequest, Io};
use crate::session::comms::Comms;
use crate::session::state::{CellState, VariablesView};
use crate::session::Session;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What the worker's engine shares with the protocol's other tasks, each an owner of its own.
#[derive(Clone, Default)]
pub struct Shared {
    pub state: Arc<CellState>,
    pub comms: Arc<Comms>,
    pub variables: Arc<VariablesView>,
    pub analysis: Arc<complete::Latest>,
}

pub struct Engine {
    session: Session,
    state: Arc<CellState>,
    variables: Arc<VariablesView>,
    analysis: Arc<complete::Latest>,
    history: Arc<Mutex<History>>,
    meter: Meter,
    magics: Magics,
    /// The kernel's scratch directory (pool files, the last experiment's report).
    state_dir: PathBuf,
}

/// What one cell produced besides its output.
struct CellRun {
    payload: Vec<Value>,
    error: Option<ErrorContent>,
    result_text: Option<String>,
}

impl Engine {
    /// Starts the evcxr session (and so the child; nothing is built yet) and writes the pool's
    /// machine record. It runs on the protocol's worker before any request.
    pub fn start(shared: Shared, history: Arc<Mutex<History>>, state_dir: PathBuf) -> anyhow::Result<Engine> {
        let Shared { state, comms, variables, analysis } = shared;
        let session = Session::start(state.clone(), comms, &state_dir.join("stream.sock"), &state_dir)?;
        let (meter, magics) = (Meter::default(), Magics::default());
        let mut engine = Engine { session, state, variables, analysis, history, meter, magics, state_dir };
        engine.magics.contexts.write_machine(&mut engine.meter, &engine.state_dir, engine.session.provenance());
        Ok(engine)
    }

    /// One step of the warm-up, run while no request waits (a request that arrives stops it);
    /// returns whether more remains.
    pub fn warm_up_step(&mut self) -> bool {
        std::env::var_os("DRYML_NO_WARM_UP").is_none() && self.session.warm_up_step()
    }

    /// Gives back the analyzer's memory until the next cell loads it again (the notebook was
    /// left alone); false while it loads.
    pub fn release_analysis(&mut self) -> bool {
        self.session.release_analysis()
    }

    /// Runs one execute request; its output has gone to `io` by the time this returns.
    pub fn execute(&mut self, req: &ExecuteRequest, io: &Io) -> ExecuteOutcome {
        // A test hook: the tests prove that a bug of ours (a panic here) costs one error reply,
        // not the kernel. Set only by them.
        if std::env::var_os("DRYML_TEST_PANIC_ON").is_some_and(|c| c == req.code.as_str()) {
            panic!("DRYML_TEST_PANIC_ON matched the cell");
        }
        self.state.set_io(io.clone());
        self.session.comms().cell_began();
        // Completion and inspection are answered beside this request from the notebook as it
        // finds it (a clone of evcxr's state: 0.2 ms with 300 variables and 100 functions).
        let taken = std::time::Instant::now();
        let snapshot = self.session.beside().map(std::sync::Arc::new);
        tracing::debug!("analysis snapshot taken in {:?}", taken.elapsed());
        self.analysis.set(snapshot);
        let state = self.state.clone();
        let _request = state.request_begins(req.silent);
        let count = req.execution_count;
        if req.store_history {
            if let Err(e) = self.history.lock().unwrap().store(count, &req.code) {
                tracing::warn!("history not saved: {e:#}");
            }
        }
        if self.state.debugging() {
            if let Some(hook) = self.state.debug_hook() {
                hook.began(&req.code);
            }
        }
        self.session.provenance().cell(&req.code);
        let run = self.run_cell(&req.code, io, count);
        // Names and types only (microseconds); values are read when the panel asks.
        self.variables.set_types(self.session.variables());
        let mut user_expressions = Map::new();
        if run.error.is_none() {
            if let (true, Some(text)) = (req.store_history, &run.result_text) {
                let _ = self.history.lock().unwrap().store_output(count, text);
            }
            for (name, expr) in &req.user_expressions {
                let value = match self.session.eval_expression(expr.as_str().unwrap_or("")) {
                    Ok(data) => replies::Reply::Ok(replies::Shown { data, metadata: Value::Object(Map::new()) }),
                    Err(e) => replies::Reply::Error(e),
                };
                user_expressions.insert(name.clone(), serde_json::to_value(value).expect("a value serialises"));
            }
        }
        ExecuteOutcome { payload: run.payload, user_expressions, error: run.error }
    }

    fn host<'a>(&'a mut self, io: &'a Io, count: i64) -> (&'a mut Magics, Host<'a>) {
        let has_context = self.magics.contexts.is_set();
        let host = Host {
            session: &mut self.session,
            meter: &mut self.meter,
            state: &self.state,
            io,
            execution_count: count,
            state_dir: &self.state_dir,
            has_context,
        };
        (&mut self.magics, host)
    }

    /// A cell: parsed, shown to the observer, run (line magics, then the cell magic's handler
    /// around the body), its value published, shown to the observer again.
    fn run_cell(&mut self, code: &str, io: &Io, count: i64) -> CellRun {
        let parsed = match dryml_magics::parse_cell(code) {
            Ok(p) => p,
            Err(e) => return CellRun { payload: Vec::new(), error: Some(magic::error(&e)), result_text: None },
        };
        let cell = Cell::new(&parsed);
        let (magics, mut host) = self.host(io, count);
        // A new child (after a crash or restart) first gets the notebook's context back.
        host.session.ensure_child_setup();
        if host.session.take_replaced() {
            magics.contexts.reclaim(&mut host);
        }
        magics.observer().before(&mut host);
        let mut outcome = magic::dispatch::run(magics, &mut host, &cell);
        host.session.note_cwd();
        // After `%%time`'s report (its handler's), as in IPython.
        let mut result_text = None;
        if let Some(data) = outcome.result.take() {
            result_text = data["text/plain"].as_str().map(str::to_string);
            io.execute_result(data);
        }
        // `:timing` on: below the value, as evcxr_jupyter shows it.
        if let Some(took) = host.session.take_took() {
            io.display(crate::session::output::took(took));
        }
        magics.observer().after(&mut host, &outcome);
        CellRun { payload: outcome.payload, error: outcome.error, result_text }
    }

    /// Reads the variables' short values for the debugger's Variables panel with a hidden cell
    /// (see [`crate::debug::values`]), unless they are as of the last cell already.
    pub fn read_variable_values(&mut self) {
        let seq = self.state.cells_begun();
        if self.variables.get().values_of == Some(seq) {
            return;
        }
        let types = self.session.variables();
        let values = if types.is_empty() {
            Default::default()
        } else {
            let code = crate::debug::values::code(&types);
            match self.session.capture_stdout(&code) {
                Ok(out) => crate::debug::values::parse(&out),
                Err(e) => {
                    tracing::warn!("the variables' values were not read: {}", e.evalue);
                    Default::default()
                }
            }
        };
        self.variables.set(crate::session::state::Variables { types, values, values_of: Some(seq) });
    }

    /// Completion, with the session's rust-analyzer.
    pub fn complete(&mut self, code: &str, cursor: usize) -> Completions {
        complete::complete(&mut self.session, code, cursor)
    }

    pub fn inspect(&mut self, code: &str, cursor: usize, detail_level: u64) -> Inspection {
        complete::inspect(&mut self.session, code, cursor, detail_level)
    }
}
