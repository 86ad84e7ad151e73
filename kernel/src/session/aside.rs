//! A build directory of the kernel's own for the cells it builds while another kernel's build
//! holds the shared one (cargo's lock on it): a `:dep` of a minute elsewhere no longer holds up
//! a cell that needs nothing new.
//!
//! The directory (`<generation>/dryml-aside/<cell crate>`) mirrors the shared one's profiles as
//! they stand: big files (libraries, build-script outputs) as hard links, small ones (cargo's
//! fingerprints, dep-info, build-script records, which cargo and rustc rewrite in place) as
//! copies; other kernels' cell crates, incremental state and cargo's locks are left out; the
//! rest of the shared directory (the runtime's sources) is linked to. Rustc and the linker
//! replace an output rather than write into it, so a hard link is never written through. A
//! build there that starts compiling anything but the cell crate (a new `:dep`, a unit cargo
//! finds stale) is stopped at once and left to cargo in the shared directory, which builds it
//! once for every kernel. While the shared directory stays busy, the cells after the first run
//! rustc alone in this one (`dryml_builds`, from what that build recorded).

use super::cache::ASIDE_DIR;
use dryml_builds::{Builds, Outcome};
use evcxr::CellBuild;
use std::fs::{self, File};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
/// Files at least this big are hard-linked; smaller ones copied.
const LINK_FROM: u64 = 64 << 10;
/// Where, in the cell crate's directory, the wrapper records the aside build's rustc command.
const RECORD_FILE: &str = ".dryml-rustc-aside.json";

/// Whether the builds under way should stop (an interrupt): asked by the kernel's own work for
/// a build, which no kill reaches.
pub(crate) type Stop = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// This kernel's aside directory and its builds there.
pub(crate) struct Aside {
    name: String,
    builds: Option<Builds>,
    stop: Stop,
}

impl Aside {
    pub(crate) fn new(name: &str, stop: Stop) -> Aside {
        Aside { name: name.to_string(), builds: None, stop }
    }

    /// Builds the cell crate aside when the shared build directory (`CARGO_BUILD_BUILD_DIR` in
    /// `cargo`'s environment) is held by another build; `None`: cargo builds it there.
    pub(crate) fn build(&mut self, cargo: &Command) -> Option<CellBuild> {
        let shared = PathBuf::from(env_of(cargo, "CARGO_BUILD_BUILD_DIR")?);
        let crate_dir = cargo.get_current_dir()?.to_path_buf();
        if !shared.is_absolute() || !busy(&shared) {
            return None;
        }
        let dir = shared.join(ASIDE_DIR).join(&self.name);
        let mut aside = dryml_builds::copy_command(cargo);
        let record = crate_dir.join(RECORD_FILE);
        aside.env("CARGO_BUILD_BUILD_DIR", &dir).env(dryml_builds::RECORD_ENV, &record);
        let builds = self.builds.get_or_insert_with(|| Builds::new(record));
        match builds.build(&aside) {
            Outcome::Built(library) => return Some(CellBuild::Built(library)),
            Outcome::Failed(output) => return Some(CellBuild::Failed(output)),
            Outcome::Stale => {}
        }
        let t0 = Instant::now();
        match seed(&shared, &dir, &self.name, &*self.stop) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                // Cargo, in the shared directory, meets the interrupter's kill.
                tracing::info!("seeding the aside directory stopped: an interrupt");
                return None;
            }
            Err(e) => {
                tracing::warn!("no build aside ({}): {e}", dir.display());
                return None;
            }
            Ok(()) => {}
        }
        tracing::info!("the shared build directory is busy: building aside, seeded in {:.2?}", t0.elapsed());
        let built = run(aside, &self.name);
        builds.settle();
        built
    }
}

/// A variable of `cargo`'s environment, as set on it.
fn env_of(cargo: &Command, key: &str) -> Option<std::ffi::OsString> {
    cargo.get_envs().find(|(k, _)| *k == key).and_then(|(_, v)| v.map(|v| v.to_owned()))
}

