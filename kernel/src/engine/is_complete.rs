//! `is_complete_request`: a real scan of Rust's lexical structure plus a `syn` parse.
//!
//! Unclosed brackets, strings or block comments mean `incomplete`; a closer with no opener (or
//! the wrong one) means `invalid`; balanced code that `syn` says ends too early (`let x = 1 +`)
//! is `incomplete`; everything else is `complete` and left to rustc to judge.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completeness {
    Complete,
    Incomplete { indent: String },
    Invalid,
}

impl Completeness {
    pub fn status(&self) -> &'static str {
        match self {
            Completeness::Complete => "complete",
            Completeness::Incomplete { .. } => "incomplete",
            Completeness::Invalid => "invalid",
        }
    }
}

enum Scan {
    Balanced,
    Open(usize),
    Stray,
}

/// Walks the code once, skipping strings, chars and comments, tracking bracket depth.
fn scan(code: &str) -> Scan {
    let b = code.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 1;
                i += 2;
                while i < b.len() && depth > 0 {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                if depth > 0 {
                    return Scan::Open(stack.len() + 1);
                }
                continue;
            }
            b'r' | b'b' | b'c' if is_raw_string_start(b, i) => {
                match skip_raw_string(b, i) {
                    Some(end) => i = end,
                    None => return Scan::Open(stack.len() + 1),
                }
                continue;
            }
            b'"' => {
                i += 1;
                let mut closed = false;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            closed = true;
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                if !closed {
                    return Scan::Open(stack.len() + 1);
                }
                continue;
            }
            b'\'' => {
                // A char literal closes within a few bytes; otherwise it is a lifetime or label.
                if b.get(i + 1) == Some(&b'\\') {
                    if let Some(off) = b[i + 2..].iter().take(12).position(|&x| x == b'\'') {
                        i += 3 + off;
                        continue;
                    }
                } else if let Some(ch) = code[i + 1..].chars().next() {
                    let after = i + 1 + ch.len_utf8();
                    if b.get(after) == Some(&b'\'') {
                        i = after + 1;
                        continue;
                    }
                }
                i += 1;
                continue;
            }
            b'(' | b'[' | b'{' => stack.push(c),
            b')' | b']' | b'}' => {
                let want = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if stack.pop() != Some(want) {
                    return Scan::Stray;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if stack.is_empty() {
        Scan::Balanced
    } else {
        Scan::Open(stack.len())
    }
}

fn is_raw_string_start(b: &[u8], i: usize) -> bool {
    // Only at a token start: `r"`, `r#"`, `br"`, `cr#"`.
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return false;
    }
    let mut j = i;
    if b[j] == b'b' || b[j] == b'c' {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return false;
    }
    j += 1;
    while b.get(j) == Some(&b'#') {
        j += 1;
    }
    b.get(j) == Some(&b'"')
}

fn skip_raw_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while b[j] != b'r' {
        j += 1;
    }
    j += 1;
    let mut hashes = 0;
    while b[j] == b'#' {
        hashes += 1;
        j += 1;
    }
    j += 1;
    while j < b.len() {
        if b[j] == b'"' && b[j + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    None
}

/// Judges a cell. Magic and `:command` lines are not Rust and are skipped.
pub fn is_complete(code: &str) -> Completeness {
    let rust: String = code
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with('%') || t.starts_with(':'))
        })
        .collect::<Vec<_>>()
        .join("\n");
    match scan(&rust) {
        Scan::Stray => Completeness::Invalid,
        Scan::Open(depth) => Completeness::Incomplete { indent: "    ".repeat(depth) },
        Scan::Balanced => {
            if ends_too_early(&rust) {
                Completeness::Incomplete { indent: String::new() }
            } else {
                Completeness::Complete
            }
        }
    }
}

/// True when syn fails only because the input ran out (a dangling operator or `let x =`).
/// Code too deeply nested to parse is left to rustc (`complete`).
fn ends_too_early(code: &str) -> bool {
    use syn::parse::Parser;
    let wrapped = format!("{{\n{code}\n}}");
    crate::syntax::analyse(&wrapped, |wrapped| {
        let Ok(tokens) = wrapped.parse::<proc_macro2::TokenStream>() else {
            return false;
        };
        match syn::Block::parse_within.parse2(strip_block(tokens)) {
            Ok(_) => false,
            Err(e) => e.to_string().contains("unexpected end of input"),
        }
    })
    .unwrap_or(false)
}

fn strip_block(tokens: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    match tokens.into_iter().next() {
        Some(proc_macro2::TokenTree::Group(g)) => g.stream(),
        _ => proc_macro2::TokenStream::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let table: &[(&str, &str)] = &[
            ("let x = 1;", "complete"),
            ("x + 1", "complete"),
            ("", "complete"),
            ("fn f() {", "incomplete"),
            ("let v = vec![1,", "incomplete"),
            ("let s = \"abc", "incomplete"),
            ("let s = r#\"abc\"", "incomplete"),
            ("let s = r#\"a\"b\"#;", "complete"),
            ("/* open comment", "incomplete"),
            ("/* a /* nested */ still", "incomplete"),
            ("let x = 1 +", "incomplete"),
            ("}", "invalid"),
            ("let a = (1, 2];", "invalid"),
            ("let c = '{';", "complete"),
            ("let c = '\\'';", "complete"),
            ("fn f<'a>(x: &'a str) -> &'a str { x }", "complete"),
            ("let s = \"}\";", "complete"),
            ("// }\nlet x = 1;", "complete"),
            (":dep serde\nlet x = 1;", "complete"),
            ("%env A=1\nfn g() {", "incomplete"),
            ("struct S { a: i32 }", "complete"),
            ("let x = b\"{\";", "complete"),
            ("let bad = ;", "complete"),
        ];
        for (code, want) in table {
            assert_eq!(is_complete(code).status(), *want, "{code:?}");
        }
    }

    #[test]
    fn indent_follows_depth() {
        assert_eq!(is_complete("fn f() {\n    if x {"), Completeness::Incomplete { indent: "        ".into() });
    }
}
