//! Tables for display bundles: rows as aligned plain text and as HTML, in the two forms the
//! kernel shows (titled listings for `%repo` and `%context`, figures for experiments and the
//! cell log), drawn by one renderer.

use std::fmt::Write as _;

/// Which of the kernel's two table forms to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style<'a> {
    /// A title line, a blank line, left-aligned columns, each line ending in a newline; HTML: a
    /// paragraph and a plain table. With no rows, just the title.
    Listing { title: &'a str },
    /// Left-aligned first column and right-aligned figures, no final newline; HTML: a
    /// `dryml-report` table with a head and a body, aligned the same. Drawn even with no rows.
    Figures,
}

/// A titled listing (see [`Style::Listing`]).
pub fn render(title: &str, header: &[&str], rows: &[Vec<String>]) -> (String, String) {
    draw(Style::Listing { title }, header, rows)
}

/// A table of figures (see [`Style::Figures`]).
pub fn figures(header: &[&str], rows: &[Vec<String>]) -> (String, String) {
    draw(Style::Figures, header, rows)
}

/// Text and HTML of a table; cells beyond the header's columns are left out of the text.
pub fn draw(style: Style<'_>, header: &[&str], rows: &[Vec<String>]) -> (String, String) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let right = |i: usize| style == Style::Figures && i > 0;
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            if right(i) {
                let _ = write!(l, "{c:>w$}");
            } else {
                let _ = write!(l, "{c:<w$}");
            }
        }
        l.trim_end().to_string()
    };
    let (mut text, mut html) = match style {
        Style::Listing { title } => {
            let (text, html) = (format!("{title}\n"), format!("<p>{}</p>", escape(title)));
            if rows.is_empty() {
                return (text, html);
            }
            (text + "\n", html + "<table><tr>")
        }
        Style::Figures => (String::new(), String::from("<table class=\"dryml-report\"><thead><tr>")),
    };
    text.push_str(&line(&mut header.iter().copied()));
    for h in header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str(match style {
        Style::Listing { .. } => "</tr>",
        Style::Figures => "</tr></thead><tbody>",
    });
    for r in rows {
        text.push('\n');
        text.push_str(&line(&mut r.iter().map(String::as_str)));
        html.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            match style {
                Style::Listing { .. } => html.push_str("<td>"),
                Style::Figures => {
                    let align = if right(i) { "right" } else { "left" };
                    let _ = write!(html, "<td style=\"text-align:{align}\">");
                }
            }
            let _ = write!(html, "{}</td>", escape(c));
        }
        html.push_str("</tr>");
    }
    if let Style::Listing { .. } = style {
        text.push('\n');
        html.push_str("</table>");
    } else {
        html.push_str("</tbody></table>");
    }
    (text, html)
}

/// Escapes text for HTML content.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_text_and_escaped_html() {
        let (text, html) = render("T", &["a", "bb"], &[vec!["xyz".into(), "<1>".into()]]);
        assert_eq!(text, "T\n\na    bb\nxyz  <1>\n");
        assert_eq!(
            html,
            "<p>T</p><table><tr><th>a</th><th>bb</th></tr><tr><td>xyz</td><td>&lt;1&gt;</td></tr></table>"
        );
        assert_eq!(render("only", &["a"], &[]), ("only\n".to_string(), "<p>only</p>".to_string()));
    }

    #[test]
    fn figures_align_right_after_the_first_column() {
        let rows =
            vec![vec!["CPU".to_string(), "1,024".into(), "7".into()], vec!["gpu/0 A&B".into(), "".into(), "12".into()]];
        let (text, html) = figures(&["RAM (MiB)", "Used", "Peak"], &rows);
        assert_eq!(text, "RAM (MiB)   Used  Peak\nCPU        1,024     7\ngpu/0 A&B           12");
        assert_eq!(
            html,
            "<table class=\"dryml-report\"><thead><tr><th>RAM (MiB)</th><th>Used</th><th>Peak</th></tr></thead><tbody>\
             <tr><td style=\"text-align:left\">CPU</td><td style=\"text-align:right\">1,024</td><td style=\"text-align:right\">7</td></tr>\
             <tr><td style=\"text-align:left\">gpu/0 A&amp;B</td><td style=\"text-align:right\"></td><td style=\"text-align:right\">12</td></tr>\
             </tbody></table>"
        );
        let (text, html) = figures(&["a", "b"], &[]);
        assert_eq!(text, "a  b");
        assert_eq!(
            html,
            "<table class=\"dryml-report\"><thead><tr><th>a</th><th>b</th></tr></thead><tbody></tbody></table>"
        );
    }
}
