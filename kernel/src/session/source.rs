//! The runtime's sources as cells build them: a copy in the build cache named by its content,
//! `<generation>/dryml-src/<hash>/runtime`. Cargo names a path crate by its path, so each checkout
//! of the same sources (a fresh clone, a worktree, CI's) built `dryml` again for every set of
//! features it used, 15 to 30 s each; copies of equal sources are one path, built once.
//!
//! A copy holds what dryml inherits of the workspace's Cargo.toml (package fields, lints, the
//! dependencies dryml names) and every file under `runtime/`, and is never written again: changed
//! sources make another copy, which cargo builds as a new crate, so values of the old build's
//! types are dropped, never read through the new build's. Each kernel holds a shared lock on the
//! copy it builds against; a new copy removes the others beyond the [`KEEP`] used last
//! (`DRYML_SOURCE_COPIES`) that no kernel holds, with their builds.

use super::cache;
use anyhow::Context;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where a generation keeps its copies.
pub const DIR: &str = "dryml-src";
/// How many earlier copies stay built besides the one in use (and any a kernel holds).
pub const KEEP_ENV: &str = "DRYML_SOURCE_COPIES";
const KEEP: usize = 4;
/// A complete copy has it; a kernel holds it locked (shared) while it builds against the copy.
const IN_USE: &str = ".dryml-in-use";

/// Each file's modification time and length: a change in the sources changes it.
type Stamp = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

/// A copy of the sources and the stamp of the checkout's files it was made from.
pub struct Copy {
    runtime: PathBuf,
    stamp: Stamp,
    _held: File,
}

impl Copy {
    /// The copy's `runtime/`, for `:dep dryml = { path = ... }`.
    pub fn runtime(&self) -> &Path {
        &self.runtime
    }

    /// Whether the checkout's sources under `runtime` are still what this copy was made from.
    pub fn current(&self, runtime: &Path) -> bool {
        files(runtime).is_ok_and(|f| stamp(&f) == self.stamp)
    }
}

