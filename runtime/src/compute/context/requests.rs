//! Resource requests as `%context` writes them: each framework's counts and shares, parsed
//! with the offending token named, checked against a machine, and shown.

use std::collections::BTreeMap;
use std::fmt;

/// What one framework asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// Whole CPUs; -1: all that remain fully free.
    pub num_cpus: Option<i64>,
    /// Whole GPUs; -1: all that remain fully free.
    pub num_gpus: Option<i64>,
    /// `cpu/<i>`: fraction of CPU i.
    pub cpus: BTreeMap<u32, f64>,
    /// `gpu/<i>`: fraction of GPU i.
    pub gpus: BTreeMap<u32, f64>,
}

/// The framework of requests that name none.
pub const DEFAULT_FRAMEWORK: &str = "default";

/// Requests per framework (`default`, `tf`, `torch`, or any other name), in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests {
    /// Each framework and what it asks for, in the order written.
    pub frameworks: Vec<(String, Request)>,
}

/// A bad request: what is wrong, and which token (0-based) says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// What is wrong.
    pub message: String,
    /// The index of the offending token, when there is one.
    pub token: Option<usize>,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RequestError {}

fn err(message: String, token: usize) -> RequestError {
    RequestError { message, token: Some(token) }
}

pub(super) fn is_framework_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_alphabetic() || f == '_')
        && c.all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '-')
}

impl Requests {
    /// Parses the text form, split on whitespace.
    pub fn parse(text: &str) -> Result<Requests, RequestError> {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        Self::parse_tokens(&tokens)
    }

    /// Parses already split tokens (the magic parser's, which know their columns).
    pub fn parse_tokens(tokens: &[&str]) -> Result<Requests, RequestError> {
        let mut out = Requests::default();
        for (i, tok) in tokens.iter().enumerate() {
            match tok.split_once('=') {
                None => {
                    if !is_framework_name(tok) {
                        return Err(err(format!("`{tok}` is not a framework name or a key=value pair"), i));
                    }
                    if out.get(tok).is_some() {
                        return Err(err(format!("framework `{tok}` is given twice"), i));
                    }
                    out.frameworks.push((tok.to_string(), Request::default()));
                }
                Some((key, value)) => {
                    // Keys before any framework are `default`'s, as DRYML's {'default': {...}}.
                    if out.frameworks.is_empty() {
                        out.frameworks.push((DEFAULT_FRAMEWORK.to_string(), Request::default()));
                    }
                    let (fw, req) = out.frameworks.last_mut().expect("one was just pushed");
                    req.set(key, value).map_err(|m| err(format!("{fw}: {m}"), i))?;
                }
            }
        }
        Ok(out)
    }

    /// The request of one framework.
    pub fn get(&self, framework: &str) -> Option<&Request> {
        self.frameworks.iter().find(|(f, _)| f == framework).map(|(_, r)| r)
    }

    /// Checks that every `cpu/<i>` and `gpu/<i>` names a device of a machine with `cpus` CPUs
    /// and `gpus` GPUs; the error names the framework and the key, and gives the key apart.
    pub fn check_devices(&self, cpus: usize, gpus: usize) -> Result<(), (String, String)> {
        for (fw, r) in &self.frameworks {
            for (kind, map, have) in [("cpu", &r.cpus, cpus), ("gpu", &r.gpus, gpus)] {
                if let Some(i) = map.keys().find(|&&i| i as usize >= have) {
                    let plural = if have == 1 { "" } else { "s" };
                    return Err((
                        format!(
                            "{fw}: {kind}/{i} does not exist (this machine has {have} {kind}{plural}, numbered from 0)"
                        ),
                        format!("{kind}/{i}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Request {
    pub(super) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let twice = || format!("`{key}` is given twice");
        match key {
            "num_cpus" | "num_gpus" => {
                let n: i64 = value
                    .parse()
                    .map_err(|_| format!("{key} must be a whole number (or -1 for all free), got `{value}`"))?;
                if n < -1 {
                    return Err(format!("{key} must be -1 or more, got {n}"));
                }
                let slot = if key == "num_cpus" { &mut self.num_cpus } else { &mut self.num_gpus };
                if slot.replace(n).is_some() {
                    return Err(twice());
                }
                Ok(())
            }
            _ => {
                let (kind, index) = key.split_once('/').ok_or_else(|| unknown(key))?;
                let map = match kind {
                    "cpu" => &mut self.cpus,
                    "gpu" => &mut self.gpus,
                    _ => return Err(unknown(key)),
                };
                let i: u32 = index.parse().map_err(|_| format!("`{key}`: the device index must be a whole number"))?;
                let f: f64 = value
                    .parse()
                    .ok()
                    .filter(|f: &f64| f.is_finite())
                    .ok_or_else(|| format!("{key} must be a fraction in (0, 1], got `{value}`"))?;
                if !(f > 0.0 && f <= 1.0) {
                    return Err(format!("{key} must be a fraction in (0, 1], got {value}"));
                }
                if map.insert(i, f).is_some() {
                    return Err(twice());
                }
                Ok(())
            }
        }
    }
}

fn unknown(key: &str) -> String {
    format!("unknown key `{key}` (expected num_cpus, num_gpus, cpu/<i> or gpu/<i>)")
}

impl Requests {
    /// The text form, which [`Requests::parse`] reads back.
    pub fn to_text(&self) -> String {
        let mut words = Vec::new();
        for (fw, r) in &self.frameworks {
            words.push(fw.clone());
            if let Some(n) = r.num_cpus {
                words.push(format!("num_cpus={n}"));
            }
            if let Some(n) = r.num_gpus {
                words.push(format!("num_gpus={n}"));
            }
            for (kind, map) in [("cpu", &r.cpus), ("gpu", &r.gpus)] {
                for (i, v) in map {
                    words.push(format!("{kind}/{i}={v}"));
                }
            }
        }
        words.join(" ")
    }
}

/// DRYML's dictionary spelling, as its error messages show requests.
impl fmt::Display for Requests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (k, (fw, r)) in self.frameworks.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "'{fw}': {{")?;
            let mut items: Vec<String> = Vec::new();
            if let Some(n) = r.num_cpus {
                items.push(format!("'num_cpus': {n}"));
            }
            if let Some(n) = r.num_gpus {
                items.push(format!("'num_gpus': {n}"));
            }
            for (kind, map) in [("cpu", &r.cpus), ("gpu", &r.gpus)] {
                for (i, v) in map {
                    items.push(format!("'{kind}/{i}': {v:?}"));
                }
            }
            write!(f, "{}}}", items.join(", "))?;
        }
        f.write_str("}")
    }
}
