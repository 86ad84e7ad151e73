//! Pure parsing of `%`/`%%` magic lines and the one registry of magics: no I/O, no state.
//!
//! The kernel calls [`parse_cell`] on every cell. Leading `%name ...` lines and a leading
//! `%%name ...` line are split off from the Rust body, checked against [`REGISTRY`], and returned
//! as [`Invocation`]s with their arguments already validated. Anything wrong yields a
//! [`MagicError`] naming the magic, the line and the column, with the nearest magic suggested.

mod args;
pub mod body;
pub mod call;
pub mod compute_args;
mod habits;
mod parsers;
mod registry;
mod rows;
mod table;
pub mod timeit;
mod tokens;

pub use args::{keep_list, ArgError, Args};
pub use call::{
    CacheCall, Call, CellCall, EnvCall, ExperimentCall, JobsCall, LineCall, LoggerCall, Preload, Query, RepoCall,
    Shell, SlurmCall, SlurmSetting,
};
pub use compute_args::{
    compute_options, context_command, parse_size, sweep_options, ComputeOptions, ContextCommand, SlurmJob, SweepOptions,
};
pub use registry::{parse_seconds, ArgSpec, MagicKind, MagicSpec, Parse};
pub use table::{Registry, REGISTRY};
pub use tokens::{tokenize, Token};

use std::fmt;

/// A bad magic line: what was wrong and where (1-based line and column in the cell).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MagicError {
    pub message: String,
    pub line: usize,
    pub column: usize,
    /// The offending source line, for the caret display.
    pub source_line: String,
    pub suggestion: Option<String>,
}

impl fmt::Display for MagicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (line {}, column {})", self.message, self.line, self.column)?;
        if let Some(s) = &self.suggestion {
            write!(f, "; did you mean {s}?")?;
        }
        Ok(())
    }
}

impl std::error::Error for MagicError {}

impl MagicError {
    /// The source line with a caret under the offending column, for tracebacks.
    pub fn caret(&self) -> String {
        format!("{}\n{}^", self.source_line, " ".repeat(self.column.saturating_sub(1)))
    }
}

/// One magic call found at the top of a cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub spec: &'static MagicSpec,
    /// `%name?`: the user asked for help instead of running it.
    pub help: bool,
    pub args: Args,
    /// What it asks, read once from `args`; None for help.
    pub call: Option<Call>,
    /// The argument tokens, for errors that later checks point at.
    pub tokens: Vec<Token>,
    /// 1-based line in the cell.
    pub line: usize,
    /// The magic's line as written, and the 1-based column where its arguments start, so
    /// later checks (devices the machine lacks) can point at a token too.
    pub source_line: String,
    pub args_column: usize,
}

impl Invocation {
    /// A line magic's call; None for `%name?`.
    pub fn line_call(&self) -> Option<&LineCall> {
        match &self.call {
            Some(Call::Line(c)) => Some(c),
            _ => None,
        }
    }

    /// A cell magic's call; None for `%%name?`.
    pub fn cell_call(&self) -> Option<&CellCall> {
        match &self.call {
            Some(Call::Cell(c)) => Some(c),
            _ => None,
        }
    }

    /// An error pointing at the `index`-th token of the arguments (the line's end if none).
    pub fn error_at(&self, index: Option<usize>, message: String) -> MagicError {
        let column = index
            .and_then(|i| self.tokens.get(i))
            .map(|t| self.args_column + t.column)
            .unwrap_or(self.source_line.len() + 1);
        error_at(&self.source_line, self.line, column, format!("{}: {message}", self.spec.display_name()), None)
    }

