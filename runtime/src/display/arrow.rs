//! Arrow record batches as tables (the `parquet` feature, which the kernel adds when a cell
//! names `arrow` or `dryml::data::parquet`): a column per field, its type in the header; only
//! the rows shown are read. Numbers, booleans and strings show their values, nulls as `null`,
//! other types their type's name.

use super::table::{cell_text, Table, Tabular};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

/// Row `i` of a column as text (a long string copied only as far as it shows).
fn cell(column: &dyn Array, i: usize) -> String {
    if column.is_null(i) {
        return "null".into();
    }
    match column.data_type() {
        DataType::Int8 => column.as_primitive::<Int8Type>().value(i).to_string(),
        DataType::Int16 => column.as_primitive::<Int16Type>().value(i).to_string(),
        DataType::Int32 => column.as_primitive::<Int32Type>().value(i).to_string(),
        DataType::Int64 => column.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt8 => column.as_primitive::<UInt8Type>().value(i).to_string(),
        DataType::UInt16 => column.as_primitive::<UInt16Type>().value(i).to_string(),
        DataType::UInt32 => column.as_primitive::<UInt32Type>().value(i).to_string(),
        DataType::UInt64 => column.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::Float32 => column.as_primitive::<Float32Type>().value(i).to_string(),
        DataType::Float64 => column.as_primitive::<Float64Type>().value(i).to_string(),
        DataType::Boolean => column.as_boolean().value(i).to_string(),
        DataType::Utf8 => cell_text(format_args!("{}", column.as_string::<i32>().value(i))),
        DataType::LargeUtf8 => cell_text(format_args!("{}", column.as_string::<i64>().value(i))),
        DataType::Utf8View => cell_text(format_args!("{}", column.as_string_view().value(i))),
        other => format!("<{other}>"),
    }
}

impl Tabular for RecordBatch {
    fn table(&self) -> Table {
        let schema = self.schema();
        let caption = format!("RecordBatch: {} rows × {} columns", self.num_rows(), self.num_columns());
        Table::build(
            caption,
            (self.num_rows(), self.num_columns()),
            |j| format!("{} ({})", schema.field(j).name(), schema.field(j).data_type()),
            |i, j| cell(self.column(j).as_ref(), i),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int32Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn a_record_batch_shows_its_fields_and_only_the_rows_shown() {
        let n: usize = 10_000_000;
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int32Array::from_iter_values(0..n as i32)) as Arc<dyn Array>),
            ("score", Arc::new(Float64Array::from_iter((0..n).map(|i| (i % 7 != 3).then_some(i as f64 / 2.0))))),
            ("name", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("row{i}"))))),
        ])
        .unwrap();
        let t = batch.table();
        assert_eq!(t.shown_rows(), 10);
        let html = t.html();
        assert!(html.contains("<th>id (Int32)</th><th>score (Float64)</th><th>name (Utf8)</th>"), "{html}");
        assert!(html.contains("<th>3</th><td>3</td><td>null</td><td>row3</td>"), "{html}");
        assert!(html.contains("<th>9999999</th><td>9999999</td><td>4999999.5</td><td>row9999999</td>"), "{html}");
        assert!(t.caption().starts_with("RecordBatch: 10000000 rows × 3 columns"));
    }
}
