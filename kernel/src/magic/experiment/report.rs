//! Experiments as data: IPyExperiments' bookkeeping and reports, fed with the meter's samples
//! by the `%experiment` magics (`super`). An [`Experiment`] keeps the variables it found at its
//! start, the names it saw re-bound, and the highest marks seen, and turns them into a
//! [`Report`]. The cell logger is [`super::logger`]'s.

use crate::display_table::{escape, figures};
use crate::measure::gpu::Gpu;
use crate::measure::meter::Sample;
use dryml::experiment::{DeviceFigures, Report};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
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

// ---- rendering -------------------------------------------------------------------------------

pub fn mib(b: impl Into<f64>) -> String {
    group(b.into() / MIB)
}

/// Whole MiB with thousands separators, as IPyExperiments prints them.
fn group(v: f64) -> String {
    dryml_sys::units::grouped(v.round() as i64)
}

/// A display bundle: text, HTML and the figures as data (under [`dryml::__kernel::display::DATA_MIME`]).
pub fn bundle(text: String, html: String, data: Value) -> Value {
    json!({"text/plain": text, "text/html": html, dryml::__kernel::display::DATA_MIME: data})
}

/// The "current state" block: the measured processes' usage and the machine's.
pub fn state_block(s: &Sample, gpus: &[Gpu], gpu_note: Option<&str>) -> (String, String, Value) {
    let used = s.cpu.total.saturating_sub(s.cpu.available);
    let mut rows = vec![vec![
        "CPU".to_string(),
        mib(s.cpu.rss as f64),
        mib(used as f64),
        mib(s.cpu.available as f64),
        mib(s.cpu.total as f64),
        format!("{:.2}%", pct(used, s.cpu.total)),
    ]];
    let mut devices = vec![json!({"device": "cpu", "name": "CPU", "process": s.cpu.rss,
        "used": used, "free": s.cpu.available, "total": s.cpu.total})];
    for (g, m) in gpus.iter().zip(&s.gpus) {
        let used = m.total.saturating_sub(m.free);
        rows.push(vec![
            format!("{} {} ({})", g.label, g.name, g.bus_id),
            mib(m.used_by_us as f64),
            mib(used as f64),
            mib(m.free as f64),
            mib(m.total as f64),
            format!("{:.2}%", pct(used, m.total)),
        ]);
        devices.push(json!({"device": g.label, "name": g.name, "bus_id": g.bus_id,
            "process": m.used_by_us, "used": used, "free": m.free, "total": m.total}));
    }
    let (mut text, mut html) = figures(&["RAM (MiB)", "This process", "Used", "Free", "Total", "Util"], &rows);
    if let Some(n) = gpu_note {
        text.push_str(&format!("\n({n})"));
        html.push_str(&format!("<p><em>{}</em></p>", escape(n)));
    }
    (text, html, json!(devices))
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The banner printed when an experiment starts.
pub fn start_banner(name: &str, s: &Sample, gpus: &[Gpu], gpu_note: Option<&str>) -> Value {
    let (t, h, devices) = state_block(s, gpus, gpu_note);
    let title = format!("*** Experiment {name} started");
    bundle(
        format!("{title}\n\n*** Current state:\n{t}\n"),
        format!("<div class=\"dryml-experiment\"><b>{}</b><br><b>Current state:</b>{h}</div>", escape(&title)),
        json!({"event": "start", "name": name, "devices": devices}),
    )
}

/// The finish report (or `%experiment data`'s figures so far when `finished` is false).
pub fn report_bundle(r: &Report, finished: bool, state: Option<(String, String, Value)>) -> Value {
    let mut text = String::new();
    let mut html = String::from("<div class=\"dryml-experiment\">");
    let title = if finished {
        format!("*** Experiment {} finished in {} (elapsed wall time)", r.name, hms(r.elapsed_secs))
    } else {
        format!("*** Experiment {} running for {}", r.name, hms(r.elapsed_secs))
    };
    let _ = writeln!(text, "{title}");
    let _ = write!(html, "<b>{}</b>", escape(&title));
    if finished {
        let _ = writeln!(text, "\n*** Variables:");
        html.push_str("<p><b>Variables:</b><br>");
        for (label, list) in [
            ("Deleted", &r.deleted),
            ("Deleted (re-bound during the experiment)", &r.reassigned),
            ("Kept", &r.kept),
            ("Failed to delete", &r.failed),
        ] {
            // "Deleted" is always shown (as "none" when empty); the other lines only when they list names.
            if list.is_empty() && label != "Deleted" {
                continue;
            }
            let names = if list.is_empty() { "none".to_string() } else { list.join(", ") };
            let _ = writeln!(text, "{label}: {names}");
            let _ = write!(html, "{}: {}<br>", escape(label), escape(&names));
        }
        html.push_str("</p>");
    }
    let head: &[&str] = if finished {
        &["RAM (MiB)", "Consumed", "Peaked", "Reclaimed", "Reclaimed %"]
    } else {
        &["RAM (MiB)", "Consumed", "Peaked"]
    };
    let rows: Vec<Vec<String>> = r
        .devices
        .iter()
        .map(|d| {
            let label = if d.device == "cpu" { "CPU".to_string() } else { format!("{} {}", d.device, d.name) };
            let mut row = vec![label, mib(d.consumed as f64), mib(d.peaked as f64)];
            if finished {
                row.push(mib(d.reclaimed as f64));
                row.push(format!("{:.2}%", d.reclaimed_percent()));
            }
            row
        })
        .collect();
    let (t, h) = figures(head, &rows);
    let _ = writeln!(text, "\n*** Experiment memory:\n{t}");
    let _ = write!(html, "<p><b>Experiment memory:</b></p>{h}");
    if finished && !r.devices.is_empty() {
        html.push_str(&report_svg(r));
    }
    if finished {
        for d in r.potential_leaks() {
            let line = format!(
                "Potential leak on {}: {} MiB consumed and not reclaimed (threshold {} MiB)",
                if d.device == "cpu" { "CPU" } else { &d.device },
                mib(d.unreclaimed() as f64),
                mib(r.leak_threshold as f64)
            );
            let _ = writeln!(text, "{line}");
            let _ = write!(html, "<p style=\"color:#b00\"><b>{}</b></p>", escape(&line));
        }
    }
    for n in &r.notes {
        let _ = writeln!(text, "({n})");
        let _ = write!(html, "<p><em>{}</em></p>", escape(n));
    }
    let mut data = report_json(r, finished);
    if let Some((t, h, devices)) = state {
        let _ = writeln!(text, "\n*** Current state:\n{t}");
        let _ = write!(html, "<p><b>Current state:</b></p>{h}");
        data["current"] = devices;
    }
    html.push_str("</div>");
    bundle(text, html, data)
}

pub fn report_json(r: &Report, finished: bool) -> Value {
    json!({
        "event": if finished { "finish" } else { "data" },
        "name": r.name,
        "elapsed_secs": r.elapsed_secs,
        "deleted": r.deleted,
        "reassigned": r.reassigned,
        "kept": r.kept,
        "failed": r.failed,
        "leak_threshold": r.leak_threshold,
        "peak_tolerance": crate::measure::meter::peak_tolerance(),
        "potential_leaks": r.potential_leaks().iter().map(|d| d.device.clone()).collect::<Vec<_>>(),
        "devices": r.devices.iter().map(|d| json!({
            "device": d.device, "name": d.name, "consumed": d.consumed, "reclaimed": d.reclaimed,
            "reclaimed_percent": d.reclaimed_percent(), "peaked": d.peaked,
            "used": d.used, "free": d.free, "total": d.total,
        })).collect::<Vec<_>>(),
        "notes": r.notes,
    })
}

/// `H:MM:SS.mmm`, as IPyExperiments prints times.
pub fn hms(secs: f64) -> String {
    let ms = (secs * 1000.0).round() as u64;
    format!("{}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// A finished experiment's memory per device as grouped bars (consumed, peaked, reclaimed).
pub fn report_svg(r: &Report) -> String {
    let labels: Vec<String> =
        r.devices.iter().map(|d| if d.device == "cpu" { "CPU".to_string() } else { d.device.clone() }).collect();
    let col = |f: &dyn Fn(&dryml::experiment::DeviceFigures) -> i64| -> Vec<f64> {
        r.devices.iter().map(|d| f(d) as f64 / MIB).collect()
    };
    dryml::plot::Figure::new()
        .y_label("MiB")
        .size(420, 190)
        .bars("consumed", &labels, &col(&|d| d.consumed))
        .bars("peaked", &labels, &col(&|d| d.peaked))
        .bars("reclaimed", &labels, &col(&|d| d.reclaimed))
        .svg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::meter::CpuMem;

    fn sample(rss: u64, hwm: u64) -> Sample {
        Sample {
            at: Instant::now(),
            cpu: CpuMem { rss, hwm, available: 1 << 30, total: 2 << 30 },
            gpus: vec![],
            pids: vec![1],
        }
    }

    fn vars(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn rebound_names_from_top_level_bindings() {
        let got = rebound_names(
            "let a = 1; let (b, mut c): (i32, i32) = (1, 2); d = 3; if x { e = 4; } let S { f, .. } = s;",
        )
        .unwrap();
        assert_eq!(got, ["a", "b", "c", "d", "f"]);
        assert!(rebound_names("let = ;").unwrap().is_empty());
    }

    #[test]
    fn cleanup_plan() {
        let mut e = Experiment::start(
            "x".into(),
            sample(100, 100),
            vec![],
            vars(&[("old", "i32"), ("m", "Vec<u8>"), ("t", "i32")]),
            ["k".to_string()],
        );
        e.note_cell("let m = vec![1u8];").unwrap();
        let now = vars(&[("old", "i32"), ("m", "Vec<u8>"), ("t", "String"), ("new1", "u8"), ("k", "u8")]);
        let c = e.cleanup(&now);
        assert_eq!(c.delete, ["new1"]);
        assert_eq!(c.reassigned, ["m", "t"]);
        assert_eq!(c.kept, ["k"]);
    }

    #[test]
    fn report_figures() {
        let mut e = Experiment::start("x".into(), sample(100 << 20, 100 << 20), vec![], BTreeMap::new(), []);
        e.observe(&sample(400 << 20, 900 << 20));
        let r = e.report(
            &sample(612 << 20, 612 << 20),
            &sample(101 << 20, 101 << 20),
            Cleanup { delete: vec!["a".into()], reassigned: vec![], kept: vec![], unknown_keep: vec!["modle".into()] },
            vec![],
            vec![],
        );
        assert_eq!(r.notes, ["asked to keep modle, but no such variable exists"]);
        let cpu = r.cpu().unwrap();
        assert_eq!(cpu.consumed, 512 << 20);
        assert_eq!(cpu.reclaimed, 511 << 20);
        assert_eq!(cpu.peaked, 288 << 20);
        assert_eq!(peaked(100, 50, 300), 200);
        assert_eq!(peaked(100, 150, 150), 0);
        assert!(r.potential_leaks().is_empty());
        let b = report_bundle(&r, true, None);
        let text = b["text/plain"].as_str().unwrap();
        assert!(text.contains("Deleted: a") && text.contains("99.80%"), "{text}");
        assert_eq!(b[dryml::__kernel::display::DATA_MIME]["devices"][0]["consumed"], 512 << 20);
    }

    #[test]
    fn formatting() {
        assert_eq!(group(1234567.4), "1,234,567");
        assert_eq!(group(-1500.0), "-1,500");
        assert_eq!(group(0.2), "0");
        assert_eq!(hms(3723.5), "1:02:03.500");
    }

    #[test]
    fn cleanup_code_shape() {
        let c = cleanup_code(&["a".into()]);
        assert!(c.contains("drop(a)") && c.contains("malloc_trim(0)"));
    }
}
