//! Models that take and give [`Dataset`]s, whatever their framework, so one metric scores them
//! all ([`crate::metrics`]): the [`Model`] trait, and [`TrainSpec`], the training cursor saved
//! with a model so that an interrupted training resumes where it stopped.
//!
//! A model is also an [`Object`](crate::Object): it is built from its definition, saved to a
//! repo with its weights and its [`TrainSpec`], and trained in sandboxes, sweeps and Slurm jobs
//! as any object is. Models of the frameworks come with their cargo features: `linfa` (a
//! decision tree), `torch` and `candle` (network classifiers and regressors,
//! `tch::TchClassifier`, `tch::TchRegressor` and candle's two, built from one definition of
//! components: a [`net::NetDef`] of layers, optimiser and loss, and a [`training::Training`]
//! procedure written once for every framework; and a network of one's own, `tch::TchModel`
//! and `candle::CandleModel`, learning classes or values, [`net::Target`]). [`pipe`] chains steps: a transform before a model or after it, each trained on
//! what the step before gives (`Standardize`, `ArgMax`). [`callbacks`] hear of every epoch of a
//! training ([`Model::train_with`]): its loss curves, drawn as it runs, or a reason to stop.
//!
//! ```
//! use dryml::data::ndarray::{array, Array1};
//! use dryml::data::{Dataset, Xy};
//! use dryml::models::{eval, Model, ModelError, TrainSpec};
//!
//! /// A model of one's own: the nearest class mean.
//! #[derive(Default)]
//! struct Centroids { means: Vec<Array1<f32>> }
//!
//! impl Model for Centroids {
//!     type X = Array1<f32>;
//!     type Y = usize;
//!     type P = usize;
//!     fn train(&mut self, data: &Dataset<Xy<Array1<f32>, usize>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
//!         let rows = data.collect()?;
//!         let classes = rows.iter().map(|r| r.y).max().map_or(0, |c| c + 1);
//!         self.means = (0..classes).map(|c| {
//!             let of: Vec<&Xy<Array1<f32>, usize>> = rows.iter().filter(|r| r.y == c).collect();
//!             of.iter().fold(Array1::zeros(rows[0].x.len()), |s, r| s + &r.x) / of.len().max(1) as f32
//!         }).collect();
//!         spec.finish_epoch(rows.len() as u64);
//!         Ok(())
//!     }
//!     fn predict(&self, x: &Array1<f32>) -> Result<usize, ModelError> {
//!         let d = |m: &Array1<f32>| (x - m).mapv(|v| v * v).sum();
//!         Ok((0..self.means.len()).min_by(|&a, &b| d(&self.means[a]).total_cmp(&d(&self.means[b]))).unwrap_or(0))
//!     }
//! }
//!
//! let data = Dataset::from_vec(vec![
//!     Xy { x: array![0.0f32, 0.1], y: 0usize }, Xy { x: array![0.2, 0.0], y: 0 },
//!     Xy { x: array![1.0, 0.9], y: 1 }, Xy { x: array![0.8, 1.1], y: 1 },
//! ]);
//! let mut model = Centroids::default();
//! let mut spec = TrainSpec::epochs(1);
//! model.train(&data, &mut spec).unwrap();
//! assert!(spec.is_done());
//! let scored = eval(&model, &data).unwrap();
//! assert_eq!(dryml::metrics::categorical_accuracy(&scored).unwrap(), 1.0);
//! ```

#[cfg(feature = "burn")]
pub mod burn;
pub mod callbacks;
#[cfg(feature = "candle")]
pub mod candle;
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
mod held;
#[cfg(feature = "linfa")]
pub mod linfa;
pub mod net;
pub mod optim;
pub mod pipe;
pub mod placement;
pub mod precision;
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
mod seam;
#[cfg(feature = "torch")]
pub mod tch;
pub mod tensorboard;
#[cfg(all(test, feature = "linfa"))]
mod testing;
mod tracking;
pub mod training;

use crate::data::{Batch as _, DataError, Dataset, Element, Xy};
use crate::objects::{ObjectError, State};
use std::fmt;

pub use crate::objects::FRAMEWORK_MODELS;

/// A model: trained on supervised data, it predicts a `P` for each `X`.
pub trait Model {
    /// The features it takes.
    type X: Element;
    /// The targets it learns.
    type Y: Element;
    /// What it predicts for one element (class scores, a class, values).
    type P: Element;

    /// Trains on `data` from where `spec` says training stands, moving `spec` on as it goes
    /// (so a model saved mid-training resumes where it was).
    fn train(&mut self, data: &Dataset<Xy<Self::X, Self::Y>>, spec: &mut TrainSpec) -> Result<(), ModelError>;

