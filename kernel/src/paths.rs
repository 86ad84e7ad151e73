//! Where things are: the `dryml` crate's sources, the venv that holds PyTorch, and this
//! kernel's scratch directory.

use anyhow::Context;
use std::path::PathBuf;

/// The `dryml` crate's sources: `$DRYML_RUNTIME_PATH`, else this checkout's `runtime/`.
pub fn runtime() -> PathBuf {
    std::env::var_os("DRYML_RUNTIME_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../runtime")))
}

/// The venv to take torch from: `$DRYML_TORCH_VENV`, else the checkout's `.venv`.
pub fn venv() -> PathBuf {
    match std::env::var_os("DRYML_TORCH_VENV") {
        Some(v) => PathBuf::from(v),
        None => runtime().join("..").join(".venv"),
    }
}

/// This kernel's scratch directory, `<tmp>/dryml-kernel-<uid>/<pid>`: the output socket, the
/// resource pool's files, the last experiment's report and, unless the user set
/// `EVCXR_TMPDIR`, evcxr's build directory. Directories left by kernels that were killed (their
/// pid is gone) are removed here, since a SIGKILL leaves no chance to clean.
pub fn scratch() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir().join(format!("dryml-kernel-{}", unsafe { libc::getuid() }));
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let stale = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|pid| !dryml::procfs::exists(pid));
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
