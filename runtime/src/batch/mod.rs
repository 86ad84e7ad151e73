//! TOMA for Rust: loops that retry with a smaller batch when the device runs out of memory, and
//! remember the size that worked, at next to no cost when nothing fails.
//!
//! [`batch`] retries one call with smaller sizes; [`range`] walks `start..end` in steps and, when
//! a step fails, goes on from where it was with a smaller step; `chunked` (the `torch` feature)
//! does that over slices of a tensor. `range` and `chunked` show a progress bar that updates in
//! place in the kernel. The kernel's interrupt stops them between steps (see [`Interrupted`]).
//! What counts as out of memory is the [`OutOfMemory`] trait; other errors pass through
//! untouched. The size that worked is cached by call site (`#[track_caller]`, no stack walk) and
//! free memory in buckets (TOMA's default), per call site only ([`Cache::Global`]), or not at all.
//!
//! ```
//! use std::collections::TryReserveError;
//!
//! // A step that fails with more than 64 rows, as a GPU would run out of memory.
//! let step = |size: usize| -> Result<usize, TryReserveError> {
//!     let mut rows: Vec<u8> = Vec::new();
//!     if size > 64 {
//!         rows.try_reserve(usize::MAX)?;
//!     }
//!     Ok(size)
//! };
//! assert_eq!(dryml::batch::batch(256, step), Ok(64)); // 256, then 128, then 64
//! // The same call site starts at the size that worked.
//! let mut seen = Vec::new();
//! dryml::batch::range(0, 100, 40, |lo, hi| -> Result<(), TryReserveError> {
//!     seen.push(hi - lo);
//!     Ok(())
//! })
//! .unwrap();
//! assert_eq!(seen, [40, 40, 20]);
//! ```

use std::panic::Location;
use std::sync::Mutex;

/// Whether an error means "out of memory": the loops retry those with a smaller size.
pub trait OutOfMemory {
    /// True when the error means the device (or the process) ran out of memory.
    fn is_out_of_memory(&self) -> bool;
}

impl OutOfMemory for std::collections::TryReserveError {
    fn is_out_of_memory(&self) -> bool {
        true
    }
}

/// Whether a libtorch error message means "out of memory": CUDA out of memory (from its caching
/// allocator, or from a raw CUDA call), a failed CPU allocation, cuBLAS or cuDNN failing to
/// allocate, and cuDNN refusing a size ("not supported", which TOMA also retries). Plain text,
/// so `tests/gpu/` checks it against the messages a real GPU gives without linking libtorch.
pub fn is_out_of_memory_message(m: &str) -> bool {
    m.contains("CUDA out of memory")
        || m.contains("CUDA error: out of memory")
        || m.contains("CUDA_ERROR_OUT_OF_MEMORY")
        || m.contains("DefaultCPUAllocator: can't allocate memory")
        || m.contains("DefaultCPUAllocator: not enough memory")
        || m.contains("CUDNN_STATUS_NOT_SUPPORTED")
        || m.contains("CUDNN_STATUS_ALLOC_FAILED")
        || m.contains("CUBLAS_STATUS_ALLOC_FAILED")
}

#[cfg(feature = "torch")]
impl OutOfMemory for tch::TchError {
    fn is_out_of_memory(&self) -> bool {
        matches!(self, tch::TchError::Torch(m) if is_out_of_memory_message(m))
    }
}

impl OutOfMemory for std::io::Error {
    fn is_out_of_memory(&self) -> bool {
        self.kind() == std::io::ErrorKind::OutOfMemory
    }
}

/// Boxed errors (`?` in code returning `Box<dyn Error>`): out of memory when what is inside is.
fn boxed_is_out_of_memory(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = e.downcast_ref::<std::collections::TryReserveError>() {
        return e.is_out_of_memory();
    }
    if let Some(e) = e.downcast_ref::<std::io::Error>() {
        return e.is_out_of_memory();
    }
    #[cfg(feature = "torch")]
    if let Some(e) = e.downcast_ref::<tch::TchError>() {
        return e.is_out_of_memory();
    }
    false
}

impl OutOfMemory for Box<dyn std::error::Error> {
    fn is_out_of_memory(&self) -> bool {
        boxed_is_out_of_memory(self.as_ref())
    }
}

impl OutOfMemory for Box<dyn std::error::Error + Send + Sync> {
    fn is_out_of_memory(&self) -> bool {
        boxed_is_out_of_memory(self.as_ref())
    }
}

/// Where a loop's last working size is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cache {
    /// By call site and free memory (in buckets of a power of two): TOMA's default.
    CallSiteAndMemory,
    /// By call site only: TOMA's `GlobalBatchsizeCache`.
    Global,
    /// Always start from the initial size.
    None,
}

/// What a loop unwinds with when the kernel's interrupt stops it between steps: the cell ends
/// as `KeyboardInterrupt`, the rest of the cell does not run on a partial result, and the
/// notebook's variables keep what the finished steps wrote (evcxr catches the unwind). The
/// panic hook does not run, so nothing is printed. Outside the kernel there is no interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// Where a `range` had got to (everything before it is done); 0 for `batch`.
    pub at: usize,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted at {}", self.at)
    }
}

