//! Requests built in Rust, beside the text grammar `%context` reads, and checked alike.

use super::requests::{is_framework_name, Request, RequestError, Requests, DEFAULT_FRAMEWORK};

/// Requests built in Rust rather than parsed: each setter is the text form's `key=value` for the
/// framework named last (`default` before any), checked as [`Requests::parse`] checks it, and
/// [`done`](RequestsBuilder::done) gives the first mistake, naming the framework.
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `done`"]
pub struct RequestsBuilder {
    requests: Requests,
    error: Option<RequestError>,
}

impl Requests {
    /// Starts requests built in Rust.
    pub fn build() -> RequestsBuilder {
        RequestsBuilder::default()
    }
}

impl RequestsBuilder {
    /// What follows is `name`'s request (`"torch"`, `"tf"`, `"default"`, ...).
    pub fn framework(mut self, name: &str) -> RequestsBuilder {
        if self.error.is_none() {
            if !is_framework_name(name) {
                self.error = Some(RequestError { message: format!("`{name}` is not a framework name"), token: None });
            } else if self.requests.get(name).is_some() {
                self.error = Some(RequestError { message: format!("framework `{name}` is given twice"), token: None });
            } else {
                self.requests.frameworks.push((name.to_string(), Request::default()));
            }
        }
        self
    }

    /// Whole CPUs; -1: all that remain fully free.
    pub fn num_cpus(self, n: i64) -> RequestsBuilder {
        self.set("num_cpus", n.to_string())
    }

    /// Whole GPUs; -1: all that remain fully free.
    pub fn num_gpus(self, n: i64) -> RequestsBuilder {
        self.set("num_gpus", n.to_string())
    }

    /// A share in (0, 1] of CPU `i`.
    pub fn cpu(self, i: u32, share: f64) -> RequestsBuilder {
        self.set(&format!("cpu/{i}"), share.to_string())
    }

    /// A share in (0, 1] of GPU `i`.
    pub fn gpu(self, i: u32, share: f64) -> RequestsBuilder {
        self.set(&format!("gpu/{i}"), share.to_string())
    }

    fn set(mut self, key: &str, value: String) -> RequestsBuilder {
        if self.error.is_none() {
            if self.requests.frameworks.is_empty() {
                self.requests.frameworks.push((DEFAULT_FRAMEWORK.to_string(), Request::default()));
            }
            let (fw, req) = self.requests.frameworks.last_mut().expect("one was just pushed");
            if let Err(m) = req.set(key, &value) {
                self.error = Some(RequestError { message: format!("{fw}: {m}"), token: None });
            }
        }
        self
    }

    /// The requests, or the first mistake in them.
    pub fn done(self) -> Result<Requests, RequestError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.requests),
        }
    }
}
