//! numpy's files as datasets (the `numpy` feature, which the kernel adds when a cell names
//! `dryml::data::numpy`): a `.npy` array's rows, and a `.npz` archive's features and targets.
//! Each element is one row along the first axis, flattened to `f32`s, so images `[n, 8, 8]`
//! become rows of 64 features that a definition's `{"reshape": [1, 8, 8]}` makes images again.
//! Read whole (`ndarray-npy`), of any of numpy's usual dtypes; a bad file is a
//! [`DataError::File`] naming the file, the array and what is wrong.
//!
//! ```no_run
//! use dryml::data::numpy;
//!
//! let images = numpy::rows("digits_x.npy").unwrap();              // Dataset<Array1<f32>>
//! let labelled = numpy::xy("digits.npz", "x", "y").unwrap();      // Dataset<Xy<Array1<f32>, usize>>
//! ```

use super::ndarray::{Array1, ArrayD, Axis, IxDyn, OwnedRepr};
use super::{DataError, Dataset, Xy};
use ndarray_npy::{NpzReader, ReadNpyError, ReadNpyExt, ReadNpzError};
use std::path::Path;

/// The rows of the array in the `.npy` file at `path`.
pub fn rows(path: impl AsRef<Path>) -> Result<Dataset<Array1<f32>>, DataError> {
    let path = path.as_ref();
    let bad = |m: String| file_error(path, m);
    let a = read_any(|kind| {
        let f = std::fs::File::open(path).map_err(Failure::Open)?;
        match kind {
            Dtype::F32 => ArrayD::<f32>::read_npy(f).map(|a| a.mapv(f64::from)),
            Dtype::F64 => ArrayD::<f64>::read_npy(f),
            Dtype::U8 => ArrayD::<u8>::read_npy(f).map(|a| a.mapv(f64::from)),
            Dtype::I64 => ArrayD::<i64>::read_npy(f).map(|a| a.mapv(|v| v as f64)),
            Dtype::I32 => ArrayD::<i32>::read_npy(f).map(|a| a.mapv(f64::from)),
        }
        .map_err(Failure::Npy)
    })
    .map_err(bad)?;
    Ok(Dataset::from_vec(split_rows(a).map_err(bad)?))
}

/// The features in array `x` and the classes in array `y` of the `.npz` archive at `path`
/// (names as numpy's `savez` gives them, with or without `.npy`).
pub fn xy(path: impl AsRef<Path>, x: &str, y: &str) -> Result<Dataset<Xy<Array1<f32>, usize>>, DataError> {
    let path = path.as_ref();
    let bad = |m: String| file_error(path, m);
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut reader = NpzReader::new(file).map_err(|e| bad(format!("not a .npz archive: {e}")))?;
    let names = reader.names().map_err(|e| bad(e.to_string()))?;
    for name in [x, y] {
        if !names.iter().any(|n| n == name.strip_suffix(".npy").unwrap_or(name)) {
            return Err(bad(format!("has no array `{name}` (it holds {})", names.join(", "))));
        }
    }
    let mut member = |name: &str| {
        read_any(|kind| {
            match kind {
                Dtype::F32 => reader.by_name::<OwnedRepr<f32>, IxDyn>(name).map(|a| a.mapv(f64::from)),
                Dtype::F64 => reader.by_name::<OwnedRepr<f64>, IxDyn>(name),
                Dtype::U8 => reader.by_name::<OwnedRepr<u8>, IxDyn>(name).map(|a| a.mapv(f64::from)),
                Dtype::I64 => reader.by_name::<OwnedRepr<i64>, IxDyn>(name).map(|a| a.mapv(|v| v as f64)),
                Dtype::I32 => reader.by_name::<OwnedRepr<i32>, IxDyn>(name).map(|a| a.mapv(f64::from)),
            }
            .map_err(Failure::Npz)
        })
        .map_err(|e| bad(format!("array `{name}`: {e}")))
    };
    let xs = member(x)?;
    let ys = member(y)?;
    let xs = split_rows(xs).map_err(|e| bad(format!("array `{x}`: {e}")))?;
    if ys.ndim() != 1 {
        return Err(bad(format!("array `{y}` holds the classes, one per row: it must have one axis, not shape {:?}", ys.shape())));
    }
    if ys.len() != xs.len() {
        return Err(bad(format!("array `{x}` has {} rows and `{y}` {} classes", xs.len(), ys.len())));
    }
    let classes = ys
        .iter()
        .enumerate()
        .map(|(i, &c)| (c >= 0.0 && c.fract() == 0.0).then_some(c as usize).ok_or_else(|| bad(format!("array `{y}`, element {i}: {c} is not a class (a whole number, 0 or more)"))))
        .collect::<Result<Vec<usize>, _>>()?;
    Ok(Dataset::from_vec(xs.into_iter().zip(classes).map(|(x, y)| Xy { x, y }).collect()))
}

fn file_error(path: &Path, message: String) -> DataError {
    DataError::File { path: path.display().to_string(), at: None, message }
}

/// The dtypes read, in the order tried.
#[derive(Clone, Copy)]
enum Dtype {
    F32,
    F64,
    U8,
    I64,
    I32,
}

/// Why a read failed.
enum Failure {
    Open(std::io::Error),
    Npy(ReadNpyError),
    Npz(ReadNpzError),
}

impl Failure {
    fn wrong_dtype(&self) -> bool {
        matches!(self, Failure::Npy(ReadNpyError::WrongDescriptor(_)) | Failure::Npz(ReadNpzError::Npy(ReadNpyError::WrongDescriptor(_))))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Open(e) => write!(f, "{e}"),
            Failure::Npy(e) => write!(f, "{e}"),
            Failure::Npz(e) => write!(f, "{e}"),
        }
    }
}

/// The array as `f64`s, read as the first dtype the file has: float32, float64, uint8, int64,
/// int32.
fn read_any(mut read: impl FnMut(Dtype) -> Result<ArrayD<f64>, Failure>) -> Result<ArrayD<f64>, String> {
    for kind in [Dtype::F32, Dtype::F64, Dtype::U8, Dtype::I64, Dtype::I32] {
        match read(kind) {
            Err(e) if e.wrong_dtype() => continue,
            r => return r.map_err(|e| e.to_string()),
        }
    }
    Err("its dtype is none of float32, float64, uint8, int64, int32".into())
}

/// Each row along the first axis, flattened to `f32`s.
fn split_rows(a: ArrayD<f64>) -> Result<Vec<Array1<f32>>, String> {
    if a.ndim() < 1 {
        return Err("holds a single value, not rows".into());
    }
    Ok(a.axis_iter(Axis(0)).map(|row| row.iter().map(|&v| v as f32).collect()).collect())
}

#[cfg(test)]
mod tests;
