//! Metrics on datasets of predictions beside targets (`Xy { x: prediction, y: target }`, what a
//! model's `eval` gives), the same for every framework, batched or not.
//!
//! A prediction of floats is class scores (its class is the arg-max over the last axis) or
//! values; integers are classes. A batch is many of either, so batched and unbatched datasets
//! score alike. [`Comparison`] sums a metric up across models (a repo's selections): mean ±
//! std per model type as a table, and a box-and-whisker plot.
//!
//! ```
//! use dryml::data::ndarray::array;
//! use dryml::data::{Dataset, Xy};
//! use dryml::metrics;
//!
//! // Scores for three classes beside the true class.
//! let eval = Dataset::from_vec(vec![
//!     Xy { x: array![0.1f32, 0.7, 0.2], y: 1usize },
//!     Xy { x: array![0.8f32, 0.1, 0.1], y: 0 },
//!     Xy { x: array![0.3f32, 0.3, 0.4], y: 0 },
//! ]);
//! assert_eq!(metrics::categorical_accuracy(&eval).unwrap(), 2.0 / 3.0);
//! // Batched, the same number.
//! assert_eq!(metrics::categorical_accuracy(&eval.batch(2, false).unwrap()).unwrap(), 2.0 / 3.0);
//! let m = metrics::confusion_matrix(&eval, 3).unwrap();
//! assert_eq!(m[[0, 2]], 1); // one of class 0 taken for class 2
//! ```

mod compare;

use crate::data::ndarray::{Array, Array2, Axis, Dimension};
use crate::data::{DataError, Dataset, Scalar, Xy};
pub use compare::{Comparison, Summary};

/// What a prediction or target says of classes: one class each, or one per batch row.
pub trait Classes {
    /// The classes, in order.
    fn classes(&self) -> Vec<usize>;
}

/// What a prediction or target says of values: all of its numbers, in order.
pub trait Values {
    /// The numbers, as `f64`.
    fn values(&self) -> Vec<f64>;
}

/// A float that scores a class.
pub trait Score: Scalar + PartialOrd + Into<f64> {}
impl Score for f32 {}
impl Score for f64 {}

macro_rules! int_classes {
    ($($t:ty),*) => {$(
        impl Classes for $t {
            fn classes(&self) -> Vec<usize> {
                vec![*self as usize]
            }
        }
        impl<D: Dimension> Classes for Array<$t, D> {
            fn classes(&self) -> Vec<usize> {
                self.iter().map(|&c| c as usize).collect()
            }
        }
        impl Values for $t {
            fn values(&self) -> Vec<f64> {
                vec![*self as f64]
            }
        }
        impl<D: Dimension> Values for Array<$t, D> {
            fn values(&self) -> Vec<f64> {
                self.iter().map(|&v| v as f64).collect()
            }
        }
    )*};
}
int_classes!(i32, i64, u8, u32, u64, usize);

