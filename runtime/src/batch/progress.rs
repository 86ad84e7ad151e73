//! The progress bar of `range` and `chunked`: a widget, a display updated in place, a line
//! redrawn on a terminal, or a line at the end of a slow loop.

use crate::display::Update;
use std::io::Write;

/// Where a progress bar goes: a widget where the frontend renders widgets, a display updated in
/// place elsewhere in the kernel, a line redrawn with `\r` on a terminal, else one line at the
/// end of a loop that took a second or more.
#[derive(Clone, Copy, PartialEq)]
enum Sink {
    Widget,
    Kernel,
    Terminal,
    Log,
}

/// The progress bar of `range` and `chunked`. Only loops slow enough to watch (200 ms) get one,
/// and it is redrawn at most ten times a second.
pub(super) struct Progress {
    start: usize,
    end: usize,
    /// Found on the first redraw: most loops are too quick to need it.
    sink: std::cell::OnceCell<Sink>,
    /// Made on the first update: most loops are too quick to get a bar.
    id: std::cell::OnceCell<String>,
    widget: std::cell::OnceCell<std::cell::RefCell<crate::widgets::ProgressBar>>,
    last: std::cell::Cell<Option<std::time::Instant>>,
    t0: std::time::Instant,
}

impl Progress {
    pub(super) fn new(start: usize, end: usize) -> Progress {
        Progress {
            start,
            end,
            sink: std::cell::OnceCell::new(),
            id: std::cell::OnceCell::new(),
            widget: std::cell::OnceCell::new(),
            last: std::cell::Cell::new(None),
            t0: std::time::Instant::now(),
        }
    }
    fn text(&self, at: usize) -> String {
        let total = self.end.saturating_sub(self.start).max(1);
        let done = at.saturating_sub(self.start);
        let width = 30;
        let filled = (done * width / total).min(width);
        format!(
            "[{}{}] {done}/{total} ({:.1} s)",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.t0.elapsed().as_secs_f64()
        )
    }
    fn html(&self, at: usize, text: &str) -> String {
        let total = self.end.saturating_sub(self.start).max(1);
        format!(
            "<progress value=\"{}\" max=\"{total}\" style=\"width:20em\"></progress> <code>{text}</code>",
            at.saturating_sub(self.start)
        )
    }
    fn sink(&self) -> Sink {
        use std::io::IsTerminal;
        *self.sink.get_or_init(|| {
            if crate::widgets::available() {
                Sink::Widget
            } else if crate::display::wire::in_kernel() {
                Sink::Kernel
            } else if std::io::stderr().is_terminal() {
                Sink::Terminal
            } else {
                Sink::Log
            }
        })
    }
    fn send(&self, at: usize, update: bool, last: bool) {
        match self.sink() {
            Sink::Widget => {
                let bar = self.widget.get_or_init(|| {
                    crate::display::announce_polling(true);
                    let total = self.end.saturating_sub(self.start) as u64;
                    std::cell::RefCell::new(crate::widgets::ProgressBar::new(Some(total), ""))
                });
                let done = at.saturating_sub(self.start) as u64;
                if last {
                    bar.borrow_mut().finish(done);
                } else {
                    bar.borrow_mut().redraw(done);
                }
            }
            Sink::Kernel => {
                let id = self.id.get_or_init(|| {
                    // A loop slow enough for a bar may have steps longer than the kernel's usual
                    // grace period after an interrupt: ask it to wait for the step to end.
                    crate::display::announce_polling(true);
                    format!("dryml-range-{}", crate::objects::uuid_v4())
                });
                let text = self.text(at);
                let html = self.html(at, &text);
                let update = if update { Update::Replace(id) } else { Update::InPlace(id) };
                crate::display::display(&[("text/plain", &text), ("text/html", &html)], update);
            }
            // Straight to fd 2: a redirected stderr is where the line belongs.
            Sink::Terminal => {
                let _ = write!(std::io::stderr(), "\r{}{}", self.text(at), if last { "\n" } else { "" });
            }
            Sink::Log if last => {
                let _ = writeln!(std::io::stderr(), "{}", self.text(at));
            }
            Sink::Log => {}
        }
    }
    pub(super) fn show(&self, at: usize) {
        let last = self.last.get();
        if last.is_none() && self.t0.elapsed().as_millis() < 200 {
            return;
        }
        let now = std::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t).as_millis() < 100) {
            return;
        }
        self.last.set(Some(now));
        self.send(at, last.is_some(), false);
    }
    pub(super) fn done(&self, at: usize) {
        let shown = self.last.get().is_some();
        if shown || (self.t0.elapsed().as_secs() >= 1 && self.sink() == Sink::Log) {
            self.send(at, shown, true);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Also on the unwind after an interrupt.
        if self.id.get().is_some() || self.widget.get().is_some() {
            crate::display::announce_polling(false);
        }
    }
}
