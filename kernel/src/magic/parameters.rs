//! `%%parameters`: the cell papermill injects (kernelspec/papermill writes it), each `NAME = JSON`
//! line made a Rust `let` of the type the notebook's own `parameters` cell gave NAME, so that
//! `let lr: f64 = 0.1;` run with `-p lr 1` gets `1.0_f64`, not an `i32` that breaks every later use.

use super::cell::{Cell, CellMagic};
use super::Host;
use crate::protocol::ErrorContent;
use serde_json::Value;
use std::collections::BTreeMap;

/// `%%parameters`'s handler: the body becomes typed `let`s, one per line, so a compile error
/// names the parameter's own line.
pub struct ParametersCell;

impl CellMagic for ParametersCell {
    fn code(&mut self, host: &mut Host<'_>, cell: &Cell<'_>) -> Result<String, ErrorContent> {
        let declared = host.session.variables();
        let code = lets(cell.body(), cell.magic_lines + 1, &declared).map_err(|e| {
            ErrorContent::new("ParameterError", format!("{e}\n(a `%%parameters` line is `NAME = JSON`)"))
        })?;
        host.session.set_cell_lines(Some(crate::session::errors::CellLines::body(cell.magic_lines)));
        Ok(code)
    }
}

/// The body's `let`s, a line each (blank for blank and `//` lines), given the notebook's
/// variables and their types; the error names the parameter, its line in the cell (the body's
/// first is `first`) and why.
pub fn lets(body: &str, first: usize, declared: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            out.push(String::new());
            continue;
        }
        let at = format!("line {}", first + i);
        let (name, text) = line.split_once('=').ok_or_else(|| format!("{at}: `{line}` has no `=`"))?;
        let name = name.trim();
        if !is_ident(name) {
            return Err(format!("{at}: `{name}` is not a Rust variable name"));
        }
        let value = parse_value(text.trim()).map_err(|e| format!("parameter `{name}` ({at}): {e}"))?;
        let (ty, written) = match declared.get(name) {
            Some(t) => (Ty::parse(t), t.clone()),
            None => {
                let ty = infer(&value).map_err(|e| format!("parameter `{name}` ({at}) is not declared, and {e}"))?;
                let written = ty.to_string();
                (ty, written)
            }
        };
        let expr = literal(&ty, &value).map_err(|e| format!("parameter `{name}` ({at}) is `{written}`: {e}"))?;
        out.push(format!("let {name}: {written} = {expr};"));
    }
    Ok(out.join("\n"))
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic()) && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// JSON, and the non-finite floats Python's `json.dumps` writes, which JSON itself lacks.
fn parse_value(text: &str) -> Result<Value, String> {
    match text {
        "NaN" | "Infinity" | "-Infinity" => Ok(Value::String(format!("\u{0}{text}"))),
        _ => serde_json::from_str(text).map_err(|e| format!("`{text}` is not JSON ({e})")),
    }
}

/// A non-finite float, carried as a marked string from [`parse_value`].
fn non_finite(v: &Value) -> Option<&'static str> {
    match v.as_str()? {
        "\u{0}NaN" => Some("NAN"),
        "\u{0}Infinity" => Some("INFINITY"),
        "\u{0}-Infinity" => Some("NEG_INFINITY"),
        _ => None,
    }
}

