//! The debugger's side of the cells the kernel runs while it is attached: which cell a request
//! is (the file the panel names it by), where its lines went in evcxr's source as its library is
//! about to load (its breakpoints set there, with their conditions and log messages, and lifted
//! when it ends), and the cells whose bodies run elsewhere (a sandbox, a Slurm job).
//!
//! evcxr builds every cell with the items (functions, types) of the cells before it, copied as
//! written; it keeps no record of which cell each came from. A breakpoint in an earlier cell's
//! function, and a frame in one, are placed by the text: the line of evcxr's source outside the
//! running cell that holds the cell line's text and agrees best with its neighbours.

use super::{body_of, dap, Breakpoint, Debugger, Event, SourceBreakpoint};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// Neighbours on each side compared when a line's text is looked for.
const CONTEXT: usize = 3;

/// Where a cell's lines went: the source its library was built from (evcxr's `lib.rs`) and,
/// for each of its lines, the cell's line it holds (0: generated code, or an earlier cell's).
pub(super) struct Loaded {
    pub(super) cell: String,
    pub(super) lib: String,
    lines: Vec<usize>,
    /// The source's text, by line.
    text: Vec<String>,
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

    /// The source's line (from 1) that holds line `line` of an earlier cell whose text is
    /// `source`: outside the running cell, the same text, the neighbours agreeing best (one
    /// best, and at least one agreeing).
    fn earlier_lib_line(&self, source: &[&str], line: usize) -> Option<usize> {
        let at = line.checked_sub(1)?;
        best(
            (0..self.text.len()).filter(|&j| self.lines[j] == 0).map(|j| (j + 1, agreement(source, at, &self.text, j))),
        )
    }

    /// Which earlier cell (of `cells`: file and text, oldest first) and line a source line
    /// outside the running cell holds (lines count from 1). Between cells that agree as well
    /// (an edited cell's versions), the newest.
    pub(super) fn earlier_cell_line<'c>(
        &self,
        cells: &'c [(String, String)],
        lib_line: usize,
    ) -> Option<(&'c str, usize)> {
        let j = lib_line.checked_sub(1).filter(|&j| self.lines.get(j) == Some(&0))?;
        let mut top: Option<((&str, usize), usize)> = None;
        for (path, text) in cells.iter().rev().filter(|(path, _)| *path != self.cell) {
            let lines: Vec<&str> = text.lines().collect();
            let scored = (0..lines.len()).map(|i| (i, agreement(&lines, i, &self.text, j)));
            let Some(i) = best(scored.clone()) else { continue };
            let score = scored.filter(|(k, _)| *k == i).find_map(|(_, s)| s).unwrap_or(0);
            if top.is_none_or(|(_, s)| score > s) {
                top = Some(((path.as_str(), i + 1), score));
            }
        }
        top.map(|(at, _)| at)
    }
}

/// How well line `i` of `a` and line `j` of `b` agree: `None` when their texts differ (or are too
/// bare to tell, as a lone brace), else how many of their neighbours agree too.
fn agreement(a: &[&str], i: usize, b: &[String], j: usize) -> Option<usize> {
    let text = a.get(i)?.trim();
    if text.len() < 3 || text != b.get(j)?.trim() {
        return None;
    }
    let same = |x: Option<&&str>, y: Option<&String>| x.zip(y).is_some_and(|(x, y)| x.trim() == y.trim());
    Some(
        (1..=CONTEXT)
            .map(|d| {
                usize::from(same(a.get(i + d), b.get(j + d)))
                    + usize::from(same(
                        i.checked_sub(d).and_then(|k| a.get(k)),
                        j.checked_sub(d).and_then(|k| b.get(k)),
                    ))
            })
            .sum(),
    )
}

