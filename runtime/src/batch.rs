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

use std::collections::HashMap;
use std::io::Write;
use std::panic::Location;
use std::sync::Mutex;

/// Whether an error means "out of memory": the loops retry those with a smaller size.
pub trait OutOfMemory {
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

fn unwind_interrupted(at: usize) -> ! {
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

/// Remembered sizes, by key hash: `[size, successes in a row at that size]`. One per process: in
/// the kernel, evcxr links a copy of this crate, statics and all, into every cell, so the kernel
/// binary exports `dryml_batch_get`/`dryml_batch_record` (its own copy of [`table_get`] and
/// [`table_record`]) and every cell's copy goes through those. Elsewhere there is one copy.
static TABLE: Mutex<Option<HashMap<u64, [u64; 2]>>> = Mutex::new(None);

/// Reads a table entry into `out`; false when there is none. For the kernel to export.
///
/// # Safety
/// `out` is null or valid for one write of `[u64; 2]`.
#[doc(hidden)]
pub unsafe extern "C" fn table_get(key: u64, out: *mut [u64; 2]) -> bool {
    let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    match t.as_ref().and_then(|m| m.get(&key)) {
        Some(v) if !out.is_null() => {
            unsafe { *out = *v };
            true
        }
        _ => false,
    }
}

/// Records a size that worked: one more success in a row if it is the size already there, else
/// the first at a new size. For the kernel to export.
#[doc(hidden)]
pub extern "C" fn table_record(key: u64, size: u64) {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let e = t.get_or_insert_with(HashMap::new).entry(key).or_insert([size, 0]);
    *e = if e[0] == size { [size, e[1].saturating_add(1)] } else { [size, 1] };
}

type TableGet = unsafe extern "C" fn(u64, *mut [u64; 2]) -> bool;
type TableRecord = extern "C" fn(u64, u64);

fn table() -> (TableGet, TableRecord) {
    static FNS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    let (g, p) = *FNS.get_or_init(|| {
        match (crate::interrupt::kernel_symbol(crate::protocol::symbols::BATCH_GET), crate::interrupt::kernel_symbol(crate::protocol::symbols::BATCH_RECORD)) {
            (Some(g), Some(p)) => (g, p),
            _ => (table_get as TableGet as usize, table_record as TableRecord as usize),
        }
    });
    // Both are `extern "C"` functions with exactly these signatures (kernel/src/child.rs).
    unsafe { (std::mem::transmute::<usize, TableGet>(g), std::mem::transmute::<usize, TableRecord>(p)) }
}

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
    let (available, _) = crate::procfs::memory();
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
    pub fn range<E: OutOfMemory, F: FnMut(usize, usize) -> Result<(), E>>(&self, start: usize, end: usize, f: F) -> Result<(), E> {
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
pub fn range<E: OutOfMemory>(start: usize, end: usize, initial_step: usize, f: impl FnMut(usize, usize) -> Result<(), E>) -> Result<(), E> {
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
        self.range_keyed(self.cache_key::<F>(), 0, n, |lo, hi| f(&mut tensor.narrow(d, lo as i64, (hi - lo) as i64), lo, hi))
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

/// Where a progress bar goes: a display updated in place in the kernel, a line redrawn with
/// `\r` on a terminal, else one line at the end of a loop that took a second or more.
#[derive(Clone, Copy, PartialEq)]
enum Sink {
    Kernel,
    Terminal,
    Log,
}

/// The progress bar of `range` and `chunked`. Only loops slow enough to watch (200 ms) get one,
/// and it is redrawn at most ten times a second.
struct Progress {
    start: usize,
    end: usize,
    /// Found on the first redraw: most loops are too quick to need it.
    sink: std::cell::OnceCell<Sink>,
    /// Made on the first update: most loops are too quick to get a bar.
    id: std::cell::OnceCell<String>,
    last: std::cell::Cell<Option<std::time::Instant>>,
    t0: std::time::Instant,
}

impl Progress {
    fn new(start: usize, end: usize) -> Progress {
        Progress {
            start,
            end,
            sink: std::cell::OnceCell::new(),
            id: std::cell::OnceCell::new(),
            last: std::cell::Cell::new(None),
            t0: std::time::Instant::now(),
        }
    }
    fn text(&self, at: usize) -> String {
        let total = self.end.saturating_sub(self.start).max(1);
        let done = at.saturating_sub(self.start);
        let width = 30;
        let filled = (done * width / total).min(width);
        format!(
            "[{}{}] {done}/{total} ({:.1} s)",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.t0.elapsed().as_secs_f64()
        )
    }
    fn html(&self, at: usize, text: &str) -> String {
        let total = self.end.saturating_sub(self.start).max(1);
        format!(
            "<progress value=\"{}\" max=\"{total}\" style=\"width:20em\"></progress> <code>{text}</code>",
            at.saturating_sub(self.start)
        )
    }
    fn sink(&self) -> Sink {
        use std::io::IsTerminal;
        *self.sink.get_or_init(|| {
            if crate::display::in_kernel() {
                Sink::Kernel
            } else if std::io::stderr().is_terminal() {
                Sink::Terminal
            } else {
                Sink::Log
            }
        })
    }
    fn send(&self, at: usize, update: bool, last: bool) {
        match self.sink() {
            Sink::Kernel => {
                let id = self.id.get_or_init(|| {
                    // A loop slow enough for a bar may have steps longer than the kernel's usual
                    // grace period after an interrupt: ask it to wait for the step to end.
                    crate::display::announce_polling(true);
                    format!("dryml-range-{}", crate::object::uuid_v4())
                });
                let text = self.text(at);
                let html = self.html(at, &text);
                crate::display::display(&[("text/plain", &text), ("text/html", &html)], Some(id), update);
            }
            // Straight to fd 2: a redirected stderr is where the line belongs.
            Sink::Terminal => {
                let _ = write!(std::io::stderr(), "\r{}{}", self.text(at), if last { "\n" } else { "" });
            }
            Sink::Log if last => {
                let _ = writeln!(std::io::stderr(), "{}", self.text(at));
            }
            Sink::Log => {}
        }
    }
    fn show(&self, at: usize) {
        let last = self.last.get();
        if last.is_none() && self.t0.elapsed().as_millis() < 200 {
            return;
        }
        let now = std::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t).as_millis() < 100) {
            return;
        }
        self.last.set(Some(now));
        self.send(at, last.is_some(), false);
    }
    fn done(&self, at: usize) {
        let shown = self.last.get().is_some();
        if shown || (self.t0.elapsed().as_secs() >= 1 && self.sink() == Sink::Log) {
            self.send(at, shown, true);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Also on the unwind after an interrupt.
        if self.id.get().is_some() {
            crate::display::announce_polling(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum E {
        Oom,
        Other,
    }
    impl OutOfMemory for E {
        fn is_out_of_memory(&self) -> bool {
            *self == E::Oom
        }
    }

    #[test]
    fn sizes_shrink_and_are_remembered_per_call_site() {
        let limit = std::cell::Cell::new(100usize);
        let mut tried = Vec::new();
        let call = |tried: &mut Vec<usize>| {
            batch(512, |b| {
                tried.push(b);
                if b > limit.get() { Err(E::Oom) } else { Ok(b) }
            })
        };
        // One call site, called in a loop: the second call starts at the size that worked.
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(call(&mut tried).unwrap());
        }
        assert_eq!(got, vec![64, 64]);
        assert_eq!(tried, vec![512, 256, 128, 64, 64]);
        // Another call site starts again from the top.
        let mut other = Vec::new();
        batch(512, |b| {
            other.push(b);
            if b > 100 { Err(E::Oom) } else { Ok(()) }
        })
        .unwrap();
        assert_eq!(other, vec![512, 256, 128, 64]);
    }

    #[test]
    fn factor_no_cache_and_giving_up() {
        let mut tried = Vec::new();
        let r: Result<(), E> = Batcher::new(10).factor(0.9).cache(Cache::None).batch(|b| {
            tried.push(b);
            Err(E::Oom)
        });
        assert_eq!(r, Err(E::Oom), "gives up with the last error at size 1");
        assert_eq!(tried, vec![10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
        // Other errors pass through at once.
        let mut n = 0;
        let r: Result<(), E> = Batcher::new(64).cache(Cache::None).batch(|_| {
            n += 1;
            Err(E::Other)
        });
        assert_eq!((r, n), (Err(E::Other), 1));
        // Cache::None starts from the top every time.
        for _ in 0..2 {
            let mut first = None;
            Batcher::new(64).cache(Cache::None).batch(|b| {
                first.get_or_insert(b);
                if b > 8 { Err(E::Oom) } else { Ok(()) }
            })
            .unwrap();
            assert_eq!(first, Some(64));
        }
    }

    #[test]
    fn range_goes_on_from_where_it_was_with_the_smaller_step() {
        let mut calls = Vec::new();
        Batcher::new(32).cache(Cache::None).range(0, 100, |lo, hi| {
            calls.push((lo, hi));
            if hi - lo > 20 && lo >= 32 { Err(E::Oom) } else { Ok(()) }
        })
        .unwrap();
        assert_eq!(calls, vec![(0, 32), (32, 64), (32, 48), (48, 64), (64, 80), (80, 96), (96, 100)]);
        let covered: usize = calls.iter().filter(|(l, h)| !(h - l > 20 && *l >= 32)).map(|(l, h)| h - l).sum();
        assert_eq!(covered, 100);
    }

    #[test]
    fn keys_global_cache_and_probing_back_up() {
        let spike = std::cell::Cell::new(true);
        let run = |tried: &mut Vec<usize>| {
            Batcher::new(64).key("probe-test").cache(Cache::Global).probe_up(2).batch(|b| {
                tried.push(b);
                if spike.get() && b > 16 { Err(E::Oom) } else { Ok(()) }
            })
        };
        let mut tried = Vec::new();
        run(&mut tried).unwrap();
        assert_eq!(tried, vec![64, 32, 16]);
        spike.set(false);
        let mut later = Vec::new();
        for _ in 0..4 {
            run(&mut later).unwrap();
        }
        // 16 once more (streak 2), then probes up to 32, 32 again, then 64.
        assert_eq!(later, vec![16, 32, 32, 64]);
    }

    #[test]
    fn one_call_site_with_two_closures_keeps_two_sizes_and_a_shared_key_stays_under_initial() {
        // As in a notebook, where two cells' call sites can have the same file, line and column
        // (each cell is its own crate): one Batcher, so one Location, used from two functions.
        let b = Batcher::new(64).cache(Cache::Global);
        fn small(b: &Batcher) -> Result<usize, E> {
            b.batch(|n| if n > 16 { Err(E::Oom) } else { Ok(n) })
        }
        fn large(b: &Batcher) -> Result<usize, E> {
            b.batch(Ok)
        }
        assert_eq!(small(&b), Ok(16));
        assert_eq!(large(&b), Ok(64), "another closure does not inherit 16");
        assert_eq!(small(&b), Ok(16));
        // A helper that wraps a loop passes its callers' sites on with #[track_caller].
        #[track_caller]
        fn helper(limit: usize) -> Result<usize, E> {
            batch(64, move |n| if n > limit { Err(E::Oom) } else { Ok(n) })
        }
        assert_eq!(helper(8), Ok(8));
        assert_eq!(helper(32), Ok(32), "another call site starts from the top");
        // A named key is shared on purpose, but never starts above what the call asks for.
        assert_eq!(Batcher::new(64).key("shared").batch(|n| if n > 16 { Err(E::Oom) } else { Ok(n) }), Ok(16));
        assert_eq!(Batcher::new(64).key("shared").batch(Ok::<usize, E>), Ok(16));
        assert_eq!(Batcher::new(8).key("shared").batch(Ok::<usize, E>), Ok(8));
    }

    /// A path in the temp dir unique to this process.
    fn tempfile_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("dryml-test-{}-{name}", std::process::id()))
    }

    /// True in the process [`run_child`] starts: the test runs its child half there.
    fn in_child() -> bool {
        std::env::var_os("DRYML_TEST_CHILD").is_some()
    }

    /// Runs test `name` alone in a new process of this test binary, with `DRYML_TEST_CHILD` set
    /// and its stderr going to `stderr`; returns its exit status. Not a fork: a fork of the
    /// multi-threaded test runner can inherit a lock (the size table's, the meminfo cache's)
    /// held by a test on another thread, and hang.
    fn run_child(name: &str, stderr: std::process::Stdio) -> std::process::ExitStatus {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("batch::tests::{name}"), "--test-threads=1", "--nocapture"])
            .env("DRYML_TEST_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .status()
            .unwrap()
    }

    #[test]
    fn a_slow_range_outside_the_kernel_logs_one_line_at_the_end() {
        if in_child() {
            // stderr is a pipe, as in a log: no redraws, one line once the loop is done.
            let r = range(0, 4, 1, |_, _| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                Ok::<(), E>(())
            });
            std::process::exit(r.is_ok() as i32);
        }
        let log = tempfile_path("slow-range.log");
        let file = std::fs::File::create(&log).unwrap();
        let status = run_child("a_slow_range_outside_the_kernel_logs_one_line_at_the_end", file.into());
        assert_eq!(status.code(), Some(1));
        let out = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out:?}");
        assert!(lines[0].starts_with(&format!("[{}] 4/4 (1.", "#".repeat(30))), "{out:?}");
    }

    #[test]
    fn a_slow_range_on_a_terminal_redraws_one_line() {
        if in_child() {
            let r = range(0, 8, 1, |_, _| {
                std::thread::sleep(std::time::Duration::from_millis(150));
                Ok::<(), E>(())
            });
            std::process::exit(r.is_ok() as i32);
        }
        let (mut master, mut slave) = (0, 0);
        let r = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(r, 0, "openpty");
        // The child gets its own copy of the terminal's slave end as stderr.
        let slave_copy = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(libc::dup(slave)) };
        let status = run_child("a_slow_range_on_a_terminal_redraws_one_line", slave_copy.into());
        assert_eq!(status.code(), Some(1));
        // Read while our end of the slave is still open: all of it is buffered by now.
        let mut buf = vec![0u8; 1 << 16];
        let n = unsafe { libc::read(master, buf.as_mut_ptr().cast(), buf.len()) };
        unsafe {
            libc::close(slave);
            libc::close(master);
        }
        // The terminal turns the final \n into \r\n.
        let out = String::from_utf8_lossy(&buf[..n.max(0) as usize]).replace("\r\n", "\n");
        // Redraws after 200 ms, each starting with \r, then the last one ends the line.
        let draws: Vec<&str> = out.split('\r').filter(|d| !d.is_empty()).collect();
        assert!(draws.len() >= 2, "{out:?}");
        assert!(draws.last().unwrap().starts_with(&format!("[{}] 8/8 (1.", "#".repeat(30))), "{out:?}");
        assert!(out.ends_with('\n') && out.matches('\n').count() == 1, "{out:?}");
    }

    /// This process's address space in bytes (`VmSize`).
    fn vm_size() -> u64 {
        crate::procfs::statm(std::process::id()).unwrap().size
    }

    #[test]
    fn real_out_of_memory_under_a_cpu_memory_limit() {
        // In a child, so the limit does not bind the test runner.
        if in_child() {
            let limit = (vm_size() + (384 << 20)) as f64 / (1u64 << 30) as f64;
            set_cpu_memory_limit(limit).unwrap();
            let got = batch(1usize << 31, |n| {
                let mut v: Vec<u8> = Vec::new();
                v.try_reserve_exact(n)?;
                v.resize(n, 1);
                std::hint::black_box(&v);
                Ok::<usize, std::collections::TryReserveError>(v.len())
            });
            let code = match got {
                Ok(n) => n.trailing_zeros() as i32,
                Err(_) => 99,
            };
            std::process::exit(code);
        }
        let status = run_child("real_out_of_memory_under_a_cpu_memory_limit", std::process::Stdio::inherit());
        assert!(status.code().is_some(), "the child died: {status}");
        // 2 GiB, 1 GiB and 512 MiB do not fit under +384 MiB; 256 MiB does. (The margins are
        // wide: malloc_trim between tries hands back some of what was mapped.)
        assert_eq!(status.code(), Some(28));
    }

    #[test]
    fn boxed_and_io_errors_count_by_what_they_hold() {
        let oom: Box<dyn std::error::Error> = Box::new(Vec::<u8>::new().try_reserve(usize::MAX).unwrap_err());
        assert!(oom.is_out_of_memory());
        let other: Box<dyn std::error::Error + Send + Sync> = "bad input".into();
        assert!(!other.is_out_of_memory());
        assert!(std::io::Error::from(std::io::ErrorKind::OutOfMemory).is_out_of_memory());
        assert!(!std::io::Error::from(std::io::ErrorKind::NotFound).is_out_of_memory());
        // With `?` in a closure returning Box<dyn Error>: sizes shrink past the failing ones.
        let got = Batcher::new(1 << 20).cache(Cache::None).batch(|n| -> Result<usize, Box<dyn std::error::Error>> {
            if n > 1000 {
                Vec::<u8>::new().try_reserve(usize::MAX)?;
            }
            Ok(n)
        });
        assert_eq!(got.unwrap(), 512);
    }

    #[test]
    fn try_reserve_counts_as_out_of_memory() {
        let got = batch(1usize << 62, |n| {
            let mut v: Vec<u8> = Vec::new();
            v.try_reserve_exact(n)?;
            Ok::<usize, std::collections::TryReserveError>(n)
        })
        .unwrap();
        assert!(got < 1 << 40, "{got}");
    }

    #[cfg(feature = "torch")]
    #[test]
    fn chunked_walks_every_slice_and_tch_errors_are_sorted() {
        use tch::{Device, Kind, Tensor};
        let t = Tensor::zeros([100, 3], (Kind::Float, Device::Cpu));
        let mut seen = Vec::new();
        Batcher::new(32).cache(Cache::None).chunked(&t, 0, |chunk, lo, hi| {
            seen.push((lo, hi));
            if hi - lo > 20 && lo >= 32 {
                // libtorch's own words for a failed CUDA allocation.
                return Err(tch::TchError::Torch("CUDA out of memory. Tried to allocate 2.00 GiB".into()));
            }
            let _ = chunk.fill_(1.0);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(0, 32), (32, 64), (32, 48), (48, 64), (64, 80), (80, 96), (96, 100)]);
        assert_eq!(t.sum(Kind::Float).double_value(&[]), 300.0, "chunks are views: every row was filled");
        // A shape error is not out of memory: it passes through at once.
        let mut n = 0;
        let r = chunked(&t, 64, -1, |c, _, _| {
            n += 1;
            c.f_view([7, 7]).map(|_| ())
        });
        assert!(r.is_err() && n == 1);
        assert!(!tch::TchError::Convert("CUDA out of memory".into()).is_out_of_memory());
        for m in [
            "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
            "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 4294967296 bytes.",
        ] {
            assert!(tch::TchError::Torch(m.into()).is_out_of_memory(), "{m}");
        }
        assert!(!tch::TchError::Torch("shape '[7, 7]' is invalid for input of size 300".into()).is_out_of_memory());
    }

    #[cfg(feature = "torch")]
    #[test]
    fn real_out_of_memory_with_tch_tensors_under_a_cpu_memory_limit() {
        use tch::{Device, Kind, Tensor};
        // In a child, so the limit does not bind the test runner; libtorch's thread pools start
        // there, before the limit and not under it.
        if in_child() {
            tch::set_num_threads(2);
            let _ = Tensor::ones([64, 64], (Kind::Float, Device::Cpu)).matmul(&Tensor::ones([64, 64], (Kind::Float, Device::Cpu)));
            let limit = (vm_size() + (384 << 20)) as f64 / (1u64 << 30) as f64;
            set_cpu_memory_limit(limit).unwrap();
            let mut failures = 0;
            let rows = Batcher::new(1 << 28).cache(Cache::None).batch(|n| {
                let r = Tensor::f_ones([n as i64, 4], (Kind::Float, Device::Cpu)).map(|t| t.size()[0]);
                failures += r.is_err() as i32;
                r
            });
            // 2^28 rows of 16 bytes is 4 GiB; 512 MiB is the last that fails under +384 MiB.
            let code = match rows {
                Ok(n) if n == 1 << 24 => failures,
                _ => 99,
            };
            std::process::exit(code);
        }
        let status = run_child("real_out_of_memory_with_tch_tensors_under_a_cpu_memory_limit", std::process::Stdio::inherit());
        assert!(status.code().is_some(), "the child died: {status}");
        assert_eq!(status.code(), Some(4));
    }
}