/// The types a parameter can be given as, read from a type name as the notebook stores it.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Int(&'static str),
    Float(&'static str),
    Bool,
    Char,
    String,
    Str,
    Vec(Box<Ty>),
    Option(Box<Ty>),
    /// `HashMap` or `BTreeMap`, keyed by `String` (or `&str`, the flag).
    Map(&'static str, bool, Box<Ty>),
    Json,
    /// Any other type: no JSON value is given as one.
    Other,
}

const INTS: [&str; 12] = ["i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize"];

impl Ty {
    fn parse(text: &str) -> Ty {
        let tokens = tokenize(text);
        let mut pos = 0;
        match parse_ty(&tokens, &mut pos) {
            Some(ty) if pos == tokens.len() => ty,
            _ => Ty::Other,
        }
    }
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Int(t) | Ty::Float(t) => f.write_str(t),
            Ty::Bool => f.write_str("bool"),
            Ty::Char => f.write_str("char"),
            Ty::String => f.write_str("String"),
            Ty::Str => f.write_str("&'static str"),
            Ty::Vec(t) => write!(f, "Vec<{t}>"),
            Ty::Option(t) => write!(f, "Option<{t}>"),
            Ty::Map(kind, _, t) => write!(f, "std::collections::{kind}<String, {t}>"),
            Ty::Json => f.write_str("serde_json::Value"),
            Ty::Other => f.write_str("_"),
        }
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '<' | '>' | ',' | '&' => out.push(c.to_string()),
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                out.push("::".into());
            }
            c if c == '\'' || c == '_' || c.is_alphanumeric() => {
                let mut word = c.to_string();
                while let Some(&d) = chars.peek().filter(|d| **d == '_' || d.is_alphanumeric()) {
                    word.push(d);
                    chars.next();
                }
                out.push(word);
            }
            other => out.push(other.to_string()),
        }
    }
    out
}

/// One type: `&['a] [mut] T`, or a path whose last segment names it, with its generics.
fn parse_ty(tokens: &[String], pos: &mut usize) -> Option<Ty> {
    let mut next = || {
        let t = tokens.get(*pos)?;
        *pos += 1;
        Some(t.as_str())
    };
    let first = next()?;
    if first == "&" {
        let mut t = tokens.get(*pos)?.as_str();
        if t.starts_with('\'') || t == "mut" {
            *pos += 1;
            t = tokens.get(*pos)?.as_str();
        }
        *pos += 1;
        return (t == "str").then_some(Ty::Str);
    }
    let mut path = vec![first.to_string()];
    while tokens.get(*pos).map(String::as_str) == Some("::") {
        *pos += 2;
        path.push(tokens.get(*pos - 1)?.clone());
    }
    let mut args = Vec::new();
    if tokens.get(*pos).map(String::as_str) == Some("<") {
        *pos += 1;
        loop {
            args.push(parse_ty(tokens, pos)?);
            *pos += 1;
            match tokens.get(*pos - 1)?.as_str() {
                "," => continue,
                ">" => break,
                _ => return None,
            }
        }
    }
    let last = path.last()?.as_str();
    let std_path = path.len() == 1 || matches!(path[0].as_str(), "std" | "alloc" | "core");
    let json = last == "Value" && (path.len() == 1 || path[0] == "serde_json");
    Some(match (last, args.as_slice()) {
        _ if json && args.is_empty() => Ty::Json,
        _ if !std_path => Ty::Other,
        (t, []) if INTS.contains(&t) => Ty::Int(INTS.into_iter().find(|i| *i == t)?),
        ("f64", []) => Ty::Float("f64"),
        ("f32", []) => Ty::Float("f32"),
        ("bool", []) => Ty::Bool,
        ("char", []) => Ty::Char,
        ("String", []) => Ty::String,
        ("Vec", [t]) => Ty::Vec(Box::new(t.clone())),
        ("Option", [t]) => Ty::Option(Box::new(t.clone())),
        ("HashMap" | "BTreeMap", [k @ (Ty::String | Ty::Str), v]) => {
            Ty::Map(if last == "HashMap" { "HashMap" } else { "BTreeMap" }, *k == Ty::Str, Box::new(v.clone()))
        }
        _ => Ty::Other,
    })
}

/// The type an undeclared parameter takes from its value.
fn infer(v: &Value) -> Result<Ty, String> {
    Ok(match v {
        Value::Bool(_) => Ty::Bool,
        Value::Number(n) if n.is_f64() => Ty::Float("f64"),
        Value::Number(_) => Ty::Int("i64"),
        _ if non_finite(v).is_some() => Ty::Float("f64"),
        Value::String(_) => Ty::String,
        Value::Array(items) => {
            let mut elem: Option<Ty> = None;
            for item in items {
                let t = infer(item)?;
                elem = Some(match (elem, t) {
                    (None, t) => t,
                    (Some(a), b) if a == b => a,
                    (Some(Ty::Int(_) | Ty::Float(_)), Ty::Int(_) | Ty::Float(_)) => Ty::Float("f64"),
                    (Some(a), b) => return Err(format!("its list mixes {a} and {b}: declare its type")),
                });
            }
            Ty::Vec(Box::new(elem.ok_or("an empty list has no element type: declare it")?))
        }
        Value::Null => return Err("null has no type: declare it (for example `Option<i64>`)".into()),
        Value::Object(_) => {
            return Err("a dict needs a declared type (`serde_json::Value` or `HashMap<String, T>`)".into())
        }
    })
}

