//! Jupyter widgets from Rust: sliders, a dropdown, text, a checkbox, buttons, labels, boxes, an
//! output area, a progress bar for any iterator ([`progress`], tqdm's job) and [`interact`], over
//! Jupyter comms ([`comm`]) and ipywidgets' protocol (version 2, `@jupyter-widgets/controls`
//! 2.0), which JupyterLab's widget manager (the `jupyterlab_widgets` package) renders.
//!
//! A widget's value lives in the notebook's process: what the user sets in the page reaches it
//! at once, while a cell runs too, and the next cell reads it.
//!
//! ```
//! use dryml::widgets::{IntSlider, progress};
//!
//! let epochs = IntSlider::new(1..=50, 10).description("epochs");
//! // A cell ending in `epochs` shows the slider; a later cell reads what the user chose.
//! for _ in progress(0..epochs.value()) {
//!     // train one epoch
//! }
//! ```
//!
//! Outside the kernel (a program, a test) widgets keep their state and run their handlers, but
//! nothing shows.

pub mod comm;
mod controls;
#[allow(missing_docs)]
pub(crate) mod hub;
mod interact;
mod model;
mod progress;
#[cfg(test)]
mod tests;

pub use comm::{register_target, Comm};

/// Whether a frontend that renders widgets is attached (JupyterLab's widget manager announced
/// itself to the kernel). `dryml`'s own progress bars (`batch::range`, sweeps) are widgets then,
/// HTML otherwise (an `nbconvert` run, a client without widgets). Always false outside the kernel.
pub fn available() -> bool {
    static FLAG: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let addr = *FLAG.get_or_init(|| {
        crate::display::interrupt::kernel_symbol(crate::sys::protocol::symbols::WIDGETS_AVAILABLE).unwrap_or(0)
    });
    // SAFETY: the kernel binary exports an `AtomicBool` under this name (kernel/src/child.rs).
    addr != 0 && unsafe { &*(addr as *const std::sync::atomic::AtomicBool) }.load(std::sync::atomic::Ordering::Relaxed)
}
pub use controls::{Button, Checkbox, Container, Dropdown, FloatSlider, IntSlider, Label, Output, Text};
pub use interact::{interact, Control, Controls, Interactive};
pub use model::{Model, Widget, CONTROLS_VERSION, PROTOCOL_VERSION, VIEW_MIME};
pub use progress::{progress, progress_as, Progress, ProgressBar, REDRAW};
