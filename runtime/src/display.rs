//! Rich output from cells: `display_data`, in-place updates by display id, and `clear_output`.
//!
//! Each call prints one `DRYML_...` line that the kernel turns into a Jupyter message while the
//! cell is still running. Outside the kernel, the plain-text form is printed instead.

use std::fmt::Write as _;
use std::io::Write;

pub(crate) fn in_kernel() -> bool {
    std::env::var_os(crate::protocol::FLUSH_FDS_ENV).is_some()
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

fn emit(line: String) {
    let mut out = std::io::stdout().lock();
    // Finish any partial line first: the kernel reads these markers at line starts.
    let _ = out.flush();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Shows a mime bundle (pairs of mime type and content). With `display_id`, later calls with
/// `update = true` replace it in place.
pub fn display(bundle: &[(&str, &str)], display_id: Option<&str>, update: bool) {
    send(bundle, display_id, if update { "true" } else { "false" });
}

/// Shows a mime bundle under `display_id`: a new output the first time this cell shows that id,
/// the same output redrawn after that. (A re-run cell shows it afresh: its old output is gone.)
pub fn show(bundle: &[(&str, &str)], display_id: &str) {
    send(bundle, Some(display_id), "\"auto\"");
}

/// Shows SVG text inline (a figure from `plotters`' SVG backend, say).
pub fn svg(svg: &str) {
    display(&[("image/svg+xml", svg), ("text/plain", "<svg image>")], None, false);
}

/// Shows PNG bytes inline (a dataset's sample, a saved figure).
pub fn png(bytes: &[u8]) {
    image("image/png", bytes);
}

/// Shows JPEG bytes inline.
pub fn jpeg(bytes: &[u8]) {
    image("image/jpeg", bytes);
}

/// Shows an image of mime type `mime` (`image/png`, `image/jpeg`, `image/gif`) from its bytes;
/// Jupyter carries them base64-encoded.
pub fn image(mime: &str, bytes: &[u8]) {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let text = format!("<{mime} image, {} bytes>", bytes.len());
    display(&[(mime, &data), ("text/plain", &text)], None, false);
}

fn send(bundle: &[(&str, &str)], display_id: Option<&str>, update: &str) {
    if !in_kernel() {
        if let Some((_, text)) = bundle.iter().find(|(m, _)| *m == "text/plain") {
            println!("{text}");
        }
        return;
    }
    let data: Vec<String> = bundle
        .iter()
        .map(|(m, c)| format!("{}:{}", json_string(m), json_string(c)))
        .collect();
    let mut line = format!(
        "{} {{\"data\":{{{}}},\"update\":{update}",
        crate::protocol::DISPLAY,
        data.join(",")
    );
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
        crate::protocol::ERROR,
        json_string(ename),
        json_string(evalue)
    ));
}

/// Tells the kernel that a loop polling the interrupt flag is (`on`) or is no longer running.
pub(crate) fn announce_polling(on: bool) {
    if in_kernel() {
        emit(format!("{} {{\"on\":{on}}}", crate::protocol::POLLING));
    }
}

/// Shows HTML (with a plain-text fallback made by stripping tags).
pub fn html(html: &str) {
    display(&[("text/html", html), ("text/plain", &strip_tags(html))], None, false);
}

/// Clears the cell's output; with `wait`, only when new output arrives.
pub fn clear_output(wait: bool) {
    if in_kernel() {
        emit(format!("{} {{\"wait\":{wait}}}", crate::protocol::CLEAR));
    }
}

/// Plain text of an HTML snippet, for the `text/plain` fallback.
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

/// A value that shows as HTML when it is a cell's result (evcxr's `evcxr_display` protocol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Html(pub String);

impl Html {
    pub fn evcxr_display(&self) {
        println!(
            "EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT",
            self.0
        );
        println!(
            "EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT",
            strip_tags(&self.0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escaping() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn strips_tags() {
        assert_eq!(strip_tags("<b>bold</b> text"), "bold text");
    }
}
