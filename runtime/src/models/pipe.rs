//! Models made of steps (DRYML's `Pipe`): a [`Transform`] before a model ([`Pipe`]) or after
//! it ([`Then`]), each step trained in order on what the step before gives, and prediction
//! chained through them. Transforms are trainables too: [`Standardize`] learns its means and
//! spreads from the data it is fitted on; [`ArgMax`] turns class scores into classes. Both are
//! objects, saved and loaded with what they learnt.
//!
//! ```
//! use dryml::data::ndarray::{array, Array1};
//! use dryml::data::{Dataset, Xy};
//! use dryml::models::pipe::{ArgMax, Pipe, Standardize, Then, Transform};
//! use dryml::models::{eval, Model, ModelError, TrainSpec};
//!
//! /// A "model" that scores class 1 by the first feature.
//! struct Sign;
//! impl Model for Sign {
//!     type X = Array1<f32>;
//!     type Y = usize;
//!     type P = Array1<f32>;
//!     fn train(&mut self, _: &Dataset<Xy<Array1<f32>, usize>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
//!         spec.finish_epoch(0);
//!         Ok(())
//!     }
//!     fn predict(&self, x: &Array1<f32>) -> Result<Array1<f32>, ModelError> {
//!         Ok(array![-x[0], x[0]])
//!     }
//! }
//!
//! let data = Dataset::from_vec(vec![
//!     Xy { x: array![10.0f32], y: 0usize }, Xy { x: array![30.0], y: 1 },
//! ]);
//! // Standardised first (the mean, 20, is learnt in training), classes after.
//! let mut model = Then::new(Pipe::new(Standardize::new(), Sign), ArgMax::new());
//! model.train(&data, &mut TrainSpec::epochs(1)).unwrap();
//! assert_eq!(eval(&model, &data).unwrap().collect().unwrap().iter().map(|e| e.x).collect::<Vec<_>>(), [0, 1]);
//! ```

use super::callbacks::Callback;
use super::{eval, Model, ModelError, TrainSpec};
use crate::data::ndarray::{Array1, Axis};
use crate::data::{DataError, Dataset, Element, Xy};
use crate::objects::{Build, Meta, ObjectError, State};
use serde_json::Value;

/// A step that changes each element's features (or a model's predictions), fitted on the
/// elements it will change. Most learn nothing.
pub trait Transform: Clone + Send + Sync + 'static {
    /// What it takes.
    type X: Element;
    /// What it gives.
    type P: Element;
    /// Whether [`Transform::fit`] learns anything (when not, no step runs to give it data).
    const LEARNS: bool = false;
    /// Learns what it needs from the elements it will transform (by default nothing).
    fn fit(&mut self, _xs: &Dataset<Self::X>) -> Result<(), ModelError> {
        Ok(())
    }
    /// One element, transformed.
    fn apply(&self, x: &Self::X) -> Result<Self::P, ModelError>;
}

/// A transform, then a model trained on what it gives.
pub struct Pipe<T, M> {
    /// The first step.
    pub transform: T,
    /// The second.
    pub model: M,
}

impl<T, M> Pipe<T, M> {
    /// `transform`, then `model`.
    pub fn new(transform: T, model: M) -> Pipe<T, M> {
        Pipe { transform, model }
    }
}

fn apply_all<T: Transform>(t: &T, xs: Vec<T::X>) -> Result<Vec<T::P>, ModelError> {
    xs.iter().map(|x| t.apply(x)).collect()
}

impl<T, M> Model for Pipe<T, M>
where
    T: Transform,
    M: Model<X = T::P>,
    M::Y: Send,
{
    type X = T::X;
    type Y = M::Y;
    type P = M::P;

    /// Fits the transform on the features (once: a resumed training keeps it), then trains the
    /// model on the transformed data from where `spec` stands.
    fn train(&mut self, data: &Dataset<Xy<T::X, M::Y>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
        self.train_with(data, spec, &mut [])
    }

    /// As `train`, the model's epochs told to `callbacks`.
    fn train_with(
        &mut self,
        data: &Dataset<Xy<T::X, M::Y>>,
        spec: &mut TrainSpec,
        callbacks: &mut [&mut dyn Callback],
    ) -> Result<(), ModelError> {
        if T::LEARNS && spec.epoch == 0 {
            self.transform.fit(&data.map(|e| e.x))?;
        }
        let t = self.transform.clone();
        let through =
            data.try_map(move |e| Ok(Xy { x: t.apply(&e.x).map_err(|e| DataError::Argument(e.to_string()))?, y: e.y }));
        self.model.train_with(&through, spec, callbacks)
    }

    fn predict(&self, x: &T::X) -> Result<M::P, ModelError> {
        self.model.predict(&self.transform.apply(x)?)
    }

    fn predict_all(&self, xs: Vec<T::X>) -> Result<Vec<M::P>, ModelError> {
        self.model.predict_all(apply_all(&self.transform, xs)?)
    }
}

