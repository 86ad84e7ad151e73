//! Experiments as data: IPyExperiments' bookkeeping and reports, fed with the meter's samples
//! by the `%experiment` magics (`super`). An [`Experiment`] keeps the variables it found at its
//! start, the names it saw re-bound, and the highest marks seen, and turns them into a
//! [`Report`]. The cell logger is [`super::logger`]'s.

use crate::measure::gpu::Gpu;
use crate::measure::meter::Sample;
use dryml::experiment::{DeviceFigures, Report};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Unreclaimed memory above this is called a potential leak. Every compiled cell keeps its
/// library mapped (about 0.1 to 1 MiB each), so a few MiB are expected over a long experiment.
pub const LEAK_THRESHOLD: u64 = 32 << 20;

pub(super) const MIB: f64 = (1u64 << 20) as f64;

/// An open experiment.
pub struct Experiment {
    pub name: String,
    started: Instant,
    start: Sample,
    gpus: Vec<Gpu>,
    /// Variable names and types when it started.
    vars_at_start: BTreeMap<String, String>,
    keep: BTreeSet<String>,
    /// Pre-existing names re-bound by a top-level `let` or assignment during the experiment.
    rebound: BTreeSet<String>,
    /// Highest CPU high-water mark and per-process GPU usage seen.
    peak_cpu: u64,
    peak_gpu: Vec<u64>,
    /// Cells run since the start.
    cells: usize,
}

/// What the finish will do to the notebook's variables.
pub struct Cleanup {
    pub delete: Vec<String>,
    pub reassigned: Vec<String>,
    pub kept: Vec<String>,
    /// Names asked to be kept that the notebook does not hold (a typo, often).
    pub unknown_keep: Vec<String>,
}

impl Experiment {
    pub fn start(
        name: String,
        start: Sample,
        gpus: Vec<Gpu>,
        vars: BTreeMap<String, String>,
        keep: impl IntoIterator<Item = String>,
    ) -> Experiment {
        Experiment {
            name,
            started: Instant::now(),
            peak_cpu: start.cpu.rss,
            peak_gpu: start.gpus.iter().map(|g| g.used_by_us).collect(),
            start,
            gpus,
            vars_at_start: vars,
            keep: keep.into_iter().collect(),
            rebound: BTreeSet::new(),
            cells: 0,
        }
    }

    pub fn cells(&self) -> usize {
        self.cells
    }

    /// Starts the figures over from `s` (after a preload, before the first cell).
    pub fn rebase(&mut self, s: Sample) {
        self.peak_cpu = s.cpu.rss;
        self.peak_gpu = s.gpus.iter().map(|g| g.used_by_us).collect();
        self.start = s;
    }

