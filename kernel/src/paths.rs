//! Where things are: the `dryml` crate's sources, the venv that holds PyTorch, and this
//! kernel's scratch directory.
//!
//! # Scratch files
//!
//! Each kernel works in `<tmp>/dryml-kernel-<uid>/<pid>/`, both made 0700 and refused when another
//! user owns them (the kernel then works in `<tmp>/dryml-kernel-<uid>-<pid>/` and says why): the
//! output socket, the pool's files, the
//! last experiment's report, and evcxr's crate and final libraries (unless `EVCXR_TMPDIR` is set);
//! what is compiled for them lives in the build cache. A clean
//! shutdown removes it; each start removes those of dead pids.

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
/// `EVCXR_TMPDIR`, evcxr's build directory. Only this user may enter it (see
/// [`dryml::__kernel::fs::private_dir`]); when another user holds `<tmp>/dryml-kernel-<uid>`, the kernel
/// says so and works in `<tmp>/dryml-kernel-<uid>-<pid>` instead. Directories left by kernels
/// that were killed (their pid is gone) are removed here, since a SIGKILL leaves no chance to
/// clean.
pub fn scratch() -> anyhow::Result<PathBuf> {
    let uid = unsafe { libc::getuid() };
    let tmp = std::env::temp_dir();
    let base = tmp.join(format!("dryml-kernel-{uid}"));
    if let Err(e) = dryml::__kernel::fs::private_dir(&base) {
        tracing::warn!("{e}; this kernel works in a directory of its own instead");
        let dir = tmp.join(format!("dryml-kernel-{uid}-{}", std::process::id()));
        dryml::__kernel::fs::private_dir(&dir).with_context(|| format!("the kernel's scratch directory {}", dir.display()))?;
        return Ok(dir);
    }
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let stale = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|pid| !dryml::__kernel::procfs::exists(pid));
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    dryml::__kernel::fs::private_dir(&dir).with_context(|| format!("the kernel's scratch directory {}", dir.display()))?;
    Ok(dir)
}
