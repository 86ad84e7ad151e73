//! The debugger's side of the cells the kernel runs while it is attached: which cell a request
//! is (the file the panel names it by), where its lines went in evcxr's source as its library is
//! about to load (its breakpoints set there, with their conditions and log messages, and lifted
//! when it ends), and the cells whose bodies run elsewhere (a sandbox, a Slurm job).

use super::{body_of, lock, Debugger};
use serde_json::{json, Value};
use std::path::Path;

/// Where a cell's lines went: the source its library was built from (evcxr's `lib.rs`) and,
/// for each of its lines, the cell's line it holds (0: generated code).
pub(super) struct Loaded {
    pub(super) cell: String,
    pub(super) lib: String,
    lines: Vec<usize>,
}

impl Loaded {
    /// The source's first line that holds the cell's line `line`.
    fn lib_line(&self, line: u64) -> Option<usize> {
        self.lines.iter().position(|&l| l as u64 == line).map(|i| i + 1)
    }

    /// The cell's line a source line holds (generated code: the cell's line before it).
    pub(super) fn cell_line(&self, lib_line: u64) -> Option<usize> {
        let upto = (lib_line as usize).min(self.lines.len());
        self.lines[..upto].iter().rev().find(|&&l| l > 0).copied()
    }
}

impl Debugger {
    /// A cell's request begins (while attached): `source` names its file.
    pub fn cell_began(&mut self, source: &str) {
        self.current = Some(self.cell_path(source).to_string_lossy().into_owned());
    }

    /// The running cell's body runs where the debugger is not attached (`why`): its
    /// breakpoints are not set, and the panel and the user hear so when it has some.
    pub fn cell_elsewhere(&mut self, why: &str) -> Option<String> {
        let cell = self.current.take()?;
        let bps = self.breakpoints.get(&cell).and_then(Value::as_array).filter(|b| !b.is_empty())?;
        let message = format!("{why}, which the debugger is not attached to: its breakpoints are not set");
        if let Some(events) = lock(&self.shared.events).clone() {
            for b in bps {
                events(json!({"type": "event", "seq": 0, "event": "breakpoint", "body": {"reason": "changed", "breakpoint": {"verified": false, "line": b["line"], "source": {"path": cell}, "message": message}}}));
            }
        }
        Some(format!("dryml: the debugger does not stop in this cell: {message}.\n"))
    }

    /// User code of the running cell was built (while attached) and is about to load: its
    /// breakpoints are put where its lines went, to bind as it loads. A new process that runs
    /// cells (evcxr replaced the old one) gets a new lldb-dap first.
    pub fn cell_built(&mut self, lib: &Path, lines: &[usize]) {
        self.reap();
        if !self.started() {
            return;
        }
        let pid = self.state.child_pid();
        if pid != self.pid {
            if let Err(e) = self.reattach(pid) {
                self.lost(&format!("the debugger could not attach to evcxr's new process {pid}: {e}"));
                return;
            }
        }
        let Some(cell) = self.current.clone() else {
            self.loaded = None;
            return;
        };
        self.loaded = Some(Loaded { cell: cell.clone(), lib: lib.to_string_lossy().into_owned(), lines: lines.to_vec() });
        let bps = self.breakpoints.get(&cell).cloned().unwrap_or(json!([]));
        if let Err(e) = self.push_breakpoints(&bps) {
            tracing::warn!("the cell's breakpoints were not set: {e}");
        }
    }

    /// The cell's code has ended: its breakpoints are lifted from the source every cell is
    /// built from, so the hidden cells the kernel runs next (built from it too) cannot stop on
    /// them.
    pub fn cell_ended(&mut self) {
        self.reap();
        if let (true, Some(l)) = (self.started(), self.loaded.take()) {
            if let Err(e) = self.call("setBreakpoints", Some(&json!({"source": {"path": l.lib}, "breakpoints": []}))) {
                tracing::warn!("the cell's breakpoints were not lifted: {e}");
            }
        }
    }

    /// Sets `bps` (the panel's, on the loaded cell's lines, with their conditions and log
    /// messages) on the loaded cell's source; the panel's lines with what lldb-dap made of each.
    pub(super) fn push_breakpoints(&mut self, bps: &Value) -> Result<Value, String> {
        let Some(l) = self.loaded.as_ref().filter(|_| self.started()) else {
            return Err("not attached".into());
        };
        let (cell, lib) = (l.cell.clone(), l.lib.clone());
        let wanted: Vec<(Value, Option<usize>)> = bps.as_array().into_iter().flatten().filter(|b| b["line"].is_u64()).map(|b| (b.clone(), b["line"].as_u64().and_then(|line| l.lib_line(line)))).collect();
        let lib_bps: Vec<Value> = wanted
            .iter()
            .filter_map(|(b, at)| {
                let mut b = b.clone();
                b["line"] = json!((*at)?);
                Some(b)
            })
            .collect();
        let set = body_of(self.call("setBreakpoints", Some(&json!({"source": {"path": lib}, "breakpoints": lib_bps})))?)?;
        let mut answers = set["breakpoints"].as_array().cloned().unwrap_or_default().into_iter();
        let out: Vec<Value> = wanted
            .iter()
            .map(|(b, at)| match at {
                Some(_) => {
                    let mut answer = answers.next().unwrap_or(json!({"verified": false}));
                    answer["line"] = b["line"].clone();
                    answer["source"] = json!({"path": cell});
                    answer
                }
                None => json!({"verified": false, "line": b["line"], "source": {"path": cell}, "message": "no code on this line"}),
            })
            .collect();
        Ok(json!({"breakpoints": out}))
    }

}