/// A model, then a transform of its predictions (fitted on them once the model is trained).
pub struct Then<M, T> {
    /// The first step.
    pub model: M,
    /// The second.
    pub transform: T,
}

impl<M, T> Then<M, T> {
    /// `model`, then `transform`.
    pub fn new(model: M, transform: T) -> Then<M, T> {
        Then { model, transform }
    }
}

impl<M, T> Model for Then<M, T>
where
    M: Model,
    T: Transform<X = M::P>,
    M::Y: Sync,
    M::P: Sync,
{
    type X = M::X;
    type Y = M::Y;
    type P = T::P;

    /// Trains the model, then fits the transform on its predictions for `data` (if it learns).
    fn train(&mut self, data: &Dataset<Xy<M::X, M::Y>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
        self.train_with(data, spec, &mut [])
    }

    /// As `train`, the model's epochs told to `callbacks`.
    fn train_with(
        &mut self,
        data: &Dataset<Xy<M::X, M::Y>>,
        spec: &mut TrainSpec,
        callbacks: &mut [&mut dyn Callback],
    ) -> Result<(), ModelError> {
        self.model.train_with(data, spec, callbacks)?;
        if !T::LEARNS {
            return Ok(());
        }
        self.transform.fit(&eval(&self.model, data)?.map(|e| e.x))
    }

    fn predict(&self, x: &M::X) -> Result<T::P, ModelError> {
        self.transform.apply(&self.model.predict(x)?)
    }

    fn predict_all(&self, xs: Vec<M::X>) -> Result<Vec<T::P>, ModelError> {
        apply_all(&self.transform, self.model.predict_all(xs)?)
    }
}

/// Features standardised: less the mean, over the standard deviation, per feature, both learnt
/// by `fit` (a feature that does not vary is only centred). No arguments.
#[derive(crate::Object, Clone)]
pub struct Standardize {
    args: Value,
    meta: Meta,
    fitted: Option<(Array1<f32>, Array1<f32>)>,
}

impl Standardize {
    /// Not fitted yet.
    pub fn new() -> Standardize {
        Standardize::build(Value::Null, Meta::new())
    }

    /// The means and standard deviations it learnt, once fitted.
    pub fn fitted(&self) -> Option<&(Array1<f32>, Array1<f32>)> {
        self.fitted.as_ref()
    }
}

impl Default for Standardize {
    fn default() -> Self {
        Standardize::new()
    }
}

impl Build for Standardize {
    type Args = Value;
    fn build(args: Value, meta: Meta) -> Self {
        Standardize { args, meta, fitted: None }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        if let Some((mean, std)) = &self.fitted {
            s.put("mean", &mean.to_vec())?;
            s.put("std", &std.to_vec())?;
        }
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        if s.names().any(|n| n == "mean") {
            self.fitted = Some((Array1::from_vec(s.get("mean")?), Array1::from_vec(s.get("std")?)));
        }
        Ok(())
    }
}

impl Transform for Standardize {
    type X = Array1<f32>;
    type P = Array1<f32>;
    const LEARNS: bool = true;

    fn fit(&mut self, xs: &Dataset<Array1<f32>>) -> Result<(), ModelError> {
        let all = xs.gather_all()?.ok_or_else(|| ModelError::Model("Standardize: no elements to fit on".into()))?;
        let mean = all.mean_axis(Axis(0)).expect("at least one row");
        let std = all.std_axis(Axis(0), 0.0).mapv(|s| if s > 0.0 { s } else { 1.0 });
        self.fitted = Some((mean, std));
        Ok(())
    }

    fn apply(&self, x: &Array1<f32>) -> Result<Array1<f32>, ModelError> {
        let (mean, std) = self.fitted.as_ref().ok_or(ModelError::NotTrained("Standardize"))?;
        if x.len() != mean.len() {
            return Err(ModelError::Model(format!(
                "Standardize: an element of {} features; it was fitted on {}",
                x.len(),
                mean.len()
            )));
        }
        Ok((x - mean) / std)
    }
}

/// Class scores to the class of the highest score (DRYML's `BestCat`). No arguments, nothing
/// to learn.
#[derive(crate::Object, Clone)]
pub struct ArgMax {
    args: Value,
    meta: Meta,
}

impl ArgMax {
    /// The transform.
    pub fn new() -> ArgMax {
        ArgMax::build(Value::Null, Meta::new())
    }
}

impl Default for ArgMax {
    fn default() -> Self {
        ArgMax::new()
    }
}

impl Build for ArgMax {
    type Args = Value;
    fn build(args: Value, meta: Meta) -> Self {
        ArgMax { args, meta }
    }
}

impl Transform for ArgMax {
    type X = Array1<f32>;
    type P = usize;

    fn apply(&self, x: &Array1<f32>) -> Result<usize, ModelError> {
        x.iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
            .ok_or_else(|| ModelError::Model("ArgMax: scores of no classes".into()))
    }
}

#[cfg(all(test, feature = "torch", feature = "linfa"))]
mod tests;
