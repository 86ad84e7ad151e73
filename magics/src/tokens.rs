//! Splits a magic's argument text into tokens, shell-style, remembering each token's column.

/// One argument token; `column` is 0-based within the text given to [`tokenize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub column: usize,
    /// Written with quotes, so never read as an option.
    pub quoted: bool,
}

/// Whitespace splits tokens; single and double quotes group; backslash escapes in double quotes.
/// Errors give a message and the 0-based column of the problem.
pub fn tokenize(text: &str) -> Result<Vec<Token>, (String, usize)> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    let col_of = |byte: usize| text[..byte].chars().count();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut buf = String::new();
        let mut quoted = false;
        while let Some(&(pos, c)) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '\'' | '"' => {
                    quoted = true;
                    let mut closed = false;
                    while let Some((_, q)) = chars.next() {
                        if q == c {
                            closed = true;
                            break;
                        }
                        if q == '\\' && c == '"' {
                            if let Some((_, e)) = chars.next() {
                                buf.push(e);
                            }
                            continue;
                        }
                        buf.push(q);
                    }
                    if !closed {
                        return Err((format!("unclosed {c} quote"), col_of(pos)));
                    }
                }
                _ => buf.push(c),
            }
        }
        tokens.push(Token { text: buf, column: col_of(start), quoted });
    }
    Ok(tokens)
}
