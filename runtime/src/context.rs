//! Resource requests, DRYML's `{'tf': {'gpu/0': 0.5}}`, in one grammar for cells and magics.
//!
//! The text form is what `%context` takes: framework names, each followed by its `key=value`
//! pairs, e.g. `tf gpu/0=0.5 torch num_gpus=0`. Keys are `num_cpus` and `num_gpus` (whole numbers,
//! -1 meaning all that remain fully free) and `cpu/<i>` and `gpu/<i>` (a fraction in (0, 1]).
//! Errors carry the index of the offending token so callers can point at it.

use std::collections::BTreeMap;
use std::fmt;

/// What one framework asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    pub num_cpus: Option<i64>,
    pub num_gpus: Option<i64>,
    /// `cpu/<i>`: fraction of CPU i.
    pub cpus: BTreeMap<u32, f64>,
    /// `gpu/<i>`: fraction of GPU i.
    pub gpus: BTreeMap<u32, f64>,
}

/// Requests per framework (`default`, `tf`, `torch`, or any other name), in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests {
    pub frameworks: Vec<(String, Request)>,
}

/// A bad request: what is wrong, and which token (0-based) says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    pub message: String,
    pub token: Option<usize>,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RequestError {}

fn err(message: String, token: usize) -> RequestError {
    RequestError {
        message,
        token: Some(token),
    }
}

fn is_framework_name(s: &str) -> bool {
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
                    let Some((fw, req)) = out.frameworks.last_mut() else {
                        return Err(err(
                            format!("`{tok}` needs a framework before it, as in `tf {tok}`"),
                            i,
                        ));
                    };
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
    /// and `gpus` GPUs; the error names the framework and the key.
    pub fn check_devices(&self, cpus: usize, gpus: usize) -> Result<(), String> {
        for (fw, r) in &self.frameworks {
            for (kind, map, have) in [("cpu", &r.cpus, cpus), ("gpu", &r.gpus, gpus)] {
                if let Some(i) = map.keys().find(|&&i| i as usize >= have) {
                    let plural = if have == 1 { "" } else { "s" };
                    return Err(format!(
                        "{fw}: {kind}/{i} does not exist (this machine has {have} {kind}{plural}, numbered from 0)"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Request {
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
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
                let i: u32 = index
                    .parse()
                    .map_err(|_| format!("`{key}`: the device index must be a whole number"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_parse() {
        // (text, DRYML's spelling of the result)
        let table: &[(&str, &str)] = &[
            ("tf gpu/0=0.5 torch num_gpus=0", "{'tf': {'gpu/0': 0.5}, 'torch': {'num_gpus': 0}}"),
            ("default num_cpus=-1", "{'default': {'num_cpus': -1}}"),
            ("tf", "{'tf': {}}"),
            ("", "{}"),
            ("jax cpu/1=1 cpu/0=0.25 num_gpus=2", "{'jax': {'num_gpus': 2, 'cpu/0': 0.25, 'cpu/1': 1.0}}"),
            ("tf num_cpus=2 num_gpus=1 gpu/3=1.0", "{'tf': {'num_cpus': 2, 'num_gpus': 1, 'gpu/3': 1.0}}"),
        ];
        for (text, want) in table {
            let r = Requests::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(r.to_string(), *want, "{text:?}");
        }
        let r = Requests::parse("tf gpu/0=0.5").unwrap();
        assert_eq!(r.get("tf").unwrap().gpus[&0], 0.5);
        assert!(r.get("torch").is_none());
    }

    #[test]
    fn requests_that_fail() {
        // (text, words the message must contain, index of the token it points at)
        let table: &[(&str, &str, usize)] = &[
            ("gpu/0=0.5", "needs a framework before it", 0),
            ("tf gpu/0=1.5", "tf: gpu/0 must be a fraction in (0, 1], got 1.5", 1),
            ("tf gpu/0=0", "in (0, 1]", 1),
            ("tf gpu/0=-0.1", "in (0, 1]", 1),
            ("tf gpu/0=half", "got `half`", 1),
            ("tf gpu/0=NaN", "got `NaN`", 1),
            ("tf gpu/x=0.5", "device index must be a whole number", 1),
            ("tf tpu/0=1", "unknown key `tpu/0`", 1),
            ("tf memory=4", "unknown key `memory`", 1),
            ("tf num_gpus=1.5", "num_gpus must be a whole number", 1),
            ("tf num_gpus=-2", "must be -1 or more", 1),
            ("torch num_cpus=1 num_cpus=2", "`num_cpus` is given twice", 2),
            ("tf gpu/0=0.5 gpu/0=0.25", "`gpu/0` is given twice", 2),
            ("tf torch tf", "framework `tf` is given twice", 2),
            ("tf {x}", "not a framework name", 1),
        ];
        for (text, words, token) in table {
            let e = Requests::parse(text).expect_err(text);
            assert!(e.message.contains(words), "{text:?}: {}", e.message);
            assert_eq!(e.token, Some(*token), "{text:?}");
        }
    }

    #[test]
    fn devices_must_exist() {
        let r = Requests::parse("tf gpu/1=0.5 torch cpu/3=1").unwrap();
        assert_eq!(r.check_devices(4, 1).unwrap_err(), "tf: gpu/1 does not exist (this machine has 1 gpu, numbered from 0)");
        assert!(r.check_devices(4, 2).is_ok());
        assert!(r.check_devices(3, 2).unwrap_err().starts_with("torch: cpu/3"));
    }
}
