//! Tables for values: an HTML table with its text form beside it, for `ndarray` arrays of rank 1
//! and 2, a dataset's first elements (`dryml::data::Dataset`), and Arrow record batches (the
//! `parquet` feature). A cell whose value is one of these shows the table; the kernel puts
//! [`ShowTable`] in scope for the final expression. However large the value, only the rows and
//! columns shown are formatted (pandas' rule: past 60 rows, the first and last 5), so a table of
//! 10⁷ rows shows at once.
//!
//! ```
//! use dryml::display::{Table, Tabular};
//! use dryml::data::ndarray::Array2;
//!
//! let a = Array2::<f64>::from_shape_fn((1000, 3), |(i, j)| (i * 3 + j) as f64);
//! let t = a.table();
//! assert_eq!(t.shown_rows(), 10); // five at the head, five at the tail
//! assert!(t.html().contains("1000 rows × 3 columns"));
//! t.show(); // the HTML table in a notebook, its text form elsewhere
//! ```

use super::wire::{escape_html, send};
use ndarray::{ArrayBase, Data, Ix1, Ix2, IxDyn};
use std::fmt::{Display, Write as _};

/// Past this many rows, only the head and the tail are shown (pandas' `display.max_rows`).
pub const MAX_ROWS: usize = 60;
/// Rows shown at each end of a longer table (half of pandas' `display.min_rows`).
pub const END_ROWS: usize = 5;
/// Past this many columns, only the first and last 10 (pandas' `display.max_columns`).
pub const MAX_COLUMNS: usize = 20;
/// A cell's text is cut at this many characters.
pub const MAX_CELL: usize = 50;

/// Which of `n` rows (or columns) to show, with `None` where the elided ones are.
fn shown(n: usize, max: usize, end: usize) -> Vec<Option<usize>> {
    if n <= max {
        return (0..n).map(Some).collect();
    }
    (0..end).map(Some).chain([None]).chain((n - end..n).map(Some)).collect()
}

/// A cell's text, cut to [`MAX_CELL`] characters.
fn cut(s: String) -> String {
    cell_text(format_args!("{s}"))
}

/// A writer that takes [`MAX_CELL`] characters and then refuses, so a huge value's `Debug` or
/// `Display` stops there instead of formatting the whole value.
#[derive(Default)]
struct Bounded {
    text: String,
    chars: usize,
    cut: bool,
}

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            if self.chars == MAX_CELL {
                self.cut = true;
                return Err(std::fmt::Error);
            }
            self.text.push(c);
            self.chars += 1;
        }
        Ok(())
    }
}

/// A cell's text from its formatting, at most [`MAX_CELL`] characters (and `…`) formatted.
pub(crate) fn cell_text(args: std::fmt::Arguments<'_>) -> String {
    let mut b = Bounded::default();
    // An error is the writer's own refusal (or the value's), after what fits is written.
    let _ = std::fmt::Write::write_fmt(&mut b, args);
    if b.cut {
        b.text.push('…');
    }
    b.text
}

/// A table ready to show: a caption, column names, and the rows shown (a `None` row or cell
/// stands for the elided ones).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    caption: String,
    /// The index column's name (`""` for row numbers).
    index: String,
    columns: Vec<Option<String>>,
    rows: Vec<Option<(String, Vec<Option<String>>)>>,
}

impl Table {
    /// A table of `rows × columns` cells, `cell(row, column)` called only for those shown;
    /// rows are numbered from 0, columns named by `name(column)`.
    pub fn build(
        caption: impl Into<String>,
        (rows, columns): (usize, usize),
        name: impl Fn(usize) -> String,
        mut cell: impl FnMut(usize, usize) -> String,
    ) -> Table {
        let cols = shown(columns, MAX_COLUMNS, MAX_COLUMNS / 2);
        let header = cols.iter().map(|c| c.map(|j| cut(name(j)))).collect();
        let body = shown(rows, MAX_ROWS, END_ROWS)
            .into_iter()
            .map(|r| r.map(|i| (i.to_string(), cols.iter().map(|c| c.map(|j| cut(cell(i, j)))).collect())))
            .collect();
        Table { caption: caption.into(), index: String::new(), columns: header, rows: body }
    }

    /// A table of already formatted rows (each `(index, cells)`), shown as given, with an
    /// elision row after them when there are `more`.
    pub fn from_rows(
        caption: impl Into<String>,
        index: &str,
        columns: &[&str],
        rows: Vec<(String, Vec<String>)>,
        more: bool,
    ) -> Table {
        Table {
            caption: caption.into(),
            index: index.to_string(),
            columns: columns.iter().map(|c| Some(c.to_string())).collect(),
            // Short rows (an error in a dataset's pass) are padded with empty cells.
            rows: rows
                .into_iter()
                .map(|(i, cells)| {
                    let pad = columns.len().saturating_sub(cells.len());
                    Some((
                        i,
                        cells
                            .into_iter()
                            .chain(std::iter::repeat_n(String::new(), pad))
                            .map(|c| Some(cut(c)))
                            .collect(),
                    ))
                })
                .chain(more.then_some(None))
                .collect(),
        }
    }

    /// How many rows are shown (the elision row not counted).
    pub fn shown_rows(&self) -> usize {
        self.rows.iter().flatten().count()
    }

    /// The table's caption (its shape and element type).
    pub fn caption(&self) -> &str {
        &self.caption
    }

