//! A crate's workspace and its source files read from disk: cargo metadata, the sysroot, every
//! `.rs` file of every package root (0.5-1 s), done without the host's lock where it can be.

use anyhow::{bail, Result};
use ra_ap_paths::AbsPathBuf;
use ra_ap_project_model::{CargoConfig, ProjectManifest, ProjectWorkspace, RustLibSource};
use ra_ap_vfs::loader::{self, Handle};
use std::time::Duration;

/// A workspace with the files of its roots, ready for a host to apply.
pub(crate) struct Loaded {
    pub(crate) workspace: ProjectWorkspace,
    pub(crate) files: Vec<(AbsPathBuf, Option<Vec<u8>>)>,
}

/// The package evcxr writes over a crate's Cargo.toml for a moment to check a `:dep`.
const DEP_CHECK_PACKAGE: &str = "evcxr_dummy_validate_dep";

/// Tries at a load whose `cargo metadata` failed, before the load fails.
const TRIES: u32 = 3;

/// Set, with this process's binary as their `RUSTC_WRAPPER`, on the cargo runs of a load.
pub const RUSTC_WRAPPER_ENV: &str = "DRYML_ANALYSIS_RUSTC";

/// Whether this binary's `main` runs [`rustc_wrapper_hook`] (a test harness does not).
static WRAPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// As the `RUSTC_WRAPPER` of a load's cargo runs: runs rustc from `/`, which cargo's questions
/// to it (`-vV`, `--print` on stdin's empty crate) do not need. ci48: rustup's proxy could not
/// locate the crate folder cargo ran in, removed under it; ci54: rustc found its working
/// directory invalid where the wrapper had found it there a moment before, in every load of
/// one process. Returns only where this process is not that wrapper; the loads of a binary that
/// never called it run no wrapper.
pub fn rustc_wrapper_hook() {
    if std::env::var_os(RUSTC_WRAPPER_ENV).is_none() {
        WRAPS.store(true, std::sync::atomic::Ordering::SeqCst);
        return;
    }
    let mut args = std::env::args_os().skip(1);
    let Some(rustc) = args.next() else { return };
    let mut command = std::process::Command::new(rustc);
    command.args(args).env_remove(RUSTC_WRAPPER_ENV).current_dir("/");
    let error = std::os::unix::process::CommandExt::exec(&mut command);
    eprintln!("dryml-analysis: rustc did not start: {error}");
    std::process::exit(101);
}

/// Loads the workspace of `manifest` and reads its files.
pub(crate) fn load(manifest: AbsPathBuf, with_sysroot: bool) -> Result<Loaded> {
    let manifest = ProjectManifest::from_manifest_file(manifest)?;
    let mut config = CargoConfig { sysroot: with_sysroot.then_some(RustLibSource::Discover), ..CargoConfig::default() };
    if WRAPS.load(std::sync::atomic::Ordering::SeqCst) {
        // This process's binary by its /proc name: it runs even where the file was rebuilt or
        // removed since the process started (its path then ends in " (deleted)").
        config.extra_env.insert("RUSTC_WRAPPER".into(), Some(format!("/proc/{}/exe", std::process::id())));
        config.extra_env.insert(RUSTC_WRAPPER_ENV.into(), Some("1".into()));
    }
    let mut tries = 0;
    // The crate folder's inode: cargo's rustc once found its working directory gone (ci48).
    let folder = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(manifest.manifest_path().parent().as_str()).map(|m| m.ino()).ok()
    };
    let workspace = loop {
        let before = folder();
        let workspace = load_settled(&manifest, &config)?;
        let Some(why) = incomplete(&workspace, with_sysroot) else { break workspace };
        // One line in the log: cargo's message spans several.
        let why = why.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ");
        let after = folder();
        let folder = match (before, after) {
            (_, None) => "is gone",
            (before, after) if before == after => "stayed",
            _ => "was replaced meanwhile",
        };
        tries += 1;
        eprintln!("dryml-analysis: incomplete load of {manifest} (try {tries} of {TRIES}; its folder {folder}): {why}");
        // A folder gone is a kernel gone: nothing to try again for.
        if tries == TRIES || after.is_none() {
            bail!("the analysis could not load {manifest}: {why}");
        }
        std::thread::sleep(Duration::from_millis(250 * u64::from(tries)));
    };
    let entries = workspace
        .to_roots()
        .into_iter()
        .map(|root| {
            loader::Entry::Directories(loader::Directories {
                extensions: vec!["rs".to_owned()],
                include: root.include,
                exclude: root.exclude,
            })
        })
        .collect();
    let (sender, receiver) = crossbeam_channel::unbounded();
    let mut reader = ra_ap_vfs_notify::NotifyHandle::spawn(sender);
    // The configuration starts the reading; nothing is watched afterwards.
    reader.set_config(loader::Config { version: 1, load: entries, watch: Vec::new() });
    let mut files = Vec::new();
    for message in receiver {
        match message {
            loader::Message::Progress { n_done: loader::LoadingProgress::Finished, .. } => break,
            loader::Message::Progress { .. } => {}
            loader::Message::Loaded { files: read } | loader::Message::Changed { files: read } => {
                files.extend(read.into_iter().map(|(path, bytes)| (path.to_path_buf(), bytes)));
            }
        }
    }
    Ok(Loaded { workspace, files })
}

