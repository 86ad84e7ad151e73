//! The kernel's part of a result's provenance (`dryml::objects::Provenance`): the cells that ran,
//! the notebook, rustc and cargo, the cell crate's resolved crates, libtorch and CUDA once `tch`
//! is in, the GPUs. Written to the state directory as each cell starts and again after its build
//! (the crate's resolved `Cargo.lock`), for the child's `Provenance::here` to read; a cell pays
//! for a hash and two small file writes.

use dryml::objects::provenance::{Cells, Gpu, Provenance};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

/// What the kernel knows of how results are made; shared with the closure a build calls.
pub struct Recorder {
    /// `DRYML_NO_PROVENANCE` is set: nothing is written (objects then record only what their
    /// process sees), for the benchmark's comparison.
    off: bool,
    file: PathBuf,
    inner: Mutex<Inner>,
    /// `rustc --version` and `cargo --version`, asked once in the background.
    toolchain: Arc<OnceLock<(Option<String>, Option<String>)>>,
}

#[derive(Default)]
struct Inner {
    cells: Sha256,
    count: u64,
    /// The cell crate's `Cargo.lock` as last read: its time and its crates.
    lock: Option<(SystemTime, BTreeMap<String, String>)>,
    /// GPUs and the driver, from the machine record the kernel writes at its start.
    gpus: Vec<Gpu>,
    /// libtorch's and CUDA's versions, once a cell brought `tch` in.
    torch: Option<(String, Option<String>)>,
    /// The git state where this cell's code runs, being looked up (beside its build) or found
    /// (`null`: no work tree); none: the child looks itself.
    git: Option<Git>,
}

/// The git look of a cell: asked for when its code is about to build, taken when it has built.
enum Git {
    Looking(crossbeam_channel::Receiver<Value>),
    Found(Value),
}

impl Recorder {
    pub fn new(state_dir: &Path) -> Recorder {
        let toolchain = Arc::new(OnceLock::new());
        let set = toolchain.clone();
        std::thread::spawn(move || {
            let _ = set.set((version("rustc"), version("cargo")));
        });
        let file = state_dir.join(dryml::objects::provenance::KERNEL_FILE);
        let off = std::env::var_os("DRYML_NO_PROVENANCE").is_some();
        Recorder { off, file, inner: Mutex::new(Inner::default()), toolchain }
    }

    /// A cell (any execute request, magics too) is about to run: its source joins the hash of
    /// the cells so far, and the kernel's part is written for it.
    pub fn cell(&self, code: &str) {
        {
            let mut i = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            i.cells.update((code.len() as u64).to_le_bytes());
            i.cells.update(code.as_bytes());
            i.count += 1;
            i.git = None;
        }
        self.write(std::env::var_os("EVCXR_TMPDIR").as_deref().map(Path::new));
    }

    /// Code is about to be built to run in `dir`: its git state is looked up beside the build
    /// (git takes about 3 ms; a build, 100 ms or more), so that no cell waits for git.
    pub fn look_at_git(&self, dir: PathBuf) {
        if self.off {
            return;
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(dryml::objects::provenance::Git::of(&dir).map_or(Value::Null, |g| g.to_json()));
        });
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).git = Some(Git::Looking(rx));
    }

    /// The notebook has `tch`: libtorch's version and its CUDA are recorded from now on.
    pub fn torch_in(&self) {
        if self.inner.lock().unwrap_or_else(PoisonError::into_inner).torch.is_none() {
            if let Some(lib) = crate::torch::available() {
                self.torch(&lib);
            }
        }
    }

    /// The machine's GPUs (name, memory in bytes) and NVIDIA's driver.
    pub fn gpus(&self, gpus: &[(String, u64)], driver: &str) {
        let list = gpus.iter().map(|(name, memory)| Gpu { name: name.clone(), memory: *memory, driver: driver.into() });
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).gpus = list.collect();
    }

    /// `tch` is in: libtorch's version and its CUDA, from PyTorch's `torch/version.py`.
    fn torch(&self, lib_dir: &Path) {
        let text = std::fs::read_to_string(lib_dir.join("..").join("version.py")).unwrap_or_default();
        let field = |k: &str| {
            text.lines()
                .filter_map(|l| l.strip_prefix(k))
                .filter_map(|rest| rest.split(['\'', '"']).nth(1))
                .next()
                .map(str::to_string)
        };
        if let Some(v) = field("__version__") {
            self.inner.lock().unwrap_or_else(PoisonError::into_inner).torch = Some((v, field("cuda")));
        }
    }

    /// Writes the kernel's part for the cell about to run; the cell crate is `crate_dir`.
    pub fn write(&self, crate_dir: Option<&Path>) {
        if self.off {
            return;
        }
        let mut i = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lock) = crate_dir.map(|d| d.join("Cargo.lock")) {
            let modified = std::fs::metadata(&lock).and_then(|m| m.modified()).ok();
            if modified.is_some() && modified != i.lock.as_ref().map(|l| l.0) {
                let crates = std::fs::read_to_string(&lock).map(|t| crates(&t)).unwrap_or_default();
                i.lock = modified.map(|m| (m, crates));
            }
        }
        // Not there 20 ms after the build (a huge work tree): no cell waits longer, and a cell
        // that stores objects has its process look itself.
        if let Some(Git::Looking(rx)) = &i.git {
            i.git = rx.recv_timeout(std::time::Duration::from_millis(20)).ok().map(Git::Found);
        }
        let (rustc, cargo) = self.toolchain.get().cloned().unwrap_or_default();
        let part = Provenance {
            notebook: std::env::var("JPY_SESSION_NAME").ok(),
            cells: Some(Cells { count: i.count, sha256: hex::encode(i.cells.clone().finalize()) }),
            rustc,
            cargo,
            crates: i.lock.as_ref().map(|l| l.1.clone()).unwrap_or_default(),
            libtorch: i.torch.as_ref().map(|t| t.0.clone()),
            cuda: i.torch.as_ref().and_then(|t| t.1.clone()),
            gpus: i.gpus.clone(),
            ..Provenance::default()
        };
        let mut part = part.to_json();
        // Looked at, even when it found no work tree (`null`): the child need not look again.
        if let Some(Git::Found(git)) = &i.git {
            part["git"] = git.clone();
        }
        let bytes = serde_json::to_vec(&part).unwrap_or_default();
        if let Err(e) = dryml_sys::fs::write_atomic(&self.file, &bytes, dryml_sys::fs::Durability::NoFsync) {
            tracing::warn!("provenance not written to {}: {e}", self.file.display());
        }
    }
}

