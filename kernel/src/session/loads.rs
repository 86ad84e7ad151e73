//! Which stored variables a cell loads (evcxr's `CellLoads`, patch part one): those it names and
//! those whose type names a type it defines or imports. evcxr checked, took and put back every
//! variable in every cell, so a trivial cell's build grew with the notebook (100 variables: 1.19 s
//! a cell, against 0.27 s). The same hook makes the notebook's kept borrows (`borrows.rs`).

use super::borrows::Borrows;
use regex::Regex;
use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap());

/// A type the cell defines (its name) or imports (every word of the `use`).
static DEFINED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:struct|enum|union|type|trait)\s+([A-Za-z_][A-Za-z0-9_]*)|\buse\b([^;]*);").unwrap()
});

#[derive(Debug, Default)]
pub struct NamedOnly(pub Arc<Borrows>);

impl evcxr::CellLoads for NamedOnly {
    /// A variable is loaded where the cell's text has its name as a word (in code, strings and
    /// comments alike: `println!("{x}")` names `x`), or its type names a type the cell defines
    /// or imports, so that the cell that redefines a type still finds its variables; and those
    /// a kept borrow it names is made from.
    fn loads(&self, code: &str, variables: &[(&str, &str)]) -> HashSet<String> {
        let words: HashSet<&str> = WORD.find_iter(code).map(|m| m.as_str()).collect();
        let roots = self.0.roots_named(|name| words.contains(name));
        let mut types = HashSet::new();
        for found in DEFINED.captures_iter(code) {
            types.extend(found.get(1).map(|name| name.as_str()));
            if let Some(tree) = found.get(2) {
                types.extend(WORD.find_iter(tree.as_str()).map(|m| m.as_str()));
            }
        }
        let loaded = |name: &str, type_name: &str| {
            words.contains(name)
                || roots.iter().any(|r| r == name)
                || WORD.find_iter(type_name).any(|m| types.contains(m.as_str()))
        };
        variables.iter().filter(|(name, ty)| loaded(name, ty)).map(|(name, _)| name.to_string()).collect()
    }

    fn borrows(&self, code: &str, variables: &[&str]) -> evcxr::CellBorrows {
        self.0.around(code, variables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evcxr::CellLoads;

    fn loads(code: &str) -> Vec<String> {
        let variables = [("x", "i32"), ("points", "Vec<Point>"), ("model", "nn::Linear"), ("other", "String")];
        let mut names: Vec<String> = NamedOnly::default().loads(code, &variables).into_iter().collect();
        names.sort();
        names
    }

    #[test]
    fn a_cell_loads_what_it_names_and_what_holds_a_type_it_defines_or_imports() {
        assert_eq!(loads("println!(\"{x}\");"), ["x"]);
        assert_eq!(loads("// x later\n1 + 1"), ["x"]);
        assert_eq!(loads("struct Point { x: f64 }"), ["points", "x"]);
        assert_eq!(loads("use tch::nn;"), ["model"]);
        assert!(loads("let y = 2;").is_empty());
        assert!(loads("let xs = 2;").is_empty(), "a word, not a part of one");
    }
}
