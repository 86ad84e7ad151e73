//! A Rust body's notebook lines: `!cmd` shell lines and `%timeit` lines become Rust statements
//! in their place, line for line, so they run in order with the code around them and compile
//! errors keep naming the cell's own lines.
//!
//! A line is read as one of these only where a statement may start: outside strings and
//! comments, after a line ending in `;`, `{` or `}` (or at the body's start). `{expr}` in a
//! shell line is the Rust value's `Display`, where the braces hold a Rust expression (not a
//! range: `{1..5}` stays bash's); `${VAR}`, `{}`, `{a,b}` and `{{`/`}}` stay the shell's.

use crate::timeit::{timeit_options, TimeitOptions};
use crate::{MagicError, MagicKind};

/// The body with its shell and `%timeit` lines made Rust; `first_line` is the body's first
/// line in the cell (1-based), for errors.
pub fn rewrite(body: &str, first_line: usize) -> Result<String, MagicError> {
    let mut out = String::with_capacity(body.len());
    let mut lexer = Lexer::default();
    let mut at_statement = true;
    let lines: Vec<&str> = body.split_inclusive('\n').collect();
    let last_code = lines.iter().rposition(|l| !l.trim().is_empty());
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        let eol = &raw[line.len()..];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let line_no = first_line + i;
        let err = |column: usize, message: String| MagicError {
            message,
            line: line_no,
            column,
            source_line: line.to_string(),
            suggestion: None,
        };
        // evcxr's `:dep` and other commands, which come first.
        if lexer.normal() && at_statement && trimmed.starts_with(':') {
            out.push_str(raw);
            continue;
        }
        if lexer.normal() && at_statement {
            if let Some(cmd) = shell_line(trimmed) {
                let cmd = cmd.trim();
                if cmd.is_empty() {
                    return Err(err(indent.len() + 1, "`!` needs a shell command after it".into()));
                }
                out.push_str(indent);
                out.push_str(&shell_statement(cmd));
                out.push_str(eol);
                continue;
            }
            if let Some((lhs, rest)) = timeit_line(trimmed) {
                let column = indent.len() + lhs.len() + "%timeit".len() + 1;
                let (opts, expr) = timeit_options(rest).map_err(|m| err(column, format!("%timeit: {m}")))?;
                let expr = expr.trim();
                // `let r = %timeit -o f(x);`: the `;` is the `let`'s.
                let (expr, semi) = match (lhs.is_empty(), expr.strip_suffix(';')) {
                    (false, Some(e)) => (e.trim_end(), ";"),
                    (false, None) => (expr, ""),
                    // Its value is the cell's only where asked for and nothing follows.
                    (true, _) if opts.output && Some(i) == last_code => (expr, ""),
                    (true, _) => (expr, ";"),
                };
                if expr.is_empty() {
                    return Err(err(column, "%timeit: the expression to time is missing".into()));
                }
                out.push_str(&format!("{indent}{lhs}{}{semi}{eol}", timeit_call(&opts, expr)));
                continue;
            }
            if let Some(name) = other_magic(trimmed) {
                return Err(err(
                    indent.len() + 1,
                    format!("`%{name}` must come before the cell's code: line magics run first (only `%timeit` and `!` lines run in order with it)"),
                ));
            }
        }
        at_statement = lexer.line(line, at_statement);
        out.push_str(raw);
    }
    Ok(out)
}

/// The command of a `!cmd` line (not `!=`, a continued comparison).
fn shell_line(trimmed: &str) -> Option<&str> {
    let rest = trimmed.strip_prefix('!')?;
    (!rest.starts_with('=')).then_some(rest)
}

/// `%timeit ...` or `let PAT = %timeit ...`: what comes before `%timeit`, and its arguments.
fn timeit_line(trimmed: &str) -> Option<(&str, &str)> {
    let at = if trimmed.starts_with("%timeit") {
        0
    } else if trimmed.starts_with("let ") {
        let eq = trimmed.find('=')?;
        let after = trimmed[eq + 1..].trim_start();
        if !after.starts_with("%timeit") {
            return None;
        }
        trimmed.len() - after.len()
    } else {
        return None;
    };
    let rest = &trimmed[at + "%timeit".len()..];
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| (&trimmed[..at], rest))
}

/// A registered line magic's name at a line's start (`%name`, not `%` of a continued `a % b`).
fn other_magic(trimmed: &str) -> Option<&str> {
    let rest = trimmed.strip_prefix('%')?;
    let name = &rest[..rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len())];
    crate::lookup(name, MagicKind::Line).map(|m| m.name)
}

/// `dryml::__kernel::shell::line(...)` for a command, its `{expr}`s formatted in. No leading
/// `::`: evcxr takes a line starting with `:` for one of its commands.
pub fn shell_statement(cmd: &str) -> String {
    let (format, exprs) = interpolate(cmd);
    if exprs.is_empty() {
        return format!("dryml::__kernel::shell::line({:?});", unescape_braces(&format));
    }
    let args: String = exprs.iter().map(|e| format!(", ({e})")).collect();
    format!("dryml::__kernel::shell::line(&::std::format!({format:?}{args}));")
}

fn unescape_braces(format: &str) -> String {
    format.replace("{{", "{").replace("}}", "}")
}