/// The Rust expression of `v` as a `ty`, or why it does not fit.
fn literal(ty: &Ty, v: &Value) -> Result<String, String> {
    let shown = || v.to_string();
    let mismatch = |what: &str| Err(format!("{} is not {what}", shown()));
    match ty {
        Ty::Int(t) => {
            let Value::Number(n) = v else { return mismatch("an integer") };
            let fits = match (n.as_i64(), n.as_u64()) {
                (_, Some(u)) => int_fits(t, u as i128),
                (Some(i), _) => int_fits(t, i as i128),
                _ => return mismatch("an integer"),
            };
            if !fits {
                return Err(format!("{n} does not fit in {t}"));
            }
            Ok(format!("{n}{t}"))
        }
        Ty::Float(t) => {
            if let Some(special) = non_finite(v) {
                return Ok(format!("{t}::{special}"));
            }
            let Some(x) = v.as_f64().filter(|_| v.is_number()) else { return mismatch("a number") };
            if *t == "f32" && x.is_finite() && (x as f32).is_infinite() {
                return Err(format!("{x} does not fit in f32"));
            }
            Ok(format!("{x:?}_{t}"))
        }
        Ty::Bool => v.as_bool().map(|b| b.to_string()).ok_or(()).or_else(|_| mismatch("true or false")),
        Ty::Char => match v.as_str().filter(|s| non_finite(v).is_none() && s.chars().count() == 1) {
            Some(s) => Ok(format!("{:?}", s.chars().next().unwrap_or_default())),
            None => mismatch("a one-character string"),
        },
        Ty::String | Ty::Str => match v.as_str().filter(|_| non_finite(v).is_none()) {
            Some(s) if *ty == Ty::String => Ok(format!("String::from({s:?})")),
            Some(s) => Ok(format!("{s:?}")),
            None => mismatch("a string"),
        },
        Ty::Vec(t) => {
            let Value::Array(items) = v else { return mismatch("a list") };
            let items: Result<Vec<_>, _> =
                items.iter().enumerate().map(|(i, x)| literal(t, x).map_err(|e| format!("item {i}: {e}"))).collect();
            Ok(format!("vec![{}]", items?.join(", ")))
        }
        Ty::Option(t) => match v {
            Value::Null => Ok("None".into()),
            _ => Ok(format!("Some({})", literal(t, v)?)),
        },
        Ty::Map(kind, str_keys, t) => {
            let Value::Object(entries) = v else { return mismatch("a dict") };
            let mut pairs = Vec::new();
            for (k, x) in entries {
                let key = if *str_keys { format!("{k:?}") } else { format!("String::from({k:?})") };
                pairs.push(format!("({key}, {})", literal(t, x).map_err(|e| format!("key {k:?}: {e}"))?));
            }
            Ok(format!("std::collections::{kind}::from([{}])", pairs.join(", ")))
        }
        Ty::Json => {
            if non_finite(v).is_some() {
                return Err("JSON has no NaN or infinity".into());
            }
            let text = v.to_string();
            let hashes = "#".repeat((1..).find(|n| !text.contains(&format!("\"{}", "#".repeat(*n)))).unwrap_or(1));
            Ok(format!("::serde_json::from_str::<::serde_json::Value>(r{hashes}\"{text}\"{hashes}).unwrap()"))
        }
        Ty::Other => {
            Err("papermill can set integers, floats, bool, char, String, &str, and Vec, Option, HashMap or BTreeMap \
             (String keys) of them, and serde_json::Value"
                .into())
        }
    }
}

