//! The bottom layer every part uses: the one atomic file write, the one `/proc` reader, the
//! line protocol and environment names shared with the kernel, and sizes and durations as
//! people write them. Crate-private; the kernel reaches it through `__kernel`.

#![allow(missing_docs)]

pub mod fs;
pub mod procfs;
pub mod protocol;
pub mod units;
