//! Training procedures written once for every framework: a [`Training`] (epochs, batch size,
//! validation split, early stopping that restores the best weights) drives any [`Learner`] an
//! epoch at a time, moving the model's [`TrainSpec`] on, so a model saved after each epoch
//! resumes, once killed, at the epoch after the last one saved.

use super::{ModelError, TrainSpec};
use crate::data::{Dataset, Element, Xy};
use serde_json::Value;

/// What a training procedure drives: one framework's network, optimiser and loss.
pub trait Learner {
    /// The features of one element.
    type X: Element;
    /// The target of one element.
    type Y: Element;

    /// One optimisation step on a batch; its loss.
    fn step(&mut self, batch: Xy<<Self::X as Element>::Batch, <Self::Y as Element>::Batch>) -> Result<f64, ModelError>;

    /// The mean loss over batches, without learning.
    fn loss(
        &mut self,
        batches: &Dataset<Xy<<Self::X as Element>::Batch, <Self::Y as Element>::Batch>>,
    ) -> Result<f64, ModelError>;

    /// The weights as they are (early stopping keeps the best).
    fn snapshot(&self) -> Result<Vec<u8>, ModelError>;

    /// Puts weights from [`Learner::snapshot`] back.
    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError>;

    /// The training's elements (in their order) made ready on the model's device once, where
    /// they fit, for [`Learner::epoch_held`]; `None` (the default): each step gets its batch as
    /// made on the host.
    fn hold(&mut self, _elements: &Dataset<Xy<Self::X, Self::Y>>) -> Result<Option<Held>, ModelError> {
        Ok(None)
    }

    /// An epoch of steps on `held`'s elements, `batch` at a time, in `order` (their positions):
    /// the sum of its steps' losses, and how many it took.
    fn epoch_held(&mut self, _held: &Held, _order: &[usize], _batch: usize) -> Result<(f64, u64), ModelError> {
        Err(ModelError::Model("training: this model holds no elements on its device".into()))
    }
}

/// A training's elements as a [`Learner`] holds them on its device (its own type inside).
pub type Held = Box<dyn std::any::Any>;

/// A training procedure's settings, from a model's `training` argument: `epochs` (default 10),
/// `batch_size` (32), `validation_split` (0: none; else the share held out, by position after
/// one shuffle), `patience` (early stopping: epochs without a better validation loss before
/// it stops and restores the best weights; needs a validation split), `subsample` (1: all;
/// else the share of the data this training uses, a seeded sample, so copies of one model
/// differ by their data as well as their initial weights), `seed` (0), `on_device` (true: where
/// the model's framework can, the elements fit and are stored rather than computed on each pass
/// ([`Dataset::is_stored`]), they are moved to its device once and each batch is picked there,
/// as PyTorch's fastest loops do; false: each batch is made on the host and copied over; the
/// same batches, the same weights).
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    /// Epochs in all.
    pub epochs: u64,
    /// Elements per step.
    pub batch_size: usize,
    /// The share of the data held out to validate on.
    pub validation_split: f64,
    /// Early stopping's patience, in epochs.
    pub patience: Option<u64>,
    /// The share of the data used, sampled by `seed`.
    pub subsample: f64,
    /// Seeds the sample, the split and each epoch's shuffle.
    pub seed: u64,
    /// Whether the elements may be held on the model's device for the training.
    pub on_device: bool,
}

impl Default for Training {
    fn default() -> Self {
        Training {
            epochs: 10,
            batch_size: 32,
            validation_split: 0.0,
            patience: None,
            subsample: 1.0,
            seed: 0,
            on_device: true,
        }
    }
}

/// What an epoch gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epoch {
    /// Its number, from 1.
    pub epoch: u64,
    /// The mean loss of its steps (`None` for a model that fits in one pass, with no loss).
    pub train_loss: Option<f64>,
    /// The loss on the held-out data, if any is held out.
    pub val_loss: Option<f64>,
}

