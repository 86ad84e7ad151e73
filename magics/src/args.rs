//! A magic's checked arguments and the small readers every parser shares (variable names,
//! the token an error points at). It sits below the registry, the calls and the context
//! parsers, so none of them needs another to read its arguments.

use crate::tokens::Token;
use std::collections::BTreeMap;

/// An argument error: the message and the index of the bad token (None: the line's end).
pub type ArgError = (String, Option<usize>);

/// Validated arguments of one magic invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    pub positionals: Vec<String>,
    /// Options by long name without dashes; flags map to `None`.
    pub options: BTreeMap<String, Option<String>>,
    /// The argument text as written, for arguments that are not shell words (JSON).
    pub raw: String,
    /// The same, untrimmed: token columns count from its start.
    pub raw_line: String,
}

impl Args {
    pub fn flag(&self, name: &str) -> bool {
        self.options.contains_key(name)
    }
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options.get(name).and_then(|v| v.as_deref())
    }
}

pub(crate) fn is_ident(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f.is_alphabetic() || f == '_')
        && c.all(|ch| ch.is_alphanumeric() || ch == '_')
        && n != "_"
}

/// Index of the k-th positional token (tokens that are not options), for error carets.
pub(crate) fn positional_token(tokens: &[Token], k: usize) -> Option<usize> {
    tokens.iter().enumerate().filter(|(_, t)| t.quoted || !t.text.starts_with('-')).nth(k).map(|(i, _)| i)
}

/// Index of the token holding an option's value (`--keep a,b` or `--keep=a,b`).
pub(crate) fn option_token(tokens: &[Token], long: &str) -> Option<usize> {
    let flag = format!("--{long}");
    tokens.iter().position(|t| t.text == flag || t.text.starts_with(&format!("{flag}="))).map(|i| {
        if tokens[i].text == flag {
            i + 1
        } else {
            i
        }
    })
}

/// Index of a flag's token (`--detach`).
pub(crate) fn flag_token(tokens: &[Token], long: &str) -> Option<usize> {
    tokens.iter().position(|t| t.text == format!("--{long}"))
}

/// `--keep a,b`: a comma-separated list of variable names.
pub fn keep_list(value: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = value.split(',').map(|s| s.trim().to_string()).collect();
    for n in &names {
        if !is_ident(n) {
            return Err(format!("`{n}` is not a variable name (expected --keep a,b,c)"));
        }
    }
    Ok(names)
}