/// The command as a `format!` string (braces of the shell's doubled) and the Rust
/// expressions its `{}`s stand for.
fn interpolate(cmd: &str) -> (String, Vec<String>) {
    let mut format = String::new();
    let mut exprs = Vec::new();
    let mut i = 0;
    let b = cmd.as_bytes();
    while i < b.len() {
        let c = b[i];
        if c == b'{' && b.get(i + 1) == Some(&b'{') {
            format.push_str("{{");
            i += 2;
            continue;
        }
        if c == b'}' && b.get(i + 1) == Some(&b'}') {
            format.push_str("}}");
            i += 2;
            continue;
        }
        if c == b'{' {
            if let Some(end) = matching_brace(b, i) {
                let inner = &cmd[i + 1..end];
                let shells = i > 0 && b[i - 1] == b'$';
                if !shells && is_rust_value(inner) {
                    format.push_str("{}");
                    exprs.push(inner.trim().to_string());
                } else {
                    format.push_str(&cmd[i..=end].replace('{', "{{").replace('}', "}}"));
                }
                i = end + 1;
                continue;
            }
        }
        let ch = cmd[i..].chars().next().unwrap_or('?');
        match ch {
            '{' => format.push_str("{{"),
            '}' => format.push_str("}}"),
            _ => format.push(ch),
        }
        i += ch.len_utf8();
    }
    (format, exprs)
}

fn matching_brace(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `{inner}` reads as a Rust value rather than shell text: an expression, not a range.
fn is_rust_value(inner: &str) -> bool {
    !inner.trim().is_empty() && matches!(syn::parse_str::<syn::Expr>(inner), Ok(e) if !matches!(e, syn::Expr::Range(_)))
}

/// The call that times `expr` as the options say, printing IPython's line.
fn timeit_call(opts: &TimeitOptions, expr: &str) -> String {
    format!("{} {expr} }})", timeit_head(opts))
}

/// The call up to its closure's `{`.
fn timeit_head(opts: &TimeitOptions) -> String {
    let number = match opts.number {
        Some(n) => format!("Some({n})"),
        None => "None".into(),
    };
    format!(
        "dryml::__kernel::timeit::line(dryml::timeit::Options {{ number: {number}, repeat: {}, quiet: {}, precision: {} }}, || {{",
        opts.repeat, opts.quiet, opts.precision
    )
}

/// `%%timeit`'s body as one timed closure, its first line beside the call's start, so its
/// lines stay the cell's.
pub fn timeit_cell(opts: &TimeitOptions, body: &str) -> String {
    let semi = if opts.output { "" } else { ";" };
    format!("{} {body}\n}}){semi}", timeit_head(opts))
}

/// Where a line leaves Rust's lexical state: strings and block comments span lines.
#[derive(Default)]
struct Lexer {
    /// Nesting depth of `/* */`.
    comment: usize,
    /// Inside a string: `None` for `"`, `Some(n)` for a raw string closed by `"` and n `#`s.
    string: Option<Option<usize>>,
}

impl Lexer {
    fn normal(&self) -> bool {
        self.comment == 0 && self.string.is_none()
    }

    /// Reads a line; returns whether a statement may start on the next one (the last code
    /// character was `;`, `{` or `}`; a blank or comment line keeps `was`).
    fn line(&mut self, line: &str, was: bool) -> bool {
        let b = line.as_bytes();
        let mut last: Option<u8> = None;
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if self.comment > 0 {
                if b[i..].starts_with(b"*/") {
                    self.comment -= 1;
                    i += 2;
                } else if b[i..].starts_with(b"/*") {
                    self.comment += 1;
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            if let Some(raw) = self.string {
                match raw {
                    None if c == b'\\' => i += 2,
                    None if c == b'"' => {
                        self.string = None;
                        last = Some(b'"');
                        i += 1;
                    }
                    Some(n) if c == b'"' && b[i + 1..].iter().take(n).filter(|&&h| h == b'#').count() == n => {
                        self.string = None;
                        last = Some(b'"');
                        i += 1 + n;
                    }
                    _ => i += 1,
                }
                continue;
            }
            if b[i..].starts_with(b"//") {
                break;
            }
            if b[i..].starts_with(b"/*") {
                self.comment += 1;
                i += 2;
                continue;
            }
            if c == b'"' {
                self.string = Some(None);
                i += 1;
                continue;
            }
            if c == b'r' && !b[..i].last().is_some_and(|p| p.is_ascii_alphanumeric() || *p == b'_') {
                let hashes = b[i + 1..].iter().take_while(|&&h| h == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    self.string = Some(Some(hashes));
                    i += 2 + hashes;
                    continue;
                }
            }
            if c == b'\'' {
                // A char literal ('x', '\n', '"'); otherwise a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2 + b[i + 2..].iter().position(|&q| q == b'\'').map_or(b.len(), |p| p + 1);
                    last = Some(b'\'');
                    continue;
                }
                let ch = line[i + 1..].chars().next().map_or(0, char::len_utf8);
                if ch > 0 && b.get(i + 1 + ch) == Some(&b'\'') {
                    i += 2 + ch;
                    last = Some(b'\'');
                    continue;
                }
            }
            if !c.is_ascii_whitespace() {
                last = Some(c);
            }
            i += 1;
        }
        match last {
            None if self.normal() => was,
            None => false,
            Some(c) => self.normal() && matches!(c, b';' | b'{' | b'}'),
        }
    }
}

#[cfg(test)]
mod tests;
