//! Tables: what is shown of large values, and the two forms.

use super::*;
use ndarray::{Array1, Array2, ArrayD};

#[test]
fn a_long_array_shows_its_head_and_tail_only() {
    let a = Array2::<f64>::from_shape_fn((10_000_000, 3), |(i, j)| (i * 3 + j) as f64);
    let t = a.table();
    assert_eq!(t.shown_rows(), 2 * END_ROWS);
    let html = t.html();
    assert!(html.contains("<th>9999999</th><td>29999997</td>"), "{html}");
    assert!(html.contains("<th>…</th>"));
    assert!(html.contains("10000000 rows × 3 columns, f64"));
    let text = t.text();
    let lines: Vec<&str> = text.lines().collect();
    // Header, five rows, the elision, five rows, the caption.
    assert_eq!(lines.len(), 1 + 5 + 1 + 5 + 1, "{text}");
    assert!(lines[6].trim_start().starts_with('…'));
    assert!(lines[11].ends_with("29999999"), "{text}");
}

#[test]
fn a_short_array_shows_every_row_and_wide_ones_their_first_and_last_columns() {
    let a = Array1::from(vec![1, 2, 3]);
    assert_eq!(a.table().shown_rows(), 3);
    assert_eq!(a.table().caption(), "3 rows, i32");
    let wide = Array2::<u8>::zeros((2, 100));
    let html = wide.table().html();
    assert_eq!(html.matches("<th>").count(), 1 + MAX_COLUMNS + 1 + 2, "{html}");
    assert!(html.contains("<th>9</th><th>…</th><th>90</th>"));
}

#[test]
fn cells_are_cut_and_escaped() {
    let a = Array1::from(vec!["<b>".repeat(40)]);
    let t = a.table();
    let html = t.html();
    assert!(html.contains("&lt;b&gt;"));
    assert!(!html.contains("<b>"));
    let cell = t.text().lines().nth(1).unwrap().trim().trim_start_matches('0').trim().to_string();
    assert_eq!(cell.chars().count(), MAX_CELL + 1, "{cell}");
    assert!(cell.ends_with('…'));
}

#[test]
fn other_ranks_show_their_shape() {
    let a = ArrayD::<f32>::zeros(vec![2, 2, 2]);
    assert_eq!(a.table().caption(), "shape [2, 2, 2], f32");
    let b = ArrayD::<f32>::zeros(vec![4, 2]);
    assert_eq!(b.table().caption(), "4 rows × 2 columns, f32");
}

#[test]
fn views_show_as_their_arrays() {
    let a = Array2::from_shape_fn((3, 2), |(i, j)| i + j);
    assert_eq!(a.view().table(), a.table());
    assert_eq!(a.row(1).table().caption(), "2 rows, usize");
}

#[test]
fn a_huge_cell_is_formatted_only_as_far_as_it_shows() {
    struct Endless;
    impl std::fmt::Display for Endless {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            // Would never end if the writer did not refuse.
            loop {
                f.write_str("x")?;
            }
        }
    }
    let text = cell_text(format_args!("{}", Endless));
    assert_eq!(text, format!("{}…", "x".repeat(MAX_CELL)));
    assert_eq!(cell_text(format_args!("{:?}", vec![1; 3])), "[1, 1, 1]");
}
