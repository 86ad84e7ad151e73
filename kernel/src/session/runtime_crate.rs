//! evcxr's runtime (the variable store every cell uses) as a crate of the build cache, named by
//! its content: built once per machine and linked by each cell, where evcxr compiled it into
//! every cell as a module (about 5 ms of a trivial cell's 90 ms build).

use anyhow::Context;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where a generation keeps the crate, one directory per content; `%cache clear` leaves it.
pub const DIR: &str = "evcxr-runtime";

/// The crate holding `source` in `generation`, made if missing; its dependency line's value.
pub fn dependency(generation: &Path, source: &str) -> anyhow::Result<String> {
    // Not `lib.rs`: evcxr reads a span in any file so named as the cell's own.
    let files = [("Cargo.toml", manifest()), ("runtime.rs", format!("#![allow(warnings)]\n{source}"))];
    let mut hash = Sha256::new();
    for (name, text) in &files {
        hash.update(name.as_bytes());
        hash.update((text.len() as u64).to_le_bytes());
        hash.update(text.as_bytes());
    }
    let dir = generation.join(DIR).join(hex::encode(&hash.finalize()[..8]));
    if !dir.join("Cargo.toml").exists() {
        make(&dir, &files).with_context(|| format!("writing {}", dir.display()))?;
    }
    let path = dir.to_str().context("the build cache's path is not UTF-8")?;
    Ok(format!("{{ path = {path:?} }}"))
}

fn manifest() -> String {
    format!(
        "[package]\nname = {:?}\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[lib]\npath = \"runtime.rs\"\n\n\
         # Not a member of any workspace above the cache.\n[workspace]\n",
        evcxr::RUNTIME_CRATE
    )
}

/// Writes the crate beside `dir` and renames it into place: whole or not at all, and a kernel
/// that made the same crate first wins.
fn make(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    let parent = dir.parent().context("no parent")?;
    std::fs::create_dir_all(parent)?;
    let tmp: PathBuf = parent.join(format!(".tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&tmp)?;
    let written = files
        .iter()
        .try_for_each(|(name, text)| std::fs::write(tmp.join(name), text))
        .and_then(|()| std::fs::rename(&tmp, dir));
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    match written {
        Err(_) if dir.join("Cargo.toml").exists() => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_is_made_once_per_content_whole() {
        let generation = tempfile::tempdir().unwrap();
        let first = dependency(generation.path(), "pub fn a() {}").unwrap();
        assert_eq!(dependency(generation.path(), "pub fn a() {}").unwrap(), first);
        let other = dependency(generation.path(), "pub fn b() {}").unwrap();
        assert_ne!(other, first);
        let dirs: Vec<_> = std::fs::read_dir(generation.path().join(DIR)).unwrap().flatten().collect();
        assert_eq!(dirs.len(), 2, "no temporary directory is left");
        let path = first.trim_start_matches("{ path = \"").trim_end_matches("\" }");
        assert!(std::fs::read_to_string(Path::new(path).join("runtime.rs")).unwrap().ends_with("pub fn a() {}"));
    }
}
