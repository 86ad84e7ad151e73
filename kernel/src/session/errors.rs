//! What a failed cell reports: evcxr's errors, panics, crashes (with their cause) and
//! interrupts, each as Jupyter error content with an `ename` a client can test. (A bad magic
//! line is the magic host's to report: `magic::error`.)

use crate::protocol::ErrorContent;
use evcxr::Error as EvcxrError;

/// Whether line `line` of the code evcxr was given is one of the cell's own.
fn in_cell(line: usize, src: Source<'_>) -> bool {
    line > src.added
        && line <= src.code.lines().count()
        && src.cell.is_some_and(|c| c.cell_line(line - src.added).is_some())
}

/// The variable the cell moved or dropped where only the kernel's check then borrows it: the
/// last statement of a cell naming what a kept borrow is made from (`borrows.rs`).
pub fn moved_under_borrow(e: &EvcxrError, src: Source<'_>) -> Option<String> {
    let EvcxrError::CompilationErrors(errors) = e else { return None };
    errors.iter().find_map(|e| {
        let primary_in_cell = e
            .spanned_messages()
            .iter()
            .any(|m| m.is_primary && m.span.as_ref().is_some_and(|s| in_cell(s.start_line, src)));
        let moved = e.message().strip_prefix("borrow of moved value: `")?.strip_suffix('`')?.to_owned();
        (e.code() == Some("E0382") && !primary_in_cell).then_some(moved)
    })
}

/// That error, said as what it is: `name` (made by `borrow`) borrows `root`, which the cell moves.
pub fn moved_while_borrowed(mut err: ErrorContent, root: &str, (name, borrow): (String, String)) -> ErrorContent {
    err.evalue = format!(
        "[E0382] `{root}` is moved or dropped here, but `{name}` borrows it (`{borrow}`, kept from an \
         earlier cell). Let `{name}` go first (`drop({name});` above the move), or move a clone of `{root}`."
    );
    if let Some(first) = err.traceback.first_mut() {
        *first = format!("CompilationError: {}", err.evalue);
    }
    err
}

/// A context error, under DRYML's exception name.
pub fn context(e: dryml::compute::context::ContextError) -> ErrorContent {
    ErrorContent::new(e.name(), e.message())
}

fn headline(e: &evcxr::CompilationError) -> String {
    match e.code() {
        Some(code) => format!("[{code}] {}", e.message()),
        None => e.message(),
    }
}

/// One compile error as rustc shows it, with the cell's line numbers: each labelled span under
/// its line. Errors with no span in the user's code keep rustc's own rendering.
fn render(e: &evcxr::CompilationError, src: Source<'_>, is_first: bool) -> String {
    use std::fmt::Write as _;
    let lines: Vec<&str> = src.code.lines().collect();
    let spans: Vec<_> = e
        .spanned_messages()
        .iter()
        .filter_map(|m| m.span.as_ref().map(|s| (s, m)))
        .filter(|(s, _)| in_cell(s.start_line, src))
        .collect();
    let Some(cell) = src.cell.filter(|_| !spans.is_empty()) else {
        // Only in the code the kernel wraps a `%%compute` or `%%sweep` body in: rustc's words,
        // never that code. An error with no span at all (the linker's) is about no code: its
        // notes (what the linker said) are what the user needs.
        let spanned = e.spanned_messages().iter().any(|m| m.span.is_some());
        if spanned && src.cell.is_some_and(|c| c.generated()) {
            let code = e.code().map(|c| format!("[{c}]")).unwrap_or_default();
            return format!("{}{code}: {} (in the code the kernel wraps the cell's body in)", e.level(), e.message());
        }
        return e.rendered();
    };
    let mut out = String::new();
    if !is_first {
        let level = e.level();
        let code = e.code().map(|c| format!("[{c}]")).unwrap_or_default();
        let _ = writeln!(out, "{level}{code}: {}", e.message());
    }
    let cell_line = |l: usize| cell.cell_line(l - src.added).expect("spans are the cell's");
    let width = spans.iter().map(|(s, _)| cell_line(s.start_line).to_string().len()).max().unwrap_or(1);
    let (first, _) = spans.iter().find(|(_, m)| m.is_primary).unwrap_or(&spans[0]);
    let _ = writeln!(out, "{:width$}--> cell line {}, column {}", "", cell_line(first.start_line), first.start_column);
    for (s, m) in &spans {
        let text = lines[s.start_line - 1];
        let mark = if m.is_primary { '^' } else { '-' };
        let end =
            if s.end_line == s.start_line { s.end_column.max(s.start_column + 1) } else { text.chars().count() + 1 };
        let _ = writeln!(out, "{:width$} |\n{:>width$} | {text}", "", cell_line(s.start_line));
        let _ = writeln!(
            out,
            "{:width$} | {}{} {}",
            "",
            " ".repeat(s.start_column.saturating_sub(1)),
            mark.to_string().repeat(end.saturating_sub(s.start_column).max(1)),
            m.label
        );
    }
    for help in e.help() {
        // A suggested replacement follows its message after a blank line.
        let help = match help.split_once("\n\n") {
            Some((msg, code)) => format!("{msg}: `{code}`"),
            None => help,
        };
        let _ = writeln!(out, "{:width$} = help: {help}", "");
    }
    out
}

