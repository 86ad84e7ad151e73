//! What the kernel process and `dryml` (every cell's copy) both link, and nothing else: the one
//! atomic file write, the one `/proc` reader, the line protocol and environment names they
//! share, and sizes and durations as people write them. It names no crate of ours, so the
//! kernel's protocol and measurements depend on no ML code; `dryml`'s parts call it `sys`.

#![allow(missing_docs)]

pub mod fs;
pub mod procfs;
pub mod protocol;
pub mod units;
