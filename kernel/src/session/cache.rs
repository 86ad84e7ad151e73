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

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
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

/// One thing eviction may remove: a whole generation that is not this kernel's, or one cargo
/// unit (the files of one crate build, which share a hash) of this kernel's generation.
#[derive(Debug)]
pub(super) struct Item {
    label: String,
    pub(super) bytes: u64,
    last_used: SystemTime,
    pub(super) paths: Vec<PathBuf>,
    /// Cargo locks to hold while removing it.
    generation: PathBuf,
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
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
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
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                orphans.insert(token.to_string(), (e.path(), file));
            }
        }
        if orphans.is_empty() {
            return Ok(0);
        }
        let _held = lock_generation(&self.dir(), wait)?;
        let mut freed = 0;
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

    /// Evicts what was used least recently until the cache is below its bound. Skips what a
    /// build holds (cargo's lock, tried for `wait`) and what was used in the last hour.
    /// Returns the bytes freed.
    pub fn collect(&self, wait: Duration) -> anyhow::Result<u64> {
        let total = tree_size(&self.root).0;
        if total <= self.limit {
            return Ok(0);
        }
        let target = (self.limit as f64 * LOW_WATER) as u64;
        let mut items = Vec::new();
        for g in self.generations() {
            if g == self.dir() {
                items.extend(units(&g));
            } else {
                let (bytes, newest) = tree_size(&g);
                let used = std::fs::metadata(g.join(USED_FILE)).and_then(|m| m.modified()).ok();
                items.push(Item {
                    label: g.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                    bytes,
                    // Kernels touch the file at start; the tree's times are a fallback.
                    last_used: used.unwrap_or(newest),
                    paths: vec![g.clone()],
                    generation: g,
                });
            }
        }
        items.sort_by_key(|i| i.last_used);
        let now = SystemTime::now();
        let mut left = total;
        let mut freed = 0;
        let mut locks: BTreeMap<PathBuf, Vec<File>> = BTreeMap::new();
        for item in items {
            if left <= target {
                break;
            }
            if now.duration_since(item.last_used).unwrap_or_default() < RECENT {
                break;
            }
            if !locks.contains_key(&item.generation) {
                match lock_generation(&item.generation, wait) {
                    Ok(held) => {
                        locks.insert(item.generation.clone(), held);
                    }
                    Err(e) => {
                        tracing::info!("build cache: {} skipped: {e:#}", item.label);
                        continue;
                    }
                }
            }
            for p in &item.paths {
                remove(p);
            }
            tracing::info!("build cache: evicted {} ({})", item.label, dryml_sys::units::size(item.bytes));
            left = left.saturating_sub(item.bytes);
            freed += item.bytes;
        }
        Ok(freed)
    }

    /// Removes every generation; returns the bytes freed. Waits up to `wait` for builds in other
    /// kernels to finish, then gives up with an error that says so.
    pub fn clear(&self, wait: Duration) -> anyhow::Result<u64> {
        let mut freed = 0;
        for g in self.generations() {
            let _held = lock_generation(&g, wait)?;
            let size = tree_size(&g).0;
            // Keep the lock files (held now) and the directories cargo expects; drop the rest.
            for profile in profile_dirs(&g) {
                for e in std::fs::read_dir(&profile).into_iter().flatten().flatten() {
                    if e.file_name() != ".cargo-lock" {
                        remove(&e.path());
                    }
                }
            }
            for e in std::fs::read_dir(&g).into_iter().flatten().flatten() {
                let p = e.path();
                // Running kernels' claims stay; what their crates built is gone with the rest.
                if e.file_name() != KERNELS_DIR && !profile_dirs(&g).iter().any(|d| d.starts_with(&p)) {
                    remove(&p);
                }
            }
            freed += size.saturating_sub(tree_size(&g).0);
        }
        Ok(freed)
    }
}

/// `$XDG_CACHE_HOME/dryml-rust/build`, else `~/.cache/dryml-rust/build`.
fn default_root() -> Option<PathBuf> {
    Some(dirs::cache_dir()?.join("dryml-rust").join("build"))
}

/// What a build's artifacts depend on that cargo does not track: the compiler (cargo does track
/// it, but a new toolchain makes every old artifact garbage, best evicted at once) and libtorch,
/// which torch-sys's build script links against without watching its version or location.
pub fn generation_key() -> String {
    let info = std::process::Command::new(rustc())
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    key_for(&info, crate::torch::available().as_deref())
}

/// The key from `rustc -vV`'s output and the libtorch directory (`<torch>/lib`), if any.
fn key_for(rustc_info: &str, torch_lib: Option<&Path>) -> String {
    let field = |name: &str| rustc_info.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    let mut key = format!(
        "rustc-{}-{}",
        field("release:").unwrap_or_else(|| "unknown".into()),
        field("commit-hash:").map(|h| h.chars().take(9).collect::<String>()).unwrap_or_else(|| "unknown".into())
    );
    if let Some(lib) = torch_lib {
        let version = std::fs::read_to_string(lib.join("..").join("version.py"))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    let v = l.strip_prefix("__version__")?.trim_start().strip_prefix('=')?.trim();
                    Some(v.trim_matches(|c| c == '\'' || c == '"').to_string())
                })
            })
            .unwrap_or_else(|| "unknown".into());
        key.push_str(&format!("-torch-{version}-{:08x}", fnv1a(lib.to_string_lossy().as_bytes()) as u32));
    }
    key.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

/// The rustc evcxr runs (`$RUSTC`, else the one on `PATH`).
pub(super) fn rustc() -> std::ffi::OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

/// The toolchain's directory of target libraries, where the `libstd-*.so` that cells link is.
pub fn std_lib_dir() -> Option<PathBuf> {
    let out = std::process::Command::new(rustc()).args(["--print", "target-libdir"]).output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && dir.is_dir()).then_some(dir)
}

/// A stable hash (std's may change between Rust releases; this names directories).
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// Cargo's profile directories in a build directory: the host's (build scripts) and each
/// target's (evcxr passes `--target`).
pub(super) fn profile_dirs(generation: &Path) -> Vec<PathBuf> {
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
pub(super) fn lock_generation(generation: &Path, wait: Duration) -> anyhow::Result<Vec<File>> {
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
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
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
/// [`Claim::cell_crate`]) codegen objects and incremental state behind, and a later cell's link then took stale
/// objects (`rust-lld: undefined hidden symbol`, found by the soak). Removes them from every
/// profile directory under `root` (down to `target/<triple>/debug`), holding cargo's lock when
/// the directory has one, so no build of another kernel is touched.
pub fn clean_killed_build(root: &Path, crate_name: &str, wait: Duration) -> anyhow::Result<()> {
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
        let _held = lock_generation(profile.parent().unwrap_or(&profile), wait)?;
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
    Ok(())
}

/// The cargo units of a generation, grouped by the hash that ends their file names.
pub(super) fn units(generation: &Path) -> Vec<Item> {
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
pub(super) fn unit_of(file_name: &str) -> Option<(&str, &str)> {
    let stem = file_name.split('.').next()?;
    let (name, hash) = stem.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) && !name.is_empty()).then_some((name, hash))
}

/// Bytes under `path` and the newest use seen: mtimes, and the access times of files (reading
/// a directory, as this walk does, would refresh its own).
fn tree_size(path: &Path) -> (u64, SystemTime) {
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

pub(super) fn remove(path: &Path) {
    let r = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    };
    if let Err(e) = r {
        tracing::warn!("build cache: removing {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests;
