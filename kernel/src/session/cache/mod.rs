//! The machine's build cache: one cargo build directory per user, toolchain and libtorch, shared
//! by every kernel, so `dryml`, `tch` and any `:dep` crate is built once per machine rather than
//! once per kernel start. Cargo's fingerprints decide what is fresh (a change in `runtime/`, the
//! features, the profile or a watched variable rebuilds) and cargo's lock keeps concurrent builds
//! apart (a cell that would wait on it builds aside: `aside.rs`); this module picks the directory,
//! keeps it within a size bound (least recently used first) and clears it.
//!
//! # How a cell is built
//!
//! evcxr builds each cell as a crate in the kernel's scratch directory, but with
//! `CARGO_BUILD_BUILD_DIR` (set through evcxr's `:build_env`) pointing at
//! `~/.cache/dryml-rust/build/rustc-<version>-<commit>[-torch-<version>-<path hash>]`: every kernel
//! of the user shares the compiled dependencies, cargo's fingerprints decide what is fresh (a change
//! in `runtime/`, features, profile or a watched variable rebuilds), and the generation key covers
//! what cargo cannot see (torch-sys links libtorch without watching its version). Each kernel
//! claims a token (`dryml-kernels/<token>.lock`, flocked while it runs) and names its cell crate
//! `ctx_<token>` (evcxr's patch lets the crate be named): cargo
//! hashes a workspace's root package by its path relative to the workspace, so with evcxr's one
//! `ctx` every kernel's cells were one cargo unit, and a kernel could load another's fresh build.
//! A kernel's warm-up (once idle after its start) removes the crates of tokens whose lock is free. Each kernel's
//! final library still lands in its private target directory, from which evcxr loads it; cells find
//! the dynamic std through `LD_LIBRARY_PATH`, since their rpath is relative to the cache. The warm-up also
//! evicts least recently used crate builds and generations beyond the bound
//! (`DRYML_BUILD_CACHE_LIMIT`, default 10 GiB), holding cargo's `.cargo-lock`s so no build is
//! disturbed.
//!
//! Cells build `dryml` from a copy of the runtime's sources in the generation, named by their
//! content (`dryml-src/<hash>`, see [`super::source`]): cargo names a path crate by its path, and
//! every checkout of the same sources then shares one build per set of features.
//!
//! Cargo's own part of a cell's build (resolving the graph, checking every unit's fingerprint:
//! 20 ms with `dryml`, 50 ms with `tch`'s 164 units) ends in the same rustc command whenever only
//! the cell changed. So cargo runs the cell crate's rustc through evcxr's wrapper
//! (`RUSTC_WORKSPACE_WRAPPER`, which wraps the cell crate only), which records the command in the
//! crate directory; the kernel then keeps, beside it, how evcxr calls cargo, Cargo.toml, the cargo
//! config, the stamps of the libraries the command links and of every file of every path package
//! (`cargo metadata`; more than 5000 files, or one changed while that cargo build ran: cargo
//! again next time). The next build runs that command
//! alone if all of it is unchanged and cargo's lock on the build directory is free (taken for the
//! build, so no other kernel's cargo or eviction changes its inputs); otherwise, or when rustc
//! cannot use a dependency it was given (E0460-E0464, E0514, E0786), it goes through cargo, which
//! records again. The library is linked where cargo would uplift it, and the one in the shared
//! directory stays cargo's.
//!
//! With evcxr's patch, the code generated for a cell checks, takes and puts back only the
//! stored variables whose names appear in the cell's text (or whose types it redefines), so a
//! cell's cost does not grow with the notebook.

mod evict;
mod files;
mod key;

