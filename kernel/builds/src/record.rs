//! The wrapper's half: the cell crate's rustc command, kept where the next build finds it.

use serde::{Deserialize, Serialize};
use std::fs;
use std::path::Path;
use std::process::Command;

/// What a command must not carry over from the build that recorded it: the jobserver cargo lent
/// that rustc (its file descriptors are gone) and cargo's wrapper setting.
const NOT_RECORDED: &[&str] = &["MAKEFLAGS", "MFLAGS", "CARGO_MAKEFLAGS", "RUSTC_WORKSPACE_WRAPPER"];

/// A rustc command as cargo ran it: enough to run it again without cargo.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Recorded {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
}

impl Recorded {
    /// The value of the argument after `flag` (`--out-dir`, `--crate-name`).
    pub(crate) fn arg_after(&self, flag: &str) -> Option<&str> {
        self.args.windows(2).find(|w| w[0] == flag).map(|w| w[1].as_str())
    }
}

/// In the rustc wrapper, once rustc has built the cell crate: records `command` (with this
/// process's environment, but for `wrapper_env`, the wrapper's own variables) in `to`, whole or
/// not at all. Nothing is recorded for a command that is not text: it could not be given back.
pub(crate) fn record(command: &Command, to: &Path, wrapper_env: &[&str]) {
    let Some(recorded) = recorded(command, wrapper_env) else {
        return;
    };
    let Ok(json) = serde_json::to_vec(&recorded) else {
        return;
    };
    // The kernel reads it once cargo is done: a rename, never a half-written file.
    let tmp = to.with_extension("tmp");
    if fs::write(&tmp, json).is_ok() {
        let _ = fs::rename(&tmp, to);
    }
}

fn recorded(command: &Command, wrapper_env: &[&str]) -> Option<Recorded> {
    let program = command.get_program().to_str()?.to_owned();
    let args = command.get_args().map(|a| a.to_str().map(str::to_owned)).collect::<Option<_>>()?;
    let cwd = std::env::current_dir().ok()?.to_str()?.to_owned();
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        let (k, v) = (k.into_string().ok()?, v.into_string().ok()?);
        if !NOT_RECORDED.contains(&k.as_str()) && !wrapper_env.contains(&k.as_str()) {
            env.push((k, v));
        }
    }
    Some(Recorded { program, args, cwd, env })
}
