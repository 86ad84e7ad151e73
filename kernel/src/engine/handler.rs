//! The kernel as the protocol sees it: [`JupyterHandler`] implements `protocol::Handler`, handing
//! cells to the [`Engine`] (started on the worker thread, so sockets answer while evcxr
//! starts) and answering kernel_info, is_complete, history and interrupt on its own.

use super::is_complete::{is_complete, Completeness};
use super::{Engine, Shared};
use crate::history::History;
use crate::protocol::replies::{self, Completions, HelpLink, Inspection, IsComplete, KernelInfo, LanguageInfo, Reply};
use crate::protocol::{CommRequest, ErrorContent, ExecuteOutcome, ExecuteRequest, Handler, Io, PROTOCOL_VERSION};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a notebook stays quiet (no cell, no Tab) before the analyzer's memory goes back:
/// `DRYML_ANALYSIS_IDLE_S` seconds, 0 for never; ten minutes by default, a spell away from the
/// notebook. The next cell loads it again beside itself (its types then come from rustc).
fn analysis_idle() -> Option<Duration> {
    const DEFAULT: u64 = 600;
    let secs = match std::env::var("DRYML_ANALYSIS_IDLE_S") {
        Ok(v) => v.trim().parse::<u64>().unwrap_or_else(|_| {
            tracing::warn!("DRYML_ANALYSIS_IDLE_S={v:?} is not a number of seconds: {DEFAULT} s");
            DEFAULT
        }),
        Err(_) => DEFAULT,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

enum Slot {
    /// Not started yet: the scratch directory it will work in.
    Waiting(PathBuf),
    Ready(Box<Engine>),
    /// evcxr could not start: every request says why.
    Failed(String),
}

pub struct JupyterHandler {
    /// The cell's state, the comm manager (the frontend's comms are handled here, on the shell
    /// task, at once), the variables view and the analysis snapshot, shared with the engine.
    shared: Shared,
    history: Arc<Mutex<History>>,
    /// Locked by the worker thread only, so a running cell never blocks the other handlers.
    engine: Mutex<Slot>,
    /// The JupyterLab debugger's bridge, served on the control channel while cells run.
    debugger: Arc<Mutex<crate::debug::Debugger>>,
}

impl JupyterHandler {
    pub fn new(scratch: PathBuf) -> anyhow::Result<JupyterHandler> {
        let history_path = crate::history::default_path();
        let history = match History::open(&history_path) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("history kept in memory only: {e:#}");
                History::in_memory()?
            }
        };
        let shared = Shared::default();
        let debugger = crate::debug::Debugger::new(shared.state.clone(), shared.variables.clone());
        let debugger = Arc::new(Mutex::new(debugger));
        shared.state.set_debug_hook(Box::new(DebugHook(debugger.clone())));
        Ok(JupyterHandler {
            debugger,
            shared,
            history: Arc::new(Mutex::new(history)),
            engine: Mutex::new(Slot::Waiting(scratch)),
        })
    }

    /// Runs `f` on the engine, or answers with why there is none.
    fn with_engine<T>(&self, f: impl FnOnce(&mut Engine) -> T) -> Reply<T> {
        match &mut *self.engine.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Ready(engine) => Reply::Ok(f(engine)),
            Slot::Failed(why) => Reply::Error(ErrorContent::new("EngineError", why.clone())),
            Slot::Waiting(_) => unreachable!("the worker starts the engine before any request"),
        }
    }
}

impl Handler for JupyterHandler {
    fn start(&self) {
        // From here until the warm-up ends, an interrupt stops the start-up's optional work.
        self.shared.state.start_begins();
        let mut slot = self.engine.lock().unwrap_or_else(PoisonError::into_inner);
        if let Slot::Waiting(scratch) = &*slot {
            *slot = match Engine::start(self.shared.clone(), self.history.clone(), scratch.clone()) {
                Ok(e) => Slot::Ready(Box::new(e)),
                Err(e) => {
                    tracing::error!("the evcxr engine failed to start: {e:#}");
                    Slot::Failed(format!("{e:#}"))
                }
            };
        }
        self.shared.state.start_ends();
    }

