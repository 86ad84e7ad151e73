//! An experiment as the notebook shows it: its start banner, the state block, the report as
//! text, HTML, an SVG chart and figures as data, IPyExperiments' way of writing MiB and time.

use super::report::MIB;
use crate::display_table::{escape, figures};
use crate::measure::gpu::Gpu;
use crate::measure::meter::Sample;
use crate::protocol::published::Bundle;
use dryml::experiment::Report;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

pub fn mib(b: impl Into<f64>) -> String {
    group(b.into() / MIB)
}

/// Whole MiB with thousands separators, as IPyExperiments prints them.
pub(super) fn group(v: f64) -> String {
    dryml_sys::units::grouped(v.round() as i64)
}

/// A display bundle: text, HTML and the figures as data (under [`dryml::__kernel::display::DATA_MIME`]).
pub fn bundle(text: String, html: String, data: &impl Serialize) -> Value {
    Bundle::html(text, html).with_data(data).value()
}

/// A device's state in the figures: the measured processes' usage and the machine's, in bytes.
#[derive(Serialize)]
pub struct DeviceState {
    device: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    bus_id: Option<String>,
    process: u64,
    used: u64,
    free: u64,
    total: u64,
}

/// The figures of an experiment's start.
#[derive(Serialize)]
struct Start<'a> {
    event: &'static str,
    name: &'a str,
    devices: Vec<DeviceState>,
}

/// The figures of an experiment's report: `finish`, or `data` while it runs.
#[derive(Serialize)]
struct ReportData<'a> {
    event: &'static str,
    name: &'a str,
    elapsed_secs: f64,
    deleted: &'a [String],
    reassigned: &'a [String],
    kept: &'a [String],
    failed: &'a [String],
    leak_threshold: u64,
    peak_tolerance: u64,
    potential_leaks: Vec<&'a str>,
    devices: Vec<DeviceReport<'a>>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    current: Option<Vec<DeviceState>>,
}

/// A device's figures in a report, in bytes.
#[derive(Serialize)]
struct DeviceReport<'a> {
    device: &'a str,
    name: &'a str,
    consumed: i64,
    reclaimed: i64,
    reclaimed_percent: f64,
    peaked: i64,
    used: u64,
    free: u64,
    total: u64,
}

/// The "current state" block: the measured processes' usage and the machine's.
pub fn state_block(s: &Sample, gpus: &[Gpu], gpu_note: Option<&str>) -> (String, String, Vec<DeviceState>) {
    let used = s.cpu.total.saturating_sub(s.cpu.available);
    let mut rows = vec![vec![
        "CPU".to_string(),
        mib(s.cpu.rss as f64),
        mib(used as f64),
        mib(s.cpu.available as f64),
        mib(s.cpu.total as f64),
        format!("{:.2}%", pct(used, s.cpu.total)),
    ]];
    let mut devices = vec![DeviceState {
        device: "cpu".into(),
        name: "CPU".into(),
        bus_id: None,
        process: s.cpu.rss,
        used,
        free: s.cpu.available,
        total: s.cpu.total,
    }];
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
        devices.push(DeviceState {
            device: g.label.clone(),
            name: g.name.clone(),
            bus_id: Some(g.bus_id.clone()),
            process: m.used_by_us,
            used,
            free: m.free,
            total: m.total,
        });
    }
    let (mut text, mut html) = figures(&["RAM (MiB)", "This process", "Used", "Free", "Total", "Util"], &rows);
    if let Some(n) = gpu_note {
        text.push_str(&format!("\n({n})"));
        html.push_str(&format!("<p><em>{}</em></p>", escape(n)));
    }
    (text, html, devices)
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
        &Start { event: "start", name, devices },
    )
}

/// The finish report (or `%experiment data`'s figures so far when `finished` is false).
pub fn report_bundle(r: &Report, finished: bool, state: Option<(String, String, Vec<DeviceState>)>) -> Value {
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
    let mut data = report_data(r, finished);
    if let Some((t, h, devices)) = state {
        let _ = writeln!(text, "\n*** Current state:\n{t}");
        let _ = write!(html, "<p><b>Current state:</b></p>{h}");
        data.current = Some(devices);
    }
    html.push_str("</div>");
    bundle(text, html, &data)
}

fn report_data(r: &Report, finished: bool) -> ReportData<'_> {
    let devices = r.devices.iter().map(|d| DeviceReport {
        device: &d.device,
        name: &d.name,
        consumed: d.consumed,
        reclaimed: d.reclaimed,
        reclaimed_percent: d.reclaimed_percent(),
        peaked: d.peaked,
        used: d.used,
        free: d.free,
        total: d.total,
    });
    ReportData {
        event: if finished { "finish" } else { "data" },
        name: &r.name,
        elapsed_secs: r.elapsed_secs,
        deleted: &r.deleted,
        reassigned: &r.reassigned,
        kept: &r.kept,
        failed: &r.failed,
        leak_threshold: r.leak_threshold,
        peak_tolerance: crate::measure::meter::peak_tolerance(),
        potential_leaks: r.potential_leaks().iter().map(|d| d.device.as_str()).collect(),
        devices: devices.collect(),
        notes: &r.notes,
        current: None,
    }
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