pub(crate) fn unwind_interrupted(at: usize) -> ! {
    std::panic::resume_unwind(Box::new(Interrupted { at }))
}

/// Changes the cache the loops use when not told otherwise (for every later cell, in a notebook).
pub fn set_default_cache(c: Cache) {
    let code = match c {
        Cache::CallSiteAndMemory => 0,
        Cache::Global => 1,
        Cache::None => 2,
    };
    (table().1)(DEFAULT_CACHE_KEY, code);
}

fn default_cache() -> Cache {
    let mut v = [0u64; 2];
    // SAFETY: `v` is a live local the callee writes once.
    unsafe { (table().0)(DEFAULT_CACHE_KEY, &mut v) };
    match v[0] {
        1 => Cache::Global,
        2 => Cache::None,
        _ => Cache::CallSiteAndMemory,
    }
}

/// The table's slot for the default cache kind (key hashes avoid it).
const DEFAULT_CACHE_KEY: u64 = u64::MAX;

// Modules marked `allow(missing_docs)` are the kernel's side (`__kernel` re-exports them).
#[allow(missing_docs)]
pub(crate) mod table;

mod progress;

use progress::Progress;
use table::table;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Site {
    /// The call site and the closure's type: in a notebook each cell is its own crate, and two
    /// cells' call sites can share a file, line and column; their closures' type names differ.
    Caller(&'static Location<'static>, &'static str),
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    site: Site,
    bucket: Option<u32>,
}

/// The memory this process may still take (`MemAvailable`, capped by its cgroup's limit in a
/// container) in power-of-two buckets. Read at most every
/// 250 ms: reading `/proc/meminfo` costs more than a quick loop, and a bucket is a factor of two
/// wide, so a reading that old is as good.
fn memory_bucket() -> u32 {
    static LAST: Mutex<Option<(std::time::Instant, u32)>> = Mutex::new(None);
    let now = std::time::Instant::now();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, b)) = *last {
        if now.duration_since(at).as_millis() < 250 {
            return b;
        }
    }
    let (available, _) = crate::sys::procfs::memory();
    let kib = available / 1024;
    let b = 64 - kib.leading_zeros();
    *last = Some((now, b));
    b
}

/// A loop's settings; the free functions use the defaults.
#[derive(Debug, Clone)]
pub struct Batcher {
    initial: usize,
    factor: f64,
    cache: Cache,
    key: Option<String>,
    probe_after: Option<u32>,
    site: &'static Location<'static>,
}

impl Batcher {
    /// Starts at `initial`, halves on out of memory, caches by call site and memory.
    #[track_caller]
    pub fn new(initial: usize) -> Batcher {
        Batcher {
            initial: initial.max(1),
            factor: 0.5,
            cache: default_cache(),
            key: None,
            probe_after: None,
            site: Location::caller(),
        }
    }
    /// The factor a size is multiplied by after out of memory (0.5 by default; accelerate uses
    /// 0.9). Clamped to (0, 1); a size always shrinks by at least one.
    pub fn factor(mut self, f: f64) -> Batcher {
        self.factor = if f > 0.0 && f < 1.0 { f } else { 0.5 };
        self
    }
    /// How the size that worked is remembered (default: [`set_default_cache`]).
    pub fn cache(mut self, c: Cache) -> Batcher {
        self.cache = c;
        self
    }
    /// The explicit forms: a cache key instead of the call site.
    pub fn key(mut self, k: impl Into<String>) -> Batcher {
        self.key = Some(k.into());
        self
    }
    /// After `successes` in a row at a cached size, try the next larger one once, so a size shrunk
    /// by a passing spike does not stay low.
    pub fn probe_up(mut self, successes: u32) -> Batcher {
        self.probe_after = Some(successes.max(1));
        self
    }

