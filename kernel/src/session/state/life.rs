//! A cell's life as the phases of [`CellState`]: the start, a request, the warm-up, a cell begun
//! and ended, input awaited; each transition says which phases it expects.

use super::*;

impl CellState {
    /// The phase and the start-up's flags, locked: the interrupter's view (`session::interrupt`);
    /// outside the session, [`CellState::phase`] gives a snapshot.
    pub(in crate::session) fn life(&self) -> MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot of the phase.
    pub fn phase(&self) -> Phase {
        self.life().phase.clone()
    }

    /// Whether an execute request is under way (its magics, its build, its run).
    pub fn request_under_way(&self) -> bool {
        matches!(self.life().phase, Phase::Requested { .. } | Phase::Running(_))
    }

    /// How many cells have begun since the start.
    pub fn cells_begun(&self) -> u64 {
        self.life().cells
    }

    /// Idle → Starting: evcxr's start-up, whose optional work an interrupt skips.
    pub fn start_begins(&self) {
        self.expect("the start-up", |p| matches!(p, Phase::Idle), Phase::Starting);
    }

    /// Starting → Idle.
    pub fn start_ends(&self) {
        self.expect("the end of the start-up", |p| matches!(p, Phase::Starting), Phase::Idle);
    }

    /// Idle → Requested: an execute request is handled (`silent`: its output suppressed) until
    /// the guard this returns is dropped, however the request ends (a bug of ours that panics
    /// costs that request, not the next one's phase).
    pub fn request_begins(&self, silent: bool) -> RequestGuard<'_> {
        self.set_quiet(silent);
        let mut life = self.life();
        if life.phase != Phase::Idle {
            tracing::error!("a request began in phase {:?}", life.phase);
        }
        life.phase = Phase::Requested { interrupted: false };
        RequestGuard(self)
    }

    /// Idle → Warming, unless the warm-up was stopped, a request waits (the flag is taken: the
    /// worker is idle again when the step is tried next) or `busy` says the analyzer's own
    /// start-up work is under way.
    pub fn warm_up_begins(&self, busy: impl FnOnce() -> bool) -> WarmUp {
        let mut life = self.life();
        if life.warm_up_stopped {
            return WarmUp::Stopped;
        }
        if std::mem::take(&mut life.work_waiting) {
            return WarmUp::Later;
        }
        // The analyzer's first load and priming take a core for seconds after the start;
        // `dryml` would change Cargo.toml under it and make it start over.
        if busy() {
            return WarmUp::Busy;
        }
        if life.phase != Phase::Idle {
            tracing::error!("a warm-up step in phase {:?}", life.phase);
            return WarmUp::Stopped;
        }
        life.phase = Phase::Warming;
        WarmUp::Go
    }

    /// Warming → Idle; whether the warm-up may go on (no interrupt stopped it).
    pub fn warm_up_ends(&self) -> bool {
        let mut life = self.life();
        if life.phase == Phase::Warming {
            life.phase = Phase::Idle;
        }
        !life.warm_up_stopped
    }

    /// Whether the builds under way should stop: the running cell was interrupted, or the
    /// warm-up's step was stopped or gives way to a request. The kernel's own work for a build
    /// (seeding a build directory) asks, since no kill reaches it.
    pub fn builds_stopping(&self) -> bool {
        let life = self.life();
        match &life.phase {
            Phase::Running(run) => run.escalation >= Escalation::Interrupted,
            Phase::Warming => life.warm_up_stopped || life.work_waiting,
            _ => false,
        }
    }

    /// Whether a request waits for the warm-up's step to give way.
    pub fn work_waiting(&self) -> bool {
        self.life().work_waiting
    }

    /// Idle or Requested → Running: clears what the last cell left and starts the next one.
    /// Returns true when an interrupt already came for the request (the cell then ends, as
    /// interrupted, before it builds).
    pub fn begin_cell(&self) -> bool {
        *self.leftovers() = Leftovers::default();
        let mut life = self.life();
        let (in_request, interrupted) = match life.phase {
            Phase::Requested { interrupted } => (true, interrupted),
            Phase::Idle => (false, false),
            ref other => {
                tracing::error!("a cell began in phase {other:?}");
                debug_assert!(false, "a cell began in phase {other:?}");
                (false, false)
            }
        };
        life.cells += 1;
        let seq = life.cells;
        let escalation = if interrupted { Escalation::Interrupted } else { Escalation::None };
        life.phase = Phase::Running(Run { seq, in_request, escalation, ..Run::default() });
        interrupted
    }

    /// Running → Requested (or Idle, for a cell outside a request): how its code ended. Taken
    /// under the lock, so no kill for it is under way after this.
    pub fn end_cell(&self) -> Escalation {
        let mut life = self.life();
        match std::mem::take(&mut life.phase) {
            Phase::Running(run) => {
                life.phase = if run.in_request { Phase::Requested { interrupted: false } } else { Phase::Idle };
                run.escalation
            }
            other => {
                tracing::error!("a cell ended in phase {other:?}");
                debug_assert!(false, "a cell ended in phase {other:?}");
                life.phase = other;
                Escalation::None
            }
        }
    }

    /// The running cell waits for an `input_reply` (or got it).
    pub fn awaiting_input(&self, waiting: bool) {
        if let Phase::Running(run) = &mut self.life().phase {
            run.awaiting_input = waiting;
        }
    }

    /// The running cell entered (or left) a loop that stops between steps on interrupt.
    pub fn polling(&self, on: bool) {
        if let Phase::Running(run) = &mut self.life().phase {
            run.polling = if on { run.polling + 1 } else { run.polling.saturating_sub(1) };
        }
    }

    /// A transition from the phases `from` accepts to `to`; any other phase is a bug of ours,
    /// said in the log (and a panic in debug builds), the phase left as it was.
    fn expect(&self, what: &str, from: impl FnOnce(&Phase) -> bool, to: Phase) {
        let mut life = self.life();
        if from(&life.phase) {
            life.phase = to;
        } else {
            tracing::error!("{what} in phase {:?}", life.phase);
            debug_assert!(false, "{what} in phase {:?}", life.phase);
        }
    }
}
