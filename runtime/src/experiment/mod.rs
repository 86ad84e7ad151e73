//! Experiment figures as Rust values: what `%%experiment` measured, for cells to use.
//!
//! The kernel writes the last finished experiment's report into its state directory in a small
//! tab-separated record ([`Report::to_record`]); [`last`] reads it back. Both sides use this one
//! type, so the format cannot drift.
//!
//! ```
//! // In a cell after a `%%experiment` cell has finished:
//! if let Some(report) = dryml::experiment::last() {
//!     for leak in report.potential_leaks() {
//!         println!("{}: {} MiB not reclaimed", leak.device, leak.unreclaimed() >> 20);
//!     }
//! }
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::sys::protocol::{EXPERIMENT_LAST_FILE as LAST_FILE, STATE_DIR_ENV};
const VERSION: &str = "dryml-experiment 1";

/// One device's memory over an experiment, in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFigures {
    /// `cpu`, or `gpu/N` numbered as CUDA numbers it in the child.
    pub device: String,
    /// A readable name: the GPU model and its PCI bus id.
    pub name: String,
    /// Memory held at the finish (before clean-up) minus memory held at the start.
    pub consumed: i64,
    /// Memory given back by the clean-up.
    pub reclaimed: i64,
    /// Memory used for a while and given back before the end, as IPyExperiments' △Peaked: the
    /// highest usage above the start, less what was still consumed at the end.
    pub peaked: i64,
    /// This process's usage after clean-up.
    pub used: u64,
    /// Free on the device (available system memory for the CPU).
    pub free: u64,
    /// The device's total memory, bytes.
    pub total: u64,
}

impl DeviceFigures {
    /// Reclaimed as a percentage of consumed (100 when nothing was consumed).
    pub fn reclaimed_percent(&self) -> f64 {
        if self.consumed <= 0 {
            100.0
        } else {
            100.0 * self.reclaimed as f64 / self.consumed as f64
        }
    }

    /// Consumed and not given back.
    pub fn unreclaimed(&self) -> i64 {
        (self.consumed - self.reclaimed).max(0)
    }
}

/// A finished experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The experiment's name (`%%experiment NAME`).
    pub name: String,
    /// Its wall time.
    pub elapsed_secs: f64,
    /// Variables created during the experiment and deleted at its finish.
    pub deleted: Vec<String>,
    /// Variables that existed before, were re-bound during the experiment, and were deleted.
    pub reassigned: Vec<String>,
    /// Variables kept on request (`--keep`, `%experiment keep`).
    pub kept: Vec<String>,
    /// Variables that could not be deleted (their type is `Copy` and so never moves, say).
    pub failed: Vec<String>,
    /// The CPU first, then each visible GPU.
    pub devices: Vec<DeviceFigures>,
    /// Unreclaimed memory above this is flagged as a potential leak.
    pub leak_threshold: u64,
    /// Why there are no GPU figures, or anything else worth a line.
    pub notes: Vec<String>,
    /// How the experiment's work was made (the kernel records it at the finish).
    pub provenance: Option<crate::objects::Provenance>,
}

impl Report {
    // Owned copies: a notebook variable cannot hold a reference into another one (evcxr).
    /// The CPU's figures.
    pub fn cpu(&self) -> Option<DeviceFigures> {
        self.devices.iter().find(|d| d.device == "cpu").cloned()
    }

    /// Each visible GPU's figures, `gpu/0` first.
    pub fn gpus(&self) -> Vec<DeviceFigures> {
        self.devices.iter().filter(|d| d.device != "cpu").cloned().collect()
    }

    /// Devices whose unreclaimed memory is over the threshold.
    pub fn potential_leaks(&self) -> Vec<&DeviceFigures> {
        self.devices.iter().filter(|d| d.unreclaimed() as u64 > self.leak_threshold).collect()
    }

    /// The record the kernel writes: one `key<TAB>value...` line per field.
    pub fn to_record(&self) -> String {
        let mut out = format!("{VERSION}\n");
        let _ = writeln!(out, "name\t{}", clean(&self.name));
        let _ = writeln!(out, "elapsed\t{}", self.elapsed_secs);
        let _ = writeln!(out, "leak_threshold\t{}", self.leak_threshold);
        for (key, list) in [
            ("deleted", &self.deleted),
            ("reassigned", &self.reassigned),
            ("kept", &self.kept),
            ("failed", &self.failed),
        ] {
            let _ = writeln!(out, "{key}\t{}", list.join(","));
        }
        for d in &self.devices {
            let _ = writeln!(
                out,
                "device\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                clean(&d.device),
                clean(&d.name),
                d.consumed,
                d.reclaimed,
                d.peaked,
                d.used,
                d.free,
                d.total
            );
        }
        for n in &self.notes {
            let _ = writeln!(out, "note\t{}", clean(n));
        }
        if let Some(p) = &self.provenance {
            let _ = writeln!(out, "provenance\t{}", p.to_json());
        }
        out
    }

