//! The Variables panel's values while no cell is stopped: a hidden cell prints each
//! variable's `Debug` text, cut at [`MAX_CHARS`] (the formatting stops there, as a writer that
//! refuses more ends it); a `Vec` shows its first elements and its length. Only types that
//! print cheaply are read ([`prints_cheaply`]: the standard library's numbers, text and
//! collections of them, tensors): a user's `Debug` could run for ever, and the panel's request
//! waits for it. Past a time budget the rest are left blank, and a panic in one is caught.

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
    for (name, ty) in types.iter().filter(|(_, ty)| prints_cheaply(ty)).take(MAX_VARS) {
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

/// The names, last path segment, of the types whose `Debug` is the standard library's (or a
/// tensor library's, which prints its shape) and so costs what its size does.
const CHEAP: &[&str] = &[
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32", "f64", "bool",
    "char", "str", "String", "Vec", "VecDeque", "HashMap", "BTreeMap", "HashSet", "BTreeSet", "Option", "Result",
    "Box", "Rc", "Arc", "Duration", "PathBuf", "Path", "Tensor", "mut", "dyn",
];

/// Whether a type (evcxr's name of it) is made only of [`CHEAP`] types: tuples, arrays,
/// references and paths of them.
pub fn prints_cheaply(ty: &str) -> bool {
    ty.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '\''))
        .filter(|t| !t.is_empty() && !t.starts_with('\'') && !t.chars().all(|c| c.is_ascii_digit()))
        .all(|t| CHEAP.contains(&t.rsplit("::").next().unwrap_or(t)))
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
        let types: BTreeMap<String, String> =
            [("v", "Vec<f32>"), ("x", "i32")].map(|(n, t)| (n.to_string(), t.to_string())).into();
        let code = code(&types);
        assert!(
            code.contains("(\"v\", &|| (&DrymlShow(&v[..v.len().min(16)]))")
                && code.contains("(\"x\", &|| (&DrymlShow(&x)).dryml_text())"),
            "{code}"
        );
        let out = format!("v{SEP}[1.5, 2.5] (len 2)\nx{SEP}5\nnoise without a separator\n");
        assert_eq!(
            parse(&out),
            [("v", "[1.5, 2.5] (len 2)"), ("x", "5")].map(|(n, v)| (n.to_string(), v.to_string())).into()
        );
    }

    #[test]
    fn only_types_that_print_cheaply_are_read() {
        for ty in [
            "i32",
            "Vec<f32>",
            "std::collections::HashMap<String, (u8, [f64; 3])>",
            "Option<&'static str>",
            "tch::Tensor",
            "()",
        ] {
            assert!(prints_cheaply(ty), "{ty}");
        }
        for ty in ["Net", "Vec<Net>", "dryml::models::Pipe<A, B>", "HashMap<String, Config>"] {
            assert!(!prints_cheaply(ty), "{ty}");
        }
        let types: BTreeMap<String, String> =
            [("net", "Net"), ("x", "i32")].map(|(n, t)| (n.to_string(), t.to_string())).into();
        assert!(!code(&types).contains("&net"));
    }
}