    /// Checks that every `cpu/<i>` and `gpu/<i>` of `requests` exists on a machine with `cpus`
    /// CPUs and `gpus` GPUs; the error points at the key's token (or the JSON's start).
    pub fn check_devices(
        &self,
        requests: &dryml::compute::context::Requests,
        cpus: usize,
        gpus: usize,
    ) -> Result<(), MagicError> {
        let Err((message, key)) = requests.check_devices(cpus, gpus) else { return Ok(()) };
        let tokens = &self.tokens;
        let prefix = format!("{key}=");
        let at = tokens
            .iter()
            .position(|t| t.text.starts_with(&prefix))
            .or_else(|| tokens.iter().position(|t| t.text.starts_with('{')));
        Err(self.error_at(at, message))
    }
}

/// A cell split into its magics and its Rust body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCell {
    pub line_magics: Vec<Invocation>,
    pub cell_magic: Option<Invocation>,
    /// The code left for evcxr (the cell body for a cell magic), its `!` and `%timeit` lines
    /// made Rust line for line; a `%%bash` or `%%writefile` body as written.
    pub body: String,
    /// The lines above the body (its magics), so errors name the cell's own lines.
    pub magic_lines: usize,
}

impl ParsedCell {
    pub fn has_magics(&self) -> bool {
        !self.line_magics.is_empty() || self.cell_magic.is_some()
    }
}

/// Finds a magic by exact name and kind.
pub fn lookup(name: &str, kind: MagicKind) -> Option<&'static MagicSpec> {
    REGISTRY.iter().find(|m| m.name == name && m.kind == kind)
}

/// The registered magic closest to `name`, written with its `%` or `%%` prefix.
pub fn nearest(name: &str) -> Option<String> {
    REGISTRY
        .iter()
        .map(|m| (strsim::damerau_levenshtein(name, m.name), m))
        .filter(|(d, m)| *d <= 3.max(m.name.len() / 3) || m.name.starts_with(name))
        .min_by_key(|(d, _)| *d)
        .map(|(_, m)| m.display_name())
}

/// Magic names (with prefix) that start with `prefix`, which includes its `%` or `%%`.
pub fn complete(prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = REGISTRY.iter().map(|m| m.display_name()).filter(|n| n.starts_with(prefix)).collect();
    out.sort();
    out
}

/// Splits the leading magic lines from a cell and validates them.
///
/// Blank lines before and between magics are allowed; the first line that is not a magic starts
/// the Rust body. A `%%` magic must be the first non-blank line and takes the rest as its body.
/// A `%timeit` line runs in order with the body, so it starts the body (see [`body::rewrite`]).
pub fn parse_cell(cell: &str) -> Result<ParsedCell, MagicError> {
    let mut line_magics = Vec::new();
    let mut cell_magic = None;
    let mut body_start = None;
    let mut offset = 0;
    for (idx, raw_line) in cell.split_inclusive('\n').enumerate() {
        let line_no = idx + 1;
        let line = raw_line.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            offset += raw_line.len();
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("%%") {
            if !line_magics.is_empty() || cell_magic.is_some() {
                return Err(error_at(
                    line,
                    line_no,
                    indent + 1,
                    "a %% cell magic must be the first line of the cell".into(),
                    None,
                ));
            }
            let inv = parse_invocation(rest, MagicKind::Cell, line, line_no, indent + 3)?;
            cell_magic = Some(inv);
            offset += raw_line.len();
            body_start = Some(offset);
            break;
        } else if let Some(rest) = trimmed.strip_prefix('%').filter(|r| !starts_timeit(r)) {
            let inv = parse_invocation(rest, MagicKind::Line, line, line_no, indent + 2)?;
            line_magics.push(inv);
            offset += raw_line.len();
        } else {
            body_start = Some(offset);
            break;
        }
    }
    let start = body_start.unwrap_or(cell.len());
    let magic_lines = cell[..start].matches('\n').count();
    let mut body = cell[start..].to_string();
    let call = cell_magic.as_ref().and_then(Invocation::cell_call);
    if call.is_none_or(CellCall::takes_rust) {
        body = body::rewrite(&body, magic_lines + 1)?;
    }
    if let Some(CellCall::Timeit(opts)) = call {
        body = body::timeit_cell(opts, &body);
    }
    Ok(ParsedCell { line_magics, cell_magic, body, magic_lines })
}

