//! What the kernel process and `dryml` (every cell's copy) both link, and nothing else: the one
//! atomic file write, the one file lock, the one `/proc` reader, the line protocol and environment names they
//! share, sizes and durations as people write them, and what a panic said. It names no crate of ours, so the
//! kernel's protocol and measurements depend on no ML code; `dryml`'s parts call it `sys`.

#![allow(missing_docs)]

pub mod fs;
pub mod lock;
pub mod procfs;
pub mod protocol;
pub mod units;

/// What a panic said: its payload when that is a string (as `panic!` makes it).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned())
}
