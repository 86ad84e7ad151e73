//! The child's environment and working directory: `%env` and `%context` settings and the
//! directory `%cd` (or a cell's own `set_current_dir`) left, kept by the session and given to
//! each new child by a cell of its own.

use super::Session;
use crate::protocol::ErrorContent;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a new child is given back.
#[derive(Default)]
pub struct ChildEnv {
    /// `%env` settings (None: unset).
    overrides: BTreeMap<String, Option<String>>,
    /// The working directory the last cell left, where it is not the kernel's own.
    cwd: Option<PathBuf>,
}

/// Code that sets each `(name, Some(value))` and unsets each `(name, None)` in the child.
pub fn cell<'a>(settings: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> String {
    // set_var is unsafe from edition 2024 on; the fn's allow covers older editions.
    let mut code = String::from("#[allow(unused_unsafe)]\nfn dryml_apply_env() { unsafe {\n");
    for (name, value) in settings {
        match value {
            Some(value) => code.push_str(&format!("std::env::set_var({name:?}, {value:?});\n")),
            None => code.push_str(&format!("std::env::remove_var({name:?});\n")),
        }
    }
    code.push_str("} }\ndryml_apply_env();\n");
    code
}

/// Code that makes `dir` the child's working directory.
fn cd_cell(dir: &Path) -> String {
    format!("std::env::set_current_dir({:?}).unwrap();\n", dir.to_string_lossy())
}

impl Session {
    /// The value of an environment variable in the child: `%env` settings over the kernel's.
    pub fn child_env(&self, name: &str) -> Option<String> {
        match self.child_env.overrides.get(name) {
            Some(v) => v.clone(),
            None => std::env::var(name).ok(),
        }
    }

    /// Sets (`Some`) or unsets (`None`) variables in the child, now and after every restart.
    pub fn set_env(&mut self, vars: Vec<(String, Option<String>)>) -> Result<(), ErrorContent> {
        let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
        self.child_env.overrides.extend(vars);
        self.apply_env(&names)
    }

    /// Forgets settings without touching the child (it is about to be replaced).
    pub fn forget_env(&mut self, names: &[String]) {
        for n in names {
            self.child_env.overrides.remove(n);
        }
    }

    /// Pushes the remembered `%env` settings for `names` into the child.
    pub(super) fn apply_env(&mut self, names: &[String]) -> Result<(), ErrorContent> {
        let overrides = &self.child_env.overrides;
        let code = cell(names.iter().map(|n| (n.as_str(), overrides.get(n).and_then(|v| v.as_deref()))));
        self.eval_hidden(&code).map(|_| ())
    }

    /// A new child gets the settings and the working directory back.
    pub(super) fn reapply_env(&mut self) {
        if !self.child_env.overrides.is_empty() {
            let names: Vec<String> = self.child_env.overrides.keys().cloned().collect();
            let _ = self.apply_env(&names);
        }
        if let Some(dir) = self.child_env.cwd.clone() {
            if let Err(e) = self.eval_hidden(&cd_cell(&dir)) {
                let note = format!(
                    "the working directory {} is gone ({}); cells run in the kernel's\n",
                    dir.display(),
                    e.evalue
                );
                self.state.stream(crate::protocol::published::StreamName::Stderr, &note);
                self.child_env.cwd = None;
            }
        }
    }

    /// The child's working directory now (the kernel's, if the child cannot be read).
    pub fn child_cwd(&self) -> PathBuf {
        cwd_of(self.child_pid()).unwrap_or_else(|_| kernel_cwd().clone())
    }

    /// Makes `dir` (absolute) the child's working directory, now and after every restart.
    pub fn set_cwd(&mut self, dir: &Path) -> Result<(), ErrorContent> {
        self.eval_hidden(&cd_cell(dir))?;
        self.child_env.cwd = Some(dir.to_path_buf());
        Ok(())
    }

    /// Keeps where the last cell left the child (its own `set_current_dir` too), for a restart.
    /// A child that replaced a dead one is not read: it starts in the kernel's directory and is
    /// given the kept one when it is set up.
    pub fn note_cwd(&mut self) {
        let pid = self.note_child_pid();
        if pid != self.setup_pid {
            return;
        }
        if let Ok(dir) = cwd_of(pid) {
            self.child_env.cwd = (dir != *kernel_cwd()).then_some(dir);
        }
    }
}

fn cwd_of(pid: u32) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
}

/// The kernel's own directory, read once: the kernel never changes it.
fn kernel_cwd() -> &'static PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")))
}
