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
//! shutdown removes it; each start removes those of dead pids. The user's analysis process
//! listens beside those directories ([`analysis_dir`]).

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
/// [`dryml_sys::fs::private_dir`]); when another user holds `<tmp>/dryml-kernel-<uid>`, the kernel
/// says so and works in `<tmp>/dryml-kernel-<uid>-<pid>` instead. Directories left by kernels
/// that were killed are removed here, since a SIGKILL leaves no chance to clean: each kernel
/// holds a lock in its directory while it lives, so a kernel in another pid namespace (a
/// container sharing `/tmp`), which sees none of this one's pids, removes none of the living.
pub fn scratch() -> anyhow::Result<PathBuf> {
    let uid = unsafe { libc::getuid() };
    let tmp = std::env::temp_dir();
    let base = tmp.join(format!("dryml-kernel-{uid}"));
    if let Err(e) = dryml_sys::fs::private_dir(&base) {
        tracing::warn!("{e}; this kernel works in a directory of its own instead");
        let dir = tmp.join(format!("dryml-kernel-{uid}-{}", std::process::id()));
        dryml_sys::fs::private_dir(&dir)
            .with_context(|| format!("the kernel's scratch directory {}", dir.display()))?;
        return Ok(dir);
    }
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let stale = match std::fs::File::open(e.path().join(ALIVE)) {
                // Its kernel holds the lock while it lives, in whatever pid namespace: a pid
                // this process cannot see (a kernel in a container, or outside ours) proves nothing.
                Ok(f) => dryml_sys::lock::try_exclusive(&f),
                // A directory being made, or one of a kernel from before the lock: its pid decides.
                Err(_) => !dryml_sys::procfs::exists(pid),
            };
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(std::process::id().to_string());
    dryml_sys::fs::private_dir(&dir).with_context(|| format!("the kernel's scratch directory {}", dir.display()))?;
    hold(&dir)?;
    Ok(dir)
}

/// Where this user's kernels meet their shared analysis process (its socket, lock and log):
/// `$DRYML_ANALYSIS_DIR`, else `<tmp>/dryml-kernel-<uid>`; None, the process then this kernel's
/// alone, where that directory is not this user's only.
pub fn analysis_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("DRYML_ANALYSIS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("dryml-kernel-{}", unsafe { libc::getuid() })),
    };
    match dryml_sys::fs::private_dir(&dir) {
        Ok(()) => Some(dir),
        Err(e) => {
            tracing::warn!("{e}; this kernel's analysis process is its own");
            None
        }
    }
}

/// The file in a scratch directory its kernel keeps flocked for its whole life.
const ALIVE: &str = ".alive";
static HELD: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Takes `dir`'s lock for the rest of this process.
fn hold(dir: &std::path::Path) -> anyhow::Result<()> {
    // Locked before it takes its name: a sweep that found the file unlocked for a moment
    // (between its creation and the lock) took this living kernel's directory for a dead one's.
    let (held, alive) = (dir.join(format!("{ALIVE}.new")), dir.join(ALIVE));
    let f = std::fs::File::create(&held).with_context(|| format!("{}", held.display()))?;
    if !dryml_sys::lock::try_exclusive(&f) {
        anyhow::bail!("{} is locked by another kernel", dir.display());
    }
    std::fs::rename(&held, &alive).with_context(|| format!("{}", alive.display()))?;
    let _ = HELD.set(f);
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_the_directories_whose_lock_is_free_are_swept() {
        let base = std::env::temp_dir().join(format!("dryml-kernel-{}", unsafe { libc::getuid() }));
        // Above any pid this machine gives (pid_max is at most 4194304).
        let (dead, alive) = (base.join("4194401"), base.join("4194402"));
        for d in [&dead, &alive] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(dead.join(super::ALIVE), b"").unwrap();
        let held = std::fs::File::create(alive.join(super::ALIVE)).unwrap();
        assert!(dryml_sys::lock::try_exclusive(&held));
        // A living kernel whose pid this process cannot see: its directory stays.
        let mine = super::scratch().unwrap();
        assert!(!dead.exists() && alive.exists() && mine.join(super::ALIVE).exists());
        drop(held);
        std::fs::remove_dir_all(&alive).unwrap();
    }
}
