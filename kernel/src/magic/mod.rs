//! The magic host: runs the calls that `dryml_magics` parsed, one module per family. The
//! registry (`magics/src/registry.rs`) holds each magic's grammar, help and parser; here each
//! typed call meets its code in one exhaustive `match` ([`run_line`] for line magics,
//! [`dispatch`]'s handler lookup for cell magics), so a new magic that is not handled does not
//! compile. [`dispatch::run`] runs a parsed cell; the engine calls the [`cell::CellObserver`]
//! around it.

pub mod cache;
pub mod cell;
pub mod codegen;
pub mod compute;
pub mod context;
pub mod dispatch;
pub mod env;
pub mod experiment;
pub mod habits;
pub mod mlflow;
pub mod parameters;
pub mod repo;
pub mod slurm;
pub mod time;

use crate::measure::meter::Meter;
use crate::protocol::published::{Bundle, StreamName};
use crate::protocol::{ErrorContent, Io};
use crate::session::state::CellState;
use crate::session::Session;
use dryml_magics::LineCall;
use serde_json::Value;
use std::path::Path;

/// The engine's services a magic may use while it runs.
pub struct Host<'a> {
    pub session: &'a mut Session,
    pub meter: &'a mut Meter,
    pub state: &'a CellState,
    pub io: &'a Io,
    pub execution_count: i64,
    /// The kernel's scratch directory: the pool's files and the last experiment's report.
    pub state_dir: &'a Path,
    /// The notebook's process holds a `%context`.
    pub has_context: bool,
}

impl Host<'_> {
    /// Publishes a display bundle, unless the request is silent.
    pub fn show(&self, data: impl Into<Value>) {
        if !self.state.quiet() {
            self.io.display(data.into());
        }
    }

    pub fn print(&self, text: &str) {
        self.state.stream(StreamName::Stdout, text);
    }

    pub fn warn(&self, text: &str) {
        self.state.stream(StreamName::Stderr, text);
    }

    pub fn child_pid(&self) -> u32 {
        self.state.child_pid()
    }

    /// How a result made now is made: the kernel's part, and git where the notebook's process
    /// works (its `%cd`).
    pub fn provenance(&self) -> dryml::objects::Provenance {
        let cwd = std::fs::read_link(format!("/proc/{}/cwd", self.session.child_pid())).unwrap_or_default();
        let kernel_part = self.state_dir.join(dryml::objects::provenance::KERNEL_FILE);
        dryml::objects::Provenance::at(Some(&kernel_part), &cwd)
    }

    /// The GPUs measured, numbered as the child's CUDA numbers them; with a context, the
    /// pool's GPUs (numbered as `%context` does), since sandboxes may hold GPUs the notebook's
    /// own process cannot see.
    pub fn visible_gpus(&mut self) -> Vec<crate::measure::gpu::Gpu> {
        let cvd = if self.has_context {
            std::env::var("CUDA_VISIBLE_DEVICES").ok()
        } else {
            self.session.child_env("CUDA_VISIBLE_DEVICES")
        };
        self.meter.visible_gpus(cvd.as_deref())
    }
}

/// The notebook-wide state of the magics that keep any.
#[derive(Default)]
pub struct Magics {
    pub experiments: experiment::Experiments,
    pub contexts: context::Contexts,
    pub repo: repo::RepoMagic,
    pub slurm: slurm::SlurmMagic,
    pub dirs: habits::Directories,
}

impl Magics {
    /// What watches every cell: the experiment and the cell logger, which share its samples.
    pub fn observer(&mut self) -> &mut dyn cell::CellObserver {
        &mut self.experiments
    }
}

/// Runs one line magic (`call` is None for `%name?`, whose help goes to the pager).
pub fn run_line(
    magics: &mut Magics,
    host: &mut Host<'_>,
    inv: &dryml_magics::Invocation,
    payload: &mut Vec<Value>,
) -> Result<(), ErrorContent> {
    let Some(call) = inv.line_call() else {
        payload.push(page(&inv.spec.help_text()));
        return Ok(());
    };
    match call {
        LineCall::Lsmagic => {
            host.show(Bundle::text(dryml_magics::lsmagic_text()));
            Ok(())
        }
        LineCall::Env(c) => env::run(host, c),
        LineCall::Experiment(c) => magics.experiments.run(host, c),
        LineCall::CellLogger(c) => {
            magics.experiments.run_logger(host, *c);
            Ok(())
        }
        LineCall::Context(c) => magics.contexts.run(host, inv, c),
        LineCall::Repo(c) => magics.repo.run(host, c),
        LineCall::Cache(c) => cache::run(host, *c),
        LineCall::Slurm(c) => magics.slurm.run(host, c),
        LineCall::Jobs(c) => magics.slurm.jobs(host, c),
        LineCall::Cd(dir) => magics.dirs.cd(host, dir.as_deref()),
        LineCall::Pwd => {
            habits::pwd(host);
            Ok(())
        }
        LineCall::Load(path) => habits::load(host, path, payload),
        // `parse_cell` leaves `%timeit` in the body, where it runs in order.
        LineCall::Timeit => Ok(()),
    }
}

/// A bad magic line, with the caret under its column.
pub fn error(e: &dryml_magics::MagicError) -> ErrorContent {
    ErrorContent {
        ename: crate::protocol::MAGIC_ERROR.into(),
        evalue: e.to_string(),
        traceback: vec![e.caret(), format!("{}: {e}", crate::protocol::MAGIC_ERROR)],
    }
}

/// A `page` payload, which frontends show in their pager.
pub fn page(text: &str) -> Value {
    crate::protocol::replies::Payload::Page { data: Bundle::text(text), start: 0 }.value()
}
