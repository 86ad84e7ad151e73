//! `state`'s unit tests.

use super::*;
use std::sync::Arc;

#[test]
fn a_cells_life_goes_through_its_phases_and_a_panic_of_ours_resets_it() {
    let state = Arc::new(CellState::default());
    {
        let _request = state.request_begins(true);
        assert!(state.quiet());
        // An interrupt before the cell's code starts: the cell ends before it builds.
        crate::session::interrupt::interrupt(&state);
        assert_eq!(state.phase(), Phase::Requested { interrupted: true });
        assert!(state.begin_cell(), "the cell starts interrupted");
        assert!(matches!(state.phase(), Phase::Running(Run { seq: 1, in_request: true, .. })));
        assert!(state.builds_stopping(), "its builds stop, and the kernel's work for them");
        assert_eq!(state.end_cell(), Escalation::Interrupted);
        // The next cell of the same request starts afresh.
        assert!(!state.begin_cell());
        assert!(!state.builds_stopping());
        state.polling(true);
        let Phase::Running(run) = state.phase() else { panic!("running") };
        assert_eq!((run.seq, run.polling), (2, 1));
        // A panic of ours here leaves the cell running; the request's guard ends it.
    }
    assert_eq!((state.phase(), state.quiet()), (Phase::Idle, false));
    let _request = state.request_begins(false);
    assert!(!state.begin_cell(), "a new request is not interrupted by an old one");
    assert_eq!(state.cells_begun(), 3);
}

#[test]
fn the_warm_up_stops_for_an_interrupt_and_gives_way_to_a_request() {
    let state = Arc::new(CellState::default());
    crate::session::interrupt::give_way(&state);
    assert_eq!(state.warm_up_begins(|| false), WarmUp::Later, "a request waits");
    assert_eq!(state.warm_up_begins(|| true), WarmUp::Busy, "the analyzer's start-up first");
    assert_eq!(state.warm_up_begins(|| false), WarmUp::Go);
    assert_eq!(state.phase(), Phase::Warming);
    assert!(!state.builds_stopping());
    crate::session::interrupt::interrupt(&state);
    assert!(state.builds_stopping());
    assert!(!state.warm_up_ends(), "an interrupt ends the warm-up");
    assert_eq!(state.warm_up_begins(|| false), WarmUp::Stopped);
    assert_eq!(state.phase(), Phase::Idle);
}
