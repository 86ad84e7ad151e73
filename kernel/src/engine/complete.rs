//! Completion and inspection: magic names and help from the registry, Rust from the analysis
//! evcxr asks (`dryml-analysis`), and the notebook's own variables when it has nothing. The same
//! answers come from evcxr on the worker, or beside a running cell from that analysis's view of
//! the last cell ([`Snapshot`]).

use crate::protocol::published::Bundle;
use crate::protocol::replies::{self, Inspection, Reply};
use crate::protocol::Beside;
use crate::session::beside;
use crate::session::Session;
use evcxr::Completions;
use std::sync::Arc;

/// What completion and inspection ask of evcxr's analysis.
pub trait Analysis {
    fn completions(&mut self, code: &str, pos: usize) -> anyhow::Result<Completions>;
    /// `(plain, html)` for the code before `pos`; None where there is nothing to show.
    fn hover_at(&mut self, code: &str, pos: usize) -> anyhow::Result<Option<(String, String)>>;
    fn variable_type(&mut self, name: &str) -> Option<String>;
    /// The notebook's variables (`true`) and items (`false`).
    fn names(&mut self) -> Vec<(String, bool)>;
    /// Whether the analysis answers without a wait for its load (which this begins).
    fn ready(&mut self) -> bool {
        true
    }
    /// Whether the analysis's load is under way, which an answer now would wait for.
    fn loading(&mut self) -> bool {
        false
    }
}

impl Analysis for Session {
    fn completions(&mut self, code: &str, pos: usize) -> anyhow::Result<Completions> {
        self.evcxr().completions(code, pos)
    }
    fn hover_at(&mut self, code: &str, pos: usize) -> anyhow::Result<Option<(String, String)>> {
        // evcxr says it has nothing in words.
        let (plain, html) = self.evcxr().hover_at(code, pos)?;
        Ok((!plain.is_empty() && plain != "No documentation found").then_some((plain, html)))
    }
    fn variable_type(&mut self, name: &str) -> Option<String> {
        self.evcxr().variables_and_types().find(|(n, _)| *n == name).map(|(_, t)| t.to_string())
    }
    fn names(&mut self) -> Vec<(String, bool)> {
        let ctx = self.evcxr();
        let variables = ctx.variables_and_types().map(|(n, _)| (n.to_string(), true));
        variables.chain(ctx.defined_item_names().map(|n| (n.to_string(), false))).collect()
    }
    fn ready(&mut self) -> bool {
        self.analysis_ready()
    }
    fn loading(&mut self) -> bool {
        self.analysis_loading()
    }
}

/// The analysis snapshot of the request under way, an owner of its own: the worker sets it as
/// a request begins; completion and inspection beside that request read it on the shell task.
#[derive(Default)]
pub struct Latest(std::sync::Mutex<Option<Arc<beside::Beside>>>);

impl Latest {
    pub fn set(&self, snapshot: Option<Arc<beside::Beside>>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = snapshot;
    }

