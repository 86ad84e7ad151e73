//! Where a cell's output ends: the child numbers its cell ends, and the stdout and stderr syncs
//! of each end carry its number, so a sync that comes late from an earlier cell (one whose wait
//! gave up under load) is never taken for the current cell's.

use super::state::CellState;
use crate::protocol::published::StreamName;
use crossbeam_channel::{Receiver, Sender};
use dryml_sys::protocol::{STDERR_SYNC, SYNC_MIME};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The syncs that say a cell end's stdout and stderr have been published.
pub struct Ends {
    stdout: Receiver<u64>,
    stderr: Receiver<u64>,
}

impl Ends {
    /// Forgets syncs from before the code about to run.
    pub fn drain(&self) {
        while self.stdout.try_recv().is_ok() {}
        while self.stderr.try_recv().is_ok() {}
    }

    /// Waits until the code just run has all its output published: cell end `end`'s syncs, or
    /// without its number (outputs lost to an error), the next syncs for up to `unnumbered`
    /// (`None`: no code ran, nothing to wait for).
    pub fn settle(&self, end: Option<u64>, unnumbered: Option<Duration>) {
        match (end, unnumbered) {
            // Its syncs were written before evcxr heard of the end: only this process's threads
            // are left to publish them, so a long limit costs a healthy cell nothing.
            (Some(_), _) => self.wait(end, Duration::from_secs(10)),
            (None, Some(limit)) => self.wait(None, limit),
            (None, None) => true,
        };
    }

    /// Waits (up to `limit` in all) until cell end `end`'s stdout and stderr have both been
    /// published; without its number, for the next syncs.
    fn wait(&self, end: Option<u64>, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let reached = |rx: &Receiver<u64>| loop {
            match rx.recv_deadline(deadline) {
                Ok(n) if end.is_none_or(|e| n == e) => return true,
                Ok(n) => tracing::debug!("a late sync of cell end {n} passed over"),
                Err(_) => return false,
            }
        };
        reached(&self.stdout) && reached(&self.stderr)
    }
}

/// Takes the number of the cell end the pump added to evcxr's outputs (see [`SYNC_MIME`]).
pub fn take_end(outputs: &mut evcxr::EvalOutputs) -> Option<u64> {
    outputs.content_by_mime_type.remove(SYNC_MIME).and_then(|n| n.trim().parse().ok())
}

/// Forwards evcxr's stderr lines to the running cell as they come, up to each cell end's
/// marker; `stdout` is the output listener's syncs.
pub fn forward_stderr(state: Arc<CellState>, stderr: Receiver<String>, stdout: Receiver<u64>) -> std::io::Result<Ends> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new().name("dryml-stderr".into()).spawn(move || forward(&state, &stderr, &tx))?;
    Ok(Ends { stdout, stderr: rx })
}

fn forward(st: &CellState, stderr: &Receiver<String>, ends: &Sender<u64>) {
    // Lines that arrived together go out as one text: one line at a time could not keep up
    // with a cell flooding stderr.
    let mut text = String::new();
    while let Ok(first) = stderr.recv() {
        if first.starts_with(crate::child::STARTUP_FAILED) {
            tracing::warn!("{first}; the next cell carries the start-up code");
            st.startup_failed();
            continue;
        }
        let mut next = Some(first);
        while let Some(line) = next.take() {
            match split_marker(&line) {
                Some((open, n)) => {
                    // The rest of a line `eprint!` left open, without the newline it lacked.
                    text.push_str(open);
                    st.stream(StreamName::Stderr, &std::mem::take(&mut text));
                    let _ = ends.send(n);
                }
                None => {
                    let line = st.in_cell(&line);
                    st.keep_stderr(&line);
                    text.push_str(&line);
                    text.push('\n');
                    if text.len() < 64 << 10 {
                        next = stderr.try_recv().ok();
                    }
                }
            }
        }
        st.stream(StreamName::Stderr, &std::mem::take(&mut text));
    }
}

/// A line that ends in a cell end's marker: what came before it, and the end's number.
fn split_marker(line: &str) -> Option<(&str, u64)> {
    let (open, n) = line.rsplit_once(STDERR_SYNC)?;
    Some((open, n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_ends_a_line_and_carries_its_cell_end() {
        assert_eq!(split_marker("DRYML_STDERR_SYNC12"), Some(("", 12)));
        assert_eq!(split_marker("open 0DRYML_STDERR_SYNC3"), Some(("open 0", 3)));
        // A user's line that merely names the marker is the user's.
        assert_eq!(split_marker("DRYML_STDERR_SYNC is ours"), None);
        assert_eq!(split_marker("no marker"), None);
    }

    #[test]
    fn a_late_sync_from_an_earlier_cell_is_passed_over() {
        let (out_tx, stdout) = crossbeam_channel::unbounded();
        let (err_tx, stderr) = crossbeam_channel::unbounded();
        let ends = Ends { stdout, stderr };
        // Cell end 4's wait gave up; its syncs arrive while cell end 5 runs.
        for n in [4, 5] {
            out_tx.send(n).unwrap();
        }
        err_tx.send(4).unwrap();
        assert!(!ends.wait(Some(5), Duration::from_millis(50)), "stderr of end 5 has not come");
        err_tx.send(5).unwrap();
        out_tx.send(5).unwrap();
        assert!(ends.wait(Some(5), Duration::from_millis(50)));
        // Without a number, the next syncs do.
        out_tx.send(9).unwrap();
        err_tx.send(9).unwrap();
        assert!(ends.wait(None, Duration::from_millis(50)));
    }

    #[test]
    fn the_end_number_is_taken_out_of_the_outputs() {
        let mut outputs = evcxr::EvalOutputs::new();
        outputs.content_by_mime_type.insert(SYNC_MIME.into(), "17".into());
        outputs.content_by_mime_type.insert("text/plain".into(), "42".into());
        assert_eq!(take_end(&mut outputs), Some(17));
        assert_eq!(outputs.content_by_mime_type.keys().collect::<Vec<_>>(), ["text/plain"]);
        assert_eq!(take_end(&mut outputs), None);
    }
}