/// The one candidate that agrees best (with at least one neighbour); none on a tie.
fn best<T>(candidates: impl Iterator<Item = (T, Option<usize>)>) -> Option<T> {
    let mut top: Option<(T, usize)> = None;
    let mut tied = false;
    for (t, score) in candidates {
        let Some(score) = score.filter(|&s| s > 0) else { continue };
        match &top {
            Some((_, s)) if score < *s => {}
            Some((_, s)) if score == *s => tied = true,
            _ => {
                top = Some((t, score));
                tied = false;
            }
        }
    }
    top.filter(|_| !tied).map(|(t, _)| t)
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
        let bps = self.breakpoints.get(&cell).filter(|b| !b.is_empty())?;
        let message = format!("{why}, which the debugger is not attached to: its breakpoints are not set");
        for b in bps {
            let breakpoint = Breakpoint::unset(&cell, b.line, Some(&message));
            self.shared.tell(Event::Breakpoint { reason: "changed", breakpoint });
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
        let text = std::fs::read_to_string(lib).unwrap_or_default().lines().map(str::to_string).collect();
        self.loaded =
            Some(Loaded { cell: cell.clone(), lib: lib.to_string_lossy().into_owned(), lines: lines.to_vec(), text });
        if let Err(e) = self.push_breakpoints(&cell) {
            tracing::warn!("the cell's breakpoints were not set: {e}");
        }
    }

    /// The cell's code has ended: its breakpoints are lifted from the source every cell is
    /// built from, so the hidden cells the kernel runs next (built from it too) cannot stop on
    /// them.
    pub fn cell_ended(&mut self) {
        self.reap();
        if let (true, Some(l)) = (self.started(), self.loaded.take()) {
            let none = dap::value(&dap::SetBreakpoints { source: dap::Source::at(&l.lib), breakpoints: Vec::new() });
            if let Err(e) = self.call("setBreakpoints", Some(&none)) {
                tracing::warn!("the cell's breakpoints were not lifted: {e}");
            }
        }
    }

    /// Sets every cell's breakpoints (the panel's, with their conditions and log messages) on
    /// the loaded source: the running cell's where its lines went, earlier cells' where their
    /// items' text is; what lldb-dap made of cell `answer_for`'s, on its lines.
    pub(super) fn push_breakpoints(&mut self, answer_for: &str) -> Result<Value, String> {
        let Some(l) = self.loaded.as_ref().filter(|_| self.started()) else {
            return Err("not attached".into());
        };
        let lib = l.lib.clone();
        // (cell, its breakpoint, the source line it goes to)
        let mut wanted: Vec<(String, u64, Option<usize>)> = Vec::new();
        let mut lib_bps = Vec::new();
        for (path, bps) in &self.breakpoints {
            // An earlier cell's text, as the panel dumped it before setting its breakpoints.
            let text = self.dumped.iter().find(|(p, _)| p == path && *path != l.cell).map(|(_, t)| t.as_str());
            let lines: Vec<&str> = text.map(|t| t.lines().collect()).unwrap_or_default();
            for b in bps {
                let at = if *path == l.cell { l.lib_line(b.line) } else { l.earlier_lib_line(&lines, b.line as usize) };
                // Its condition and log message go with it, on the library's line.
                lib_bps.extend(at.map(|at| SourceBreakpoint { line: at as u64, ..b.clone() }));
                wanted.push((path.clone(), b.line, at));
            }
        }
        let set = dap::SetBreakpoints { source: dap::Source::at(&lib), breakpoints: lib_bps };
        let set = body_of(self.call("setBreakpoints", Some(&dap::value(&set)))?)?;
        let answers = dap::Breakpoints::deserialize(&set).map_err(|e| format!("lldb-dap's breakpoints: {e}"))?;
        let mut answers = answers.breakpoints.into_iter();
        let mut out = Vec::new();
        for (path, line, at) in wanted {
            let answer = match at {
                Some(_) => Breakpoint {
                    line: Some(line),
                    source: Some(dap::Source::at(&path)),
                    ..answers.next().unwrap_or_default()
                },
                None => Breakpoint::unset(&path, line, Some("no code on this line in the running cell's build")),
            };
            if path == answer_for {
                out.push(answer);
            }
        }
        Ok(dap::value(&dap::Breakpoints { breakpoints: out }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_cells_line_is_found_by_its_text_and_neighbours() {
        let cell_a = "fn step(x: f32) -> f32 {\n    let y = x * 2.0;\n    y + 1.0\n}";
        let lib = "use std::x;\nfn other() {\n    let y = x * 2.0;\n}\nfn step(x: f32) -> f32 {\n    let y = x * 2.0;\n    y + 1.0\n}\npub fn run_user_code_3() {\nlet z = step(1.0);\n}";
        let loaded = Loaded {
            cell: "b.rs".into(),
            lib: "lib.rs".into(),
            lines: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            text: lib.lines().map(str::to_string).collect(),
        };
        let a: Vec<&str> = cell_a.lines().collect();
        // `let y = x * 2.0;` is on lines 3 and 6: the one inside `step` agrees with its neighbours.
        assert_eq!(loaded.earlier_lib_line(&a, 2), Some(6));
        assert_eq!(loaded.earlier_lib_line(&a, 4), None, "a lone brace is too bare to place");
        let cells = [
            ("a.rs".to_string(), cell_a.to_string()),
            ("b.rs".to_string(), "let z = step(1.0);".to_string()),
            ("a-edited.rs".to_string(), format!("// v2\n{cell_a}")),
        ];
        assert_eq!(loaded.earlier_cell_line(&cells[..2], 6), Some(("a.rs", 2)));
        assert_eq!(
            loaded.earlier_cell_line(&cells, 6),
            Some(("a-edited.rs", 3)),
            "an edited cell's versions: the newest"
        );
        assert_eq!(loaded.earlier_cell_line(&cells, 10), None, "the running cell's own line");
    }
}