    /// The table as HTML (a `<table>` in JupyterLab's style, its caption below it).
    pub fn html(&self) -> String {
        let mut h = String::from(
            "<div class=\"dryml-table\"><table class=\"dataframe\"><thead><tr style=\"text-align: right;\">",
        );
        let _ = write!(h, "<th>{}</th>", escape_html(&self.index));
        for c in &self.columns {
            let _ = write!(h, "<th>{}</th>", c.as_deref().map_or("…".into(), escape_html));
        }
        h.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            h.push_str("<tr>");
            match r {
                Some((i, cells)) => {
                    let _ = write!(h, "<th>{}</th>", escape_html(i));
                    for c in cells {
                        let _ = write!(h, "<td>{}</td>", c.as_deref().map_or("…".into(), escape_html));
                    }
                }
                None => {
                    h.push_str("<th>…</th>");
                    for _ in &self.columns {
                        h.push_str("<td>…</td>");
                    }
                }
            }
            h.push_str("</tr>");
        }
        let _ = write!(h, "</tbody></table><p>{}</p></div>", escape_html(&self.caption));
        h
    }

    /// The table as aligned text, its caption below it.
    pub fn text(&self) -> String {
        let dots = || "…".to_string();
        let mut grid: Vec<Vec<String>> = vec![std::iter::once(self.index.clone())
            .chain(self.columns.iter().map(|c| c.clone().unwrap_or_else(dots)))
            .collect()];
        for r in &self.rows {
            grid.push(match r {
                Some((i, cells)) => {
                    std::iter::once(i.clone()).chain(cells.iter().map(|c| c.clone().unwrap_or_else(dots))).collect()
                }
                None => vec![dots(); self.columns.len() + 1],
            });
        }
        let widths: Vec<usize> = (0..=self.columns.len())
            .map(|j| grid.iter().filter_map(|r| r.get(j)).map(|c| c.chars().count()).max().unwrap_or(0))
            .collect();
        let mut t = String::new();
        for row in &grid {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
            t.push_str(cells.join("  ").trim_end());
            t.push('\n');
        }
        t.push_str(&self.caption);
        t
    }

    /// Shows the table as a new output of the running cell (its text form outside a notebook).
    pub fn show(&self) {
        send(&[("text/html", &self.html()), ("text/plain", &self.text())], None, "false");
    }

    /// Shows the table as a cell's value (evcxr calls it).
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT", self.html());
        println!("EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT", self.text());
    }
}

/// A value that shows as a [`Table`]: bounded in time and size whatever the value holds.
pub trait Tabular {
    /// The value's table: its head and tail past [`MAX_ROWS`] rows.
    fn table(&self) -> Table;
}

/// Shows a value's table as a new output of the running cell.
pub fn table<T: Tabular + ?Sized>(value: &T) {
    value.table().show();
}

/// The short name of an element type: `f64`, `String`, `Xy<…>` without module paths.
pub(crate) fn short_type<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    for ch in full.chars().chain(['\0']) {
        if ch.is_alphanumeric() || ch == '_' || ch == ':' {
            word.push(ch);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            if ch != '\0' {
                out.push(ch);
            }
        }
    }
    out
}

/// The table of an array of any ndarray release, from its `shape` and its elements (`get`, by
/// index): rank 1 and 2 cell by cell, other ranks as the shape and the array's own (elided)
/// text, `whole`, in one cell. dryml's arrays are shown through it, and so are a notebook's
/// arrays of another ndarray release (the kernel's code for them calls it), alike.
pub fn array_table<'a, A: Display + 'a>(
    shape: &[usize],
    get: impl Fn(&[usize]) -> Option<&'a A>,
    whole: &dyn Display,
) -> Table {
    let kind = short_type::<A>();
    let text = |index: &[usize]| get(index).map_or_else(String::new, |v| cell_text(format_args!("{v}")));
    match *shape {
        [n] => Table::build(format!("{n} rows, {kind}"), (n, 1), |_| "0".into(), |i, _| text(&[i])),
        [r, c] => {
            Table::build(format!("{r} rows × {c} columns, {kind}"), (r, c), |j| j.to_string(), |i, j| text(&[i, j]))
        }
        _ => Table::from_rows(
            format!("shape {shape:?}, {kind}"),
            "",
            &["array"],
            vec![(String::new(), vec![cell_text(format_args!("{whole}"))])],
            false,
        ),
    }
}

impl<A: Display, S: Data<Elem = A>> Tabular for ArrayBase<S, Ix1> {
    fn table(&self) -> Table {
        array_table(self.shape(), |i| self.get(i[0]), self)
    }
}

impl<A: Display, S: Data<Elem = A>> Tabular for ArrayBase<S, Ix2> {
    fn table(&self) -> Table {
        array_table(self.shape(), |i| self.get((i[0], i[1])), self)
    }
}

impl<A: Display, S: Data<Elem = A>> Tabular for ArrayBase<S, IxDyn> {
    fn table(&self) -> Table {
        array_table(self.shape(), |i| self.get(i), self)
    }
}

/// What puts a value's table in a cell's result: the kernel writes `use ShowTable as _;` into
/// the block that shows the final expression, which asks `evcxr_table` first and, when a value
/// has no table (evcxr's fallback, found one autoref later, says `false`), shows it as evcxr
/// does: its own `evcxr_display`, or its `Debug` text. A reference (`&array`) shows its `Debug`
/// text (a table for it would tie with that fallback); a view (`array.view()`) shows the table.
pub trait ShowTable {
    /// Shows the table as the cell's value; `true` when it did.
    fn evcxr_table(&self) -> bool;
}

impl<T: Tabular + ?Sized> ShowTable for T {
    fn evcxr_table(&self) -> bool {
        self.table().evcxr_display();
        true
    }
}

#[cfg(test)]
mod tests;
