//! How a cell's final expression is shown, in one build (evcxr patch, second part): every Debug
//! type gets an `evcxr_display` that prints its Debug form (a type's own inherent one wins), and
//! once dryml is in, a value with a table (`dryml::display::ShowTable`) shows that first. evcxr's
//! two tries (its `evcxr_display`, then Debug) stay the fallback: about 70 ms of a 220 ms cell.

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

/// The code before and after a final expression: with `tables` (dryml is in), its table first.
pub fn around(tables: bool) -> Option<(String, String)> {
    Some(match tables {
        true => (
            format!("{{ {DISPLAY_OR_DEBUG} {NO_TABLE} {SHOW_TABLES} let evcxr_value = &("),
            "); if !evcxr_value.evcxr_table() { (*evcxr_value).evcxr_display(); } }".to_owned(),
        ),
        false => (format!("{{ {DISPLAY_OR_DEBUG} ("), ").evcxr_display(); }".to_owned()),
    })
}