fn int_fits(t: &str, x: i128) -> bool {
    let (lo, hi): (i128, i128) = match t {
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" | "u128" => (0, u64::MAX.into()),
        _ => (i64::MIN.into(), u64::MAX.into()),
    };
    (lo..=hi).contains(&x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(body: &str, declared: &[(&str, &str)]) -> Result<String, String> {
        lets(body, 1, &declared.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect())
    }

    #[test]
    fn a_value_takes_the_declared_type() {
        let declared = [
            ("lr", "f64"),
            ("epochs", "usize"),
            ("name", "String"),
            ("tag", "&'static str"),
            ("sizes", "alloc::vec::Vec<u32>"),
            ("seed", "Option<u64>"),
            ("on", "bool"),
            ("opts", "serde_json::Value"),
            ("w", "std::collections::HashMap<String, f32>"),
        ];
        let body =
            "// Parameters\nlr = 1\nepochs = 3\nname = \"a \\\"b\\\"\"\ntag = \"t\"\nsizes = [8, 16]\nseed = null\n\
                    on = false\nopts = {\"k\": [1, \"x\"]}\nw = {\"a\": 0.5}";
        let code = run(body, &declared).unwrap();
        let lines: Vec<_> = code.lines().collect();
        assert_eq!(lines[0], "", "a comment keeps its line");
        assert_eq!(lines[1], "let lr: f64 = 1.0_f64;");
        assert_eq!(lines[2], "let epochs: usize = 3usize;");
        assert_eq!(lines[3], r#"let name: String = String::from("a \"b\"");"#);
        assert_eq!(lines[4], r#"let tag: &'static str = "t";"#);
        assert_eq!(lines[5], "let sizes: alloc::vec::Vec<u32> = vec![8u32, 16u32];");
        assert_eq!(lines[6], "let seed: Option<u64> = None;");
        assert_eq!(lines[7], "let on: bool = false;");
        assert_eq!(
            lines[8],
            r##"let opts: serde_json::Value = ::serde_json::from_str::<::serde_json::Value>(r#"{"k":[1,"x"]}"#).unwrap();"##
        );
        assert_eq!(
            lines[9],
            r#"let w: std::collections::HashMap<String, f32> = std::collections::HashMap::from([(String::from("a"), 0.5_f32)]);"#
        );
    }

    #[test]
    fn an_undeclared_value_takes_its_own_type() {
        let code = run("a = 2\nb = 0.5\nc = \"s\"\nd = [1, 2.5]\ne = NaN", &[]).unwrap();
        assert_eq!(
            code,
            "let a: i64 = 2i64;\nlet b: f64 = 0.5_f64;\nlet c: String = String::from(\"s\");\n\
             let d: Vec<f64> = vec![1.0_f64, 2.5_f64];\nlet e: f64 = f64::NAN;"
        );
    }

    #[test]
    fn a_value_that_does_not_fit_names_the_parameter_and_why() {
        let e = run("x = 1\nepochs = 2.5", &[("epochs", "usize")]).unwrap_err();
        assert_eq!(e, "parameter `epochs` (line 2) is `usize`: 2.5 is not an integer");
        let e = run("n = 300", &[("n", "u8")]).unwrap_err();
        assert!(e.contains("300 does not fit in u8"), "{e}");
        let e = run("n = -1", &[("n", "usize")]).unwrap_err();
        assert!(e.contains("-1 does not fit in usize"), "{e}");
        let e = run("v = [1, \"a\"]", &[("v", "Vec<i32>")]).unwrap_err();
        assert!(e.contains("item 1: \"a\" is not an integer"), "{e}");
        let e = run("m = 1", &[("m", "Model")]).unwrap_err();
        assert!(e.contains("is `Model`: papermill can set"), "{e}");
        let e = run("s = 3", &[("s", "String")]).unwrap_err();
        assert!(e.contains("3 is not a string"), "{e}");
        assert!(run("d = {}", &[]).unwrap_err().contains("not declared, and a dict needs a declared type"));
        assert!(run("z = [1, \"a\"]", &[]).unwrap_err().contains("mixes i64 and String"));
        assert!(run("lr 0.1", &[]).unwrap_err().contains("line 1: `lr 0.1` has no `=`"));
        assert!(run("lr = 0.1.2", &[]).unwrap_err().contains("is not JSON"));
        assert!(run("2x = 1", &[]).unwrap_err().contains("`2x` is not a Rust variable name"));
    }
}
