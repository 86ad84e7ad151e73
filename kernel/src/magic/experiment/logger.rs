//! The cell logger as data (IPyExperiments' CellLogger): one entry per measured cell, the line
//! shown after it, the log as a table (`%cell_logger data`) and as a chart (`plot`).

use super::render::{bundle, hms, mib};
use super::report::{peaked, MIB};
use crate::display_table::figures;
use crate::measure::gpu::Gpu;
use crate::measure::meter::Sample;
use crate::protocol::published::Bundle;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggerMode {
    Off,
    On,
    Compact,
}

/// One device's figures for one cell, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CellMem {
    pub consumed: i64,
    pub peaked: i64,
    pub used: u64,
}

/// One cell's figures, as the log keeps them and `%cell_logger data` gives them.
#[derive(Debug, Clone, Serialize)]
pub struct CellEntry {
    pub execution_count: i64,
    pub secs: f64,
    pub cpu: CellMem,
    pub gpus: Vec<CellMem>,
    /// Time the two samples took.
    pub measure_us: u64,
}

pub struct CellLogger {
    pub mode: LoggerMode,
    pub log: Vec<CellEntry>,
    pub gpu_labels: Vec<String>,
}

impl CellLogger {
    pub fn new() -> Self {
        CellLogger { mode: LoggerMode::Off, log: vec![], gpu_labels: vec![] }
    }

    /// Records a cell from its samples; returns the line to print.
    /// `peaks` are the highest CPU and per-GPU usage seen during the cell.
    pub fn record(
        &mut self,
        count: i64,
        before: &Sample,
        after: &Sample,
        peaks: (u64, Vec<u64>),
        gpus: &[Gpu],
        measure: Duration,
    ) -> Value {
        let delta = |b0: u64, b1: u64, peak: u64| CellMem {
            consumed: b1 as i64 - b0 as i64,
            peaked: peaked(b0, b1, peak),
            used: b1,
        };
        let entry = CellEntry {
            execution_count: count,
            secs: after.at.duration_since(before.at).as_secs_f64(),
            cpu: delta(before.cpu.rss, after.cpu.rss, peaks.0),
            gpus: before
                .gpus
                .iter()
                .zip(&after.gpus)
                .enumerate()
                .map(|(k, (a, b))| delta(a.used_by_us, b.used_by_us, peaks.1.get(k).copied().unwrap_or(0)))
                .collect(),
            measure_us: measure.as_micros() as u64,
        };
        self.gpu_labels = gpus.iter().map(|g| g.label.clone()).collect();
        let line = self.line(&entry);
        self.log.push(entry);
        line
    }

    fn line(&self, e: &CellEntry) -> Value {
        // A bullet every text font has (IPyExperiments' U+30FB is a CJK glyph: an empty box in
        // browsers without a CJK font).
        const LOGGER_MARK: char = '\u{2022}';
        let mut rows = vec![("CPU".to_string(), e.cpu)];
        for (l, g) in self.gpu_labels.iter().zip(&e.gpus) {
            rows.push((l.to_uppercase(), *g));
        }
        let text = if self.mode == LoggerMode::Compact {
            let mut t = format!("{LOGGER_MARK} RAM: △Consumed △Peaked Used Total");
            for (l, m) in &rows {
                let _ =
                    write!(t, " | {l}: {} {} {} MiB", mib(m.consumed as f64), mib(m.peaked as f64), mib(m.used as f64));
            }
            let _ = write!(t, " | Exec time {}", hms(e.secs));
            t
        } else {
            let w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(3).max(3);
            let mut t = format!(
                "{LOGGER_MARK} {:<w$}  △Consumed    △Peaked    Used Total | Exec time {}",
                "RAM:",
                hms(e.secs),
                w = w + 1
            );
            for (l, m) in &rows {
                let _ = write!(
                    t,
                    "\n{LOGGER_MARK} {:<w$}  {:>9}  {:>9}  {:>10} MiB |",
                    format!("{l}:"),
                    mib(m.consumed as f64),
                    mib(m.peaked as f64),
                    mib(m.used as f64),
                    w = w + 1
                );
            }
            t
        };
        Bundle::text(text).value()
    }

