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
    let hash = Sha256::digest(source.as_bytes());
    let dir = generation.join(DIR).join(hex::encode(&hash[..8]));
    if !dir.join("Cargo.toml").exists() {
        make(&dir, source).with_context(|| format!("writing {}", dir.display()))?;
    }
    let path = dir.to_str().context("the build cache's path is not UTF-8")?;
    Ok(format!("{{ path = {path:?} }}"))
}

/// Writes the crate beside `dir` and renames it into place: whole or not at all, and a kernel
/// that made the same crate first wins.
fn make(dir: &Path, source: &str) -> anyhow::Result<()> {
    let parent = dir.parent().context("no parent")?;
    std::fs::create_dir_all(parent)?;
    let tmp: PathBuf = parent.join(format!(".tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&tmp)?;
    let manifest = format!(
        "[package]\nname = {:?}\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[lib]\npath = \"lib.rs\"\n\n\
         # Not a member of any workspace above the cache.\n[workspace]\n",
        evcxr::RUNTIME_CRATE
    );
    let written = std::fs::write(tmp.join("lib.rs"), format!("#![allow(warnings)]\n{source}"))
        .and_then(|()| std::fs::write(tmp.join("Cargo.toml"), manifest))
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
        assert!(std::fs::read_to_string(Path::new(path).join("lib.rs")).unwrap().ends_with("pub fn a() {}"));
    }
}
