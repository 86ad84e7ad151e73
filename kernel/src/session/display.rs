//! How a cell's final expression is shown, in one build (evcxr patch, second part): every Debug
//! type gets an `evcxr_display` that prints its Debug form (a type's own inherent one wins), and
//! once dryml is in, a value with a table (`dryml::display::ShowTable`) shows that first. evcxr's
//! two tries (its `evcxr_display`, then Debug) stay the fallback: about 70 ms of a 220 ms cell.
//! A notebook's own polars, ndarray or Arrow, of a release other than dryml's, gets the same
//! tables from code built against that release in each cell ([`POLARS`], [`NDARRAY`], [`ARROW`]).

/// `evcxr_display` for every Debug type: the bytes `evcxr_send_text_plain` writes, in one locked
/// `println!`, about 15 ms cheaper to compile per cell than that function and its `format!`.
const DISPLAY_OR_DEBUG: &str = "trait EvcxrDisplayOrDebug { fn evcxr_display(&self); } \
    impl<T: std::fmt::Debug + ?Sized> EvcxrDisplayOrDebug for T { fn evcxr_display(&self) { \
    println!(\"EVCXR_BEGIN_CONTENT text/plain\\n{:?}\\nEVCXR_END_CONTENT\", self); } }";

/// `ShowTable` is implemented for `T`; this fallback for `&T` is found one autoref later and
/// declines, so a value without a table is displayed as above.
const NO_TABLE: &str =
    "trait EvcxrNoTable { fn evcxr_table(&self) -> bool { false } } impl<T: ?Sized> EvcxrNoTable for &T {}";

const SHOW_TABLES: &str = "#[allow(unused_imports)] use ::dryml::display::ShowTable as _;";

/// Tables for the frames and series of the cell crate's own `polars`, whatever its release: only
/// API that polars has kept for years (`get_column_names`, `column`, `dtype`, `get`, `height`;
/// not `get_columns`, renamed in 0.53), and `get`'s value read whether it comes wrapped in a
/// `Result` (0.30 on) or not. The same header and caption as dryml's own polars tables.
const POLARS: &str = "trait EvcxrPolarsCell { fn evcxr_cell(self) -> String; } \
    impl EvcxrPolarsCell for ::polars::prelude::AnyValue<'_> { fn evcxr_cell(self) -> String { \
    if matches!(self, ::polars::prelude::AnyValue::Null) { return \"null\".into(); } \
    let t = self.to_string(); match t.strip_prefix('\"').and_then(|s| s.strip_suffix('\"')) { \
    Some(s) => s.to_string(), None => t } } } \
    impl<E: std::fmt::Display> EvcxrPolarsCell for Result<::polars::prelude::AnyValue<'_>, E> { \
    fn evcxr_cell(self) -> String { match self { Ok(v) => v.evcxr_cell(), Err(e) => format!(\"<{e}>\") } } } \
    trait EvcxrPolarsTable { fn evcxr_table(&self) -> bool; } \
    impl EvcxrPolarsTable for ::polars::prelude::DataFrame { fn evcxr_table(&self) -> bool { \
    let n: Vec<String> = self.get_column_names().iter().map(|n| n.to_string()).collect(); \
    ::dryml::display::Table::build(format!(\"DataFrame: {} rows × {} columns\", self.height(), self.width()), \
    (self.height(), self.width()), |j| match self.column(&n[j]) { Ok(c) => format!(\"{} ({})\", n[j], c.dtype()), \
    Err(_) => n[j].clone() }, |i, j| match self.column(&n[j]) { Ok(c) => c.get(i).evcxr_cell(), \
    Err(e) => format!(\"<{e}>\") }).evcxr_display(); true } } \
    impl EvcxrPolarsTable for ::polars::prelude::Series { fn evcxr_table(&self) -> bool { \
    ::dryml::display::Table::build(format!(\"Series: {} rows of {}\", self.len(), self.dtype()), \
    (self.len(), 1), |_| format!(\"{} ({})\", self.name(), self.dtype()), |i, _| self.get(i).evcxr_cell()) \
    .evcxr_display(); true } }";

/// Tables for the cell crate's own `ndarray` arrays of any rank, element type and storage,
/// through `dryml::display::array_table` as dryml's own: `shape`, `view`, `into_dyn` and `get`
/// by a slice of indices, which ndarray has had since 0.13.
const NDARRAY: &str = "trait EvcxrNdarrayTable { fn evcxr_table(&self) -> bool; } \
    impl<A: std::fmt::Display, S: ::ndarray::Data<Elem = A>, D: ::ndarray::Dimension> EvcxrNdarrayTable \
    for ::ndarray::ArrayBase<S, D> { fn evcxr_table(&self) -> bool { let v = self.view().into_dyn(); \
    ::dryml::display::array_table(self.shape(), |i| v.get(i), self).evcxr_display(); true } }";

/// Tables for the cell crate's own `arrow` record batches, as dryml's: a column per field, its
/// type in the header, `null` for nulls; a value as Arrow's own display writes it
/// (`util::display::array_value_to_string`, in every release since 2.0).
const ARROW: &str = "trait EvcxrArrowTable { fn evcxr_table(&self) -> bool; } \
    impl EvcxrArrowTable for ::arrow::record_batch::RecordBatch { fn evcxr_table(&self) -> bool { \
    let s = self.schema(); ::dryml::display::Table::build(format!(\"RecordBatch: {} rows × {} columns\", \
    self.num_rows(), self.num_columns()), (self.num_rows(), self.num_columns()), \
    |j| format!(\"{} ({})\", s.field(j).name(), s.field(j).data_type()), |i, j| { let c = self.column(j); \
    if ::arrow::array::Array::is_null(c.as_ref(), i) { \"null\".to_string() } else { \
    ::arrow::util::display::array_value_to_string(c, i).unwrap_or_else(|e| format!(\"<{e}>\")) } }) \
    .evcxr_display(); true } }";

/// What a notebook's values are shown with.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tables {
    /// dryml is in: a value with a table shows it.
    pub shown: bool,
    /// The cell crate has a polars of its own, not dryml's: its frames show as tables too.
    pub polars: bool,
    /// The cell crate has an ndarray of another release than dryml's: its arrays show too.
    pub ndarray: bool,
    /// The cell crate has an Arrow of another release than dryml's: its batches show too.
    pub arrow: bool,
}

impl Tables {
    /// The code before and after a final expression.
    pub fn around(self) -> Option<(String, String)> {
        if !self.shown {
            return Some((format!("{{ {DISPLAY_OR_DEBUG} ("), ").evcxr_display(); }".to_owned()));
        }
        let own: String = [(self.polars, POLARS), (self.ndarray, NDARRAY), (self.arrow, ARROW)]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, code)| format!("{code} "))
            .collect();
        Some((
            format!("{{ {DISPLAY_OR_DEBUG} {NO_TABLE} {SHOW_TABLES} {own}let evcxr_value = &("),
            "); if !evcxr_value.evcxr_table() { (*evcxr_value).evcxr_display(); } }".to_owned(),
        ))
    }
}
