//! `%%time`: wall, user and system time of a cell, as IPython prints them.

use super::cell::CellMagic;
use super::{Host, Magics};
use crate::protocol::ErrorContent;
use std::time::Instant;

/// `%%time`'s handler: the timer starts before the body and reports after it, whether or not
/// it failed, before its value (as IPython does).
#[derive(Default)]
pub struct TimeCell(Option<Timer>);

impl CellMagic for TimeCell {
    fn before(&mut self, _magics: &mut Magics, host: &mut Host<'_>) -> Result<(), ErrorContent> {
        self.0 = Some(Timer::start(host.child_pid()));
        Ok(())
    }

    fn after(&mut self, host: &Host<'_>) {
        if let Some(t) = self.0.take() {
            t.report(host);
        }
    }
}

pub struct Timer {
    start: Instant,
    cpu: Option<(f64, f64)>,
}

impl Timer {
    /// Starts timing the child `pid`'s CPU and the wall clock.
    pub fn start(pid: u32) -> Timer {
        Timer { start: Instant::now(), cpu: dryml_sys::procfs::cpu_times(pid) }
    }

    /// Prints the times since the start (before the cell's result, as IPython does).
    pub fn report(self, host: &Host<'_>) {
        let wall = self.start.elapsed();
        let (user, sys) = match (self.cpu, dryml_sys::procfs::cpu_times(host.child_pid())) {
            (Some(a), Some(b)) => ((b.0 - a.0).max(0.0), (b.1 - a.1).max(0.0)),
            _ => (0.0, 0.0),
        };
        host.print(&format!(
            "CPU times: user {}, sys: {}, total: {}\nWall time: {}\n",
            fmt_secs(user),
            fmt_secs(sys),
            fmt_secs(user + sys),
            fmt_secs(wall.as_secs_f64())
        ));
    }
}

fn fmt_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}