    fn cache_key<F>(&self) -> Option<u64> {
        let site = match &self.key {
            Some(k) => Site::Named(k.clone()),
            None => Site::Caller(self.site, std::any::type_name::<F>()),
        };
        let key = match self.cache {
            Cache::None => return None,
            Cache::Global => Key { site, bucket: None },
            Cache::CallSiteAndMemory => Key { site, bucket: Some(memory_bucket()) },
        };
        // By content (file, line, names), not by address: the same in every cell's copy.
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&key, &mut h);
        Some(std::hash::Hasher::finish(&h).min(DEFAULT_CACHE_KEY - 1))
    }

    /// The size to start from: the remembered one (or one step above it when probing).
    fn start(&self, key: Option<u64>) -> usize {
        let Some(k) = key else { return self.initial };
        let mut v = [0u64; 2];
        // SAFETY: `v` is a live local the callee writes once.
        if !unsafe { (table().0)(k, &mut v) } {
            return self.initial;
        }
        let (size, streak) = (v[0] as usize, v[1]);
        match self.probe_after {
            Some(n) if streak >= n as u64 && size < self.initial => {
                (((size as f64) / self.factor).ceil() as usize).min(self.initial).max(size + 1)
            }
            // Never above what this call asked for, even when a key is shared.
            _ => size.min(self.initial),
        }
    }

    fn remember(&self, key: Option<u64>, size: usize) {
        if let Some(k) = key {
            (table().1)(k, size as u64);
        }
    }

    fn shrink(&self, size: usize) -> usize {
        (((size as f64) * self.factor).floor() as usize).min(size - 1).max(1)
    }

    /// Calls `f(size)` until it does not run out of memory; gives up with the last error at size 1.
    pub fn batch<T, E: OutOfMemory, F: FnMut(usize) -> Result<T, E>>(&self, mut f: F) -> Result<T, E> {
        let key = self.cache_key::<F>();
        let mut size = self.start(key);
        loop {
            match f(size) {
                Ok(v) => {
                    self.remember(key, size);
                    return Ok(v);
                }
                Err(e) if e.is_out_of_memory() && size > 1 => {
                    if crate::interrupted() {
                        unwind_interrupted(0);
                    }
                    free_memory();
                    size = self.shrink(size);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Calls `f(lo, hi)` over `start..end` in steps; a step that runs out of memory is retried
    /// from the same place with a smaller step, and the loop goes on with that step.
    pub fn range<E: OutOfMemory, F: FnMut(usize, usize) -> Result<(), E>>(
        &self,
        start: usize,
        end: usize,
        f: F,
    ) -> Result<(), E> {
        self.range_keyed(self.cache_key::<F>(), start, end, f)
    }

    fn range_keyed<E: OutOfMemory>(
        &self,
        key: Option<u64>,
        start: usize,
        end: usize,
        mut f: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut step = self.start(key);
        let mut at = start;
        let progress = Progress::new(start, end);
        while at < end {
            if crate::interrupted() {
                progress.done(at);
                unwind_interrupted(at);
            }
            let hi = (at + step).min(end);
            match f(at, hi) {
                Ok(()) => {
                    at = hi;
                    progress.show(at);
                }
                Err(e) if e.is_out_of_memory() && step > 1 => {
                    free_memory();
                    step = self.shrink(step);
                }
                Err(e) => return Err(e),
            }
        }
        self.remember(key, step);
        progress.done(at);
        Ok(())
    }
}

/// Retries `f(batch_size)` with smaller sizes on out of memory: TOMA's `batch`.
#[track_caller]
pub fn batch<T, E: OutOfMemory>(initial: usize, f: impl FnMut(usize) -> Result<T, E>) -> Result<T, E> {
    Batcher::new(initial).batch(f)
}

/// Walks `start..end` in steps of `initial_step`, shrinking the step on out of memory and going
/// on from where it was: TOMA's `range`.
#[track_caller]
pub fn range<E: OutOfMemory>(
    start: usize,
    end: usize,
    initial_step: usize,
    f: impl FnMut(usize, usize) -> Result<(), E>,
) -> Result<(), E> {
    Batcher::new(initial_step).range(start, end, f)
}

/// Calls `f(chunk, lo, hi)` on slices of `tensor` along `dim` (views: writes reach `tensor`),
/// `initial_step` at a time, shrinking the step on out of memory: TOMA's `chunked`.
#[cfg(feature = "torch")]
#[track_caller]
pub fn chunked<E: OutOfMemory>(
    tensor: &tch::Tensor,
    initial_step: usize,
    dim: i64,
    f: impl FnMut(&mut tch::Tensor, usize, usize) -> Result<(), E>,
) -> Result<(), E> {
    Batcher::new(initial_step).chunked(tensor, dim, f)
}

#[cfg(feature = "torch")]
impl Batcher {
    /// [`chunked`] with these settings.
    pub fn chunked<E: OutOfMemory, F: FnMut(&mut tch::Tensor, usize, usize) -> Result<(), E>>(
        &self,
        tensor: &tch::Tensor,
        dim: i64,
        mut f: F,
    ) -> Result<(), E> {
        let d = if dim < 0 { dim + tensor.dim() as i64 } else { dim };
        let n = tensor.size()[d as usize] as usize;
        self.range_keyed(self.cache_key::<F>(), 0, n, |lo, hi| {
            f(&mut tensor.narrow(d, lo as i64, (hi - lo) as i64), lo, hi)
        })
    }
}

/// Hands freed heap back between tries (`malloc_trim`), so the retry finds it.
fn free_memory() {
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Limits this process's address space to `gib` GiB (`RLIMIT_AS`), as TOMA's
/// `set_cpu_memory_limit`: allocations beyond it fail, which makes out of memory testable on the
/// CPU. Not for processes that use CUDA, which maps far more address space than it uses.
pub fn set_cpu_memory_limit(gib: f64) -> std::io::Result<()> {
    let bytes = (gib * (1u64 << 30) as f64) as libc::rlim_t;
    let lim = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    let old = unsafe {
        let mut o: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_AS, &mut o);
        o
    };
    let lim = libc::rlimit { rlim_max: old.rlim_max, ..lim };
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
