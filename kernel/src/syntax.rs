//! Reading users' code: the words a cell names, and parsing with `syn` without letting it
//! overflow a stack: syn (and dropping what it built) recurses once per level of nesting, so code
//! nested deeper than [`MAX_DEPTH`] is not parsed at all, and what is parsed is parsed on a
//! thread of its own with a large stack, never on a tokio worker or the engine's thread.

use std::collections::BTreeSet;

/// Deeper than this (brackets, plus a run of prefix operators such as `--!x`), code is not
/// analysed; rustc still judges it when the cell runs.
pub const MAX_DEPTH: usize = 256;
/// Reserved, not committed: only the pages a parse touches are used.
const STACK_BYTES: usize = 256 << 20;

/// Code that was too deeply nested to analyse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep(pub usize);

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the code is nested {} levels deep, over the {MAX_DEPTH} the kernel analyses", self.0)
    }
}

/// The identifiers `code` mentions (over-inclusive: fields, paths and words in strings count).
pub fn identifiers(code: &str) -> BTreeSet<&str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// Whether `body` ends with an expression (its value is shown) rather than a statement.
pub fn ends_with_value(body: &str) -> Result<bool, TooDeep> {
    with_block(body, |b| matches!(b.stmts.last(), Some(syn::Stmt::Expr(_, None)))).map(|shows| shows.unwrap_or(false))
}

/// How deep `code` nests: open brackets plus the current run of prefix operators, at the
/// deepest point. Brackets inside strings and comments count too (an over-estimate is safe).
pub fn depth(code: &str) -> usize {
    let (mut open, mut run, mut deepest) = (0usize, 0usize, 0usize);
    for c in code.chars() {
        match c {
            '(' | '[' | '{' => {
                open += 1;
                run = 0;
            }
            ')' | ']' | '}' => {
                open = open.saturating_sub(1);
                run = 0;
            }
            '-' | '!' | '*' | '&' => run += 1,
            c if c.is_whitespace() => {}
            _ => run = 0,
        }
        deepest = deepest.max(open + run);
    }
    deepest
}

/// Runs `f` (which parses with syn) on `code`, on a thread with a large stack; `TooDeep` when the
/// code nests deeper than [`MAX_DEPTH`].
pub fn analyse<T: Send>(code: &str, f: impl FnOnce(&str) -> T + Send) -> Result<T, TooDeep> {
    on_big_stack(code, checked(code)?, f)
}

/// `body` as the statements of a block, analysed by `f`.
pub fn with_block<T: Send>(body: &str, f: impl FnOnce(&syn::Block) -> T + Send) -> Result<Option<T>, TooDeep> {
    let d = checked(body)?;
    on_big_stack(&format!("{{\n{body}\n}}"), d, |code| syn::parse_str::<syn::Block>(code).ok().map(|b| f(&b)))
}

fn checked(code: &str) -> Result<usize, TooDeep> {
    let d = depth(code);
    if d > MAX_DEPTH {
        Err(TooDeep(d))
    } else {
        Ok(d)
    }
}

fn on_big_stack<T: Send>(code: &str, d: usize, f: impl FnOnce(&str) -> T + Send) -> Result<T, TooDeep> {
    let f = std::sync::Mutex::new(Some(f));
    let run = || f.lock().unwrap_or_else(|p| p.into_inner()).take().map(|f| f(code));
    std::thread::scope(|s| {
        let worker =
            std::thread::Builder::new().name("dryml-syntax".into()).stack_size(STACK_BYTES).spawn_scoped(s, run);
        match worker {
            Ok(handle) => handle.join().ok().flatten(),
            // No thread to be had: parse here, the depth being bounded.
            Err(_) => run(),
        }
    })
    .ok_or(TooDeep(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_and_prefix_runs() {
        assert_eq!(depth("let x = 1;"), 0);
        assert_eq!(depth("f(a[0], {b})"), 2);
        assert_eq!(depth("- - !x"), 3);
        assert_eq!(depth(&"(".repeat(20_000)), 20_000);
        assert_eq!(depth(")))("), 1);
    }

    #[test]
    fn values_and_statements() {
        for (body, shows) in [
            ("1 + 1", true),
            ("let a = 1;", false),
            ("for i in 0..2 {}", true),
            ("x.push(1);", false),
            ("fn f() {}", false),
            ("(", false),
        ] {
            assert_eq!(ends_with_value(body), Ok(shows), "{body}");
        }
    }

    #[test]
    fn identifiers_are_words_not_numbers() {
        let got: Vec<&str> = identifiers("a.b(c1, 2x, \"s _t\") // w").into_iter().collect();
        assert_eq!(got, ["_t", "a", "b", "c1", "s", "w"]);
    }

    #[test]
    fn deep_code_is_refused_and_shallow_code_parsed() {
        let deep = format!("let q = {}1{};", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(with_block(&deep, |b| b.stmts.len()), Err(TooDeep(5000)));
        let unary = format!("let q = {}1;", "-".repeat(100_000));
        assert!(with_block(&unary, |b| b.stmts.len()).is_err());
        // Just under the limit parses (on the big stack).
        let ok = format!("let q = {}1{};", "(".repeat(MAX_DEPTH - 1), ")".repeat(MAX_DEPTH - 1));
        assert_eq!(with_block(&ok, |b| b.stmts.len()), Ok(Some(1)));
        assert_eq!(with_block("let = ;", |b| b.stmts.len()), Ok(None));
    }
}
