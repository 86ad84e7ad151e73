//! A generation's files as cargo lays them out: its profile directories and their locks, its
//! units (the files of one crate build), their sizes, and removing them.

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One thing eviction may remove: a whole generation that is not this kernel's, or one cargo
/// unit (the files of one crate build, which share a hash) of this kernel's generation.
#[derive(Debug)]
pub(in crate::session) struct Item {
    pub(in crate::session) label: String,
    pub(in crate::session) bytes: u64,
    pub(in crate::session) last_used: SystemTime,
    pub(in crate::session) paths: Vec<PathBuf>,
    /// Cargo locks to hold while removing it.
    pub(in crate::session) generation: PathBuf,
}

/// Cargo's profile directories in a build directory: the host's (build scripts) and each
/// target's (evcxr passes `--target`).
pub(in crate::session) fn profile_dirs(generation: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(generation).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_name() == "debug" {
            out.push(p);
        } else if p.join("debug").is_dir() {
            out.push(p.join("debug"));
        }
    }
    out.sort();
    out
}

/// Takes cargo's own locks on a generation (the `.cargo-lock` of each profile directory), so no
/// build runs in it meanwhile.
pub(in crate::session) fn lock_generation(generation: &Path, wait: Duration) -> anyhow::Result<Vec<File>> {
    let deadline = std::time::Instant::now() + wait;
    let mut held = Vec::new();
    for profile in profile_dirs(generation) {
        let path = profile.join(".cargo-lock");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        loop {
            if dryml_sys::lock::try_exclusive(&file) {
                break;
            }
            if std::time::Instant::now() >= deadline {
                bail!(
                    "a build is running in {} (another kernel holds cargo's lock); try again when it ends",
                    profile.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        held.push(file);
    }
    Ok(held)
}

/// After an interrupt killed a build: rustc can leave the cell crate's (`crate_name`, see
/// [`Claim::cell_crate`]) codegen objects and incremental state behind, and a later cell's link
/// then took stale objects (`rust-lld: undefined hidden symbol`, found by the soak). Removes them
/// from every profile directory under `root` (down to `target/<triple>/debug`). Without cargo's
/// lock: the files are named by this kernel's crate, so no other kernel's build reads them, and
/// waiting for the lock held the interrupt's reply until another kernel's build ended.
pub fn clean_killed_build(root: &Path, crate_name: &str) {
    let mut profiles = Vec::new();
    let mut todo = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = todo.pop() {
        if dir.join("deps").is_dir() && dir.join("incremental").is_dir() {
            profiles.push(dir);
            continue;
        }
        if depth < 4 {
            todo.extend(
                std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| (e.path(), depth + 1)),
            );
        }
    }
    for profile in profiles {
        for e in std::fs::read_dir(profile.join("deps")).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.strip_prefix(crate_name).is_some_and(|r| r.starts_with('.') && r.ends_with(".rcgu.o")) {
                remove(&e.path());
            }
        }
        for e in std::fs::read_dir(profile.join("incremental")).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().strip_prefix(crate_name).is_some_and(|r| r.starts_with('-')) {
                remove(&e.path());
            }
        }
    }
}

/// The cargo units of a generation, grouped by the hash that ends their file names.
pub(in crate::session) fn units(generation: &Path) -> Vec<Item> {
    let mut by_hash: BTreeMap<String, Item> = BTreeMap::new();
    for profile in profile_dirs(generation) {
        for sub in [".fingerprint", "build", "deps", "incremental", "examples"] {
            for e in std::fs::read_dir(profile.join(sub)).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // Incremental state is named by another hash (`dryml-0jarrlo1xdlp9`): an item
                // of its own.
                let (crate_name, hash) = match unit_of(&name) {
                    Some((c, h)) => (c, h.to_string()),
                    None if sub == "incremental" => {
                        (name.split('-').next().unwrap_or(&name), format!("incremental/{name}"))
                    }
                    None => continue,
                };
                let (size, newest) = tree_size(&e.path());
                let item = by_hash.entry(hash).or_insert_with(|| Item {
                    label: crate_name.trim_start_matches("lib").replace('_', "-"),
                    bytes: 0,
                    last_used: SystemTime::UNIX_EPOCH,
                    paths: Vec::new(),
                    generation: generation.to_path_buf(),
                });
                if sub == ".fingerprint" {
                    // The package's own spelling (hyphens), where deps/ has the crate's.
                    item.label = crate_name.to_string();
                }
                item.bytes += size;
                item.last_used = item.last_used.max(newest);
                item.paths.push(e.path());
            }
        }
    }
    by_hash.into_values().collect()
}

/// `libdryml-7734e6fd54cb951f.rlib` → (`libdryml`, `7734e6fd54cb951f`); None for names without a
/// unit hash (the notebook crate's `libctx.so`, cargo's own files).
pub(in crate::session) fn unit_of(file_name: &str) -> Option<(&str, &str)> {
    let stem = file_name.split('.').next()?;
    let (name, hash) = stem.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) && !name.is_empty()).then_some((name, hash))
}

/// Bytes under `path` and the newest use seen: mtimes, and the access times of files (reading
/// a directory, as this walk does, would refresh its own).
pub(in crate::session) fn tree_size(path: &Path) -> (u64, SystemTime) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return (0, SystemTime::UNIX_EPOCH) };
    let mut newest = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    if !meta.is_dir() {
        if let Ok(a) = meta.accessed() {
            newest = newest.max(a);
        }
        // A file linked from a kernel's build aside counts once in all.
        return (meta.blocks() * 512 / meta.nlink().max(1), newest);
    }
    let mut total = meta.blocks() * 512;
    for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let (b, n) = tree_size(&e.path());
        total += b;
        newest = newest.max(n);
    }
    (total, newest)
}

pub(in crate::session) fn remove(path: &Path) {
    let r = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    };
    if let Err(e) = r {
        tracing::warn!("build cache: removing {}: {e}", path.display());
    }
}