impl Training {
    /// The settings in `args` (a JSON object; missing keys take their defaults).
    pub fn from_args(args: &Value) -> Result<Training, ModelError> {
        let mut t = Training::default();
        if args.is_null() {
            return Ok(t);
        }
        let obj = args.as_object().ok_or_else(|| {
            ModelError::Model(format!("training: its arguments are named (a JSON object), not {args}"))
        })?;
        let bad = |k: &str, want: &str| ModelError::Model(format!("training: `{k}` must be {want}, not {}", args[k]));
        for (k, v) in obj {
            match k.as_str() {
                "epochs" => t.epochs = v.as_u64().filter(|&e| e > 0).ok_or_else(|| bad(k, "a positive integer"))?,
                "batch_size" => t.batch_size = v.as_u64().filter(|&b| b > 0).ok_or_else(|| bad(k, "a positive integer"))? as usize,
                "validation_split" => t.validation_split = v.as_f64().filter(|s| (0.0..1.0).contains(s)).ok_or_else(|| bad(k, "a number from 0 up to 1"))?,
                "patience" => t.patience = Some(v.as_u64().filter(|&p| p > 0).ok_or_else(|| bad(k, "a positive integer"))?),
                "subsample" => t.subsample = v.as_f64().filter(|s| *s > 0.0 && *s <= 1.0).ok_or_else(|| bad(k, "a number above 0, up to 1"))?,
                "seed" => t.seed = v.as_u64().ok_or_else(|| bad(k, "a non-negative integer"))?,
                "on_device" => t.on_device = v.as_bool().ok_or_else(|| bad(k, "true or false"))?,
                _ => return Err(ModelError::Model(format!("training: unknown argument `{k}` (it takes epochs, batch_size, validation_split, patience, subsample, seed, on_device)"))),
            }
        }
        if t.patience.is_some() && t.validation_split == 0.0 {
            return Err(ModelError::Model(
                "training: `patience` (early stopping) needs a `validation_split` to watch".into(),
            ));
        }
        Ok(t)
    }

    /// The part of `data` this training uses: all of it, or its seeded `subsample`.
    pub fn sample<E: Element>(&self, data: &Dataset<E>) -> Result<Dataset<E>, ModelError> {
        if self.subsample >= 1.0 {
            return Ok(data.clone());
        }
        let n = data.count()?;
        // Its own stream of the seed: the sample is not the split's first part.
        Ok(data.shuffle(n, self.seed ^ 0x5eed_5a3b1e).take(((n as f64 * self.subsample).round() as usize).max(1)))
    }

    /// A run of this training on `data`: the sample and split are made (the same on a resumed
    /// run: by position after seeded shuffles), then [`Run::epoch`] trains one epoch at a time.
    pub fn start<X: Element, Y: Element>(&self, data: &Dataset<Xy<X, Y>>) -> Result<Run<X, Y>, ModelError> {
        let data = &self.sample(data)?;
        let all = data.count()?;
        let held = (all as f64 * self.validation_split).round() as usize;
        if all == 0 || held >= all {
            return Err(ModelError::Model(format!(
                "training: {all} elements leave none to train on after holding out {held}"
            )));
        }
        let mixed = data.shuffle(all, self.seed);
        let val = (held > 0).then(|| mixed.take(held).batch(self.batch_size, false)).transpose()?;
        Ok(Run {
            training: self.clone(),
            train: mixed.skip(held),
            size: all - held,
            val,
            best: None,
            since_best: 0,
            held: None,
        })
    }
}

/// Early stopping's memory, saved with a model after every epoch so that a resumed training
/// stops where an uninterrupted one would, with the same best weights.
#[derive(Debug, Clone, PartialEq)]
pub struct BestSoFar {
    /// The best validation loss yet.
    pub loss: f64,
    /// The weights that had it ([`Learner::snapshot`]).
    pub weights: Vec<u8>,
    /// Epochs since, without a better one.
    pub since: u64,
}

