//! Datasets, as DRYML's: a [`Dataset`] is a lazy, re-iterable sequence of elements that are
//! plain (`X`), supervised ([`Xy`]), indexed ([`Indexed`]) or both, optionally batched (every
//! leaf of a batch has a leading axis). Leaves are scalars and [`ndarray`] arrays, alone or in
//! tuples and maps; models of any framework take and give datasets, so one metric scores them
//! all. With the `torch` and `candle` features, a dataset becomes tensors of either framework
//! and back (`to_tch`/`from_tch`, `to_candle`/`from_candle`), batches and layouts kept, values
//! bit for bit.
//!
//! ```
//! use dryml::data::ndarray::{array, Array1};
//! use dryml::data::{Dataset, Len};
//!
//! // Iris-like rows: four features and a class each.
//! let x = array![[5.1, 3.5, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3], [5.9, 3.0, 5.1, 1.8], [5.0, 3.4, 1.5, 0.2]];
//! let y = Array1::from_vec(vec![0usize, 1, 2, 0]);
//! let data = Dataset::from_xy(x, y).unwrap();
//! assert!(data.is_supervised() && data.len() == Len::Known(4));
//!
//! // Nothing runs until a pass; each pass starts anew, in the same shuffled order.
//! let batches = data.shuffle(4, 7).apply_x(|x| x * 10.0).batch(3, false).unwrap();
//! assert_eq!(batches.len(), Len::Known(2));
//! let first = batches.peek().unwrap().unwrap();
//! assert_eq!((first.x.shape(), first.y.len()), (&[3, 4][..], 3));
//! // Unbatched, the same elements come back (as a multiset: they were shuffled).
//! let mut back: Vec<usize> = batches.unbatch().unwrap().collect().unwrap().into_iter().map(|e| e.y).collect();
//! back.sort();
//! assert_eq!(back, [0, 0, 1, 2]);
//! ```
//!
//! Asking for the target of an unsupervised dataset does not compile:
//!
//! ```compile_fail
//! use dryml::data::Dataset;
//! let plain = Dataset::from_vec(vec![1.0f32, 2.0]);
//! let _ = plain.apply_y(|y: f32| y);
//! ```

mod access;
#[cfg(feature = "burn")]
mod burn;
#[cfg(feature = "candle")]
mod candle;
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
mod convert;
mod dataset;
mod element;
#[cfg(feature = "images")]
pub mod images;
#[cfg(feature = "numpy")]
pub mod numpy;
#[cfg(feature = "parquet")]
pub mod parquet;
mod source;
#[cfg(feature = "torch")]
mod torch;

#[cfg(feature = "burn")]
pub use burn::{images as burn_images, rows as burn_rows, BurnError, BurnTensor};
#[cfg(feature = "candle")]
pub use candle::{CandleOnto, CandleScalar, FromCandle, ToCandle};
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub use convert::{DeviceTensor, TensorTree};
pub use dataset::{Dataset, Len};
pub use element::{Batch, Columns, Element, Elements, Indexed, Layout, Scalar, ScalarFn, Supervised, Xy};
/// The arrays datasets hold (numpy's part in DRYML), re-exported so that a cell needs no `:dep`.
pub use ndarray;
pub use source::CsvOptions;
#[cfg(feature = "torch")]
pub use torch::{FromTch, Onto, TchScalar, ToTch};

use std::fmt;

/// What went wrong with a dataset, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum DataError {
    /// Leaves that do not fit together: shapes in a batch, lengths of features and targets.
    Shapes(String),
    /// A batch of no elements was asked for.
    EmptyBatch,
    /// `unbatch` of a dataset that is not batched.
    NotBatched,
    /// A whole pass over an infinite dataset (`count`, `collect`).
    Infinite(&'static str),
    /// A bad argument.
    Argument(String),
    /// A file that could not be read, or a value in it that could not (path, line, column).
    File {
        /// The file.
        path: String,
        /// Where in it (1-based), if at a value.
        at: Option<(u64, usize)>,
        /// What.
        message: String,
    },
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataError::Shapes(m) => write!(f, "shapes do not fit: {m}"),
            DataError::EmptyBatch => f.write_str("a batch needs at least one element"),
            DataError::NotBatched => f.write_str("unbatch: the dataset is not batched"),
            DataError::Infinite(what) => write!(f, "{what}: the dataset is infinite (take a part of it first)"),
            DataError::Argument(m) => f.write_str(m),
            DataError::File { path, at: Some((line, column)), message } => {
                write!(f, "{path}:{line}: column {column}: {message}")
            }
            DataError::File { path, at: None, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for DataError {}

#[cfg(test)]
mod tests;
