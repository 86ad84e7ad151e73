//! The table of batch sizes that worked, one per process and shared by every cell through the
//! kernel binary's exports.

use std::collections::HashMap;
use std::sync::Mutex;

/// Remembered sizes, by key hash: `[size, successes in a row at that size]`. One per process: in
/// the kernel, evcxr links a copy of this crate, statics and all, into every cell, so the kernel
/// binary exports `dryml_batch_get`/`dryml_batch_record` (its own copy of [`table_get`] and
/// [`table_record`]) and every cell's copy goes through those. Elsewhere there is one copy.
static TABLE: Mutex<Option<HashMap<u64, [u64; 2]>>> = Mutex::new(None);

/// Reads a table entry into `out`; false when there is none. For the kernel to export.
///
/// # Safety
/// `out` is null or valid for one write of `[u64; 2]`.
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
pub extern "C" fn table_record(key: u64, size: u64) {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let e = t.get_or_insert_with(HashMap::new).entry(key).or_insert([size, 0]);
    *e = if e[0] == size { [size, e[1].saturating_add(1)] } else { [size, 1] };
}

type TableGet = unsafe extern "C" fn(u64, *mut [u64; 2]) -> bool;
type TableRecord = extern "C" fn(u64, u64);

pub(super) fn table() -> (TableGet, TableRecord) {
    static FNS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    let (g, p) = *FNS.get_or_init(|| {
        match (
            crate::display::interrupt::kernel_symbol(crate::sys::protocol::symbols::BATCH_GET),
            crate::display::interrupt::kernel_symbol(crate::sys::protocol::symbols::BATCH_RECORD),
        ) {
            (Some(g), Some(p)) => (g, p),
            _ => (table_get as TableGet as usize, table_record as TableRecord as usize),
        }
    });
    // Both are `extern "C"` functions with exactly these signatures (kernel/src/child.rs).
    unsafe { (std::mem::transmute::<usize, TableGet>(g), std::mem::transmute::<usize, TableRecord>(p)) }
}
