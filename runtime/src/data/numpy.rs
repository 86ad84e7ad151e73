//! numpy's files as datasets (the `numpy` feature, which the kernel adds when a cell names
//! `dryml::data::numpy`): a `.npy` array's rows, and a `.npz` archive's features and targets.
//! Each element is one row along the first axis, flattened to `f32`s, so images `[n, 8, 8]`
//! become rows of 64 features that a definition's `{"reshape": [1, 8, 8]}` makes images again.
//! Of any of numpy's usual dtypes; a bad file is a [`DataError::File`] naming the file, the
//! array and what is wrong. A `.npy` file larger than a quarter of the memory free is read
//! where it lies, a batch's rows at a time ([`rows_on_disk`]); the rest is read whole
//! (`ndarray-npy`), a `.npz` archive too (its members are compressed).
//!
//! ```no_run
//! use dryml::data::numpy;
//!
//! let images = numpy::rows("digits_x.npy").unwrap();              // Dataset<Array1<f32>>
//! let huge = numpy::rows_on_disk("frames.npy").unwrap();          // read as passes reach rows
//! let labelled = numpy::xy("digits.npz", "x", "y").unwrap();      // Dataset<Xy<Array1<f32>, usize>>
//! ```

use super::ndarray::{Array1, Array2, ArrayD, Axis};
use super::{DataError, Dataset, Xy};
use disk::Kind;
use ndarray_npy::ReadNpyExt;
use num_traits::AsPrimitive;
use std::io::Read;
use std::path::Path;

/// The rows of the array in the `.npy` file at `path`: read whole, or where it lies
/// ([`rows_on_disk`]) if the file is larger than a quarter of the memory free and in C order.
pub fn rows(path: impl AsRef<Path>) -> Result<Dataset<Array1<f32>>, DataError> {
    let path = path.as_ref();
    let bad = |m: String| file_error(path, m);
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
    // Memory is looked up (a few files under /proc and /sys) only for a file that could matter.
    if len > SMALL && len > crate::sys::procfs::memory().0 / 4 {
        // (Read at its offset: the file's cursor stays at the start for `read_any`.)
        match disk::Header::read(&file) {
            Ok(head) if !head.fortran => return disk::rows(path, file, head),
            _ => {}
        }
    }
    let a = read_any::<f32>(file).map_err(bad)?;
    Ok(Dataset::from_rows(to_rows(a).map_err(bad)?))
}

/// A file size no machine dryml runs on lacks four times over.
const SMALL: u64 = 64 << 20;

/// The rows of the C-ordered array in the `.npy` file at `path`, read from the file as a pass
/// reaches them (neighbouring rows in one read), whatever its size: only the header is read
/// now, and the file's length checked against it.
pub fn rows_on_disk(path: impl AsRef<Path>) -> Result<Dataset<Array1<f32>>, DataError> {
    let path = path.as_ref();
    let bad = |m: String| file_error(path, m);
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let head = disk::Header::read(&file).map_err(bad)?;
    disk::rows(path, file, head)
}

