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

/// Loads the workspace of `manifest` and reads its files.
pub(crate) fn load(manifest: AbsPathBuf, with_sysroot: bool) -> Result<Loaded> {
    let manifest = ProjectManifest::from_manifest_file(manifest)?;
    let config = CargoConfig { sysroot: with_sysroot.then_some(RustLibSource::Discover), ..CargoConfig::default() };
    let workspace = load_settled(&manifest, &config)?;
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