    /// Trains as [`Model::train`] does, telling `callbacks` of every epoch; one that answers
    /// [`Control::Stop`](callbacks::Control::Stop) ends the training there. A model that fits
    /// in one pass (the default) tells them of that one epoch, with no loss.
    fn train_with(
        &mut self,
        data: &Dataset<Xy<Self::X, Self::Y>>,
        spec: &mut TrainSpec,
        callbacks: &mut [&mut dyn callbacks::Callback],
    ) -> Result<(), ModelError> {
        let before = spec.epoch;
        self.train(data, spec)?;
        if spec.epoch > before {
            callbacks::tell(callbacks, &training::Epoch { epoch: spec.epoch, train_loss: None, val_loss: None });
        }
        Ok(())
    }

    /// The prediction for one element's features.
    fn predict(&self, x: &Self::X) -> Result<Self::P, ModelError>;

    /// The predictions for a batch of features; by default one element at a time (a framework
    /// model predicts a whole batch at once).
    fn predict_all(&self, xs: Vec<Self::X>) -> Result<Vec<Self::P>, ModelError> {
        xs.iter().map(|x| self.predict(x)).collect()
    }

    /// The predictions for a batch of features, stacked as [`Dataset::batch`] gives them (what
    /// [`eval`] calls); by default split and given to [`Model::predict_all`] (a framework model
    /// takes the stacked batch as it is).
    fn predict_batch(&self, xs: <Self::X as Element>::Batch) -> Result<Vec<Self::P>, ModelError> {
        self.predict_all(xs.unstack()?)
    }
}

/// Every element's prediction beside its target (DRYML's `eval`), ready for a metric. Runs
/// now, in batches of a few hundred elements (gathered at once from data held in arrays); the
/// result holds the predictions in memory.
pub fn eval<M: Model>(model: &M, data: &Dataset<Xy<M::X, M::Y>>) -> Result<Dataset<Xy<M::P, M::Y>>, ModelError>
where
    M::Y: Sync,
    M::P: Sync,
{
    const CHUNK: usize = 512;
    let mut out = Vec::new();
    for b in data.batch(CHUNK, false)?.iter() {
        let b = b?;
        let ys = b.y.unstack()?;
        let ps = model.predict_batch(b.x)?;
        if ps.len() != ys.len() {
            return Err(ModelError::Model(format!("{} predictions for {} elements", ps.len(), ys.len())));
        }
        out.extend(ps.into_iter().zip(ys).map(|(x, y)| Xy { x, y }));
    }
    Ok(Dataset::from_vec(out))
}

/// Where a training stands: the epochs asked for, the epochs and steps done. A model saves it
/// with its weights, so training that was killed or preempted resumes at the next epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainSpec {
    /// Epochs in all.
    pub epochs: u64,
    /// Epochs done.
    pub epoch: u64,
    /// Steps (batches, or elements for a model that fits all at once) done in all.
    pub step: u64,
}

impl TrainSpec {
    /// A training of `n` epochs, not started; `0`: as many as the model's definition says
    /// (`training.epochs`, 10 by default).
    pub fn epochs(n: u64) -> TrainSpec {
        TrainSpec { epochs: n, epoch: 0, step: 0 }
    }

    /// Whether every epoch is done.
    pub fn is_done(&self) -> bool {
        self.epoch >= self.epochs
    }

    /// Records an epoch done, of `steps` steps.
    pub fn finish_epoch(&mut self, steps: u64) {
        self.epoch += 1;
        self.step += steps;
    }

    /// Saves it in a model's state, under `name`.
    pub fn save(&self, state: &mut State, name: &str) -> Result<(), ObjectError> {
        state.put(name, &(self.epochs, self.epoch, self.step))
    }

    /// Reads it from a model's state.
    pub fn load(state: &State, name: &str) -> Result<TrainSpec, ObjectError> {
        let (epochs, epoch, step) = state.get(name)?;
        Ok(TrainSpec { epochs, epoch, step })
    }
}

/// What went wrong in a model, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// The data: a pass that failed, shapes that do not fit the model.
    Data(DataError),
    /// The model or its framework.
    Model(String),
    /// Predicting before training.
    NotTrained(&'static str),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Data(e) => write!(f, "{e}"),
            ModelError::Model(m) => f.write_str(m),
            ModelError::NotTrained(what) => write!(f, "{what} is not trained: train it (or load a trained one) first"),
        }
    }
}

impl std::error::Error for ModelError {}

/// A model's error is out of memory where its framework's message says so: a training inside
/// `dryml::batch::batch` retries with a smaller batch (TOMA's job on a model's training).
impl crate::batch::OutOfMemory for ModelError {
    fn is_out_of_memory(&self) -> bool {
        matches!(self, ModelError::Model(m) if crate::batch::is_out_of_memory_message(m))
    }
}

impl From<DataError> for ModelError {
    fn from(e: DataError) -> Self {
        ModelError::Data(e)
    }
}

impl From<ObjectError> for ModelError {
    fn from(e: ObjectError) -> Self {
        ModelError::Model(e.to_string())
    }
}