    fn head(&self) -> Vec<String> {
        let mut h: Vec<String> =
            ["cell", "time (s)", "CPU △consumed", "CPU △peaked", "CPU used"].iter().map(|s| s.to_string()).collect();
        for l in &self.gpu_labels {
            for k in ["△consumed", "△peaked", "used"] {
                h.push(format!("{} {k}", l.to_uppercase()));
            }
        }
        h.push("measure (µs)".into());
        h
    }

    /// `%cell_logger data`: the log as a table (MiB) and as JSON (bytes).
    pub fn data(&self) -> Value {
        let rows: Vec<Vec<String>> = self
            .log
            .iter()
            .map(|e| {
                let mut r = vec![
                    e.execution_count.to_string(),
                    format!("{:.3}", e.secs),
                    mib(e.cpu.consumed as f64),
                    mib(e.cpu.peaked as f64),
                    mib(e.cpu.used as f64),
                ];
                for g in &e.gpus {
                    r.extend([mib(g.consumed as f64), mib(g.peaked as f64), mib(g.used as f64)]);
                }
                r.push(e.measure_us.to_string());
                r
            })
            .collect();
        let head = self.head();
        let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
        let (text, html) = figures(&head_refs, &rows);
        let text = if self.log.is_empty() {
            "The cell log is empty (turn it on with %cell_logger on).".to_string()
        } else {
            format!("Cell log (MiB):\n{text}")
        };
        /// The log's figures.
        #[derive(Serialize)]
        struct Data<'a> {
            gpus: &'a [String],
            cells: &'a [CellEntry],
            peak_tolerance: u64,
        }
        let tolerance = crate::measure::meter::peak_tolerance();
        bundle(text, html, &Data { gpus: &self.gpu_labels, cells: &self.log, peak_tolerance: tolerance })
    }

    /// `%cell_logger plot`: memory and time per cell as an inline SVG.
    pub fn plot(&self) -> Value {
        if self.log.is_empty() {
            let text =
                "No cell has been logged yet: turn the logger on with %cell_logger on, run some cells, then plot.";
            return Bundle::text(text).value();
        }
        let plain = format!("<cell log plot: {} cells>", self.log.len());
        Bundle { svg: Some(plot_svg(&self.log)), ..Bundle::text(plain) }.value()
    }
}

impl Default for CellLogger {
    fn default() -> Self {
        Self::new()
    }
}

/// The highest usage during a cell, in bytes, from its logged deltas.
fn peak_of(m: &CellMem) -> f64 {
    let start = m.used as f64 - m.consumed as f64;
    (start + m.consumed.max(0) as f64 + m.peaked as f64).max(m.used as f64)
}

/// Two panels sharing the cell axis, drawn by `dryml::plot` as a cell's plots are: CPU memory
/// used after each cell (line) over its peak during it (bars), and execution time (bars).
pub fn plot_svg(log: &[CellEntry]) -> String {
    use dryml::plot::Figure;
    let labels: Vec<String> = log.iter().map(|e| e.execution_count.to_string()).collect();
    let at: Vec<usize> = (0..log.len()).collect();
    let peaks: Vec<f64> = log.iter().map(|e| peak_of(&e.cpu) / MIB).collect();
    let used: Vec<f64> = log.iter().map(|e| e.cpu.used as f64 / MIB).collect();
    let secs: Vec<f64> = log.iter().map(|e| e.secs).collect();
    let mem = Figure::new()
        .title("CPU memory per cell: used after the cell, peak during it")
        .y_label("MiB")
        .size(640, 200)
        .bars("peak during", &labels, &peaks)
        .color("#f4b183")
        .line("used after", &at, &used)
        .color("#c00000");
    let time = Figure::new()
        .title("Execution time per cell")
        .x_label("execution count")
        .y_label("seconds")
        .size(640, 190)
        .bars("time", &labels, &secs)
        .color("#5b9bd5");
    dryml::plot::stack(&[mem, time])
}
