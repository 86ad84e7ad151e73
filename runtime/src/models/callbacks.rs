//! What a training tells the notebook as it goes (DRYML's callbacks): a [`Callback`] hears of
//! every epoch and may stop the training there; [`History`] keeps the loss curves and
//! [`LiveLoss`] redraws them in the cell's output after every epoch.
//!
//! ```
//! use dryml::models::callbacks::{Callback, Control, History};
//! use dryml::models::training::Epoch;
//!
//! let mut history = History::default();
//! // A closure is a callback too: this one stops the training once the loss is below 0.1.
//! let mut good_enough = |e: &Epoch| if e.train_loss.is_some_and(|l| l < 0.1) { Control::Stop } else { Control::Continue };
//! for (epoch, loss) in [(1, 0.9), (2, 0.05)] {
//!     let e = Epoch { epoch, train_loss: Some(loss), val_loss: None };
//!     history.on_epoch(&e);
//!     if good_enough.on_epoch(&e) == Control::Stop {
//!         break;
//!     }
//! }
//! assert_eq!(history.train_losses(), [0.9, 0.05]);
//! ```

use super::training::Epoch;
use crate::plot::Figure;

/// What a callback tells the training after an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Go on.
    Continue,
    /// End the training now: its [`TrainSpec`](super::TrainSpec) says it is over (as early
    /// stopping's does), so training it again does nothing.
    Stop,
}

/// Hears of every epoch of a training ([`Model::train_with`](super::Model::train_with)).
pub trait Callback {
    /// Called after each epoch, with what it gave.
    fn on_epoch(&mut self, epoch: &Epoch) -> Control;

    /// Whether [`Callback::on_weights`] is wanted (reading a network's weights copies them).
    fn wants_weights(&self) -> bool {
        false
    }

    /// After each epoch of a network, when [`Callback::wants_weights`]: every parameter by
    /// name, sorted, with its shape and values.
    fn on_weights(&mut self, epoch: u64, weights: &[(String, Vec<usize>, Vec<f32>)]) {
        let _ = (epoch, weights);
    }
}

impl<F: FnMut(&Epoch) -> Control> Callback for F {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        self(epoch)
    }
}

/// Tells every callback of `epoch`; [`Control::Stop`] when any of them says so (all hear it).
pub fn tell(callbacks: &mut [&mut dyn Callback], epoch: &Epoch) -> Control {
    callbacks
        .iter_mut()
        .fold(Control::Continue, |c, cb| if cb.on_epoch(epoch) == Control::Stop { Control::Stop } else { c })
}

/// The epochs a training gave, kept: its loss curves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Every epoch heard of, in order.
    pub epochs: Vec<Epoch>,
}

impl History {
    /// The training losses, one per epoch that had one.
    pub fn train_losses(&self) -> Vec<f64> {
        self.epochs.iter().filter_map(|e| e.train_loss).collect()
    }

    /// The validation losses, one per epoch that had one.
    pub fn val_losses(&self) -> Vec<f64> {
        self.epochs.iter().filter_map(|e| e.val_loss).collect()
    }

    /// The loss curves over epochs (`train`, and `validation` when data was held out).
    pub fn figure(&self) -> Figure {
        let mut f = Figure::new().title("loss").x_label("epoch").y_label("loss");
        for (name, ys) in [("train", self.train_losses()), ("validation", self.val_losses())] {
            if !ys.is_empty() {
                let xs: Vec<u64> = self
                    .epochs
                    .iter()
                    .filter(|e| if name == "train" { e.train_loss.is_some() } else { e.val_loss.is_some() })
                    .map(|e| e.epoch)
                    .collect();
                f = f.line(name, &xs, &ys);
            }
        }
        f
    }
}

impl Callback for History {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        self.epochs.push(*epoch);
        Control::Continue
    }
}

/// The loss curves drawn in the cell's output and redrawn in place after every epoch, so a
/// training shows how it goes while it runs.
#[derive(Debug, Clone)]
pub struct LiveLoss {
    id: String,
    /// What it has drawn so far.
    pub history: History,
}

impl LiveLoss {
    /// Curves shown under `id` (a second `LiveLoss` of the same id in the cell draws over it).
    pub fn new(id: &str) -> LiveLoss {
        LiveLoss { id: id.to_string(), history: History::default() }
    }
}

impl Callback for LiveLoss {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        self.history.on_epoch(epoch);
        self.history.figure().title(&self.id).show_as(&self.id);
        Control::Continue
    }
}

/// A training's epochs: the bar moves at each, its losses after the counts. Give the bar the
/// number of epochs: `ProgressBar::new(Some(epochs), "training")`.
impl Callback for crate::widgets::ProgressBar {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        let loss = |name: &str, l: Option<f64>| l.map(|l| format!("{name}={l:.4}"));
        let parts: Vec<String> =
            [loss("loss", epoch.train_loss), loss("val_loss", epoch.val_loss)].into_iter().flatten().collect();
        self.set_postfix(&parts.join(", "));
        if self.total().is_some_and(|t| epoch.epoch >= t) {
            self.finish(epoch.epoch);
        } else {
            self.redraw(epoch.epoch);
        }
        Control::Continue
    }
}

#[cfg(all(test, feature = "candle", feature = "linfa"))]
mod tests;

#[cfg(test)]
mod progress_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_training_moves_the_bar_at_each_epoch() {
        let mut bar = crate::widgets::ProgressBar::new(Some(3), "training");
        let epoch = |e, l| Epoch { epoch: e, train_loss: Some(l), val_loss: None };
        bar.on_epoch(&epoch(1, 0.5));
        let (value, _, counts) = bar.state();
        assert_eq!(value, 1);
        assert!(counts.ends_with(" loss=0.5000"), "{counts}");
        bar.on_epoch(&epoch(3, 0.25));
        let (value, style, _) = bar.state();
        assert_eq!((value, style), (json!(3), json!("success")));
    }
}
