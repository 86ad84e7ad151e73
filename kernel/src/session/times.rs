//! Where a cell's time went, for the benchmarks: with `DRYML_CELL_TIMES=FILE`, each user cell
//! that ran appends one JSON line to FILE with its seconds in all and by phase: evcxr's commands
//! (the `:dep` lines the kernel or the user added, each validated) and code generation, then
//! evcxr's phases (the Cargo.toml and the variables' types, the build through cargo or rustc
//! alone, the library's load and run in the child).

use std::io::Write;
use std::time::Duration;

pub const ENV: &str = "DRYML_CELL_TIMES";

/// The name of the time before evcxr's first phase.
const BEFORE: &str = "Commands (:dep) and code generation";

/// Appends the cell's line where `DRYML_CELL_TIMES` names a file; evcxr's build phase says
/// whether rustc built the cell `alone`, or cargo.
pub fn record(total: Duration, phases: &[(String, Duration)], alone: bool) {
    let Some(path) = std::env::var_os(ENV) else { return };
    let by = if alone { "Final compile (rustc alone)" } else { "Final compile (cargo)" };
    let named: Vec<_> =
        phases.iter().map(|(n, d)| (if n == "Final compile" { by.to_owned() } else { n.clone() }, *d)).collect();
    let line = line(total, &named);
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        tracing::warn!("{ENV}={}: {e}", path.to_string_lossy());
    }
}

/// One cell's line: its total seconds, and each phase's name and seconds, in order.
#[derive(serde::Serialize)]
struct Line {
    total: f64,
    phases: Vec<(String, f64)>,
}

fn line(total: Duration, phases: &[(String, Duration)]) -> serde_json::Value {
    let measured: Duration = phases.iter().map(|p| p.1).sum();
    let mut named = vec![(BEFORE.to_string(), total.saturating_sub(measured).as_secs_f64())];
    named.extend(phases.iter().map(|(n, d)| (n.clone(), d.as_secs_f64())));
    serde_json::to_value(Line { total: total.as_secs_f64(), phases: named }).expect("a line serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phases_and_what_came_before_them_add_up_to_the_cell() {
        let phase = |name: &str, ms| (name.to_string(), Duration::from_millis(ms));
        let got = line(Duration::from_millis(1000), &[phase("Final compile (cargo)", 700), phase("Execution", 200)]);
        assert_eq!(
            got,
            serde_json::json!({"total": 1.0, "phases": [[BEFORE, 0.1], ["Final compile (cargo)", 0.7], ["Execution", 0.2]]})
        );
    }
}
