//! Interrupting the running cell: its builds are killed (variables kept), the child gets SIGINT
//! while it runs the cell's code or waits for input, and is killed if that code outlives a grace
//! period. During the start-up, the warm-up is stopped instead; a request that arrives during
//! the warm-up pauses it the same way.
//!
//! # What an interrupt does
//!
//! An interrupt (control `interrupt_request`, or SIGINT to the kernel):
//! - ends a wait for input at once (`dryml::input` then ends the cell as interrupted, variables
//!   kept; a late `input_reply` naming the old request is ignored);
//! - kills the cell's builds, now and any it starts until it ends (the interrupt may land between
//!   evcxr's steps); what a killed build leaves of the cell crate (`ctx.*.rcgu.o`, its incremental
//!   state) is removed before the next build, or the next link picks stale objects up; the
//!   kernel's own work for a build (seeding its aside directory) asks the phase and stops;
//! - sends SIGINT to the child only while it runs the cell's code or waits for input (a child
//!   reading stdin otherwise waits for evcxr's next command: the cell is building); the flag
//!   `dryml::interrupted()` reads is set, `dryml::batch` loops poll it; a cell whose code is still
//!   running 1 s later (60 s for a loop that said `DRYML_POLLING`) has its child killed, and the
//!   error lists the variables lost; a second interrupt kills at once;
//! - before the cell has started (its request is being handled), ends it as interrupted when it
//!   would start;
//! - during the warm-up, ends it (killing its builds; a request that arrives only pauses it); cells
//!   queued behind the start-up (evcxr's, before the first request is served) end as interrupted
//!   (the first `KeyboardInterrupt`, the rest `aborted`);
//! - kills only builds (`cargo build`/`check` and below, and the cell crate's rustc run alone, told
//!   by its `--crate-name`), never the analyzer's `cargo metadata`.
//!
//! The interrupter's kills and the end of a cell share one lock, the cell's phase
//! (`CellState::life`), so a kill meant for one cell never reaches the next one's build. evcxr
//! restarts a dead child inside the failing eval; the next cell re-applies `%env` and the context.

use super::state::{CellState, Escalation, Phase, Run};
use std::sync::Arc;
use std::time::Duration;

/// How long a cell has to stop after SIGINT before the child is killed; a cell in a loop that
/// stops between steps (`DRYML_POLLING`) gets longer, for its current step to end.
const GRACE: Duration = Duration::from_millis(1000);
const GRACE_POLLING: Duration = Duration::from_secs(60);

/// Stops the running cell. A second interrupt while the first is pending kills the child at once.
pub fn interrupt(state: &Arc<CellState>) {
    let mut life = state.life();
    let child = state.child_pid();
    match &mut life.phase {
        // The warm-up is only ahead-of-time work: the first cell that needs it builds it.
        Phase::Warming => {
            life.stop_warm_up();
            stop_warm_up_step(state);
        }
        // evcxr's own start-up builds too, but without it there is no kernel: only what would
        // follow it is skipped.
        Phase::Starting => life.stop_warm_up(),
        Phase::Idle => {}
        // The request is being handled but its cell has not started: it will not.
        Phase::Requested { interrupted } => *interrupted = true,
        Phase::Running(run) => {
            run.escalation = run.escalation.max(Escalation::Interrupted);
            for pid in build_processes(std::process::id(), child) {
                kill_build(state, pid);
            }
            // A second press kills at once, but only after a SIGINT: one just after a build was
            // killed must not take the notebook's variables with it.
            if run.escalation >= Escalation::Signalled && child != 0 {
                run.escalation = Escalation::Killed;
                unsafe { libc::kill(child as i32, libc::SIGKILL) };
                return;
            }
            let sigint_at = running_code(run, child).then(|| signal(run, child));
            let (state, cell) = (state.clone(), run.seq);
            std::thread::spawn(move || watch(&state, cell, child, sigint_at));
        }
    }
}

/// A request was queued: the warm-up's step under way (if any) stops, its build killed, and the
/// next step waits until no request does. Both are decided under the phase's lock, so either
/// this sees the step or the step sees the flag before it builds.
pub fn give_way(state: &Arc<CellState>) {
    let mut life = state.life();
    life.work_queued();
    if life.phase == Phase::Warming {
        stop_warm_up_step(state);
    }
}

/// Kills the warm-up step's builds until the step has ended (one may start after this call).
fn stop_warm_up_step(state: &Arc<CellState>) {
    let state = state.clone();
    std::thread::spawn(move || loop {
        {
            let life = state.life();
            if life.phase != Phase::Warming {
                return;
            }
            for pid in build_processes(std::process::id(), state.child_pid()) {
                kill_build(&state, pid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    });
}

/// Whether the child is running the cell's code, or waiting for the answer to its input
/// request. A child blocked reading stdin otherwise waits for evcxr's next command: the cell
/// is still being built, and neither a SIGINT (its flag would outlive the cell) nor a kill
/// (the notebook's variables) is called for.
fn running_code(run: &Run, child: u32) -> bool {
    child != 0 && (run.awaiting_input || !dryml_sys::procfs::reading_stdin(child))
}

fn signal(run: &mut Run, child: u32) -> std::time::Instant {
    run.escalation = run.escalation.max(Escalation::Signalled);
    unsafe { libc::kill(child as i32, libc::SIGINT) };
    std::time::Instant::now()
}

/// Until the interrupted cell ends: kills any build it starts (the interrupt may have come
/// between two of evcxr's steps), signals the child once it runs the cell's code, and kills it
/// if that code is still running when the grace period is over.
fn watch(state: &CellState, cell: u64, child: u32, mut sigint_at: Option<std::time::Instant>) {
    loop {
        {
            let mut life = state.life();
            let Phase::Running(run) = &mut life.phase else { return };
            if run.seq != cell {
                return;
            }
            for pid in build_processes(std::process::id(), child) {
                kill_build(state, pid);
            }
            if running_code(run, child) {
                let at = *sigint_at.get_or_insert_with(|| signal(run, child));
                let grace = if run.polling > 0 { GRACE_POLLING } else { GRACE };
                if at.elapsed() >= grace {
                    run.escalation = Escalation::Killed;
                    unsafe { libc::kill(child as i32, libc::SIGKILL) };
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_build(state: &CellState, pid: u32) {
    state.build_was_killed();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

/// The kernel's builds: its `cargo build` and `cargo check` children (evcxr's, the job
/// programs'), the cell crate's rustc when evcxr runs it without cargo (`--crate-name`), and
/// everything below them. Not the evcxr child, and not what evcxr's analyzer
/// runs while it loads the workspace on a thread of its own (`cargo metadata`, `rustc
/// --print`): killing those would leave it without the standard library.
fn build_processes(kernel: u32, child: u32) -> Vec<u32> {
    let children = dryml_sys::procfs::children_by_parent();
    let mut todo: Vec<u32> = children.get(&kernel).cloned().unwrap_or_default();
    todo.retain(|&p| {
        p != child && dryml_sys::procfs::cmdline(p).iter().any(|a| a == "build" || a == "check" || a == "--crate-name")
    });
    let mut out = Vec::new();
    while let Some(p) = todo.pop() {
        out.push(p);
        todo.extend(children.get(&p).into_iter().flatten());
    }
    out
}
