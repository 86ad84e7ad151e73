//! The registry: what a magic is (name, kind, summary, argument grammar), the table of them
//! (`table.rs`, its rows in `rows.rs` and `habits.rs`), and the grammar's check of a line's tokens.

use crate::args::{ArgError, Args};
use crate::call::Call;
use crate::tokens::Token;
pub use dryml_sys::units::parse_seconds;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MagicKind {
    /// `%name args`: applies to the rest of the cell.
    Line,
    /// `%%name args`: the whole cell is its body.
    Cell,
}

impl MagicKind {
    pub fn prefix(self) -> &'static str {
        match self {
            MagicKind::Line => "%",
            MagicKind::Cell => "%%",
        }
    }
    pub(crate) fn word(self) -> &'static str {
        match self {
            MagicKind::Line => "line",
            MagicKind::Cell => "cell",
        }
    }
}

/// One element of a magic's argument grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSpec {
    /// `--long` or `-s`, no value.
    Flag { long: &'static str, short: Option<char>, help: &'static str },
    /// `--long VALUE` or `--long=VALUE`.
    Opt { long: &'static str, value: &'static str, help: &'static str },
    /// A positional argument; `many` takes all the rest.
    Pos { name: &'static str, required: bool, many: bool, help: &'static str },
    /// The whole text, read by the magic's parser alone (IPython's `-n 10` short options).
    Raw { name: &'static str, help: &'static str },
}

/// Reads a magic's arguments, already checked against its grammar, into its typed call, with
/// the checks the grammar cannot say.
pub type Parse = fn(&Args, &[Token]) -> Result<Call, ArgError>;

#[derive(Debug)]
pub struct MagicSpec {
    pub name: &'static str,
    pub kind: MagicKind,
    pub summary: &'static str,
    pub usage: &'static str,
    pub details: &'static str,
    pub args: &'static [ArgSpec],
    pub parse: Parse,
}

/// Magics are identified by name and kind; the registry holds each once.
impl PartialEq for MagicSpec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.kind == other.kind
    }
}
impl Eq for MagicSpec {}

impl MagicSpec {
    pub fn display_name(&self) -> String {
        format!("{}{}", self.kind.prefix(), self.name)
    }

    /// The `%name?` help text.
    pub fn help_text(&self) -> String {
        let mut out = format!("{}: {}\n\nUsage: {}\n", self.display_name(), self.summary, self.usage);
        if !self.args.is_empty() {
            out.push_str("\nArguments:\n");
            for a in self.args {
                let (left, help) = match a {
                    ArgSpec::Flag { long, short, help } => (
                        match short {
                            Some(s) => format!("-{s}, --{long}"),
                            None => format!("--{long}"),
                        },
                        help,
                    ),
                    ArgSpec::Opt { long, value, help } => (format!("--{long} {value}"), help),
                    ArgSpec::Pos { name, help, .. } | ArgSpec::Raw { name, help } => (name.to_string(), help),
                };
                out.push_str(&format!("  {left:<20} {help}\n"));
            }
        }
        if !self.details.is_empty() {
            out.push('\n');
            out.push_str(self.details);
            out.push('\n');
        }
        out
    }

    /// Checks tokens against the grammar. Errors carry the index of the offending token.
    pub(crate) fn validate(&self, tokens: &[Token], raw: &str) -> Result<(Args, Call), ArgError> {
        let mut args = Args { raw: raw.trim().to_string(), raw_line: raw.to_string(), ..Args::default() };
        if matches!(self.args, [ArgSpec::Raw { .. }]) {
            let call = (self.parse)(&args, tokens)?;
            return Ok((args, call));
        }
        let positional: Vec<&ArgSpec> = self.args.iter().filter(|a| matches!(a, ArgSpec::Pos { .. })).collect();
        let takes_many = positional.iter().any(|a| matches!(a, ArgSpec::Pos { many: true, .. }));
        let mut i = 0;
        let mut only_positional = false;
        while i < tokens.len() {
            let tok = &tokens[i];
            let text = tok.text.as_str();
            if !only_positional && !tok.quoted && text == "--" {
                only_positional = true;
            } else if !only_positional && !tok.quoted && text.starts_with("--") {
                let (name, inline) = match text[2..].split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (&text[2..], None),
                };
                match self.find_long(name) {
                    Some(ArgSpec::Flag { long, .. }) => {
                        if inline.is_some() {
                            return Err((format!("flag --{long} takes no value"), Some(i)));
                        }
                        args.options.insert(long.to_string(), None);
                    }
                    Some(ArgSpec::Opt { long, value, .. }) => {
                        let v = match inline {
                            Some(v) => v,
                            None => {
                                i += 1;
                                match tokens.get(i) {
                                    Some(t) => t.text.clone(),
                                    None => {
                                        return Err((format!("option --{long} needs a value {value}"), Some(i - 1)))
                                    }
                                }
                            }
                        };
                        args.options.insert(long.to_string(), Some(v));
                    }
                    _ => return Err((self.unknown_option(text), Some(i))),
                }
            } else if !only_positional
                && !tok.quoted
                && text.len() == 2
                && text.starts_with('-')
                && text.as_bytes()[1].is_ascii_alphabetic()
            {
                let c = text.as_bytes()[1] as char;
                match self.args.iter().find(|a| matches!(a, ArgSpec::Flag { short: Some(s), .. } if *s == c)) {
                    Some(ArgSpec::Flag { long, .. }) => {
                        args.options.insert(long.to_string(), None);
                    }
                    _ => return Err((self.unknown_option(text), Some(i))),
                }
            } else {
                if args.positionals.len() >= positional.len() && !takes_many {
                    return Err((
                        if positional.is_empty() {
                            format!("takes no arguments, got `{text}`")
                        } else {
                            format!("unexpected argument `{text}`")
                        },
                        Some(i),
                    ));
                }
                args.positionals.push(tok.text.clone());
            }
            i += 1;
        }
        for (idx, p) in positional.iter().enumerate() {
            if let ArgSpec::Pos { name, required: true, .. } = p {
                if args.positionals.len() <= idx {
                    return Err((format!("missing required argument {name}"), None));
                }
            }
        }
        let call = (self.parse)(&args, tokens)?;
        Ok((args, call))
    }

    fn find_long(&self, name: &str) -> Option<&ArgSpec> {
        self.args.iter().find(|a| match a {
            ArgSpec::Flag { long, .. } | ArgSpec::Opt { long, .. } => *long == name,
            ArgSpec::Pos { .. } | ArgSpec::Raw { .. } => false,
        })
    }

    fn unknown_option(&self, text: &str) -> String {
        let known: Vec<String> = self
            .args
            .iter()
            .filter_map(|a| match a {
                ArgSpec::Flag { long, .. } | ArgSpec::Opt { long, .. } => Some(format!("--{long}")),
                ArgSpec::Pos { .. } | ArgSpec::Raw { .. } => None,
            })
            .collect();
        if known.is_empty() {
            format!("unknown option `{text}` (this magic has no options)")
        } else {
            format!("unknown option `{text}` (known: {})", known.join(", "))
        }
    }
}