/// Why `workspace` lacks crates that a successful `cargo metadata` gives it, if it does.
/// rust-analyzer falls back quietly where `cargo metadata` fails: to the crate's own package with
/// no dependencies, or to a standard library whose crates have none (`std` without `core`'s
/// prelude, ci40 and ci44), then to one stitched from a list of a past toolchain's. A graph like
/// that types nothing the notebook names, for as long as its Cargo.toml stays.
fn incomplete(workspace: &ProjectWorkspace, with_sysroot: bool) -> Option<String> {
    if let ra_ap_project_model::ProjectWorkspaceKind::Cargo { error: Some(error), .. } = &workspace.kind {
        return Some(format!("cargo metadata failed, so no dependency was read: {error:#}"));
    }
    if !with_sysroot {
        return None;
    }
    // A sysroot without its sources (`sysroot.error()`) stays so: the analysis goes on without.
    let sysroot = &workspace.sysroot;
    if let Some(error) = sysroot.metadata_error() {
        return Some(format!("the standard library's cargo metadata failed: {error}"));
    }
    // Stitched where its workspace has a Cargo.toml: both metadata runs failed. (A toolchain
    // whose library has none is stitched by design.) Seen only in the Debug text.
    let has_manifest = sysroot.rust_lib_src_root().is_some_and(|src| std::fs::metadata(src.join("Cargo.toml")).is_ok());
    if has_manifest && stitched(sysroot) {
        return Some("the standard library's cargo metadata failed, and its crates were guessed".into());
    }
    None
}

/// Whether the sysroot's crates were guessed (stitched), read from the start of its Debug text
/// (its workspace is not public), which stops once the workspace's variant is named.
fn stitched(sysroot: &ra_ap_project_model::Sysroot) -> bool {
    const FIELD: &str = "workspace: ";
    struct Head(String);
    impl std::fmt::Write for Head {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.push_str(s);
            let named = self.0.find(FIELD).is_some_and(|at| self.0.len() >= at + FIELD.len() + 9);
            if named {
                Err(std::fmt::Error)
            } else {
                Ok(())
            }
        }
    }
    let mut head = Head(String::new());
    let _ = std::fmt::Write::write_fmt(&mut head, format_args!("{sysroot:?}"));
    head.0.contains("workspace: Stitched(")
}

/// The workspace, loaded again while it is evcxr's `:dep` check's for a moment.
fn load_settled(manifest: &ProjectManifest, config: &CargoConfig) -> Result<ProjectWorkspace> {
    for _ in 0..5 {
        let workspace = ProjectWorkspace::load(manifest.clone(), config, &|_| {})?;
        let checking = match &workspace.kind {
            ra_ap_project_model::ProjectWorkspaceKind::Cargo { cargo, .. } => {
                cargo.packages().any(|p| cargo[p].name == DEP_CHECK_PACKAGE)
            }
            _ => false,
        };
        if !checking {
            return Ok(workspace);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("Cargo.toml kept changing while it was loaded")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ra_ap_project_model::Sysroot;

    #[test]
    fn a_sysroots_workspace_is_read_from_the_head_of_its_debug_text() {
        let empty = Sysroot::empty();
        assert!(format!("{empty:?}").contains("workspace: Empty"), "the field this reads is named so");
        assert!(!stitched(&empty));
    }
}
