//! Tests of `parquet`: real files written by Arrow's Parquet writer.

use super::*;
use arrow_array::{ArrayRef, Float32Array, Float64Array, Int64Array, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::sync::Arc;

/// `columns` written to a fresh file, in row groups of `group` rows.
fn write(columns: Vec<(&str, ArrayRef)>, group: usize) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dryml-{}.parquet", crate::objects::uuid_v4()));
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(group)).build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

fn table(n: usize) -> Vec<(&'static str, ArrayRef)> {
    vec![
        ("a", Arc::new(Float32Array::from_iter_values((0..n).map(|i| i as f32))) as ArrayRef),
        ("label", Arc::new(Int64Array::from_iter_values((0..n).map(|i| (i % 3) as i64))) as ArrayRef),
        ("b", Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64 * 0.5))) as ArrayRef),
        ("name", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("row {i}")))) as ArrayRef),
    ]
}

#[test]
fn a_files_columns_are_features_and_a_target_across_row_groups() {
    // More rows than one record batch, in several row groups: read as a stream.
    let n = BATCH_ROWS * 2 + 17;
    let path = write(table(n), 3000);
    let data = xy::<usize>(&path, &["a", "b"], "label").unwrap();
    assert_eq!(data.len(), Len::Known(n));
    let all = data.collect().unwrap();
    assert_eq!(all.len(), n);
    let e = &all[BATCH_ROWS + 5];
    let i = (BATCH_ROWS + 5) as f32;
    assert_eq!((e.x.to_vec(), e.y), (vec![i, i * 0.5], (BATCH_ROWS + 5) % 3));
    // Values to learn, from any numeric column; and rows without a target.
    let values = xy::<f32>(&path, &["a"], "b").unwrap().take(3).collect().unwrap();
    assert_eq!(values.iter().map(|e| (e.x[0], e.y)).collect::<Vec<_>>(), [(0.0, 0.0), (1.0, 0.5), (2.0, 1.0)]);
    let plain = rows(&path, &["b", "a"]).unwrap().skip(2).peek().unwrap().unwrap();
    assert_eq!(plain.to_vec(), [1.0, 2.0], "in the order asked for");
    // Shuffled with a buffer and batched, as a stream.
    let batches = data.shuffle(1000, 3).batch(64, false).unwrap();
    assert_eq!(batches.count().unwrap(), n.div_ceil(64));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bad_columns_files_and_values_are_named() {
    let path = write(table(10), 10);
    let shown = path.display().to_string();
    let err = |r: Result<Dataset<Xy<Array1<f32>, usize>>, DataError>| r.map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        err(xy::<usize>(&path, &["a", "name"], "label")),
        format!("{shown}: column `name` holds Utf8; a feature column must hold numbers")
    );
    assert_eq!(
        err(xy::<usize>(&path, &["a"], "b")),
        format!("{shown}: column `b` holds Float64; the target column must hold integers (classes)")
    );
    assert_eq!(
        err(xy::<usize>(&path, &["a"], "class")),
        format!("{shown}: has no column `class` (it has a, label, b, name)")
    );
    // Every column but the target, by default: here one of them is text.
    assert!(err(xy::<usize>(&path, &[], "label")).contains("column `name` holds Utf8"));
    // A negative class and a null, named by row.
    let neg = write(
        vec![
            ("a", Arc::new(Float32Array::from(vec![1.0, 2.0])) as ArrayRef),
            ("y", Arc::new(Int64Array::from(vec![0, -2])) as ArrayRef),
        ],
        2,
    );
    assert_eq!(
        xy::<usize>(&neg, &[], "y").unwrap().collect().unwrap_err().to_string(),
        format!("{}: column `y`, row 1: -2 is not a class (0 or more)", neg.display())
    );
    let null = write(
        vec![
            ("a", Arc::new(Float32Array::from(vec![Some(1.0), None])) as ArrayRef),
            ("y", Arc::new(Int64Array::from(vec![0, 1])) as ArrayRef),
        ],
        2,
    );
    assert_eq!(
        xy::<usize>(&null, &[], "y").unwrap().collect().unwrap_err().to_string(),
        format!("{}: column `a`, row 1: null, and every row needs a number", null.display())
    );
    // Not a Parquet file, or cut short.
    let cut = std::env::temp_dir().join(format!("dryml-{}.parquet", crate::objects::uuid_v4()));
    std::fs::write(&cut, &std::fs::read(&path).unwrap()[..100]).unwrap();
    let e = err(xy::<usize>(&cut, &[], "label"));
    assert!(e.starts_with(&format!("{}: not a Parquet file: ", cut.display())), "{e}");
    for p in [path, neg, null, cut] {
        std::fs::remove_file(p).unwrap();
    }
}
