//! The lines a cell prints for the kernel (`DRYML_DISPLAY {..}` and the rest), which the kernel
//! turns into Jupyter messages while the cell runs; outside the kernel, plain text instead.

use std::fmt::Write as _;
use std::io::Write;

pub(crate) fn in_kernel() -> bool {
    std::env::var_os(crate::sys::protocol::FLUSH_FDS_ENV).is_some()
}

/// The mime type of the machine-readable data in the kernel's displays (experiment reports,
/// `%context`, `%repo`). Not `application/json`: JupyterLab ranks its JSON viewer first, so a
/// bundle carrying `application/json` showed a collapsible data tree instead of its table.
pub const DATA_MIME: &str = "application/vnd.dryml+json";

/// A string as a JSON string literal, for the `DRYML_*` lines.
pub fn json_string(s: &str) -> String {
    // Serializing a string into memory cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

pub(crate) fn emit(line: String) {
    let mut out = std::io::stdout().lock();
    // Finish any partial line first: the kernel reads these markers at line starts.
    let _ = out.flush();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub(crate) fn send(bundle: &[(&str, &str)], display_id: Option<&str>, update: &str) {
    if !in_kernel() {
        if let Some((_, text)) = bundle.iter().find(|(m, _)| *m == "text/plain") {
            println!("{text}");
        }
        return;
    }
    let data: Vec<String> = bundle.iter().map(|(m, c)| format!("{}:{}", json_string(m), json_string(c))).collect();
    let mut line = format!("{} {{\"data\":{{{}}},\"update\":{update}", crate::sys::protocol::DISPLAY, data.join(","));
    if let Some(id) = display_id {
        let _ = write!(line, ",\"display_id\":{}", json_string(id));
    }
    line.push('}');
    emit(line);
}

/// Makes the running cell end as an error named `ename` (as a Python exception would), after
/// it has returned normally, so the notebook's variables are kept. Outside the kernel the error
/// is printed to stderr.
pub fn raise_error(ename: &str, evalue: &str) {
    if !in_kernel() {
        eprintln!("{ename}: {evalue}");
        return;
    }
    emit(format!(
        "{} {{\"ename\":{},\"evalue\":{}}}",
        crate::sys::protocol::ERROR,
        json_string(ename),
        json_string(evalue)
    ));
}

/// Tells the kernel that a loop polling the interrupt flag is (`on`) or is no longer running.
pub(crate) fn announce_polling(on: bool) {
    if in_kernel() {
        emit(format!("{} {{\"on\":{on}}}", crate::sys::protocol::POLLING));
    }
}

/// Plain text of an HTML snippet, for the `text/plain` fallback.
/// Text for HTML (and SVG): `&`, `<`, `>` and quotes escaped.
pub fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escaping() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }
}