    pub fn get(&self) -> Option<Arc<beside::Beside>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// The analysis as the running cell found the notebook, answering beside it.
pub struct Snapshot(pub Arc<beside::Beside>);

impl Analysis for Snapshot {
    fn completions(&mut self, code: &str, pos: usize) -> anyhow::Result<Completions> {
        self.0.completions(code, pos)
    }
    fn hover_at(&mut self, code: &str, pos: usize) -> anyhow::Result<Option<(String, String)>> {
        self.0.hover_at(code, pos)
    }
    fn variable_type(&mut self, name: &str) -> Option<String> {
        self.0.variables_and_types().find(|(n, _)| *n == name).map(|(_, t)| t.to_string())
    }
    fn names(&mut self) -> Vec<(String, bool)> {
        let variables = self.0.variables_and_types().map(|(n, _)| (n.to_string(), true));
        variables.chain(self.0.defined_item_names().map(|n| (n.to_string(), false))).collect()
    }
    fn ready(&mut self) -> bool {
        self.0.ready()
    }
    fn loading(&mut self) -> bool {
        self.0.loading()
    }
}

impl Beside for Snapshot {
    fn complete(&self, code: &str, cursor_pos: usize) -> Reply<replies::Completions> {
        Reply::Ok(complete(&mut Snapshot(self.0.clone()), code, cursor_pos))
    }
    fn inspect(&self, code: &str, cursor_pos: usize, detail_level: u64) -> Reply<Inspection> {
        Reply::Ok(inspect(&mut Snapshot(self.0.clone()), code, cursor_pos, detail_level))
    }
}

/// The `complete_reply` content; `cursor` counts characters. Each match carries its kind
/// (function, class, module, instance, keyword, magic) as JupyterLab reads it for its icons.
pub fn complete(analysis: &mut impl Analysis, code: &str, cursor: usize) -> replies::Completions {
    let byte_pos = char_to_byte(code, cursor);
    let line_start = code[..byte_pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_prefix = &code[line_start..byte_pos];
    let mut matches: Vec<(String, Option<&str>)> = Vec::new();
    let start;
    let mut end = byte_pos;
    if line_prefix.trim_start().starts_with('%') && !line_prefix.contains(' ') {
        let word = line_prefix.trim_start();
        matches = dryml_magics::complete(word).into_iter().map(|m| (m, Some("magic"))).collect();
        start = byte_pos - word.len();
    } else {
        // The first Tab of a notebook starts the analysis (seconds to load): the notebook's own
        // names answer it at once where they match; a method or path waits for the load, for
        // a while.
        let word_start = ident_start(code, byte_pos);
        let word = &code[word_start..byte_pos];
        let ready = analysis.ready();
        let early = (!ready).then(|| names_starting(analysis, word)).filter(|n| !n.is_empty());
        let found = match early {
            Some(_) => None,
            None if !ready && still_loading(analysis) => None,
            None => analysis.completions(code, byte_pos).ok().filter(|c| !c.completions.is_empty()),
        };
        match found {
            Some(c) => {
                start = c.start_offset;
                end = c.end_offset;
                let mut seen = std::collections::HashSet::new();
                for comp in c.completions {
                    if seen.insert(comp.code.clone()) {
                        matches.push((comp.code, Some(comp.kind)));
                    }
                }
            }
            None => {
                // rust-analyzer had nothing (or was not asked): the notebook's own names.
                matches = early.unwrap_or_else(|| names_starting(analysis, word));
                start = word_start;
            }
        }
    }
    let (cursor_start, cursor_end) = (byte_to_char(code, start), byte_to_char(code, end));
    let types: Vec<Option<replies::Typed<'_>>> = matches
        .iter()
        .map(|(text, kind)| {
            kind.map(|kind| replies::Typed { text: text.as_str(), kind, start: cursor_start, end: cursor_end })
        })
        .collect();
    let metadata = serde_json::to_value(replies::CompletionTypes { types }).expect("completion types serialise");
    replies::Completions { matches: matches.into_iter().map(|m| m.0).collect(), cursor_start, cursor_end, metadata }
}

/// How long a completion or hover waits for the analysis's load (a notebook's first: 5 to 8 s
/// here) before it answers without: JupyterLab drops a completion that comes after 1 s, and
/// jupyter console gives up on one after 5 s with an error on the terminal. The next Tab,
/// once loaded, has it all; meanwhile the kernel's next request is not held up.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_millis(800);

/// Whether the analysis answers now or within [`LOAD_WAIT`], without the rest of a load.
fn answers_soon(analysis: &mut impl Analysis) -> bool {
    analysis.ready() || !still_loading(analysis)
}

/// Whether the analysis is still loading after [`LOAD_WAIT`]: its load is waited for, a while.
/// Once it is not loading (loaded, or it could not start) the request goes ahead as before.
fn still_loading(analysis: &mut impl Analysis) -> bool {
    let deadline = std::time::Instant::now() + LOAD_WAIT;
    while analysis.loading() {
        if std::time::Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// The notebook's variables and items that start with `word` (none for an empty word), sorted;
/// items' kinds are not known here, so JupyterLab shows them without one.
fn names_starting(analysis: &mut impl Analysis, word: &str) -> Vec<(String, Option<&'static str>)> {
    if word.is_empty() {
        return Vec::new();
    }
    let mut names: Vec<_> = analysis
        .names()
        .into_iter()
        .filter(|(n, _)| n.starts_with(word))
        .map(|(n, variable)| (n, variable.then_some("instance")))
        .collect();
    names.sort();
    names.dedup_by(|a, b| a.0 == b.0);
    names
}

/// The `inspect_reply` content: a magic's help, a variable's type, or rust-analyzer's hover.
/// At `detail_level` 1 (IPython's `??`), a variable's type comes with its documentation.
pub fn inspect(analysis: &mut impl Analysis, code: &str, cursor: usize, detail_level: u64) -> Inspection {
    let byte_pos = char_to_byte(code, cursor);
    let line_start = code[..byte_pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = code[line_start..].lines().next().unwrap_or("").trim();
    if line.starts_with('%') {
        let name = line.trim_start_matches('%');
        let name = name.split(|c: char| c.is_whitespace() || c == '?').next().unwrap_or("");
        let kind = if line.starts_with("%%") { dryml_magics::MagicKind::Cell } else { dryml_magics::MagicKind::Line };
        if let Some(spec) = dryml_magics::lookup(name, kind) {
            return Inspection::found(Bundle::text(spec.help_text()));
        }
    }
    // Extend to the end of the identifier under the cursor.
    let end = code[byte_pos..].find(|c: char| !is_ident_char(c)).map(|i| byte_pos + i).unwrap_or(code.len());
    let word = &code[ident_start(code, end)..end];
    if let Some(ty) = analysis.variable_type(word) {
        let typed = format!("{word}: {ty}");
        let docs = if detail_level > 0 { type_docs(analysis, &typed[word.len() + 2..]) } else { None };
        return match docs {
            Some((plain, html)) => Inspection::found(Bundle::html(
                format!("{typed}\n\n{plain}"),
                format!("<pre>{}</pre>{html}", crate::display_table::escape(&typed)),
            )),
            None => Inspection::found(Bundle::text(typed)),
        };
    }
    if !answers_soon(analysis) {
        return Inspection::none();
    }
    match analysis.hover_at(code, end) {
        Ok(Some((plain, html))) => Inspection::found(Bundle::html(plain, html)),
        _ => Inspection::none(),
    }
}

/// rust-analyzer's hover on a type's path (`Vec` of `Vec<u8>`): its signature and documentation.
/// None for types without a path of their own (tuples, arrays, references to them).
fn type_docs(analysis: &mut impl Analysis, ty: &str) -> Option<(String, String)> {
    let ty = ty.trim_start_matches('&').trim_start_matches("mut ").trim_start();
    let path = &ty[..ty.find('<').unwrap_or(ty.len())];
    if path.is_empty() || !path.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return None;
    }
    if !answers_soon(analysis) {
        return None;
    }
    analysis.hover_at(&format!("let _: {path}"), "let _: ".len() + path.len()).ok()?
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Byte offset where the identifier ending at `pos` starts.
fn ident_start(code: &str, pos: usize) -> usize {
    code[..pos].rfind(|c: char| !is_ident_char(c)).map(|i| i + 1).unwrap_or(0)
}

fn char_to_byte(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map(|(i, _)| i).unwrap_or(s.len())
}

fn byte_to_char(s: &str, byte: usize) -> usize {
    s[..byte.min(s.len())].chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An analysis whose load is under way, done after `ready_after` polls (never where None).
    struct Loading {
        polls: usize,
        ready_after: Option<usize>,
        asked: bool,
    }

    impl Loading {
        fn done(&self) -> bool {
            self.ready_after.is_some_and(|n| self.polls > n)
        }
    }

    impl Analysis for Loading {
        fn completions(&mut self, _: &str, pos: usize) -> anyhow::Result<Completions> {
            self.asked = true;
            let len = evcxr::Completion { code: "len()".into(), kind: "function", label: "len".into() };
            Ok(Completions { completions: vec![len], start_offset: pos - 2, end_offset: pos })
        }
        fn hover_at(&mut self, _: &str, _: usize) -> anyhow::Result<Option<(String, String)>> {
            self.asked = true;
            Ok(Some(("docs".into(), "docs".into())))
        }
        fn variable_type(&mut self, _: &str) -> Option<String> {
            None
        }
        fn names(&mut self) -> Vec<(String, bool)> {
            vec![("listed".into(), true)]
        }
        fn ready(&mut self) -> bool {
            self.done()
        }
        fn loading(&mut self) -> bool {
            self.polls += 1;
            !self.done()
        }
    }

    #[test]
    fn a_tab_during_the_analysiss_load_waits_for_it_a_while_then_answers_without() {
        let mut never = Loading { polls: 0, ready_after: None, asked: false };
        let code = "listed.le";
        let reply = complete(&mut never, code, code.len());
        assert!(reply.matches.is_empty() && !never.asked, "{:?}", reply.matches);
        assert!(never.polls > 2, "the load was waited for: {} polls", never.polls);
        assert!(!inspect(&mut never, "listed.len", 10, 0).found && !never.asked);
        // Loaded while it waits: the analysis answers.
        let mut soon = Loading { polls: 0, ready_after: Some(3), asked: false };
        assert_eq!(complete(&mut soon, code, code.len()).matches, ["len()"]);
        // A name is answered at once from the notebook's own.
        let mut names = Loading { polls: 0, ready_after: None, asked: false };
        assert_eq!(complete(&mut names, "lis", 3).matches, ["listed"]);
        assert_eq!(names.polls, 0, "no wait");
    }

    #[test]
    fn offsets_count_chars() {
        let s = "é = 1";
        assert_eq!(char_to_byte(s, 1), 2);
        assert_eq!(byte_to_char(s, 2), 1);
    }
}
