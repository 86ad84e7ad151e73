//! Parquet files as datasets (the `parquet` feature, which the kernel adds when a cell names
//! `dryml::data::parquet`): numeric columns as each row's features, one column as its class
//! (`usize`) or value (`f32`). The file's schema is checked when the dataset is made; its rows
//! are read a record batch at a time by Arrow's reader on each pass, so a file larger than
//! memory streams (shuffle it with a buffer smaller than the file). A column that is missing or
//! not a number, a null, or a class that is not one is a [`DataError::File`] naming the file,
//! the column and the row.
//!
//! ```no_run
//! use dryml::data::parquet;
//!
//! // Every column but `label` as features, `label` as the class.
//! let data = parquet::xy::<usize>("digits.parquet", &[], "label").unwrap();
//! // Two columns as features, a value to learn.
//! let prices = parquet::xy::<f32>("houses.parquet", &["rooms", "area"], "price").unwrap();
//! ```

use super::ndarray::Array1;
use super::{DataError, Dataset, Element, Len, Xy};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use std::path::{Path, PathBuf};

/// Rows read at a time.
const BATCH_ROWS: usize = 4096;

/// What a target column can be read as.
pub trait FromColumn: Element + Copy {
    /// What the column must hold, in errors.
    const WANTS: &'static str;
    /// Whether a column of `t` can hold it.
    fn fits(t: &DataType) -> bool;
    /// One value of the column (read as `f64`), or why it is not one.
    fn from_number(v: f64) -> Result<Self, String>;
}

impl FromColumn for usize {
    const WANTS: &'static str = "integers (classes)";
    fn fits(t: &DataType) -> bool {
        t.is_integer()
    }
    fn from_number(v: f64) -> Result<usize, String> {
        if v >= 0.0 {
            Ok(v as usize)
        } else {
            Err(format!("{v} is not a class (0 or more)"))
        }
    }
}

impl FromColumn for f32 {
    const WANTS: &'static str = "numbers";
    fn fits(t: &DataType) -> bool {
        t.is_numeric()
    }
    fn from_number(v: f64) -> Result<f32, String> {
        Ok(v as f32)
    }
}

fn file_error(path: &Path, message: String) -> DataError {
    DataError::File { path: path.display().to_string(), at: None, message }
}

/// The rows of the Parquet file at `path`: the columns `features` (every column but `target`
/// when empty) as `f32` features, and `target` read as `Y`.
pub fn xy<Y: FromColumn>(
    path: impl AsRef<Path>,
    features: &[&str],
    target: &str,
) -> Result<Dataset<Xy<Array1<f32>, Y>>, DataError> {
    let path = path.as_ref().to_path_buf();
    let plan = Plan::new(&path, features, Some((target, Y::WANTS, Y::fits)))?;
    Ok(plan.stream(Plan::read::<Y>))
}

/// The rows of the Parquet file at `path`, the columns `features` (every column when empty) as
/// `f32` features.
pub fn rows(path: impl AsRef<Path>, features: &[&str]) -> Result<Dataset<Array1<f32>>, DataError> {
    let path = path.as_ref().to_path_buf();
    Ok(Plan::new(&path, features, None)?.stream(Plan::features))
}

/// What a pass reads: the file, its feature columns and target, checked against its schema.
#[derive(Clone)]
struct Plan {
    path: PathBuf,
    features: Vec<String>,
    target: Option<String>,
    /// The file's top-level columns that are read.
    columns: Vec<usize>,
    rows: usize,
}

type Fits = fn(&DataType) -> bool;

