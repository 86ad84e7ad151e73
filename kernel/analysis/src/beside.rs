//! Completion and hover beside a running cell, from any thread: on the source of the notebook's
//! last cell as the analysis saw it, with the code asked about put after that cell's code.

use crate::lets::functions_named;
use anyhow::Result;
use evcxr::Completions;
use ra_ap_syntax::ast;
use ra_ap_syntax::{AstNode, Edition};
use std::sync::{Arc, Mutex, PoisonError};

/// The function evcxr wraps a cell's statements in, in the source it analyses.
pub(crate) const WRAPPER: &str = "evcxr_analysis_wrapper";

/// Names evcxr's generated code uses, which no completion offers.
const INTERNAL: [&str; 3] = ["evcxr_variable_store", "evcxr_internal_runtime", WRAPPER];

/// Completion and hover of a crate's source from any thread. `write` false keeps the source
/// off the disk, where a running cell's build reads the crate's files.
pub trait Shared: Send + Sync {
    fn completions_in(&self, source: String, position: usize, write: bool) -> Result<Completions>;
    /// The hover at offset `at` of `source`, as plain text and as Markdown.
    fn hover_in(&self, source: String, at: u32, write: bool) -> Result<Option<(String, String)>>;
    /// Whether an answer now would not wait for a load (which, where it would, begins).
    fn ready(&self) -> bool {
        true
    }
    /// Whether a load is under way, which an answer would wait for.
    fn loading(&self) -> bool {
        false
    }
}

/// The source of the crate's last cell, as evcxr asked for its variables.
#[derive(Clone, Default)]
pub(crate) struct LastCell(Arc<Mutex<Option<String>>>);

impl LastCell {
    /// Keeps `source` (a cell's types are asked for once or twice, with the same source).
    pub(crate) fn record(&self, source: &str) {
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if last.as_deref() != Some(source) {
            *last = Some(source.to_owned());
        }
    }

    /// `code` in the last cell's source, after its statements, and the offset it starts at.
    /// The stored variables are that function's parameters, and the last cell's `let`s are
    /// in scope, so `code` sees the notebook as the running cell does.
    fn around(&self, code: &str) -> (String, usize) {
        let last = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match last.as_deref().and_then(statements_end) {
            Some(at) => {
                let last = last.unwrap_or_default();
                (format!("{}\n{code}\n{}", &last[..at], &last[at..]), at + 1)
            }
            None => {
                let head = format!("fn {WRAPPER}() {{\n");
                (format!("{head}{code}\n}}\n"), head.len())
            }
        }
    }
}

/// Where the wrapper's statements end in `source`: before its final expression (`Ok(())`), or
/// its closing brace.
fn statements_end(source: &str) -> Option<usize> {
    let parsed = ast::SourceFile::parse(source, Edition::Edition2024).tree();
    let function = functions_named(&parsed, WRAPPER).next()?;
    let statements = function.body()?.stmt_list()?;
    let end = match statements.tail_expr() {
        Some(tail) => tail.syntax().text_range().start(),
        None => statements.r_curly_token()?.text_range().start(),
    };
    Some(end.into())
}

/// `code` with each of evcxr's command lines (`:dep`, ...) blanked, offsets kept: beside a
/// running cell they would change the notebook under it.
fn without_commands(code: &str) -> String {
    code.split_inclusive('\n')
        .map(|line| match line.trim_start().starts_with(':') {
            true => line.chars().map(|c| if c == '\n' { c } else { ' ' }).collect(),
            false => line.to_owned(),
        })
        .collect()
}

/// Completion and hover beside a running cell (a clone per request is cheap).
#[derive(Clone)]
pub struct Beside {
    pub(crate) shared: Arc<dyn Shared>,
    pub(crate) last: LastCell,
}

impl Beside {
    /// Whether completion and hover answer now, without a wait for a load (which this begins).
    pub fn ready(&self) -> bool {
        self.shared.ready()
    }

    /// Whether a load is under way, which an answer would wait for.
    pub fn loading(&self) -> bool {
        self.shared.loading()
    }

    /// As evcxr's completion between cells, at byte `position` of `code`; none in a command.
    pub fn completions(&self, code: &str, position: usize) -> Result<Completions> {
        let Some(before) = code.get(..position) else { return Ok(Completions::default()) };
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        if code[line_start..].trim_start().starts_with(':') {
            return Ok(Completions::default());
        }
        let (source, at) = self.last.around(&without_commands(code));
        let mut completions = self.shared.completions_in(source, at + position, false)?;
        let back = |offset: usize| offset.saturating_sub(at).min(code.len());
        completions.start_offset = back(completions.start_offset);
        completions.end_offset = back(completions.end_offset);
        completions.completions.retain(|c| !INTERNAL.contains(&c.code.as_str()));
        Ok(completions)
    }

    /// The hover at the end of `code` (what precedes the cursor), as evcxr's between cells:
    /// plain text and Markdown, None where there is none.
    pub fn hover(&self, code: &str) -> Result<Option<(String, String)>> {
        // A method (`None.ok_or_else`) has a hover only as a call; `let` as a statement.
        let (text, offset) = match code {
            "let" => ("let _ = 1;".to_owned(), 0),
            _ if code.ends_with('(') => (format!("{code});"), code.len() - 1),
            _ => (format!("{code};"), code.len()),
        };
        let (source, at) = self.last.around(&without_commands(&text));
        self.shared.hover_in(source, (at + offset) as u32, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAST: &str = "#![allow(unused)]\nstruct Point;\n\
        async fn evcxr_analysis_wrapper(total: usize) -> Result<(), E> {\n\
        let seen = vec![1u8];\n\
        evcxr_variable_store(seen);\n\
        Ok(())\n}\n";

    #[test]
    fn code_goes_after_the_last_cells_statements() {
        let last = LastCell::default();
        last.record(LAST);
        let (source, at) = last.around("seen.le");
        assert_eq!(&source[at..at + 7], "seen.le");
        assert!(source[..at].ends_with("evcxr_variable_store(seen);\n\n"), "{source}");
        assert!(source[at..].starts_with("seen.le\nOk(())\n}"), "{source}");
    }

    #[test]
    fn without_a_last_cell_code_is_a_wrappers_body() {
        let (source, at) = LastCell::default().around("let x = 1;");
        assert_eq!(source, "fn evcxr_analysis_wrapper() {\nlet x = 1;\n}\n");
        assert_eq!(&source[at..at + 3], "let");
        let last = LastCell::default();
        last.record("fn other() {}");
        assert_eq!(last.around("x").0, "fn evcxr_analysis_wrapper() {\nx\n}\n");
    }

    #[test]
    fn command_lines_are_blanked_with_their_offsets_kept() {
        let code = "let a = 1;\n  :dep rand\na.";
        let blanked = without_commands(code);
        assert_eq!(blanked.len(), code.len());
        assert_eq!(blanked, "let a = 1;\n           \na.");
    }
}
