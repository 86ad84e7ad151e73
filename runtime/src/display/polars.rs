//! Polars data frames and series as tables (the `polars` feature, which the kernel adds when a
//! cell's `:dep polars` asks for the polars it is built against): a column per series, its
//! dtype in the header; only the rows shown are read, so a frame of 10⁷ rows shows at once.
//! Numbers and booleans show their values, strings their text (cut past a cell's width), nulls
//! as `null`, anything else polars' own text of the value.

use super::table::{cell_text, Table, Tabular};
use ::polars::prelude::{AnyValue, DataFrame, PolarsResult, Series};

/// A value read from a column (`Column::get`, `Series::get`) as a cell's text.
fn cell(value: PolarsResult<AnyValue<'_>>) -> String {
    match value {
        Ok(AnyValue::Null) => "null".into(),
        Ok(AnyValue::String(s)) => cell_text(format_args!("{s}")),
        Ok(AnyValue::StringOwned(s)) => cell_text(format_args!("{s}")),
        Ok(other) => cell_text(format_args!("{other}")),
        Err(e) => format!("<{e}>"),
    }
}

impl Tabular for DataFrame {
    fn table(&self) -> Table {
        let columns = self.columns();
        let caption = format!("DataFrame: {} rows × {} columns", self.height(), self.width());
        Table::build(
            caption,
            (self.height(), self.width()),
            |j| format!("{} ({})", columns[j].name(), columns[j].dtype()),
            |i, j| cell(columns[j].get(i)),
        )
    }
}

impl Tabular for Series {
    fn table(&self) -> Table {
        let caption = format!("Series: {} rows of {}", self.len(), self.dtype());
        Table::build(
            caption,
            (self.len(), 1),
            |_| format!("{} ({})", self.name(), self.dtype()),
            |i, _| cell(self.get(i)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::polars::prelude::NamedFrom;

    #[test]
    fn a_data_frame_shows_its_columns_and_only_the_rows_shown() {
        let n: usize = 10_000_000;
        let ids = Series::new("id".into(), (0..n as i32).collect::<Vec<_>>());
        let scores: Vec<Option<f64>> = (0..n).map(|i| (i % 7 != 3).then_some(i as f64 / 2.0)).collect();
        let names: Vec<String> = (0..n).map(|i| format!("row{i}")).collect();
        let df = DataFrame::new_infer_height(vec![
            ids.into(),
            Series::new("score".into(), scores).into(),
            Series::new("name".into(), names).into(),
        ])
        .unwrap();
        let t = df.table();
        assert_eq!(t.shown_rows(), 10);
        let html = t.html();
        assert!(html.contains("<th>id (i32)</th><th>score (f64)</th><th>name (str)</th>"), "{html}");
        assert!(html.contains("<th>3</th><td>3</td><td>null</td><td>row3</td>"), "{html}");
        assert!(html.contains("<th>9999999</th><td>9999999</td><td>4999999.5</td><td>row9999999</td>"), "{html}");
        assert!(t.caption().starts_with("DataFrame: 10000000 rows × 3 columns"), "{}", t.caption());
        let s = Series::new("flag".into(), [true, false]);
        let t = s.table();
        assert!(t.caption().starts_with("Series: 2 rows of bool"), "{}", t.caption());
        assert!(t.html().contains("<th>flag (bool)</th>") && t.html().contains("<td>false</td>"), "{}", t.html());
    }
}