/// `e`, where its compile errors name a variable the cell dropped (`dropped`: each with why),
/// saying why it is gone.
pub fn explained(mut e: EvcxrError, dropped: &[(String, String)]) -> EvcxrError {
    if let EvcxrError::CompilationErrors(errors) = &mut e {
        dryml_analysis::explain_dropped(errors, dropped);
    }
    e
}

/// A panic, from the panic message in the tail of the cell's stderr, and its backtrace.
pub fn panic(tail: Vec<String>, backtrace: Option<String>) -> ErrorContent {
    let start = tail.iter().position(|l| l.contains("panicked at"));
    let (evalue, mut traceback) = match start {
        Some(i) => {
            let msg_lines: Vec<&str> = tail[i + 1..]
                .iter()
                .take_while(|l| !l.starts_with("note:") && !l.starts_with("stack backtrace"))
                .map(String::as_str)
                .collect();
            (msg_lines.join("\n"), tail[i..].to_vec())
        }
        None => ("the cell panicked".to_string(), tail.clone()),
    };
    if let Some(trace) = backtrace {
        traceback.push("stack backtrace:".into());
        traceback.extend(user_frames(&trace));
    }
    traceback.push("Variables defined before this cell are kept; those it created are gone.".into());
    ErrorContent { ename: "panic".into(), evalue, traceback }
}

/// A panic's backtrace from the panic to the cell's entry: the frames of the panic machinery
/// before it and of evcxr's runtime after it are dropped (each frame is its numbered line and
/// the `at` lines below it).
fn user_frames(trace: &str) -> Vec<String> {
    let mut frames: Vec<Vec<&str>> = Vec::new();
    for line in trace.lines() {
        let numbered = line.trim_start().split_once(": ").is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
        match frames.last_mut() {
            Some(f) if !numbered => f.push(line),
            _ => frames.push(vec![line]),
        }
    }
    let symbol = |f: &Vec<&str>| f[0].trim_start().split_once(": ").map_or("", |(_, s)| s).to_string();
    let machinery = [
        "core::panicking::",
        "std::panicking::",
        "__rustc::rust_begin_unwind",
        "rust_begin_unwind",
        "std::sys::backtrace::",
        "std::backtrace",
    ];
    let end = frames.iter().position(|f| symbol(f).starts_with("evcxr::")).unwrap_or(frames.len());
    let start =
        frames[..end].iter().rposition(|f| machinery.iter().any(|m| symbol(f).starts_with(m))).map_or(0, |i| i + 1);
    frames[start..end].iter().flatten().map(|l| l.to_string()).collect()
}

/// Where the user's cell sits in the code evcxr compiled, so compile errors name the cell's own
/// lines (not evcxr's generated `src/lib.rs`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Source<'a> {
    /// The code evcxr was given.
    pub code: &'a str,
    /// Lines the kernel put in front of the user's code (`:dep` lines, the flusher).
    pub added: usize,
    /// Which of its lines are the cell's; `None` when none are (a `%%compute` wrapper).
    pub cell: Option<CellLines>,
}

/// Where a cell's lines are in the code the kernel gives evcxr (not counting the lines it puts
/// in front): errors in them name the cell's line, others keep rustc's rendering.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellLines {
    /// The first of them (1-based) and how many.
    pub first: usize,
    pub count: usize,
    /// The cell's lines above the first (its magic lines).
    pub above: usize,
    /// Where the same lines start a second time (0: nowhere): `%%compute --use-existing`
    /// generates the body twice, for here and for a sandbox.
    pub again: usize,
}

impl CellLines {
    /// The code is the cell's body, under `magic_lines` lines of magics.
    pub fn body(magic_lines: usize) -> CellLines {
        CellLines { first: 1, count: usize::MAX, above: magic_lines, again: 0 }
    }

    /// A body of `count` lines that the kernel's code holds from each of `starts` (at most two).
    pub fn within(starts: &[usize], count: usize, magic_lines: usize) -> CellLines {
        CellLines {
            first: starts.first().copied().unwrap_or(0),
            count,
            above: magic_lines,
            again: starts.get(1).copied().unwrap_or(0),
        }
    }

