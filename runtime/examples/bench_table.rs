//! The table benchmark: what a cell's value of 10⁷ rows costs to show, as the kernel shows it
//! (`Tabular::table`, then the HTML and the text), for an `ndarray` array of 10⁷ × 4 `f64`, a
//! `Dataset` of 10⁷ supervised rows, and an Arrow record batch and a polars `DataFrame` of 10⁷
//! rows (an integer, a nullable float and a string column). The anchor: ndarray's own `Debug`
//! text of the same array, which also elides. Medians of N runs; prints one JSON object.
//!
//! By hand: `cargo run --release -p dryml --features parquet,polars --example bench_table -- 15`
//! (`tests/bench/bench_tables.py` runs it beside pyarrow's text of the same batch and Python
//! polars' HTML table of the same frame).

use arrow_array::{Array, Float64Array, Int32Array, RecordBatch, StringArray};
use dryml::data::ndarray::Array2;
use dryml::data::{Dataset, Xy};
use dryml::display::Tabular;
use polars::prelude::{DataFrame, NamedFrom, Series};
use std::sync::Arc;
use std::time::Instant;

const ROWS: usize = 10_000_000;

/// The median of `reps` runs of `f`, in milliseconds, and the bytes it made.
fn time(reps: usize, mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut ms = Vec::new();
    let mut bytes = 0;
    for _ in 0..reps {
        let t = Instant::now();
        bytes = std::hint::black_box(f());
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    (ms[reps / 2], bytes)
}

fn shown(t: &impl Tabular) -> usize {
    let t = t.table();
    t.html().len() + t.text().len()
}

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let array = Array2::<f64>::from_shape_fn((ROWS, 4), |(i, j)| (i * 4 + j) as f64 / 3.0);
    let data = Dataset::from_vec((0..ROWS).map(|i| Xy { x: i as f32, y: i % 10 }).collect());
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int32Array::from_iter_values(0..ROWS as i32)) as Arc<dyn Array>),
        ("score", Arc::new(Float64Array::from_iter((0..ROWS).map(|i| (i % 7 != 3).then_some(i as f64 / 2.0))))),
        ("name", Arc::new(StringArray::from_iter_values((0..ROWS).map(|i| format!("row{i}"))))),
    ])
    .expect("columns of one length");
    let frame = DataFrame::new_infer_height(vec![
        Series::new("id".into(), (0..ROWS as i32).collect::<Vec<_>>()).into(),
        Series::new("score".into(), (0..ROWS).map(|i| (i % 7 != 3).then_some(i as f64 / 2.0)).collect::<Vec<_>>())
            .into(),
        Series::new("name".into(), (0..ROWS).map(|i| format!("row{i}")).collect::<Vec<_>>()).into(),
    ])
    .expect("columns of one length");

    let (array_ms, array_bytes) = time(reps, || shown(&array));
    let (debug_ms, debug_bytes) = time(reps, || format!("{array:?}").len());
    let (data_ms, data_bytes) = time(reps, || shown(&data));
    let (batch_ms, batch_bytes) = time(reps, || shown(&batch));
    let (frame_ms, frame_bytes) = time(reps, || shown(&frame));
    println!(
        "{{\"rows\":{ROWS},\"reps\":{reps},\
         \"array_ms\":{array_ms:.4},\"array_bytes\":{array_bytes},\
         \"array_debug_ms\":{debug_ms:.4},\"array_debug_bytes\":{debug_bytes},\
         \"dataset_ms\":{data_ms:.4},\"dataset_bytes\":{data_bytes},\
         \"batch_ms\":{batch_ms:.4},\"batch_bytes\":{batch_bytes},\
         \"frame_ms\":{frame_ms:.4},\"frame_bytes\":{frame_bytes}}}"
    );
}
