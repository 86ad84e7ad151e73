//! The notebook from a cell: rich outputs (HTML, images, any mime bundle) that show while the
//! cell runs and redraw in place, `clear_output`, line input from the user, and the interrupt.
//!
//! Each display prints one `DRYML_...` line that the kernel turns into a Jupyter message while
//! the cell is still running; outside the kernel the plain-text form is printed instead, so the
//! same code runs in a test or a program. Arrays, datasets and record batches show as tables
//! ([`Tabular`]). Plots are in [`crate::plot`]; a progress bar comes with
//! [`crate::batch::range`].
//!
//! ```
//! use dryml::display::{display, html, Update};
//!
//! html("<b>training</b>");
//! for epoch in 0..3 {
//!     if dryml::interrupted() {
//!         break; // the user pressed interrupt: stop cleanly, variables kept
//!     }
//!     display(&[("text/plain", &format!("epoch {epoch}"))], Update::InPlace("epoch"));
//! }
//! ```

#[cfg(feature = "parquet")]
mod arrow;
mod input;
pub(crate) mod interrupt;
#[cfg(feature = "polars")]
mod polars;
pub(crate) mod table;
// Modules marked `allow(missing_docs)` are the kernel's side (`__kernel` re-exports them).
#[allow(missing_docs)]
pub(crate) mod wire;

pub use input::input;
pub use interrupt::interrupted;
pub use table::{array_table, table, ShowTable, Table, Tabular, END_ROWS, MAX_CELL, MAX_COLUMNS, MAX_ROWS};
pub(crate) use wire::{announce_polling, raise_error};
use wire::{emit, in_kernel, send, strip_tags};

/// Where [`display`] puts a bundle: a new output, or one shown before, redrawn in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update<'a> {
    /// A new output of the running cell.
    New,
    /// This id's output in the running cell: new the first time the cell shows the id, redrawn
    /// after that (a re-run cell shows it afresh: its old output is gone). The mode for a
    /// progress bar or a training curve.
    InPlace(&'a str),
    /// Redraws the output shown under this display id, in whichever cell it is (a redraw that
    /// may come after its cell ended).
    Replace(&'a str),
}

/// Shows a mime bundle (pairs of mime type and content, `text/plain` as the fallback), as a new
/// output or redrawn in place.
///
/// ```
/// use dryml::display::{display, Update};
///
/// for step in 0..3 {
///     let text = format!("step {step} of 3");
///     // One line that changes in place, not three.
///     display(&[("text/plain", &text)], Update::InPlace("progress"));
/// }
/// ```
pub fn display(bundle: &[(&str, &str)], update: Update<'_>) {
    match update {
        Update::New => send(bundle, None, "false"),
        Update::Replace(id) => send(bundle, Some(id), "true"),
        Update::InPlace(id) => send(bundle, Some(id), "\"auto\""),
    }
}

/// Shows SVG text inline (a figure from `plotters`' SVG backend, say).
pub fn svg(svg: &str) {
    display(&[("image/svg+xml", svg), ("text/plain", "<svg image>")], Update::New);
}

/// Shows PNG bytes inline (a dataset's sample, a saved figure).
pub fn png(bytes: &[u8]) {
    image("image/png", bytes);
}

/// Shows JPEG bytes inline.
pub fn jpeg(bytes: &[u8]) {
    image("image/jpeg", bytes);
}

/// Shows an image of mime type `mime` (`image/png`, `image/jpeg`, `image/gif`) from its bytes;
/// Jupyter carries them base64-encoded.
pub fn image(mime: &str, bytes: &[u8]) {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let text = format!("<{mime} image, {} bytes>", bytes.len());
    display(&[(mime, &data), ("text/plain", &text)], Update::New);
}

/// Shows HTML (with a plain-text fallback made by stripping tags).
pub fn html(html: &str) {
    display(&[("text/html", html), ("text/plain", &strip_tags(html))], Update::New);
}

/// Clears the cell's output; with `wait`, only when new output arrives.
pub fn clear_output(wait: bool) {
    if in_kernel() {
        emit(format!("{} {{\"wait\":{wait}}}", crate::sys::protocol::CLEAR));
    }
}

/// A value that shows as HTML when it is a cell's result (evcxr's `evcxr_display` protocol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Html(pub String);

impl Html {
    /// Shows the HTML as a cell's value (evcxr calls it).
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT", self.0);
        println!("EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT", strip_tags(&self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_tags() {
        assert_eq!(strip_tags("<b>bold</b> text"), "bold text");
    }
}