pub use files::clean_killed_build;
use files::tree_size;
pub(super) use files::{lock_generation, profile_dirs, remove, unit_of, units, Item};
pub(super) use key::{fnv1a, rustc};
pub use key::{generation_key, std_lib_dir};

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// The cache's directory, or `off` for a private build directory per kernel, as evcxr has it.
pub const DIR_ENV: &str = "DRYML_BUILD_CACHE";
/// The size bound: bytes, or with a suffix (`500M`, `10G`, `10GiB`).
pub const LIMIT_ENV: &str = "DRYML_BUILD_CACHE_LIMIT";
pub const DEFAULT_LIMIT: u64 = 10 << 30;
/// Touched by each kernel that starts on a generation.
const USED_FILE: &str = "dryml-last-used";
/// Entries used this recently are some kernel's working set: never evicted (a rebuild costs more).
const RECENT: Duration = Duration::from_secs(3600);
/// Eviction goes this far below the bound, so that every start does not evict again.
const LOW_WATER: f64 = 0.9;
/// Each running kernel's claim (see [`Claim`]), `<token>.lock` locked while it runs; its build
/// directory aside (`aside.rs`), `dryml-aside/ctx_<token>`.
const KERNELS_DIR: &str = "dryml-kernels";
pub(super) const ASIDE_DIR: &str = "dryml-aside";

pub struct BuildCache {
    root: PathBuf,
    /// The generation this kernel builds in: `rustc-<release>-<commit>[-torch-<version>-<path>]`.
    key: String,
    limit: u64,
}

/// A kernel's own crate names in the shared build directory, held while it runs (an flock on
/// `<generation>/dryml-kernels/<token>.lock`). Cargo hashes a workspace's root package by its
/// path relative to the workspace, so every kernel's cell crate (evcxr's `ctx`) was one cargo
/// unit: a kernel whose cell was written while another kernel built its own found that build
/// fresh and loaded the other notebook's code. With a token per kernel, the units are apart.
pub struct Claim {
    token: String,
    _lock: File,
}

impl Claim {
    /// The package of this kernel's cells (evcxr's crate).
    pub fn cell_crate(&self) -> String {
        format!("ctx_{}", self.token)
    }
}

/// The token in the file name of a kernel's crate: `libctx_k0123456789ab.so`, `ctx_k…-<base36>`,
/// or `job_k…-<hash>.d` (the programs Slurm cells were built as, formerly).
pub(super) fn token_of(file_name: &str) -> Option<&str> {
    let name = file_name.strip_prefix("lib").unwrap_or(file_name);
    let stem = &name[..name.find(['-', '.']).unwrap_or(name.len())];
    let token = stem.strip_prefix("ctx_").or_else(|| stem.strip_prefix("job_"))?;
    (token.len() == 13 && token.starts_with('k') && token[1..].bytes().all(|b| b.is_ascii_hexdigit())).then_some(token)
}

/// What `%cache` shows.
pub struct Report {
    pub root: PathBuf,
    pub limit: u64,
    pub generations: Vec<Generation>,
    /// This generation's largest crates: name, bytes.
    pub largest: Vec<(String, u64)>,
}

pub struct Generation {
    pub key: String,
    pub current: bool,
    pub bytes: u64,
    pub units: usize,
    pub last_used: Option<SystemTime>,
}

