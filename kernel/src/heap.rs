//! The kernel process's own heap (glibc's malloc): one arena, and freed pages handed back once
//! the worker has settled after requests, so the kernel's memory is what it holds, not what
//! its busiest moment left behind.
//!
//! Measured (issue 39): glibc gives each thread that allocates at once an arena of its own, and
//! the analyzer's loading and priming thread fills one while the worker fills another; what each
//! frees stays in its arena. One arena took the kernel from 743 to 491 MiB after five plain
//! cells and from 873 to 554 MiB after a `dryml` cell, with no change in cell times measurable
//! here; handing freed pages back took 491 to 449 MiB, in under 10 ms. evcxr's child, where
//! user code (and its threads) runs, keeps glibc's defaults.

/// One arena for every thread; call before the kernel starts any thread.
pub fn one_arena() {
    // SAFETY: mallopt only sets an allocator parameter.
    if unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) } != 1 {
        tracing::warn!("glibc refused one malloc arena; the kernel keeps one per busy thread");
    }
}

/// Hands the heap's free pages back to the system; returns the RSS before and after (bytes).
pub fn hand_back() -> (u64, u64) {
    let before = resident();
    // SAFETY: malloc_trim only releases memory malloc holds free.
    unsafe { libc::malloc_trim(0) };
    (before, resident())
}

/// This process's resident memory in bytes (0 where /proc cannot say).
pub fn resident() -> u64 {
    dryml_sys::procfs::statm(std::process::id()).map_or(0, |m| m.resident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_pages_are_handed_back() {
        one_arena();
        // 64 MiB in small blocks (below mmap's threshold: they live in the arena), then freed.
        let blocks: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![i as u8; 1000]).collect();
        // Kept: the freed blocks lie below it, where free() alone never gives pages back.
        let pin = std::hint::black_box(vec![1u8; 1000]);
        let full = resident();
        drop(blocks);
        let (before, after) = hand_back();
        drop(pin);
        assert!(full >= 64 << 20, "the blocks were resident: {full}");
        assert!(before.saturating_sub(after) >= 32 << 20, "{before} -> {after}");
    }
}
