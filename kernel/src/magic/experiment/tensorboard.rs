//! An experiment's TensorBoard (`--tensorboard DIR`): while it is open, the child knows the
//! directory and every network trained writes its run there, `DIR/<object id>`
//! (`dryml::models::tensorboard::ambient`); at the finish the experiment writes its own run,
//! `DIR/<name>`: its memory figures and time as scalars, its report as text.

use super::report::MIB;
use dryml::experiment::Report;
use dryml::models::tensorboard::TensorBoard;
use std::path::{Path, PathBuf};

/// The directory as the child will read it: absolute (from the kernel's working directory,
/// which the child shares), and made now, so a bad one is said before the experiment starts.
pub fn prepare(dir: &str) -> Result<PathBuf, String> {
    let path = std::path::absolute(dir).map_err(|e| format!("--tensorboard {dir}: {e}"))?;
    std::fs::create_dir_all(&path).map_err(|e| format!("--tensorboard {dir}: cannot make {}: {e}", path.display()))?;
    Ok(path)
}

/// The experiment's run in `dir`, at `step` (the finishing cell's execution count, so runs line
/// up along the notebook): `memory/<device>/{consumed,peaked,reclaimed}_mib`, `time/seconds`, and
/// its report (`text`) as the text `report`. Returns the run's directory.
pub fn write_run(dir: &Path, report: &Report, text: &str, step: u64) -> std::io::Result<PathBuf> {
    let mut tb = TensorBoard::create(dir.join(run_name(&report.name)))?;
    for d in &report.devices {
        for (figure, bytes) in [("consumed", d.consumed), ("peaked", d.peaked), ("reclaimed", d.reclaimed)] {
            tb.scalar(&format!("memory/{}/{figure}_mib", d.device), step, bytes as f64 / MIB)?;
        }
    }
    tb.scalar("time/seconds", step, report.elapsed_secs)?;
    tb.text("report", step, &format!("```\n{}\n```", text.trim_end()))?;
    if let Some(p) = &report.provenance {
        tb.text("provenance", step, &p.markdown())?;
    }
    Ok(tb.dir().to_path_buf())
}

/// A run directory's name for an experiment's: one path component, never hidden.
fn run_name(name: &str) -> String {
    let name: String = name.chars().map(|c| if c == '/' || c == '\0' { '_' } else { c }).collect();
    match name.as_str() {
        "" | "." | ".." => format!("experiment{name}"),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_one_directory_named_by_the_experiment() {
        assert_eq!(run_name("lr sweep"), "lr sweep");
        assert_eq!(run_name("a/b"), "a_b");
        assert_eq!(run_name(".."), "experiment..");
        assert_eq!(run_name("#12"), "#12");
    }
}