impl BuildCache {
    /// The cache as the environment configures it; `None` when it is switched off.
    pub fn from_env() -> anyhow::Result<Option<BuildCache>> {
        let root = match std::env::var_os(DIR_ENV) {
            Some(v) if v == "off" => return Ok(None),
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => default_root().context("no home directory for the build cache; set DRYML_BUILD_CACHE")?,
        };
        let limit = match std::env::var(LIMIT_ENV) {
            Ok(v) => dryml_sys::units::parse_size(&v)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("{LIMIT_ENV}={v:?}"))?,
            Err(_) => DEFAULT_LIMIT,
        };
        BuildCache::open(root, generation_key(), limit).map(Some)
    }

    /// Opens (creating, owner-only) the cache at `root`, refusing a directory that another user
    /// owns or others may write: its contents are linked into the notebook's process.
    pub fn open(root: PathBuf, key: String, limit: u64) -> anyhow::Result<BuildCache> {
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(&root) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", root.display())),
        }
        let meta = std::fs::symlink_metadata(&root)?;
        let uid = unsafe { libc::getuid() };
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
            bail!(
                "{} is not a directory that only this user (uid {uid}) owns and may write; refusing to build \
                 in it (remove it, or set {DIR_ENV} to another directory)",
                root.display()
            );
        }
        Ok(BuildCache { root, key, limit })
    }

    /// The cargo build directory this kernel uses (evcxr's `CARGO_BUILD_BUILD_DIR`).
    pub fn dir(&self) -> PathBuf {
        self.root.join(&self.key)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Takes a token for this kernel's crates, held until the claim is dropped.
    pub fn claim(&self) -> anyhow::Result<Claim> {
        let dir = self.dir().join(KERNELS_DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for _ in 0..16 {
            let token = format!("k{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            let path = dir.join(format!("{token}.lock"));
            let file = match File::options().write(true).create_new(true).open(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                r => r.with_context(|| format!("creating {}", path.display()))?,
            };
            // A sweep of a starting kernel may take the new file for a dead kernel's and remove
            // it before the lock is held: then the token is not ours, and another is tried.
            let locked = dryml_sys::lock::try_exclusive(&file);
            let same = std::fs::metadata(&path).is_ok_and(|m| file.metadata().is_ok_and(|f| f.ino() == m.ino()));
            if locked && same {
                return Ok(Claim { token, _lock: file });
            }
        }
        bail!("no token could be claimed in {}", dir.display())
    }

    /// Removes what the crates of kernels no longer running (their claim's lock is free) left in
    /// this generation, holding cargo's lock (waited for up to `wait`). Returns the bytes freed.
    pub fn remove_orphans(&self, wait: Duration) -> anyhow::Result<u64> {
        let mut orphans = BTreeMap::new();
        for e in std::fs::read_dir(self.dir().join(KERNELS_DIR)).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(token) = name.strip_suffix(".lock") else { continue };
            let Ok(file) = File::options().write(true).open(e.path()) else { continue };
            if dryml_sys::lock::try_exclusive(&file) {
                orphans.insert(token.to_string(), (e.path(), file));
            }
        }
        let mut freed = 0;
        // Builds aside whose kernel holds no claim (an earlier version's, or one killed between).
        for e in std::fs::read_dir(self.dir().join(ASIDE_DIR)).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let claim = |t: &str| self.dir().join(KERNELS_DIR).join(format!("{t}.lock"));
            if !name.strip_prefix("ctx_").is_some_and(|t| claim(t).exists()) {
                freed += tree_size(&e.path()).0;
                remove(&e.path());
            }
        }
        if orphans.is_empty() {
            return Ok(freed);
        }
        let _held = lock_generation(&self.dir(), wait)?;
        for profile in profile_dirs(&self.dir()) {
            for sub in [".fingerprint", "deps", "incremental"] {
                for e in std::fs::read_dir(profile.join(sub)).into_iter().flatten().flatten() {
                    if token_of(&e.file_name().to_string_lossy()).is_some_and(|t| orphans.contains_key(t)) {
                        freed += tree_size(&e.path()).0;
                        remove(&e.path());
                    }
                }
            }
        }
        for (token, (path, _lock)) in &orphans {
            let aside = self.dir().join(ASIDE_DIR).join(format!("ctx_{token}"));
            freed += tree_size(&aside).0;
            remove(&aside);
            remove(path);
        }
        Ok(freed)
    }

    /// Marks this generation used now (its age orders generations for eviction).
    pub fn touch(&self) -> anyhow::Result<()> {
        let dir = self.dir();
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(USED_FILE), format!("{}\n", std::process::id()))?;
        Ok(())
    }

    fn generations(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        out.sort();
        out
    }

    /// Sizes and ages, for `%cache`.
    pub fn report(&self) -> Report {
        let mut generations = Vec::new();
        let mut largest = BTreeMap::<String, u64>::new();
        for g in self.generations() {
            let key = g.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let current = key == self.key;
            let units = units(&g);
            if current {
                for u in &units {
                    *largest.entry(u.label.clone()).or_default() += u.bytes;
                }
            }
            generations.push(Generation {
                current,
                bytes: tree_size(&g).0,
                units: units.len(),
                last_used: std::fs::metadata(g.join(USED_FILE)).and_then(|m| m.modified()).ok(),
                key,
            });
        }
        let mut largest: Vec<(String, u64)> = largest.into_iter().collect();
        largest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        largest.truncate(5);
        Report { root: self.root.clone(), limit: self.limit, generations, largest }
    }
}

/// `$XDG_CACHE_HOME/dryml-rust/build`, else `~/.cache/dryml-rust/build`.
fn default_root() -> Option<PathBuf> {
    Some(dirs::cache_dir()?.join("dryml-rust").join("build"))
}

#[cfg(test)]
mod tests;
