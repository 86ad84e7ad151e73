//! The child's start-up library: the stdout flusher and the panic hook of the std that cells
//! link (`child::FLUSHER_CELL`), compiled once per machine and toolchain into the build cache
//! and loaded by every child as it starts, so that no kernel builds or analyses it as a cell.

use crate::child::{FLUSHER_CELL, STARTUP_ENTRY as ENTRY};
use std::path::{Path, PathBuf};

/// The library in `cache_dir` (the build cache's generation directory, one per toolchain),
/// built first when it is not there; concurrent kernels each build and rename into place.
pub fn library(cache_dir: &Path) -> anyhow::Result<PathBuf> {
    let body = FLUSHER_CELL.trim_end().trim_end_matches(';');
    let source = format!("#[unsafe(no_mangle)]\npub extern \"C\" fn {ENTRY}() {body}\n");
    let dir = cache_dir.join("startup");
    let lib = dir.join(format!("libdryml_startup_{:016x}.so", super::cache::fnv1a(source.as_bytes())));
    if lib.is_file() {
        return Ok(lib);
    }
    std::fs::create_dir_all(&dir)?;
    let pid = std::process::id();
    let src = dir.join(format!("startup-{pid}.rs"));
    let tmp = dir.join(format!("startup-{pid}.so"));
    std::fs::write(&src, &source)?;
    // As evcxr builds cells: std linked dynamically, so the flusher flushes the cells' stdout.
    let out = std::process::Command::new(super::cache::rustc())
        .args(["--crate-type", "cdylib", "--crate-name", "dryml_startup", "--edition", "2024"])
        .args(["-C", "prefer-dynamic", "-C", "opt-level=1", "-C", "debuginfo=0", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output();
    let _ = std::fs::remove_file(&src);
    let out = out?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!("rustc failed on the start-up library: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    std::fs::rename(&tmp, &lib)?;
    Ok(lib)
}
