//! `%timeit` and `%%timeit`'s options, IPython's: `-n N` loops per run (else chosen so a run
//! takes about 0.2 s), `-r R` runs (7), `-o` the result as a value, `-q` quiet, `-p P` digits.

/// What `%timeit` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeitOptions {
    pub number: Option<u64>,
    pub repeat: u32,
    /// `-o`: the `TimeitResult` is the value.
    pub output: bool,
    /// `-q`: nothing printed.
    pub quiet: bool,
    /// `-p`: significant digits of the figures.
    pub precision: u32,
}

impl Default for TimeitOptions {
    fn default() -> Self {
        TimeitOptions { number: None, repeat: 7, output: false, quiet: false, precision: 3 }
    }
}

/// Reads the leading options of `text` (`-n 100`, `-n100`, `-r 3`, `-o`, `-q`, `-p 4`, `--`);
/// the rest is the code to time. Anything else starting with `-` is code (`-x.abs()`).
pub fn timeit_options(text: &str) -> Result<(TimeitOptions, &str), String> {
    let mut opts = TimeitOptions::default();
    let mut rest = text.trim_start();
    loop {
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..word_end];
        let after = rest[word_end..].trim_start();
        match word.as_bytes() {
            [b'-', b'-'] => return Ok((opts, after)),
            [b'-', flag @ (b'o' | b'q')] => {
                if *flag == b'o' {
                    opts.output = true;
                } else {
                    opts.quiet = true;
                }
                rest = after;
            }
            [b'-', flag @ (b'n' | b'r' | b'p'), value @ ..] if value.iter().all(u8::is_ascii_digit) => {
                let (value, next) = if value.is_empty() {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], after[end..].trim_start())
                } else {
                    (&word[2..], after)
                };
                let name = match flag {
                    b'n' => "-n (loops per run)",
                    b'r' => "-r (runs)",
                    _ => "-p (digits)",
                };
                let n: u64 = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ if value.is_empty() => return Err(format!("{name} needs a number")),
                    _ => return Err(format!("{name} takes a whole number above 0, not `{value}`")),
                };
                match flag {
                    b'n' => opts.number = Some(n),
                    b'r' => opts.repeat = u32::try_from(n).map_err(|_| format!("{name}: {n} is too many"))?,
                    _ => opts.precision = u32::try_from(n.min(17)).unwrap_or(17),
                }
                rest = next;
            }
            _ => return Ok((opts, rest)),
        }
    }
}