/// The features in array `x` and the classes in array `y` of the `.npz` archive at `path`
/// (names as numpy's `savez` gives them, with or without `.npy`).
pub fn xy(path: impl AsRef<Path>, x: &str, y: &str) -> Result<Dataset<Xy<Array1<f32>, usize>>, DataError> {
    let path = path.as_ref();
    let bad = |m: String| file_error(path, m);
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a .npz archive: {e}")))?;
    let names: Vec<String> = zip.file_names().map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string()).collect();
    for name in [x, y] {
        if !names.iter().any(|n| n == name.strip_suffix(".npy").unwrap_or(name)) {
            return Err(bad(format!("has no array `{name}` (it holds {})", names.join(", "))));
        }
    }
    // Each member decompressed once, straight into its array.
    let stems: Vec<String> = [x, y]
        .iter()
        .map(|n| n.strip_suffix(".npy").unwrap_or(n))
        .map(|stem| {
            if zip.index_for_name(&format!("{stem}.npy")).is_some() {
                format!("{stem}.npy")
            } else {
                stem.to_string()
            }
        })
        .collect();
    let xs = zip
        .by_name(&stems[0])
        .map_err(|e| e.to_string())
        .and_then(read_any::<f32>)
        .map_err(|e| bad(format!("array `{x}`: {e}")))?;
    // Classes as f64: every integer a class can be is exact there.
    let ys = zip
        .by_name(&stems[1])
        .map_err(|e| e.to_string())
        .and_then(read_any::<f64>)
        .map_err(|e| bad(format!("array `{y}`: {e}")))?;
    let xs = to_rows(xs).map_err(|e| bad(format!("array `{x}`: {e}")))?;
    if ys.ndim() != 1 {
        return Err(bad(format!(
            "array `{y}` holds the classes, one per row: it must have one axis, not shape {:?}",
            ys.shape()
        )));
    }
    if ys.len() != xs.nrows() {
        return Err(bad(format!("array `{x}` has {} rows and `{y}` {} classes", xs.nrows(), ys.len())));
    }
    let classes = ys
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            (c >= 0.0 && c.fract() == 0.0)
                .then_some(c as usize)
                .ok_or_else(|| bad(format!("array `{y}`, element {i}: {c} is not a class (a whole number, 0 or more)")))
        })
        .collect::<Result<Vec<usize>, _>>()?;
    // Held as arrays: a batch gathers its rows, as a hand-written loader does.
    Dataset::from_xy(xs, Array1::from_vec(classes))
}

fn file_error(path: &Path, message: String) -> DataError {
    DataError::File { path: path.display().to_string(), at: None, message }
}

/// The array a `.npy` file's bytes hold, as `T`s, of any of the dtypes float32, float64,
/// uint8, int64, int32.
fn read_any<T: Copy + 'static>(mut from: impl Read) -> Result<ArrayD<T>, String>
where
    f32: AsPrimitive<T>,
    f64: AsPrimitive<T>,
    u8: AsPrimitive<T>,
    i64: AsPrimitive<T>,
    i32: AsPrimitive<T>,
{
    // The dtype from the header's text, so that only the right reader parses it (each parse of
    // a header costs more than the copy of a small array), then the header again and the rest.
    let mut head = Vec::with_capacity(disk::HEAD);
    (&mut from).take(disk::HEAD as u64).read_to_end(&mut head).map_err(|e| e.to_string())?;
    let dtype = disk::descr(&head)
        .map(|d| disk::Dtype::parse(d).ok_or_else(|| format!("its dtype `{d}` is {}", disk::NOT_READ)));
    let bytes = std::io::Cursor::new(head).chain(from);
    macro_rules! read_as {
        ($t:ty) => {
            ArrayD::<$t>::read_npy(bytes).map(|a| a.mapv(|v| v.as_())).map_err(|e| e.to_string())
        };
    }
    // The byte order is ndarray-npy's to follow.
    match dtype.transpose()?.map(|d| d.kind) {
        Some(Kind::F4) => read_as!(f32),
        Some(Kind::F8) => read_as!(f64),
        Some(Kind::U1) => read_as!(u8),
        Some(Kind::I8) => read_as!(i64),
        Some(Kind::I4) => read_as!(i32),
        // Not numpy's header: ndarray-npy's error says what is wrong with it.
        None => read_as!(f32),
    }
}

/// Each row along the first axis, flattened to `f32`s: the rows of one array.
fn to_rows(a: ArrayD<f32>) -> Result<Array2<f32>, String> {
    if a.ndim() < 1 {
        return Err("holds a single value, not rows".into());
    }
    let n = a.len_of(Axis(0));
    let width = a.len().checked_div(n).unwrap_or_else(|| a.shape()[1..].iter().product());
    // In logical order, whatever the file's (C or Fortran) order; a C-ordered file's values as
    // they are (a dynamic-rank array's iterator costs several times a copy).
    let values: Vec<f32> =
        if a.is_standard_layout() { a.into_raw_vec_and_offset().0 } else { a.iter().copied().collect() };
    Ok(Array2::from_shape_vec((n, width), values).expect("n rows of the rest"))
}

mod disk;

#[cfg(test)]
mod tests;