/// A training under way: its data split, and early stopping's best so far.
pub struct Run<X: Element, Y: Element> {
    training: Training,
    train: Dataset<Xy<X, Y>>,
    size: usize,
    val: Option<Dataset<Xy<X::Batch, Y::Batch>>>,
    best: Option<(f64, Vec<u8>)>,
    since_best: u64,
    /// The learner's hold on the training elements, asked for once (`None` inside: not held).
    held: Option<Option<Held>>,
}

impl<X: Element, Y: Element> Run<X, Y> {
    /// Trains the next epoch that `spec` has not done and moves `spec` on; `None` when the
    /// training is over (every epoch done, or stopped early: then the best weights are back).
    pub fn epoch<L: Learner<X = X, Y = Y>>(
        &mut self,
        learner: &mut L,
        spec: &mut TrainSpec,
    ) -> Result<Option<Epoch>, ModelError> {
        // A spec of 0 epochs takes the definition's; one that names its own keeps them (a
        // training that ended, all its epochs or stopped early, stays ended).
        if spec.epochs == 0 {
            spec.epochs = self.training.epochs;
        }
        if spec.is_done() {
            self.restore_best(learner)?;
            return Ok(None);
        }
        // Each epoch's own order, the same for that epoch on a resumed run.
        let seed = self.training.seed.wrapping_add(spec.epoch + 1);
        if self.held.is_none() {
            let may = self.training.on_device && self.train.is_stored();
            self.held = Some(if may { learner.hold(&self.train)? } else { None });
        }
        let (mut sum, mut steps) = (0.0, 0u64);
        if let Some(Some(held)) = &self.held {
            // The positions in the order the shuffle below would give the elements (it depends
            // on the count and the seed only).
            let positions = Dataset::from_vec((0..self.size).collect::<Vec<usize>>());
            let order = positions.shuffle(self.size, seed).iter().collect::<Result<Vec<_>, _>>()?;
            (sum, steps) = learner.epoch_held(held, &order, self.training.batch_size)?;
        } else {
            let batches = self.train.shuffle(self.size, seed).batch(self.training.batch_size, false)?;
            for b in batches.iter() {
                sum += learner.step(b?)?;
                steps += 1;
            }
        }
        let val_loss = self.val.as_ref().map(|v| learner.loss(v)).transpose()?;
        spec.finish_epoch(steps);
        if let (Some(patience), Some(v)) = (self.training.patience, val_loss) {
            if self.best.as_ref().is_none_or(|(b, _)| v < *b) {
                self.best = Some((v, learner.snapshot()?));
                self.since_best = 0;
            } else {
                self.since_best += 1;
                if self.since_best >= patience {
                    // Stopped early: the training is over, as if its epochs were run.
                    spec.epochs = spec.epoch;
                }
            }
        }
        Ok(Some(Epoch { epoch: spec.epoch, train_loss: Some(sum / steps.max(1) as f64), val_loss }))
    }

    /// Takes up early stopping's memory where a saved run left it.
    pub fn resume_best(&mut self, saved: Option<BestSoFar>) {
        if let Some(b) = saved {
            self.best = Some((b.loss, b.weights));
            self.since_best = b.since;
        }
    }

    /// Early stopping's memory now, to save with the model (`None` once the best weights are
    /// back in the model, or without early stopping).
    pub fn best_so_far(&self) -> Option<BestSoFar> {
        self.best.as_ref().map(|(loss, weights)| BestSoFar {
            loss: *loss,
            weights: weights.clone(),
            since: self.since_best,
        })
    }

    fn restore_best<L: Learner>(&mut self, learner: &mut L) -> Result<(), ModelError> {
        if let Some((_, weights)) = self.best.take() {
            learner.restore(&weights)?;
        }
        Ok(())
    }
}