/// The profile directories of a build directory: those holding cargo's `.cargo-lock`
/// (`debug`, `x86_64-unknown-linux-gnu/debug`).
fn profiles(build_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(build_dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.join(".cargo-lock").exists() {
            out.push(p.clone());
        }
        for e in fs::read_dir(&p).into_iter().flatten().flatten() {
            if e.path().join(".cargo-lock").exists() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Whether another build holds cargo's lock on one of the directory's profiles.
fn busy(build_dir: &Path) -> bool {
    profiles(build_dir).iter().any(|p| {
        // The lock, if taken, goes with the file at the end of this call.
        let lock = File::options().read(true).write(true).open(p.join(".cargo-lock"));
        lock.is_ok_and(|f| !dryml_sys::lock::try_exclusive(&f))
    })
}

/// Makes `dir` the shared directory's mirror as it stands (see the module's comment); stops
/// (`Interrupted`) as soon as `stop` says so: seeding a big cache takes seconds.
fn seed(shared: &Path, dir: &Path, own: &str, stop: &dyn Fn() -> bool) -> std::io::Result<()> {
    super::cache::remove(dir);
    let profiles = profiles(shared);
    for profile in &profiles {
        let rel = profile.strip_prefix(shared).map_err(std::io::Error::other)?;
        mirror(profile, &dir.join(rel), own, stop)?;
    }
    // The rest (`dryml-src`, whose files cargo's dep-info names relative to the build
    // directory) as links to the shared one's.
    for e in fs::read_dir(shared)? {
        let path = e?.path();
        let holds_profile = profiles.iter().any(|p| p.starts_with(&path));
        if !holds_profile && path.file_name() != Some(ASIDE_DIR.as_ref()) {
            std::os::unix::fs::symlink(&path, dir.join(path.file_name().unwrap_or_default()))?;
        }
    }
    Ok(())
}

fn mirror(from: &Path, to: &Path, own: &str, stop: &dyn Fn() -> bool) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        if stop() {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let e = e?;
        let name = e.file_name();
        let text = name.to_string_lossy();
        let other_kernels = super::cache::token_of(&text).is_some_and(|t| !own.ends_with(t));
        if text == ".cargo-lock" || text == "incremental" || other_kernels {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        let meta = fs::symlink_metadata(&src)?;
        if meta.is_dir() {
            mirror(&src, &dst, own, stop)?;
        } else if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if meta.len() >= LINK_FROM {
            fs::hard_link(&src, &dst).or_else(|_| fs::copy(&src, &dst).map(drop))?;
        } else {
            // A copy keeps its modification time, which cargo's fingerprints compare.
            fs::copy(&src, &dst)?;
            let f = File::options().write(true).open(&dst)?;
            f.set_modified(meta.modified()?)?;
        }
    }
    Ok(())
}

/// Runs cargo aside; stops it (and returns `None`, for cargo in the shared directory) as soon as
/// it compiles anything but the cell crate `name`.
fn run(mut cargo: Command, name: &str) -> Option<CellBuild> {
    let mut child = cargo.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let mut stderr = Vec::new();
    let mut other = false;
    for line in std::io::BufReader::new(child.stderr.take()?).split(b'\n').map_while(Result::ok) {
        let text = String::from_utf8_lossy(&line);
        if let Some(what) = text.trim_start().strip_prefix("Compiling ") {
            if what.split_whitespace().next() != Some(name) {
                tracing::info!("aside: {} needs building; left to the shared directory", what.trim());
                other = true;
                let _ = child.kill();
                break;
            }
        }
        stderr.extend_from_slice(&line);
        stderr.push(b'\n');
    }
    let status = child.wait().ok()?;
    let stdout = reader.join().ok()?;
    if other {
        return None;
    }
    if !status.success() {
        return Some(CellBuild::Failed(std::process::Output { status, stdout, stderr }));
    }
    library(&stdout, name).map(CellBuild::Built)
}

/// The cell crate's library among cargo's JSON messages (its uplifted file).
fn library(stdout: &[u8], name: &str) -> Option<PathBuf> {
    stdout
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.extension().is_some_and(|x| x == std::env::consts::DLL_EXTENSION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_links_big_files_copies_small_ones_and_leaves_out_locks_and_other_kernels() {
        let root = tempfile::tempdir().unwrap();
        let shared = root.path().join("gen");
        let profile = shared.join("x86_64-unknown-linux-gnu/debug");
        fs::create_dir_all(profile.join("deps")).unwrap();
        fs::create_dir_all(profile.join(".fingerprint/dryml-ab12")).unwrap();
        fs::write(profile.join(".cargo-lock"), "").unwrap();
        fs::write(profile.join("deps/libdryml-ab12.rlib"), vec![7u8; 100 << 10]).unwrap();
        fs::write(profile.join("deps/dryml-ab12.d"), "deps").unwrap();
        fs::write(profile.join(".fingerprint/dryml-ab12/lib-dryml"), "hash").unwrap();
        fs::write(profile.join("deps/libctx_k0123456789ab.so"), vec![1u8; 100 << 10]).unwrap();
        fs::write(profile.join("deps/libctx_kaaaaaaaaaaaa.so"), vec![1u8; 100 << 10]).unwrap();
        fs::create_dir_all(shared.join("dryml-src/ab/runtime")).unwrap();
        assert!(!busy(&shared));
        let held = File::options().write(true).open(profile.join(".cargo-lock")).unwrap();
        dryml_sys::lock::exclusive(&held).unwrap();
        assert!(busy(&shared));
        let aside = shared.join(ASIDE_DIR).join("ctx_k0123456789ab");
        seed(&shared, &aside, "ctx_k0123456789ab", &|| false).unwrap();
        let mirrored = aside.join("x86_64-unknown-linux-gnu/debug");
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        let (rlib, d) = ("deps/libdryml-ab12.rlib", "deps/dryml-ab12.d");
        assert_eq!(ino(&mirrored.join(rlib)), ino(&profile.join(rlib)));
        assert_ne!(ino(&mirrored.join(d)), ino(&profile.join(d)));
        let mtime = |p: &Path| fs::metadata(p).unwrap().modified().unwrap();
        assert_eq!(mtime(&mirrored.join(d)), mtime(&profile.join(d)));
        assert!(mirrored.join(".fingerprint/dryml-ab12/lib-dryml").exists());
        assert!(mirrored.join("deps/libctx_k0123456789ab.so").exists());
        assert!(!mirrored.join("deps/libctx_kaaaaaaaaaaaa.so").exists());
        assert!(!mirrored.join(".cargo-lock").exists());
        assert!(aside.join("dryml-src/ab/runtime").is_dir() && aside.join("dryml-src").is_symlink());
        // Seeded again, it starts over.
        fs::write(mirrored.join("stray"), "x").unwrap();
        seed(&shared, &aside, "ctx_k0123456789ab", &|| false).unwrap();
        assert!(!mirrored.join("stray").exists());
        // An interrupt stops it between files.
        let stopped = seed(&shared, &aside, "ctx_k0123456789ab", &|| true).unwrap_err();
        assert_eq!(stopped.kind(), std::io::ErrorKind::Interrupted);
        assert!(!mirrored.join(rlib).exists());
    }

    #[test]
    fn the_cell_crates_library_is_found_among_cargos_messages() {
        let out = br#"{"reason":"compiler-artifact","target":{"name":"dryml"},"filenames":["/x/libdryml.rlib"]}
{"reason":"compiler-artifact","target":{"name":"ctx_k1"},"filenames":["/t/libctx_k1.so"]}
{"reason":"build-finished","success":true}"#;
        assert_eq!(library(out, "ctx_k1"), Some(PathBuf::from("/t/libctx_k1.so")));
        assert_eq!(library(out, "ctx_k2"), None);
    }
}