    /// The cell line of line `l` of the code, if it is one of the cell's.
    pub fn cell_line(&self, l: usize) -> Option<usize> {
        [self.first, self.again]
            .into_iter()
            .find(|&first| first > 0 && l >= first && l - first < self.count)
            .map(|first| l - first + 1 + self.above)
    }

    /// Whether the code around the cell's lines is the kernel's own.
    pub fn generated(&self) -> bool {
        self.first > 1 || self.count != usize::MAX
    }
}

/// Where each line of a built cell's library (evcxr's `src/lib.rs`) is in the cell, so that
/// panics and a sandbox's errors name the cell's lines as its compile errors do.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    /// For each line of the library, the cell's line it holds (0: none).
    pub cell_of: Vec<usize>,
}

impl Locations {
    /// From the user's line each library line holds (evcxr's), `added` lines the kernel put in
    /// front, and where the cell's lines are in what evcxr was given.
    pub fn new(user_lines: &[usize], added: usize, cell: Option<CellLines>) -> Locations {
        let cell_of = user_lines
            .iter()
            .map(|&l| l.checked_sub(added).filter(|&l| l > 0).and_then(|l| cell?.cell_line(l)).unwrap_or(0))
            .collect();
        Locations { cell_of }
    }

    /// `text` with each `src/lib.rs:L:C` that is one of the cell's lines as `cell line N, column C`.
    pub fn map<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        static AT: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        // Not a path that ends in `src/lib.rs` (a `:dep` crate's own file).
        let at = AT
            .get_or_init(|| regex::Regex::new(r"(^|[\s(])(?:\./)?src/lib\.rs:(\d+)(?::(\d+))?").expect("static regex"));
        at.replace_all(text, |c: &regex::Captures<'_>| {
            let line =
                c[2].parse::<usize>().ok().and_then(|l| self.cell_of.get(l.checked_sub(1)?)).copied().unwrap_or(0);
            match (line, c.get(3)) {
                (0, _) => c[0].to_string(),
                (n, Some(col)) => format!("{}cell line {n}, column {}", &c[1], col.as_str()),
                (n, None) => format!("{}cell line {n}", &c[1]),
            }
        })
    }
}

/// An evcxr error; `tail` is the end of the cell's stderr (a crash's last words), and
/// `vars_before` are the variables a crash took with it.
pub fn evcxr(e: EvcxrError, tail: Vec<String>, vars_before: &[String]) -> ErrorContent {
    evcxr_in(e, tail, vars_before, Source::default())
}

/// As [`evcxr`], with the cell's source for compile errors.
pub fn evcxr_in(e: EvcxrError, tail: Vec<String>, vars_before: &[String], src: Source<'_>) -> ErrorContent {
    match e {
        EvcxrError::CompilationErrors(errors) => {
            let first = errors.iter().find(|e| e.level() == "error").or(errors.first());
            let evalue = first.map(headline).unwrap_or_else(|| "compilation failed".into());
            // The ename leads, as a Python traceback's last line names the exception: front ends
            // show the traceback, not `ename`.
            let mut traceback = vec![format!("CompilationError: {evalue}")];
            // The same error twice (`%%compute --use-existing` builds the body twice) is said once.
            let mut said = std::collections::HashSet::new();
            for e in &errors {
                if said.insert(render(e, src, false)) {
                    traceback.push(render(e, src, first.is_some_and(|f| std::ptr::eq(f, e))));
                }
            }
            ErrorContent { ename: "CompilationError".into(), evalue, traceback }
        }
        EvcxrError::SubprocessTerminated(text) => {
            let cause = crash_cause(&format!("{}\n{text}", tail.join("\n")));
            let lost = lost_list(vars_before);
            let mut traceback = tail;
            traceback.push(text);
            traceback.push(format!("The child process was restarted; its variables were lost: {lost}."));
            ErrorContent {
                ename: "ChildProcessDied".into(),
                evalue: format!("{cause}; variables lost: {lost}"),
                traceback,
            }
        }
        EvcxrError::TypeRedefinedVariablesLost(vars) => ErrorContent::new(
            "VariablesLost",
            format!("a type was redefined, so these variables were dropped: {}", vars.join(", ")),
        ),
        EvcxrError::Message(m) => ErrorContent::new("EvcxrError", m),
    }
}

/// An interrupted cell; `killed` when the child had to be killed, taking `lost` with it.
pub fn interrupted(killed: bool, lost: &[String]) -> ErrorContent {
    let evalue = if killed {
        format!(
            "the cell did not stop within the grace period, so its process was restarted; variables lost: {}",
            lost_list(lost)
        )
    } else {
        "the cell was interrupted; variables are kept".to_string()
    };
    ErrorContent::new("KeyboardInterrupt", evalue)
}

fn lost_list(vars: &[String]) -> String {
    if vars.is_empty() {
        "none were defined".to_string()
    } else {
        vars.join(", ")
    }
}