/// `tool --version`'s line.
fn version(tool: &str) -> Option<String> {
    let out = std::process::Command::new(tool).arg("--version").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A `Cargo.lock`'s packages, name to version (two releases of one crate joined by `, `), the
/// cell crate itself left out.
fn crates(lock: &str) -> BTreeMap<String, String> {
    let Ok(doc) = lock.parse::<toml::Table>() else { return BTreeMap::new() };
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for p in doc.get("package").and_then(|p| p.as_array()).into_iter().flatten() {
        let (Some(name), Some(version)) =
            (p.get("name").and_then(|v| v.as_str()), p.get("version").and_then(|v| v.as_str()))
        else {
            continue;
        };
        // The cell crate (no source, not a path dependency of ours) changes name per kernel.
        if p.get("source").is_none() && name.starts_with("ctx") {
            continue;
        }
        out.entry(name.to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(version);
            })
            .or_insert_with(|| version.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_gives_each_crate_and_both_releases() {
        let lock = "version = 4\n\n[[package]]\nname = \"ctx_k1\"\nversion = \"0.1.0\"\n\n\
            [[package]]\nname = \"ndarray\"\nversion = \"0.15.6\"\nsource = \"registry+x\"\n\n\
            [[package]]\nname = \"ndarray\"\nversion = \"0.16.1\"\nsource = \"registry+x\"\n\n\
            [[package]]\nname = \"dryml\"\nversion = \"0.1.0\"\n";
        let want = [("dryml", "0.1.0"), ("ndarray", "0.15.6, 0.16.1")];
        assert_eq!(crates(lock), want.map(|(n, v)| (n.to_string(), v.to_string())).into());
        assert!(crates("not toml [").is_empty());
    }

    #[test]
    fn the_kernels_part_reads_back_as_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::new(dir.path());
        r.cell("let x = 1;");
        r.gpus(&[("NVIDIA H200".into(), 141 << 30)], "580.95");
        std::fs::write(dir.path().join("Cargo.lock"), "[[package]]\nname = \"fastrand\"\nversion = \"2.3.0\"\n")
            .unwrap();
        r.write(Some(dir.path()));
        let read = |r: &Recorder| {
            let v: Value = serde_json::from_slice(&std::fs::read(&r.file).unwrap()).unwrap();
            dryml::objects::Provenance::from_json(&v)
        };
        let one = read(&r);
        assert_eq!(one.cells.as_ref().map(|c| c.count), Some(1));
        assert_eq!(one.crates.get("fastrand").map(String::as_str), Some("2.3.0"));
        assert_eq!(one.gpus[0].name, "NVIDIA H200");
        assert_eq!(one.gpus[0].driver, "580.95");
        assert_eq!(one.git, None, "no look asked: the child looks itself");
        // A look beside the build goes in the file, whatever it found (`null`: no work tree).
        r.look_at_git(dir.path().to_path_buf());
        // As a build would, this gives git its time (a write waits 20 ms at most).
        std::thread::sleep(std::time::Duration::from_millis(500));
        r.write(None);
        let v: Value = serde_json::from_slice(&std::fs::read(&r.file).unwrap()).unwrap();
        assert!(v.get("git").is_some(), "{v}");
        // Another cell, another hash; the same cells in another kernel, the same hash.
        r.cell("x + 1");
        r.write(None);
        let two = read(&r);
        assert_ne!(two.cells.as_ref().unwrap().sha256, one.cells.as_ref().unwrap().sha256);
        let other = Recorder::new(dir.path());
        other.cell("let x = 1;");
        other.write(None);
        assert_eq!(read(&other).cells, one.cells);
    }
}
