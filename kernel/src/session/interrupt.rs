//! Interrupting the running cell: a build is killed (variables kept); otherwise the child gets
//! SIGINT and, if the cell has not ended after a grace period, is killed.

use super::state::CellState;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a cell has to stop after SIGINT before the child is killed; a cell in a loop that
/// stops between steps (`DRYML_POLLING`) gets longer, for its current step to end.
const GRACE: Duration = Duration::from_millis(1000);
const GRACE_POLLING: Duration = Duration::from_secs(60);

/// Stops the running cell. A second interrupt while the first is pending kills the child at once.
pub fn interrupt(state: &Arc<CellState>) {
    let child = state.child_pid();
    if state.warming.load(Ordering::SeqCst) {
        // The warm-up is only ahead-of-time work: the first cell that needs it builds it. Its
        // steps stop; builds are killed until it has (one may start between two steps).
        state.warm_up_stopped.store(true, Ordering::SeqCst);
        let state = state.clone();
        std::thread::spawn(move || {
            while state.warming.load(Ordering::SeqCst) {
                for pid in build_processes(std::process::id(), state.child_pid()) {
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        return;
    }
    if state.starting.load(Ordering::SeqCst) {
        // evcxr's own start-up builds too, but without it there is no kernel: only what would
        // follow it is skipped.
        state.warm_up_stopped.store(true, Ordering::SeqCst);
        return;
    }
    if !state.running.load(Ordering::SeqCst) {
        return;
    }
    state.interrupted.store(true, Ordering::SeqCst);
    let builds = build_processes(std::process::id(), child);
    for &pid in &builds {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    // Only after a SIGINT to the child: a second press just after a build was killed must not
    // take the notebook's variables with it.
    let signalled = builds.is_empty() && child != 0;
    if signalled {
        if state.signalled.swap(true, Ordering::SeqCst) {
            state.killed.store(true, Ordering::SeqCst);
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
            return;
        }
        unsafe { libc::kill(child as i32, libc::SIGINT) };
    }
    let state = state.clone();
    let cell = state.cell_seq.load(Ordering::SeqCst);
    std::thread::spawn(move || watch(&state, cell, child, signalled));
}

/// Until the interrupted cell ends: kills any build it starts (the interrupt may have come while
/// evcxr was between two steps of one), and kills the child if it is still running the cell's
/// code when the grace period is over. A child waiting for its next command (reading stdin)
/// runs no code: the cell is building, and killing the child would only lose variables.
fn watch(state: &CellState, cell: u64, child: u32, signalled: bool) {
    let start = std::time::Instant::now();
    let same_cell = || state.running.load(Ordering::SeqCst) && state.cell_seq.load(Ordering::SeqCst) == cell;
    let mut built = !signalled;
    while same_cell() {
        let builds = build_processes(std::process::id(), child);
        for &pid in &builds {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        built |= !builds.is_empty();
        let grace = if state.polling.load(Ordering::SeqCst) > 0 { GRACE_POLLING } else { GRACE };
        if signalled && !built && start.elapsed() >= grace && !dryml::procfs::reading_stdin(child) {
            state.killed.store(true, Ordering::SeqCst);
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The kernel's descendant processes other than the evcxr child and its own: cargo and rustc
/// mid-build.
fn build_processes(kernel: u32, child: u32) -> Vec<u32> {
    let children = dryml::procfs::children_by_parent();
    let mut todo: Vec<u32> = children.get(&kernel).cloned().unwrap_or_default();
    todo.retain(|&p| p != child);
    let mut out = Vec::new();
    while let Some(p) = todo.pop() {
        out.push(p);
        todo.extend(children.get(&p).into_iter().flatten());
    }
    out
}