/// Names the cause of a child's death from evcxr's termination text.
pub fn crash_cause(text: &str) -> String {
    if text.contains("Segmentation fault") {
        // evcxr's SIGSEGV handler prints this unless the stack is exhausted.
        return "the child process crashed with a segmentation fault".to_string();
    }
    let number = |pattern: &str| {
        regex::Regex::new(pattern).expect("static regex").captures(text).and_then(|c| c[1].parse::<i32>().ok())
    };
    let base = match number(r"signal: (\d+)") {
        Some(libc::SIGABRT) => "the child process aborted (SIGABRT)".to_string(),
        Some(libc::SIGSEGV) => {
            "the child process crashed with a segmentation fault (SIGSEGV), most likely a stack overflow".to_string()
        }
        Some(libc::SIGKILL) => {
            "the child process was killed (SIGKILL), typically by the out-of-memory killer".to_string()
        }
        Some(libc::SIGBUS) => "the child process crashed with a bus error (SIGBUS)".to_string(),
        Some(libc::SIGILL) => "the child process hit an illegal instruction (SIGILL)".to_string(),
        Some(n) => format!("the child process was terminated by signal {n}"),
        None => match number(r"exit status: (\d+)") {
            Some(c) => format!("the child process exited with status {c}"),
            None => "the child process ended".to_string(),
        },
    };
    if text.contains("overflowed its stack") {
        format!("{base}: stack overflow")
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_lines_of_a_body_and_of_generated_code() {
        // A plain cell under two magic lines: every line is the cell's.
        let plain = CellLines::body(2);
        assert_eq!((plain.cell_line(1), plain.cell_line(40)), (Some(3), Some(42)));
        // A Slurm cell's body, three lines from line 10 of the generated code, under one magic line.
        let job = CellLines::within(&[10], 3, 1);
        assert_eq!([9, 10, 12, 13].map(|l| job.cell_line(l)), [None, Some(2), Some(4), None]);
        // `%%compute --use-existing`: the body twice.
        let twice = CellLines::within(&[5, 20], 2, 1);
        assert_eq!([5, 6, 7, 20, 21, 22].map(|l| twice.cell_line(l)), [Some(2), Some(3), None, Some(2), Some(3), None]);
        assert!(twice.generated() && !plain.generated());
    }

    #[test]
    fn library_locations_become_the_cells_lines() {
        // Two lines in front, a `%%compute` body of two lines from line 4, under one magic line.
        let at = Locations::new(&[0, 0, 1, 2, 6, 7, 0], 2, Some(CellLines::within(&[4], 2, 1)));
        assert_eq!(at.cell_of, [0, 0, 0, 0, 2, 3, 0]);
        assert_eq!(at.map("panicked at src/lib.rs:6:9:\nboom"), "panicked at cell line 3, column 9:\nboom");
        assert_eq!(at.map("boom (at src/lib.rs:5)"), "boom (at cell line 2)");
        assert_eq!(at.map("    at ./src/lib.rs:5:1"), "    at cell line 2, column 1");
        // Generated lines, and another crate's `src/lib.rs`, stay as they were.
        assert_eq!(at.map("at src/lib.rs:7:1 and /dep/src/lib.rs:5:1"), "at src/lib.rs:7:1 and /dep/src/lib.rs:5:1");
    }

    #[test]
    fn backtraces_keep_the_cells_frames() {
        let trace = "   0: ctx_k::run_user_code_1::{{closure}}\n             at ./src/lib.rs:3:5\n   1: std::panicking::panic_handler\n   2: core::panicking::panic_fmt\n             at /rustc/x/core/src/panicking.rs:80:14\n   3: ctx_k::deep_panic\n             at ./src/lib.rs:2:19\n   4: run_user_code_1\n   5: evcxr::runtime::Runtime::run_loop\n   6: std::sys::backtrace::__rust_begin_short_backtrace\n   7: main";
        assert_eq!(
            user_frames(trace),
            ["   3: ctx_k::deep_panic", "             at ./src/lib.rs:2:19", "   4: run_user_code_1"]
        );
        assert_eq!(user_frames("no frames at all"), ["no frames at all"]);
    }

    #[test]
    fn crash_causes() {
        assert!(crash_cause("Subprocess terminated with status: signal: 6 (SIGABRT) (core dumped)").contains("aborted"));
        assert!(crash_cause("signal: 9 (SIGKILL)").contains("out-of-memory"));
        assert!(crash_cause("exit status: 3").contains("status 3"));
        assert!(crash_cause("signal: 11 (SIGSEGV)").contains("stack overflow"));
        assert!(!crash_cause("Segmentation fault.\nsignal: 11 (SIGSEGV)").contains("stack overflow"));
    }
}