    /// Parses [`Report::to_record`]'s output; errors name the line.
    pub fn from_record(text: &str) -> Result<Report, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, v)) if v == VERSION => {}
            Some((_, v)) => return Err(format!("line 1: expected `{VERSION}`, found `{v}`")),
            None => return Err("empty record".into()),
        }
        let mut r = Report {
            name: String::new(),
            elapsed_secs: 0.0,
            deleted: vec![],
            reassigned: vec![],
            kept: vec![],
            failed: vec![],
            devices: vec![],
            leak_threshold: 0,
            notes: vec![],
            provenance: None,
        };
        for (i, line) in lines {
            let bad = |what: &str| format!("line {}: {what}: `{line}`", i + 1);
            let (key, rest) = line.split_once('\t').ok_or_else(|| bad("no tab"))?;
            let list = || -> Vec<String> { rest.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect() };
            match key {
                "name" => r.name = rest.to_string(),
                "elapsed" => r.elapsed_secs = rest.parse().map_err(|_| bad("bad number"))?,
                "leak_threshold" => r.leak_threshold = rest.parse().map_err(|_| bad("bad number"))?,
                "deleted" => r.deleted = list(),
                "reassigned" => r.reassigned = list(),
                "kept" => r.kept = list(),
                "failed" => r.failed = list(),
                "note" => r.notes.push(rest.to_string()),
                "provenance" => {
                    let v = serde_json::from_str(rest).map_err(|_| bad("not JSON"))?;
                    r.provenance = Some(crate::objects::Provenance::from_json(&v));
                }
                "device" => {
                    let f: Vec<&str> = rest.split('\t').collect();
                    if f.len() != 8 {
                        return Err(bad("a device needs 8 fields"));
                    }
                    let int = |s: &str| s.parse::<i64>().map_err(|_| bad("bad number"));
                    let uint = |s: &str| s.parse::<u64>().map_err(|_| bad("bad number"));
                    r.devices.push(DeviceFigures {
                        device: f[0].to_string(),
                        name: f[1].to_string(),
                        consumed: int(f[2])?,
                        reclaimed: int(f[3])?,
                        peaked: int(f[4])?,
                        used: uint(f[5])?,
                        free: uint(f[6])?,
                        total: uint(f[7])?,
                    });
                }
                // Newer kernels may add keys; older readers skip them.
                _ => {}
            }
        }
        Ok(r)
    }
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// Where the kernel keeps the last report, when running under the kernel.
pub fn last_path() -> Option<PathBuf> {
    std::env::var_os(STATE_DIR_ENV).map(|d| PathBuf::from(d).join(LAST_FILE))
}

/// The last finished experiment of this notebook, or `None` before the first one finishes
/// (and outside the kernel).
pub fn last() -> Option<Report> {
    let text = std::fs::read_to_string(last_path()?).ok()?;
    Report::from_record(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        Report {
            name: "lr\tsweep".into(),
            elapsed_secs: 1.5,
            deleted: vec!["a".into(), "b".into()],
            reassigned: vec!["m".into()],
            kept: vec!["k".into()],
            failed: vec![],
            devices: vec![
                DeviceFigures {
                    device: "cpu".into(),
                    name: "CPU".into(),
                    consumed: 512 << 20,
                    reclaimed: 500 << 20,
                    peaked: 600 << 20,
                    used: 40 << 20,
                    free: 8 << 30,
                    total: 16 << 30,
                },
                DeviceFigures {
                    device: "gpu/0".into(),
                    name: "H100 (0000:3B:00.0)".into(),
                    consumed: 0,
                    reclaimed: 0,
                    peaked: 0,
                    used: 0,
                    free: 1,
                    total: 2,
                },
            ],
            leak_threshold: 8 << 20,
            notes: vec!["one note".into()],
            provenance: Some(crate::objects::Provenance { host: "node\t1".into(), ..Default::default() }),
        }
    }

    #[test]
    fn record_round_trip() {
        let r = sample();
        let back = Report::from_record(&r.to_record()).unwrap();
        assert_eq!(back.name, "lr sweep");
        assert_eq!(back.devices, r.devices);
        assert_eq!(back.deleted, r.deleted);
        assert_eq!(back.reassigned, r.reassigned);
        assert_eq!(back.kept, r.kept);
        assert!(back.failed.is_empty());
        assert_eq!(back.notes, r.notes);
        assert_eq!(back.provenance, r.provenance, "JSON keeps a tab on its line");
        assert_eq!(back.potential_leaks().len(), 1);
        assert!((back.cpu().unwrap().reclaimed_percent() - 97.65625).abs() < 1e-9);
    }

    #[test]
    fn bad_records_name_the_line() {
        assert!(Report::from_record("").is_err());
        assert!(Report::from_record("other 2\n").unwrap_err().contains("line 1"));
        let e = Report::from_record(&format!("{VERSION}\nelapsed\tfast\n")).unwrap_err();
        assert!(e.contains("line 2") && e.contains("bad number"), "{e}");
        let e = Report::from_record(&format!("{VERSION}\ndevice\tcpu\t1\n")).unwrap_err();
        assert!(e.contains("8 fields"), "{e}");
    }
}
