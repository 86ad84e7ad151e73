//! The child's environment: `%env` and `%context` settings, kept by the session and given
//! to each new child by a cell of its own.

use super::Session;
use crate::protocol::ErrorContent;

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

impl Session {
    /// The value of an environment variable in the child: `%env` settings over the kernel's.
    pub fn child_env(&self, name: &str) -> Option<String> {
        match self.env_overrides.get(name) {
            Some(v) => v.clone(),
            None => std::env::var(name).ok(),
        }
    }

    /// Sets (`Some`) or unsets (`None`) variables in the child, now and after every restart.
    pub fn set_env(&mut self, vars: Vec<(String, Option<String>)>) -> Result<(), ErrorContent> {
        let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
        self.env_overrides.extend(vars);
        self.apply_env(&names)
    }

    /// Forgets settings without touching the child (it is about to be replaced).
    pub fn forget_env(&mut self, names: &[String]) {
        for n in names {
            self.env_overrides.remove(n);
        }
    }

    /// Pushes the remembered `%env` settings for `names` into the child.
    pub(super) fn apply_env(&mut self, names: &[String]) -> Result<(), ErrorContent> {
        let code = cell(names.iter().map(|n| (n.as_str(), self.env_overrides.get(n).and_then(|v| v.as_deref()))));
        self.eval_hidden(&code).map(|_| ())
    }
}
