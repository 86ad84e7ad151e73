//! Tables for display bundles: a title and rows as aligned plain text and as HTML.

/// Text (a title line, a blank line, then padded columns) and HTML (a paragraph and a table).
/// With no rows, just the title.
pub fn render(title: &str, header: &[&str], rows: &[Vec<String>]) -> (String, String) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells.zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut text = format!("{title}\n");
    let mut html = format!("<p>{}</p>", esc(title));
    if rows.is_empty() {
        return (text, html);
    }
    text.push('\n');
    text.push_str(&line(&mut header.iter().copied()));
    text.push('\n');
    html.push_str("<table><tr>");
    for h in header {
        html.push_str(&format!("<th>{}</th>", esc(h)));
    }
    html.push_str("</tr>");
    for r in rows {
        text.push_str(&line(&mut r.iter().map(String::as_str)));
        text.push('\n');
        html.push_str("<tr>");
        for c in r {
            html.push_str(&format!("<td>{}</td>", esc(c)));
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
    (text, html)
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligned_text_and_escaped_html() {
        let (text, html) = super::render("T", &["a", "bb"], &[vec!["xyz".into(), "<1>".into()]]);
        assert_eq!(text, "T\n\na    bb\nxyz  <1>\n");
        assert!(html.ends_with("<tr><td>xyz</td><td>&lt;1&gt;</td></tr></table>"), "{html}");
        assert_eq!(super::render("only", &["a"], &[]).0, "only\n");
    }
}