    pub fn keep(&mut self, names: &[String]) {
        self.keep.extend(names.iter().cloned());
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    pub fn pids(&self) -> &[u32] {
        &self.start.pids
    }

    /// Folds in a sample taken while the experiment was open.
    pub fn observe(&mut self, s: &Sample) {
        self.peak_cpu = self.peak_cpu.max(s.cpu.hwm).max(s.cpu.rss);
        self.observe_gpu_peaks(&s.gpus.iter().map(|g| g.used_by_us).collect::<Vec<_>>());
    }

    /// Folds in per-GPU peaks seen by a watch while a cell ran.
    pub fn observe_gpu_peaks(&mut self, peaks: &[u64]) {
        crate::measure::meter::fold_max(&mut self.peak_gpu, peaks.iter().copied());
    }

    /// Notes the pre-existing names a cell of the experiment re-binds.
    pub fn note_cell(&mut self, body: &str) -> Result<(), crate::syntax::TooDeep> {
        self.cells += 1;
        for name in rebound_names(body)? {
            if self.vars_at_start.contains_key(&name) {
                self.rebound.insert(name);
            }
        }
        Ok(())
    }

    /// Plans the clean-up against the variables the notebook holds now. A pre-existing variable
    /// whose type changed was re-bound too, even where the syntax did not show it.
    pub fn cleanup(&self, vars_now: &BTreeMap<String, String>) -> Cleanup {
        let mut c = Cleanup {
            delete: vec![],
            reassigned: vec![],
            kept: vec![],
            unknown_keep: self.keep.iter().filter(|k| !vars_now.contains_key(*k)).cloned().collect(),
        };
        for (name, ty) in vars_now {
            let before = self.vars_at_start.get(name);
            let new = before.is_none();
            let rebound = !new && (self.rebound.contains(name) || before != Some(ty));
            if !new && !rebound {
                continue;
            }
            if self.keep.contains(name) {
                c.kept.push(name.clone());
            } else if new {
                c.delete.push(name.clone());
            } else {
                c.reassigned.push(name.clone());
            }
        }
        c
    }

    /// Figures so far (`%experiment data`): consumed and peaked, nothing reclaimed yet.
    pub fn so_far(&self, now: &Sample) -> Report {
        let none = Cleanup { delete: vec![], reassigned: vec![], kept: vec![], unknown_keep: vec![] };
        self.report(now, now, none, vec![], vec![])
    }

    /// The finish report from the samples before and after the clean-up.
    pub fn report(
        &self,
        before: &Sample,
        after: &Sample,
        cleanup: Cleanup,
        failed: Vec<String>,
        mut notes: Vec<String>,
    ) -> Report {
        let start = &self.start;
        if !cleanup.unknown_keep.is_empty() {
            notes.push(format!("asked to keep {}, but no such variable exists", cleanup.unknown_keep.join(", ")));
        }
        if before.pids != start.pids {
            notes.push(
                "the child process was restarted during the experiment, so the figures compare two processes".into(),
            );
        }
        let peak_cpu = self.peak_cpu.max(before.cpu.hwm);
        let mut devices = vec![DeviceFigures {
            device: "cpu".into(),
            name: "CPU".into(),
            consumed: before.cpu.rss as i64 - start.cpu.rss as i64,
            reclaimed: before.cpu.rss as i64 - after.cpu.rss as i64,
            peaked: peaked(start.cpu.rss, before.cpu.rss, peak_cpu),
            used: after.cpu.rss,
            free: after.cpu.available,
            total: after.cpu.total,
        }];
        for (i, g) in self.gpus.iter().enumerate() {
            let (Some(s0), Some(b), Some(a)) = (start.gpus.get(i), before.gpus.get(i), after.gpus.get(i)) else {
                continue;
            };
            let peak = self.peak_gpu.get(i).copied().unwrap_or(0).max(b.used_by_us);
            devices.push(DeviceFigures {
                device: g.label.clone(),
                name: format!("{} ({})", g.name, g.bus_id),
                consumed: b.used_by_us as i64 - s0.used_by_us as i64,
                reclaimed: b.used_by_us as i64 - a.used_by_us as i64,
                peaked: peaked(s0.used_by_us, b.used_by_us, peak),
                used: a.used_by_us,
                free: a.free,
                total: a.total,
            });
        }
        Report {
            name: self.name.clone(),
            elapsed_secs: self.started.elapsed().as_secs_f64(),
            deleted: cleanup.delete.into_iter().filter(|n| !failed.contains(n)).collect(),
            reassigned: cleanup.reassigned.into_iter().filter(|n| !failed.contains(n)).collect(),
            kept: cleanup.kept,
            failed,
            devices,
            leak_threshold: LEAK_THRESHOLD,
            notes,
            provenance: None,
        }
    }
}

/// IPyExperiments' △Peaked: usage above the start at the peak, less what is still held at the
/// end, so memory used only for a while shows here and memory kept shows as consumed.
pub fn peaked(start: u64, end: u64, peak: u64) -> i64 {
    let consumed = end as i64 - start as i64;
    (peak.max(end) as i64 - start as i64 - consumed.max(0)).max(0)
}

/// Names a cell binds at its top level: `let` patterns and plain `name = ...` assignments.
pub fn rebound_names(body: &str) -> Result<Vec<String>, crate::syntax::TooDeep> {
    crate::syntax::with_block(body, block_bindings).map(Option::unwrap_or_default)
}

fn block_bindings(block: &syn::Block) -> Vec<String> {
    let mut out = Vec::new();
    for stmt in &block.stmts {
        match stmt {
            syn::Stmt::Local(local) => pattern_names(&local.pat, &mut out),
            syn::Stmt::Expr(syn::Expr::Assign(a), _) => {
                if let syn::Expr::Path(p) = &*a.left {
                    if let Some(id) = p.path.get_ident() {
                        out.push(id.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn pattern_names(pat: &syn::Pat, out: &mut Vec<String>) {
    match pat {
        syn::Pat::Ident(p) => out.push(p.ident.to_string()),
        syn::Pat::Type(t) => pattern_names(&t.pat, out),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|p| pattern_names(p, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pattern_names(p, out)),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pattern_names(&f.pat, out)),
        syn::Pat::Slice(s) => s.elems.iter().for_each(|p| pattern_names(p, out)),
        syn::Pat::Reference(r) => pattern_names(&r.pat, out),
        syn::Pat::Paren(p) => pattern_names(&p.pat, out),
        _ => {}
    }
}

/// The code that deletes variables in the child and hands freed heap back to the system.
pub fn cleanup_code(names: &[String]) -> String {
    let mut code = crate::session::forget_code(names);
    code.push_str("{ unsafe extern \"C\" { fn malloc_trim(pad: usize) -> i32; } unsafe { malloc_trim(0); } }\n");
    code
}

#[cfg(test)]
mod tests;