/// The first index of the largest score in `row`.
fn arg_max<S: Score>(row: impl Iterator<Item = S>) -> usize {
    let mut best: Option<(usize, S)> = None;
    for (i, s) in row.enumerate() {
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map_or(0, |(i, _)| i)
}

macro_rules! float_classes {
    ($($t:ty),*) => {$(
        impl<D: Dimension> Classes for Array<$t, D> {
            fn classes(&self) -> Vec<usize> {
                match self.ndim() {
                    0 => vec![0],
                    1 => vec![arg_max(self.iter().copied())],
                    n => self.lanes(Axis(n - 1)).into_iter().map(|row| arg_max(row.iter().copied())).collect(),
                }
            }
        }
        impl Values for $t {
            fn values(&self) -> Vec<f64> {
                vec![f64::from(*self)]
            }
        }
        impl<D: Dimension> Values for Array<$t, D> {
            fn values(&self) -> Vec<f64> {
                self.iter().map(|&v| f64::from(v)).collect()
            }
        }
    )*};
}
float_classes!(f32, f64);

/// Every (predicted, true) pair of the dataset, by a pass.
fn pairs<P, T, U>(
    data: &Dataset<Xy<P, T>>,
    what: &str,
    part: impl Fn(&P, &T) -> (Vec<U>, Vec<U>),
) -> Result<Vec<(U, U)>, DataError>
where
    P: Send + 'static,
    T: Send + 'static,
{
    let mut out = Vec::new();
    for (n, e) in data.iter().enumerate() {
        let e = e?;
        let (p, t) = part(&e.x, &e.y);
        if p.len() != t.len() {
            return Err(DataError::Shapes(format!(
                "{what}: element {n} has {} predictions for {} targets",
                p.len(),
                t.len()
            )));
        }
        out.extend(p.into_iter().zip(t));
    }
    if out.is_empty() {
        return Err(DataError::Argument(format!("{what}: the dataset is empty")));
    }
    Ok(out)
}

/// The share of predictions of the true class.
pub fn categorical_accuracy<P, T>(data: &Dataset<Xy<P, T>>) -> Result<f64, DataError>
where
    P: Classes + Send + 'static,
    T: Classes + Send + 'static,
{
    let pairs = pairs(data, "categorical_accuracy", |p, t| (p.classes(), t.classes()))?;
    Ok(pairs.iter().filter(|(p, t)| p == t).count() as f64 / pairs.len() as f64)
}

/// The mean of the squared differences between predicted and true values.
pub fn mean_squared_error<P, T>(data: &Dataset<Xy<P, T>>) -> Result<f64, DataError>
where
    P: Values + Send + 'static,
    T: Values + Send + 'static,
{
    let pairs = pairs(data, "mean_squared_error", |p, t| (p.values(), t.values()))?;
    Ok(pairs.iter().map(|(p, t)| (p - t) * (p - t)).sum::<f64>() / pairs.len() as f64)
}

/// F1 of class 1 against class 0: 2·precision·recall / (precision + recall), 0 when nothing
/// was predicted or is of class 1. Counted over every element, so batches do not change it.
pub fn binary_f1_score<P, T>(data: &Dataset<Xy<P, T>>) -> Result<f64, DataError>
where
    P: Classes + Send + 'static,
    T: Classes + Send + 'static,
{
    let pairs = pairs(data, "binary_f1_score", |p, t| (p.classes(), t.classes()))?;
    if let Some((p, t)) = pairs.iter().find(|(p, t)| *p > 1 || *t > 1) {
        return Err(DataError::Argument(format!("binary_f1_score: class {} is not 0 or 1", (*p).max(*t))));
    }
    let tp = pairs.iter().filter(|&&(p, t)| p == 1 && t == 1).count() as f64;
    let fp = pairs.iter().filter(|&&(p, t)| p == 1 && t == 0).count() as f64;
    let fn_ = pairs.iter().filter(|&&(p, t)| p == 0 && t == 1).count() as f64;
    Ok(if tp == 0.0 { 0.0 } else { 2.0 * tp / (2.0 * tp + fp + fn_) })
}

/// Counts of (true class, predicted class) over `classes` classes: row `t`, column `p`.
pub fn confusion_matrix<P, T>(data: &Dataset<Xy<P, T>>, classes: usize) -> Result<Array2<usize>, DataError>
where
    P: Classes + Send + 'static,
    T: Classes + Send + 'static,
{
    let pairs = pairs(data, "confusion_matrix", |p, t| (p.classes(), t.classes()))?;
    let mut m = Array2::zeros((classes, classes));
    for (p, t) in pairs {
        if p >= classes || t >= classes {
            return Err(DataError::Argument(format!("confusion_matrix: class {} is not below {classes}", p.max(t))));
        }
        m[[t, p]] += 1;
    }
    Ok(m)
}

#[cfg(test)]
mod tests;