/// `timeit ...` after a line's `%`, but not `timeit?` (its help).
fn starts_timeit(rest: &str) -> bool {
    rest.strip_prefix("timeit").is_some_and(|r| r.is_empty() || r.starts_with(char::is_whitespace))
}

fn error_at(line: &str, line_no: usize, column: usize, message: String, suggestion: Option<String>) -> MagicError {
    MagicError { message, line: line_no, column, source_line: line.to_string(), suggestion }
}

/// `rest` is the text after the `%`/`%%`; `name_col` is the 1-based column where the name starts.
fn parse_invocation(
    rest: &str,
    kind: MagicKind,
    line: &str,
    line_no: usize,
    name_col: usize,
) -> Result<Invocation, MagicError> {
    let name_len = rest.find(|c: char| c.is_whitespace() || c == '?').unwrap_or(rest.len());
    let name = &rest[..name_len];
    let prefix = kind.prefix();
    if name.is_empty() {
        return Err(error_at(line, line_no, name_col, format!("expected a magic name after `{prefix}`"), None));
    }
    let mut after = &rest[name_len..];
    let help = after.starts_with('?');
    if help {
        after = &after[1..];
        if !after.trim().is_empty() {
            return Err(error_at(
                line,
                line_no,
                name_col + name_len + 1,
                format!("`{prefix}{name}?` takes no arguments"),
                None,
            ));
        }
    }
    let spec = match lookup(name, kind) {
        Some(s) => s,
        None => {
            let other = match kind {
                MagicKind::Line => lookup(name, MagicKind::Cell),
                MagicKind::Cell => lookup(name, MagicKind::Line),
            };
            let message = match other {
                Some(o) => format!("`{prefix}{name}` is not a {} magic; `{}` is", kind.word(), o.display_name()),
                None => format!("unknown magic `{prefix}{name}`"),
            };
            let suggestion = other.map(|o| o.display_name()).or_else(|| nearest(name));
            return Err(error_at(line, line_no, name_col, message, suggestion));
        }
    };
    let args_col = name_col + name_len + usize::from(help);
    let tokens = tokenize(after).map_err(|(msg, col)| {
        error_at(line, line_no, args_col + col, format!("{}: {msg}", spec.display_name()), None)
    })?;
    let (args, call) = if help {
        (Args::default(), None)
    } else {
        let (args, call) = spec.validate(&tokens, after).map_err(|(msg, tok_idx)| {
            let col = tok_idx.and_then(|i| tokens.get(i)).map(|t| args_col + t.column).unwrap_or(line.len() + 1);
            error_at(line, line_no, col, format!("{}: {msg}", spec.display_name()), None)
        })?;
        debug_assert_eq!(
            matches!(call, Call::Line(_)),
            kind == MagicKind::Line,
            "{name}: its parser gives the other kind"
        );
        (args, Some(call))
    };
    Ok(Invocation {
        spec,
        help,
        args,
        call,
        tokens,
        line: line_no,
        source_line: line.to_string(),
        args_column: args_col,
    })
}

/// The `%lsmagic` listing, as plain text.
pub fn lsmagic_text() -> String {
    let mut out = String::from("Available line magics:\n");
    for m in REGISTRY.iter().filter(|m| m.kind == MagicKind::Line) {
        out.push_str(&format!("  {:<16} {}\n", m.display_name(), m.summary));
    }
    out.push_str("\nAvailable cell magics:\n");
    for m in REGISTRY.iter().filter(|m| m.kind == MagicKind::Cell) {
        out.push_str(&format!("  {:<16} {}\n", m.display_name(), m.summary));
    }
    out.push_str("\nAppend `?` to a magic for its help, e.g. `%env?`.\n");
    out
}

#[cfg(test)]
mod tests;
