//! Where datasets come from besides vectors and closures: the rows of `ndarray` arrays and
//! CSV files of numbers.

use super::access::{Access, Gather};
use super::dataset::Dataset;
use super::element::{Scalar, Xy};
use super::DataError;
use ndarray::{Array1, Array2, ArrayD, Axis, IxDyn};
use std::path::Path;
use std::sync::Arc;

impl<S: Scalar> Dataset<Array1<S>> {
    /// The rows of `x`, one element each.
    pub fn from_rows(x: Array2<S>) -> Dataset<Array1<S>> {
        let x = Arc::new(x);
        let (n, rows) = (x.nrows(), x.clone());
        let gather: Arc<Gather<Array2<S>>> = Arc::new(move |at: &[usize]| Ok(rows.select(Axis(0), at)));
        Dataset::from_access(Access::new(n, move |i| x.row(i).to_owned(), Some(gather)))
    }
}

impl<S: Scalar, T: Scalar> Dataset<Xy<Array1<S>, T>> {
    /// Supervised elements: the rows of `x`, each with its entry of `y`.
    pub fn from_xy(x: Array2<S>, y: Array1<T>) -> Result<Dataset<Xy<Array1<S>, T>>, DataError> {
        if x.nrows() != y.len() {
            return Err(DataError::Shapes(format!("x has {} rows and y {} entries", x.nrows(), y.len())));
        }
        let (x, y) = (Arc::new(x), Arc::new(y));
        let (n, xs, ys) = (y.len(), x.clone(), y.clone());
        let gather: Arc<Gather<Xy<Array2<S>, Array1<T>>>> =
            Arc::new(move |at: &[usize]| Ok(Xy { x: xs.select(Axis(0), at), y: ys.select(Axis(0), at) }));
        Ok(Dataset::from_access(Access::new(n, move |i| Xy { x: x.row(i).to_owned(), y: y[i] }, Some(gather))))
    }
}

impl<S: Scalar> Dataset<ArrayD<S>> {
    /// The slices of `a` along its first axis, one element each (images of any shape).
    pub fn from_array(a: ArrayD<S>) -> Result<Dataset<ArrayD<S>>, DataError> {
        if a.ndim() == 0 {
            return Err(DataError::Shapes("a 0-dimensional array has no elements to take".into()));
        }
        let a = Arc::new(a);
        let (n, all) = (a.len_of(Axis(0)), a.clone());
        let gather: Arc<Gather<ArrayD<S>>> = Arc::new(move |at: &[usize]| Ok(all.select(Axis(0), at)));
        Ok(Dataset::from_access(Access::new(
            n,
            move |i| a.index_axis(Axis(0), i).to_owned().into_dimensionality::<IxDyn>().expect("dynamic"),
            Some(gather),
        )))
    }
}

/// How to read a CSV file of numbers.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// The field separator.
    pub delimiter: u8,
    /// Whether the first row names the columns.
    pub header: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { delimiter: b',', header: true }
    }
}

/// A CSV file read whole: the column names and the rows of numbers.
struct Table {
    names: Vec<String>,
    rows: Array2<f64>,
}

fn read_table(path: &Path, o: &CsvOptions) -> Result<Table, DataError> {
    let shown = path.display().to_string();
    let err = |at: Option<(u64, usize)>, message: String| DataError::File { path: shown.clone(), at, message };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(o.delimiter)
        .has_headers(o.header)
        .from_path(path)
        .map_err(|e| err(None, e.to_string()))?;
    let names: Vec<String> = if o.header {
        reader.headers().map_err(|e| err(None, e.to_string()))?.iter().map(|h| h.trim().to_string()).collect()
    } else {
        Vec::new()
    };
    let mut values = Vec::new();
    let mut width = None;
    for record in reader.records() {
        let record = record.map_err(|e| err(e.position().map(|p| (p.line(), 0)), e.to_string()))?;
        let line = record.position().map_or(0, |p| p.line());
        let w = *width.get_or_insert(record.len());
        if record.len() != w {
            return Err(err(Some((line, record.len())), format!("{} fields, earlier rows have {w}", record.len())));
        }
        for (col, field) in record.iter().enumerate() {
            let v: f64 =
                field.trim().parse().map_err(|_| err(Some((line, col + 1)), format!("`{field}` is not a number")))?;
            values.push(v);
        }
    }
    let w = width.unwrap_or(names.len());
    let names = if o.header { names } else { (1..=w).map(|c| format!("column {c}")).collect() };
    let rows = Array2::from_shape_vec((values.len() / w.max(1), w), values).map_err(|e| err(None, e.to_string()))?;
    Ok(Table { names, rows })
}

impl Dataset<Array1<f64>> {
    /// The rows of a CSV file of numbers, read whole now (an error names the line and column).
    pub fn from_csv(path: impl AsRef<Path>, options: &CsvOptions) -> Result<Dataset<Array1<f64>>, DataError> {
        Ok(Dataset::from_rows(read_table(path.as_ref(), options)?.rows))
    }
}

impl Dataset<Xy<Array1<f64>, f64>> {
    /// The rows of a CSV file of numbers with a header, column `target` as the target and the
    /// others, in file order, as the features.
    pub fn from_csv_xy(
        path: impl AsRef<Path>,
        target: &str,
        options: &CsvOptions,
    ) -> Result<Dataset<Xy<Array1<f64>, f64>>, DataError> {
        let table = read_table(path.as_ref(), options)?;
        let Some(t) = table.names.iter().position(|n| n == target) else {
            return Err(DataError::File {
                path: path.as_ref().display().to_string(),
                at: None,
                message: format!("no column `{target}` (the columns: {})", table.names.join(", ")),
            });
        };
        let y = table.rows.column(t).to_owned();
        let keep: Vec<usize> = (0..table.names.len()).filter(|&c| c != t).collect();
        let x = table.rows.select(Axis(1), &keep);
        Dataset::from_xy(x, y)
    }
}
