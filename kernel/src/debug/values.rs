//! The Variables panel's values while no cell is stopped: a hidden cell prints each
//! variable's `Debug` text, cut at [`MAX_CHARS`] (the formatting stops there, as a writer that
//! refuses more ends it), for the types that have one; a `Vec` shows its first elements and
//! its length. Past a time budget the rest are left blank, and a panic in one is caught.

use std::collections::BTreeMap;

/// The longest value shown, in bytes of its text.
pub const MAX_CHARS: usize = 100;
/// The most variables read; past it, the rest are blank.
pub const MAX_VARS: usize = 500;
/// How long the hidden cell may spend formatting, in milliseconds (checked between variables).
pub const BUDGET_MS: u64 = 200;
/// A `Vec`'s elements shown before its length.
const VEC_HEAD: usize = 16;
/// Separates a name from its value in the cell's output (never in either), and the same as
/// the generated code writes it.
const SEP: char = '\u{1}';
const SEP_IN_CODE: &str = "\\u{1}";

/// The hidden cell for variables `types` (name to type, as evcxr has them). Its items are in a
/// block, so they do not join the notebook's.
pub fn code(types: &BTreeMap<String, String>) -> String {
    let mut code = format!(
        r#"{{
struct DrymlShow<'a, T: ?Sized>(&'a T);
struct DrymlCut {{ s: String, left: usize }}
impl ::std::fmt::Write for DrymlCut {{
    fn write_str(&mut self, t: &str) -> ::std::fmt::Result {{
        if t.len() <= self.left {{ self.s.push_str(t); self.left -= t.len(); return Ok(()); }}
        let mut end = self.left;
        while !t.is_char_boundary(end) {{ end -= 1; }}
        self.s.push_str(&t[..end]);
        self.left = 0;
        Err(::std::fmt::Error)
    }}
}}
trait DrymlText {{ fn dryml_text(&self) -> Option<String>; }}
impl<T: ::std::fmt::Debug + ?Sized> DrymlText for DrymlShow<'_, T> {{
    fn dryml_text(&self) -> Option<String> {{
        let mut c = DrymlCut {{ s: String::new(), left: {MAX_CHARS} }};
        let cut = ::std::fmt::Write::write_fmt(&mut c, format_args!("{{:?}}", self.0)).is_err();
        let mut s: String = c.s.chars().map(|ch| if ch.is_control() {{ ' ' }} else {{ ch }}).collect();
        if cut {{ s.push('…'); }}
        Some(s)
    }}
}}
trait DrymlOpaque {{ fn dryml_text(&self) -> Option<String>; }}
impl<T: ?Sized> DrymlOpaque for &DrymlShow<'_, T> {{ fn dryml_text(&self) -> Option<String> {{ None }} }}
let dryml_t0 = ::std::time::Instant::now();
let dryml_hook = ::std::panic::take_hook();
::std::panic::set_hook(Box::new(|_| {{}}));
let mut dryml_out = String::new();
"#
    );
    // One call site for the formatting and the catching: the closures' code is all that is
    // built per variable.
    code.push_str("let dryml_vars: &[(&str, &dyn Fn() -> Option<String>)] = &[\n");
    for (name, ty) in types.iter().take(MAX_VARS) {
        let text = if is_vec(ty) {
            format!("(&DrymlShow(&{name}[..{name}.len().min({VEC_HEAD})])).dryml_text().map(|t| format!(\"{{t}} (len {{}})\", {name}.len()))")
        } else {
            format!("(&DrymlShow(&{name})).dryml_text()")
        };
        code.push_str(&format!("    (\"{name}\", &|| {text}),\n"));
    }
    code.push_str(&format!(
        "];\nfor (name, text) in dryml_vars {{\n    if dryml_t0.elapsed() > ::std::time::Duration::from_millis({BUDGET_MS}) {{ break; }}\n    if let Ok(Some(t)) = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| text())) {{ dryml_out.push_str(&format!(\"{{name}}{SEP_IN_CODE}{{t}}\\n\")); }}\n}}\n"
    ));
    code.push_str("::std::panic::set_hook(dryml_hook);\nprint!(\"{dryml_out}\");\n}\n");
    code
}

/// A `Vec` by evcxr's name of its type.
fn is_vec(ty: &str) -> bool {
    ["Vec<", "std::vec::Vec<", "alloc::vec::Vec<"].iter().any(|p| ty.starts_with(p))
}

/// The values in the hidden cell's output.
pub fn parse(out: &str) -> BTreeMap<String, String> {
    out.lines().filter_map(|l| l.split_once(SEP)).map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_is_read_back_and_a_vec_shows_its_head_and_length() {
        let types: BTreeMap<String, String> = [("v", "Vec<f32>"), ("x", "i32")].map(|(n, t)| (n.to_string(), t.to_string())).into();
        let code = code(&types);
        assert!(code.contains("(\"v\", &|| (&DrymlShow(&v[..v.len().min(16)]))") && code.contains("(\"x\", &|| (&DrymlShow(&x)).dryml_text())"), "{code}");
        let out = format!("v{SEP}[1.5, 2.5] (len 2)\nx{SEP}5\nnoise without a separator\n");
        assert_eq!(parse(&out), [("v", "[1.5, 2.5] (len 2)"), ("x", "5")].map(|(n, v)| (n.to_string(), v.to_string())).into());
    }
}