impl Plan {
    fn new(path: &Path, features: &[&str], target: Option<(&str, &str, Fits)>) -> Result<Plan, DataError> {
        let bad = |m: String| file_error(path, m);
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(format!("not a Parquet file: {e}")))?;
        let schema: &Schema = builder.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let find = |name: &str| {
            names
                .iter()
                .position(|n| *n == name)
                .ok_or_else(|| bad(format!("has no column `{name}` (it has {})", names.join(", "))))
        };
        let target_at = target.map(|(name, _, _)| find(name)).transpose()?;
        let features: Vec<String> = if features.is_empty() {
            names.iter().enumerate().filter(|(i, _)| Some(*i) != target_at).map(|(_, n)| n.to_string()).collect()
        } else {
            features.iter().map(|s| s.to_string()).collect()
        };
        if features.is_empty() {
            return Err(bad("has no columns left for features".into()));
        }
        let mut columns = Vec::new();
        for name in &features {
            let at = find(name)?;
            let t = schema.field(at).data_type();
            if !t.is_numeric() {
                return Err(bad(format!("column `{name}` holds {t}; a feature column must hold numbers")));
            }
            columns.push(at);
        }
        if let (Some((name, wants, fits)), Some(at)) = (target, target_at) {
            let t = schema.field(at).data_type();
            if !fits(t) {
                return Err(bad(format!("column `{name}` holds {t}; the target column must hold {wants}")));
            }
            columns.push(at);
        }
        columns.sort_unstable();
        columns.dedup();
        let rows = builder.metadata().file_metadata().num_rows() as usize;
        Ok(Plan { path: path.to_path_buf(), features, target: target.map(|t| t.0.to_string()), columns, rows })
    }

    /// The dataset whose passes read the file a record batch at a time, each batch's elements
    /// made by `read` (given the batch's first row in the file).
    fn stream<T: Send + 'static>(
        self,
        read: fn(&Plan, &RecordBatch, usize) -> Result<Vec<T>, DataError>,
    ) -> Dataset<T> {
        Dataset::from_source(Len::Known(self.rows), move || {
            let plan = self.clone();
            let mut from = 0usize;
            Box::new(plan.batches().flat_map(move |b| match b.and_then(|b| read(&plan, &b, from)) {
                Ok(elements) => {
                    from += elements.len();
                    elements.into_iter().map(Ok).collect::<Vec<_>>()
                }
                Err(e) => vec![Err(e)],
            }))
        })
    }

    /// The file's record batches, of the columns read.
    fn batches(&self) -> Box<dyn Iterator<Item = Result<RecordBatch, DataError>> + Send> {
        let bad = |m: String| file_error(&self.path, m);
        let reader = std::fs::File::open(&self.path)
            .map_err(|e| bad(e.to_string()))
            .and_then(|f| {
                ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| bad(format!("not a Parquet file: {e}")))
            })
            .and_then(|b| {
                let mask = ProjectionMask::roots(b.parquet_schema(), self.columns.iter().copied());
                b.with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(|e| bad(e.to_string()))
            });
        match reader {
            Ok(r) => {
                let path = self.path.clone();
                Box::new(r.map(move |b| b.map_err(|e| file_error(&path, format!("reading: {e}")))))
            }
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    /// Column `name` of a batch as numbers (a null is an error naming its row: `from` is the
    /// batch's first row in the file).
    fn numbers(&self, b: &RecordBatch, name: &str, from: usize) -> Result<Vec<f64>, DataError> {
        let bad = |m: String| file_error(&self.path, format!("column `{name}`{m}"));
        let col = b.column_by_name(name).ok_or_else(|| bad(": missing from a record batch".into()))?;
        if let Some(row) = (0..col.len()).find(|&r| col.is_null(r)) {
            return Err(bad(format!(", row {}: null, and every row needs a number", from + row)));
        }
        macro_rules! read_as {
            ($($t:ty),*) => {$(
                if let Some(a) = col.as_primitive_opt::<$t>() {
                    return Ok(a.values().iter().map(|&v| v as f64).collect());
                }
            )*};
        }
        read_as!(
            Float32Type,
            Float64Type,
            Int8Type,
            Int16Type,
            Int32Type,
            Int64Type,
            UInt8Type,
            UInt16Type,
            UInt32Type,
            UInt64Type
        );
        Err(bad(format!(" holds {}; it must hold numbers", col.data_type())))
    }

    /// The feature rows of a batch.
    fn features(&self, b: &RecordBatch, from: usize) -> Result<Vec<Array1<f32>>, DataError> {
        let cols = self.features.iter().map(|n| self.numbers(b, n, from)).collect::<Result<Vec<_>, _>>()?;
        Ok((0..b.num_rows()).map(|r| cols.iter().map(|c| c[r] as f32).collect()).collect())
    }

    /// The elements of a batch.
    fn read<Y: FromColumn>(&self, b: &RecordBatch, from: usize) -> Result<Vec<Xy<Array1<f32>, Y>>, DataError> {
        let name = self.target.as_deref().expect("a plan for supervised rows has a target");
        let ys = self.numbers(b, name, from)?;
        let xs = self.features(b, from)?;
        xs.into_iter()
            .zip(ys)
            .enumerate()
            .map(|(r, (x, y))| {
                let y = Y::from_number(y)
                    .map_err(|m| file_error(&self.path, format!("column `{name}`, row {}: {m}", from + r)))?;
                Ok(Xy { x, y })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
