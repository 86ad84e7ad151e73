//! The cell that gives the child the environment `%env` and `%context` settings asked for.

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