/// The copy of the sources under `runtime` (and its workspace's Cargo.toml) in `generation`,
/// made if missing, and held until the returned value is dropped.
pub fn copy(runtime: &Path, generation: &Path) -> anyhow::Result<Copy> {
    let files = files(runtime).with_context(|| format!("reading {}", runtime.display()))?;
    let before = stamp(&files);
    // Read once: the copy holds the very bytes its name hashes.
    let mut contents = Vec::with_capacity(files.len());
    for (rel, abs) in &files {
        contents.push((rel, std::fs::read(abs).with_context(|| format!("reading {}", abs.display()))?));
    }
    let workspace =
        inherited_manifest(&contents).with_context(|| format!("reading {}/../Cargo.toml", runtime.display()))?;
    contents[0].1 = workspace;
    let mut hash = Sha256::new();
    for (rel, bytes) in &contents {
        hash.update(rel.as_os_str().as_encoded_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    // Files changed while they were read: the bytes may mix both; the next cell reads again.
    if files_now(runtime) != before {
        anyhow::bail!("{} changed while it was read", runtime.display());
    }
    let dirs = generation.join(DIR);
    let dest = dirs.join(hex::encode(&hash.finalize()[..8]));
    let make = || -> anyhow::Result<()> {
        let tmp = dirs.join(format!(".tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
        let made = (|| -> anyhow::Result<()> {
            for (rel, bytes) in &contents {
                let to = tmp.join(rel);
                std::fs::create_dir_all(to.parent().expect("a file's path has a parent"))?;
                std::fs::write(&to, bytes).with_context(|| format!("writing {}", to.display()))?;
            }
            File::create(tmp.join(IN_USE))?;
            // What a removal cut short (a crash) is no copy.
            if dest.exists() && !dest.join(IN_USE).exists() {
                std::fs::remove_dir_all(&dest)?;
            }
            // Another kernel that made the same copy first wins the rename; either is the copy.
            std::fs::rename(&tmp, &dest).or_else(|e| match dest.join(IN_USE).exists() {
                true => Ok(()),
                false => Err(e).with_context(|| format!("placing {}", dest.display())),
            })
        })();
        let _ = std::fs::remove_dir_all(&tmp);
        made
    };
    for _ in 0..3 {
        if !dest.join(IN_USE).exists() {
            make()?;
        }
        let Ok(held) = File::open(dest.join(IN_USE)) else { continue };
        let _ = dryml_sys::lock::shared(&held);
        // A prune may have removed the copy while this waited for its lock: then it is made again.
        let same =
            std::fs::metadata(dest.join(IN_USE)).is_ok_and(|m| held.metadata().is_ok_and(|h| h.ino() == m.ino()));
        if !same {
            continue;
        }
        // The last used, for what `prune` keeps.
        let _ = held.set_modified(SystemTime::now());
        let keep = std::env::var(KEEP_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(KEEP);
        prune(generation, &dest, keep);
        return Ok(Copy { runtime: dest.join(rel_runtime(runtime)), stamp: before, _held: held });
    }
    anyhow::bail!("{} was removed each time it was made", dest.display())
}

/// What a copy's workspace manifest (`contents[0]`) keeps of the checkout's: the package fields
/// and lints, and the workspace dependencies that the copied manifests name. Anything else (a
/// kernel's new dependency, a profile) would make a new copy, which builds dryml again.
fn inherited_manifest(contents: &[(&PathBuf, Vec<u8>)]) -> anyhow::Result<Vec<u8>> {
    use toml::{Table, Value};
    let parse = |bytes: &[u8]| -> anyhow::Result<Table> { Ok(std::str::from_utf8(bytes)?.parse()?) };
    let root = parse(&contents[0].1)?;
    let workspace = root.get("workspace").and_then(Value::as_table).context("it has no [workspace]")?;
    let mut named = std::collections::BTreeSet::new();
    let mut members = Vec::new();
    for (rel, bytes) in &contents[1..] {
        if rel.file_name().is_none_or(|n| n != "Cargo.toml") {
            continue;
        }
        let manifest = parse(bytes).with_context(|| format!("reading {}", rel.display()))?;
        members.push(Value::from(rel.parent().unwrap_or(Path::new("")).to_string_lossy().into_owned()));
        let targets = manifest.get("target").and_then(Value::as_table).into_iter().flat_map(|t| t.values());
        for holder in std::iter::once(&manifest).chain(targets.filter_map(Value::as_table)) {
            for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
                for (name, spec) in holder.get(kind).and_then(Value::as_table).into_iter().flatten() {
                    if spec.get("workspace").and_then(Value::as_bool) == Some(true) {
                        named.insert(name.clone());
                    }
                }
            }
        }
    }
    let mut kept = Table::new();
    kept.insert("members".into(), Value::Array(members));
    for key in ["package", "lints"] {
        if let Some(value) = workspace.get(key) {
            kept.insert(key.into(), value.clone());
        }
    }
    let all = workspace.get("dependencies").and_then(Value::as_table).cloned().unwrap_or_default();
    let dependencies: Table = all.into_iter().filter(|(name, _)| named.contains(name)).collect();
    kept.insert("dependencies".into(), Value::Table(dependencies));
    Ok(toml::to_string(&Table::from_iter([("workspace".to_owned(), Value::Table(kept))]))?.into_bytes())
}

/// The checkout's files for a copy: its workspace's Cargo.toml and every file under `runtime`
/// but `target/` and hidden entries, each as (path in the copy, path in the checkout), sorted.
fn files(runtime: &Path) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
    let root = runtime.join("..");
    let mut out = vec![(PathBuf::from("Cargo.toml"), root.join("Cargo.toml"))];
    let mut dirs = vec![runtime.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') || name == "target" {
                continue;
            }
            let path = e.path();
            if std::fs::metadata(&path)?.is_dir() {
                dirs.push(path);
            } else {
                let rel = rel_runtime(runtime).join(path.strip_prefix(runtime).expect("found under runtime"));
                out.push((rel, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn files_now(runtime: &Path) -> Stamp {
    files(runtime).map(|f| stamp(&f)).unwrap_or_default()
}

fn stamp(files: &[(PathBuf, PathBuf)]) -> Stamp {
    files
        .iter()
        .map(|(rel, abs)| {
            let meta = std::fs::metadata(abs).ok();
            (rel.clone(), meta.and_then(|m| Some((m.modified().ok()?, m.len()))))
        })
        .collect()
}

/// The runtime's directory name in the copy (`runtime` in this workspace).
fn rel_runtime(runtime: &Path) -> PathBuf {
    std::fs::canonicalize(runtime)
        .ok()
        .and_then(|p| p.file_name().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("runtime"))
}

/// Removes the copies beyond the `keep` used last, but `mine` and any a kernel holds, and what
/// was built from them.
fn prune(generation: &Path, mine: &Path, keep: usize) {
    let dirs = &generation.join(DIR);
    let mut copies: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(dirs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != mine && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter_map(|p| Some((std::fs::metadata(p.join(IN_USE)).ok()?.modified().ok()?, p)))
        .collect();
    copies.sort_by_key(|c| std::cmp::Reverse(c.0));
    for (_, old) in copies.into_iter().skip(keep) {
        let Ok(f) = File::open(old.join(IN_USE)) else { continue };
        // Held (shared) by a kernel building against it: it stays. Moved aside first, so no
        // kernel finds half of it under its name.
        if dryml_sys::lock::try_exclusive(&f) {
            let trash = dirs.join(format!(".trash-{}", uuid::Uuid::new_v4().simple()));
            if std::fs::rename(&old, &trash).is_ok() {
                let _ = std::fs::remove_dir_all(&trash);
                remove_builds_from(generation, &old);
            }
        }
    }
    // What a killed kernel left: copies half made or half removed.
    let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in std::fs::read_dir(dirs).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < hour_ago);
        if (name.starts_with(".tmp-") || name.starts_with(".trash-")) && old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Removes the units of `generation` built from sources under `dir` (a copy that is gone): those
/// whose dep-info names a file there. Skipped, for the eviction to do later, while a build holds
/// cargo's lock. Returns the bytes freed.
pub(super) fn remove_builds_from(generation: &Path, dir: &Path) -> u64 {
    let Ok(_held) = cache::lock_generation(generation, std::time::Duration::ZERO) else { return 0 };
    let needle = dir.to_string_lossy().into_owned() + "/";
    let mut built_there = std::collections::BTreeSet::new();
    for profile in cache::profile_dirs(generation) {
        for e in std::fs::read_dir(profile.join("deps")).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let (Some((_, hash)), true) = (cache::unit_of(&name), name.ends_with(".d")) {
                if std::fs::read_to_string(e.path()).is_ok_and(|d| d.contains(&needle)) {
                    built_there.insert(hash.to_string());
                }
            }
        }
    }
    let mut freed = 0;
    for item in cache::units(generation) {
        let hash =
            item.paths.first().and_then(|p| cache::unit_of(&p.file_name()?.to_string_lossy()).map(|u| u.1.to_string()));
        if hash.is_some_and(|h| built_there.contains(&h)) {
            item.paths.iter().for_each(|p| cache::remove(p));
            freed += item.bytes;
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dryml-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A workspace with a runtime crate, its target/ and a hidden file (neither copied).
    fn checkout(at: &Path) -> PathBuf {
        let runtime = at.join("runtime");
        for (f, text) in [
            ("Cargo.toml", "[workspace]\n[workspace.dependencies]\nserde = \"1\"\nregex = \"1\"\n"),
            ("runtime/Cargo.toml", "[package]\nname = \"dryml\"\n[dependencies]\nserde.workspace = true\n"),
            ("runtime/src/lib.rs", "pub fn f() -> u32 { 1 }\n"),
            ("runtime/sys/src/lib.rs", "\n"),
            ("runtime/target/debug/junk", "x"),
            ("runtime/.hidden", "x"),
        ] {
            std::fs::create_dir_all(at.join(f).parent().unwrap()).unwrap();
            std::fs::write(at.join(f), text).unwrap();
        }
        runtime
    }

    #[test]
    fn equal_sources_in_two_checkouts_are_one_copy_and_a_change_makes_another() {
        let d = scratch("copies");
        let (a, b, generation) = (checkout(&d.join("a")), checkout(&d.join("b")), d.join("gen"));
        let ca = copy(&a, &generation).unwrap();
        let cb = copy(&b, &generation).unwrap();
        assert_eq!(ca.runtime(), cb.runtime());
        assert!(ca.runtime().ends_with("runtime") && ca.runtime().join("sys/src/lib.rs").is_file());
        assert!(ca.runtime().join("../Cargo.toml").is_file());
        assert!(!ca.runtime().join("target").exists() && !ca.runtime().join(".hidden").exists());
        assert!(ca.current(&a));
        std::fs::write(a.join("src/lib.rs"), "pub fn f() -> u32 { 2 }\n").unwrap();
        assert!(!ca.current(&a) && cb.current(&b));
        let changed = copy(&a, &generation).unwrap();
        assert_ne!(changed.runtime(), ca.runtime());
        assert_eq!(std::fs::read_to_string(changed.runtime().join("src/lib.rs")).unwrap(), "pub fn f() -> u32 { 2 }\n");
        // The first copy is as it was made.
        assert_eq!(std::fs::read_to_string(ca.runtime().join("src/lib.rs")).unwrap(), "pub fn f() -> u32 { 1 }\n");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_workspace_change_dryml_does_not_inherit_makes_no_new_copy() {
        let d = scratch("manifest");
        let (runtime, generation) = (checkout(&d.join("a")), d.join("gen"));
        let first = copy(&runtime, &generation).unwrap();
        let manifest = std::fs::read_to_string(first.runtime().join("../Cargo.toml")).unwrap();
        assert!(manifest.contains("serde = \"1\"") && !manifest.contains("regex"), "{manifest}");
        // A kernel's new dependency, and a profile: the same copy.
        let workspace = d.join("a/Cargo.toml");
        let text = std::fs::read_to_string(&workspace).unwrap();
        std::fs::write(&workspace, format!("{text}tokio = \"1\"\n[profile.release]\ndebug = false\n")).unwrap();
        assert_eq!(copy(&runtime, &generation).unwrap().runtime(), first.runtime());
        // A dependency dryml inherits: another copy.
        std::fs::write(&workspace, text.replace("serde = \"1\"", "serde = \"1.0.200\"")).unwrap();
        assert_ne!(copy(&runtime, &generation).unwrap().runtime(), first.runtime());
        // A manifest that does not parse is named.
        std::fs::write(&workspace, "[workspace\n").unwrap();
        let error = format!("{:#}", copy(&runtime, &generation).err().expect("an error"));
        assert!(error.contains("Cargo.toml"), "{error}");
        drop(first);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn old_copies_go_but_those_a_kernel_holds_stay() {
        let d = scratch("prune");
        let (runtime, generation) = (checkout(&d.join("a")), d.join("gen"));
        let held = copy(&runtime, &generation).unwrap();
        let mut made = vec![held.runtime().parent().unwrap().to_path_buf()];
        for i in 0..KEEP + 2 {
            std::fs::write(runtime.join("src/lib.rs"), format!("pub fn f() -> u32 {{ {} }}\n", i + 10)).unwrap();
            // Each copy let go at once, as by a kernel that ended.
            let c = copy(&runtime, &generation).unwrap();
            made.push(c.runtime().parent().unwrap().to_path_buf());
        }
        let left: Vec<_> = made.iter().filter(|p| p.exists()).collect();
        // The last made, the KEEP used before it, and the held one (used first of all).
        assert!(made[0].exists(), "a held copy is never removed");
        assert_eq!(left.len(), KEEP + 2, "{left:?}");
        assert!(made[made.len() - 1].exists());
        drop(held);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