    fn idle(&self) -> bool {
        match &mut *self.engine.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Ready(engine) => engine.warm_up_step(),
            _ => false,
        }
    }

    fn settled(&self) {
        let started = std::time::Instant::now();
        let (before, after) = crate::heap::hand_back();
        let size = dryml_sys::units::size;
        tracing::debug!(
            "heap: {} of {} handed back in {:.1?}",
            size(before.saturating_sub(after)),
            size(before),
            started.elapsed()
        );
    }

    fn dormant_after(&self) -> Option<Duration> {
        analysis_idle()
    }

    fn dormant(&self) {
        let released = match &mut *self.engine.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Ready(engine) => engine.release_analysis(),
            _ => false,
        };
        if released {
            let quiet = analysis_idle().unwrap_or_default();
            tracing::info!("quiet for {quiet:?}: the analyzer's process ended, its memory with it");
        }
    }

    fn work_arrived(&self) {
        crate::session::interrupt::give_way(&self.shared.state);
    }

    fn kernel_info(&self) -> Reply<KernelInfo> {
        static DEBUGGER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let debugger = *DEBUGGER.get_or_init(|| crate::debug::adapter::find().is_some());
        let link = |text, url| HelpLink { text, url };
        Reply::Ok(KernelInfo {
            protocol_version: PROTOCOL_VERSION,
            implementation: "dryml-rust",
            implementation_version: env!("CARGO_PKG_VERSION"),
            language_info: LanguageInfo {
                name: "rust",
                version: rustc_version(),
                mimetype: "text/rust",
                file_extension: ".rs",
                pygments_lexer: "rust",
                codemirror_mode: "rust",
            },
            banner: format!("DRYML Rust {} — Rust notebooks on evcxr", env!("CARGO_PKG_VERSION")),
            help_links: vec![
                link("The Rust Book", "https://doc.rust-lang.org/book/"),
                link("Rust standard library", "https://doc.rust-lang.org/std/"),
                link("evcxr commands", "https://github.com/evcxr/evcxr/blob/main/COMMON.md"),
            ],
            debugger,
            supported_features: if debugger { vec!["debugger"] } else { Vec::new() },
        })
    }

    fn execute(&self, req: &ExecuteRequest, io: &Io) -> ExecuteOutcome {
        match &mut *self.engine.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Ready(engine) => engine.execute(req, io),
            Slot::Failed(why) => ExecuteOutcome {
                payload: Vec::new(),
                user_expressions: Map::new(),
                error: Some(ErrorContent::new("EngineError", why.clone())),
            },
            Slot::Waiting(_) => unreachable!("the worker starts the engine before any request"),
        }
    }

    fn complete(&self, code: &str, cursor_pos: usize) -> Reply<Completions> {
        self.with_engine(|e| e.complete(code, cursor_pos))
    }

    fn inspect(&self, code: &str, cursor_pos: usize, detail_level: u64) -> Reply<Inspection> {
        self.with_engine(|e| e.inspect(code, cursor_pos, detail_level))
    }

    fn beside(&self) -> Option<Box<dyn crate::protocol::Beside>> {
        let snapshot = self.shared.analysis.get()?;
        self.shared.state.request_under_way().then(|| Box::new(super::complete::Snapshot(snapshot)) as _)
    }

    fn is_complete(&self, code: &str) -> IsComplete {
        match is_complete(code) {
            Completeness::Complete => IsComplete::Complete,
            Completeness::Incomplete { indent } => IsComplete::Incomplete { indent },
            Completeness::Invalid => IsComplete::Invalid,
        }
    }

    fn history(&self, request: &crate::protocol::HistoryRequest) -> Reply<replies::History> {
        match self.history.lock().unwrap_or_else(PoisonError::into_inner).query(request) {
            Ok(history) => Reply::Ok(replies::History { history: Value::Array(history) }),
            Err(e) => Reply::Error(ErrorContent {
                ename: "HistoryError".into(),
                evalue: format!("{e:#}"),
                traceback: Vec::new(),
            }),
        }
    }

    fn debug(&self, request: &Value, events: crate::protocol::DebugEvents) -> Value {
        // The Variables panel's values are read while no cell runs (the engine is free); while
        // one does, the panel gets what the last reading found.
        if request["command"] == "inspectVariables" {
            if let Ok(mut slot) = self.engine.try_lock() {
                if let Slot::Ready(engine) = &mut *slot {
                    engine.read_variable_values();
                }
            }
        }
        self.debugger.lock().unwrap_or_else(PoisonError::into_inner).handle(request, events)
    }

    fn comm(&self, request: CommRequest, io: &Io) {
        self.shared.comms.from_frontend(request, io);
    }

    fn comm_info(&self, target_name: Option<&str>) -> Value {
        self.shared.comms.info(target_name)
    }

    fn interrupt(&self) {
        self.debugger.lock().unwrap_or_else(PoisonError::into_inner).interrupted();
        crate::session::interrupt::interrupt(&self.shared.state);
    }

    fn shutdown(&self, _restart: bool) {
        let pid = self.shared.state.child_pid();
        if pid > 0 {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// The debugger, as the session's cells reach it.
struct DebugHook(Arc<Mutex<crate::debug::Debugger>>);

impl crate::session::state::CellDebugHook for DebugHook {
    fn began(&self, source: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).cell_began(source);
    }
    fn elsewhere(&self, why: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).cell_elsewhere(why)
    }
    fn built(&self, lib: &std::path::Path, lines: &[usize]) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).cell_built(lib, lines);
    }
    fn ended(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).cell_ended();
    }
}

fn rustc_version() -> String {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION
        .get_or_init(|| {
            std::process::Command::new("rustc")
                .arg("--version")
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.split_whitespace().nth(1).map(str::to_string))
                .unwrap_or_else(|| "unknown".into())
        })
        .clone()
}
