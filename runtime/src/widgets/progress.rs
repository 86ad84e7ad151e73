//! tqdm's job as a widget: a bar with the count, the rate and the time left, for any iterator,
//! redrawn at most ten times a second so a step costs a clock read.

use super::controls::{Container, Label};
use super::model::{Model, Widget};
use crate::display::wire::escape_html;
use serde_json::json;
use std::time::{Duration, Instant};

/// How often the bar is redrawn (tqdm's `mininterval`).
pub const REDRAW: Duration = Duration::from_millis(100);

/// A progress bar: a description and percentage, the bar, then `n/total [elapsed<left, rate]`.
pub struct ProgressBar {
    row: Container,
    left: Label,
    bar: Model,
    right: Label,
    total: Option<u64>,
    what: String,
    /// Shown after the counts (tqdm's postfix): a loss, a sweep's failures.
    postfix: String,
    start: Instant,
    last: Instant,
    done: bool,
}

impl std::fmt::Debug for ProgressBar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgressBar({:?}, total {:?})", self.what, self.total)
    }
}

impl Widget for ProgressBar {
    fn model(&self) -> &Model {
        self.row.model()
    }
}

/// `12s`, `3:04`, `1:02:03`, as tqdm writes durations.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, m, s) => format!("{m:02}:{s:02}"),
        (h, m, s) => format!("{h}:{m:02}:{s:02}"),
    }
}

impl ProgressBar {
    /// A bar for `total` steps (unknown: `None`, the bar then shows the count and rate only),
    /// shown at once as a new output of the running cell.
    pub fn new(total: Option<u64>, what: &str) -> Self {
        let left = Label::html(&escape_html(what));
        let max = total.unwrap_or(1).max(1);
        let style = if total.is_some() { "" } else { "info" };
        let bar = Model::control(
            "IntProgress",
            "IntProgressModel",
            "ProgressView",
            json!({"value": 0, "min": 0, "max": max, "bar_style": style}),
        );
        let right = Label::html("");
        let row = Container::row(&[&left, &bar, &right]);
        row.show();
        let now = Instant::now();
        ProgressBar {
            row,
            left,
            bar,
            right,
            total,
            what: what.to_string(),
            postfix: String::new(),
            start: now,
            last: now,
            done: false,
        }
    }

    /// At `n` steps: redrawn when the last redraw is [`REDRAW`] old.
    #[inline]
    pub fn update(&mut self, n: u64) {
        let now = Instant::now();
        if now.duration_since(self.last) >= REDRAW {
            self.last = now;
            self.draw(n, now, None);
        }
    }

    /// Its total, if known.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// At `n` steps, redrawn now.
    pub fn redraw(&mut self, n: u64) {
        self.last = Instant::now();
        self.draw(n, self.last, None);
    }

    /// Text shown after the counts from the next redraw on (tqdm's `set_postfix_str`).
    pub fn set_postfix(&mut self, text: &str) {
        self.postfix = text.to_string();
    }

    /// Ends the bar at `n` steps: green when all were done, red when the loop stopped early.
    pub fn finish(&mut self, n: u64) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let style = match self.total {
            Some(t) if n < t => "danger",
            _ => "success",
        };
        self.draw(n, Instant::now(), Some(style));
    }

    fn draw(&self, n: u64, now: Instant, style: Option<&str>) {
        let elapsed = now.duration_since(self.start).as_secs_f64();
        let rate = if elapsed > 0.0 { n as f64 / elapsed } else { 0.0 };
        let rate_text =
            if rate >= 1.0 || rate == 0.0 { format!("{rate:.2}it/s") } else { format!("{:.2}s/it", 1.0 / rate) };
        let (pct, counts) = match self.total {
            Some(t) => {
                let left = if rate > 0.0 { clock(t.saturating_sub(n) as f64 / rate) } else { "?".into() };
                let pct = (n.min(t) * 100).checked_div(t).unwrap_or(100);
                (format!("{pct:3}%"), format!("{n}/{t} [{}<{left}, {rate_text}]", clock(elapsed)))
            }
            None => (String::new(), format!("{n} [{}, {rate_text}]", clock(elapsed))),
        };
        let counts = if self.postfix.is_empty() { counts } else { format!("{counts} {}", self.postfix) };
        let desc = if self.what.is_empty() { pct } else { format!("{}: {pct}", self.what) };
        self.left.set_value(&escape_html(&desc));
        let mut bar = json!({"value": if self.total.is_some() { n } else { 1 }});
        if let Some(s) = style {
            bar["bar_style"] = json!(s);
        }
        self.bar.set(bar);
        self.right.set_value(&escape_html(&counts));
    }
}

/// An iterator that moves a [`ProgressBar`] (see [`progress`]).
pub struct Progress<I> {
    inner: I,
    bar: ProgressBar,
    n: u64,
}

impl<I: Iterator> Iterator for Progress<I> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Option<I::Item> {
        match self.inner.next() {
            Some(item) => {
                self.n += 1;
                self.bar.update(self.n);
                Some(item)
            }
            None => {
                self.bar.finish(self.n);
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I> Drop for Progress<I> {
    fn drop(&mut self) {
        // A loop left early (a `break`, a `?`, a panic) leaves its bar where it stopped.
        self.bar.finish(self.n);
    }
}

/// Wraps an iterator in a progress bar, as `tqdm(it)`: the total is its exact length when it
/// has one.
///
/// ```
/// let mut sum = 0;
/// for i in dryml::widgets::progress(0..1000) {
///     sum += i;
/// }
/// assert_eq!(sum, 499_500);
/// ```
pub fn progress<T: IntoIterator>(iter: T) -> Progress<T::IntoIter> {
    progress_as("", iter)
}

/// [`progress`] with a description before the bar (`tqdm(it, desc=...)`).
pub fn progress_as<T: IntoIterator>(what: &str, iter: T) -> Progress<T::IntoIter> {
    let inner = iter.into_iter();
    let total = match inner.size_hint() {
        (lo, Some(hi)) if lo == hi => Some(lo as u64),
        _ => None,
    };
    Progress { bar: ProgressBar::new(total, what), inner, n: 0 }
}

#[cfg(test)]
impl ProgressBar {
    /// The bar's and the counts' state, for tests.
    pub(crate) fn state(&self) -> (serde_json::Value, serde_json::Value, String) {
        let right = self.right.model().get("value").as_str().unwrap_or_default().to_string();
        (self.bar.get("value"), self.bar.get("bar_style"), right)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_ends_green_when_done_and_red_when_left_early() {
        let mut it = progress_as("epochs", 0..10);
        assert_eq!(it.bar.total, Some(10));
        assert_eq!(it.by_ref().count(), 10);
        assert_eq!(it.bar.bar.get("bar_style"), "success");
        assert_eq!(it.bar.bar.get("value"), 10);
        assert!(it.bar.left.model().get("value").as_str().unwrap().contains("epochs: 100%"));
        assert!(it.bar.right.model().get("value").as_str().unwrap().starts_with("10/10 [00:00&lt;00:00, "));

        let mut early = progress(0..10);
        early.nth(2);
        drop(early);
        let mut open = progress((0..).take_while(|i| *i < 5));
        assert_eq!(open.bar.total, None);
        assert_eq!(open.by_ref().count(), 5);
        assert!(open.bar.right.model().get("value").as_str().unwrap().starts_with("5 [00:00, "));
    }

    #[test]
    fn durations_read_as_tqdms() {
        assert_eq!(clock(12.4), "00:12");
        assert_eq!(clock(184.0), "03:04");
        assert_eq!(clock(3723.0), "1:02:03");
    }
}
