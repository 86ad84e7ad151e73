//! The types a cell's `let`s write out, read from its source without analysis: what a cell
//! needs no inference for, and the `let`s whose types rustc is asked for while a load runs.

use evcxr::{TypeName, VariableInfo};
use ra_ap_syntax::ast::{self, HasModuleItem, HasName};
use ra_ap_syntax::{AstNode, Edition};
use std::collections::HashMap;

/// The top-level variables of `function` in `source` as far as they can be had without a wait:
/// all of them where each `let` writes its type (evcxr's analysis would take a valid written
/// type as it is); while the analysis is not `ready`, also those it does not write, left
/// `Unknown` for rustc. None: every type must wait for the analysis.
pub(crate) fn variables_now(
    source: &str,
    function: &str,
    ready: impl FnOnce() -> bool,
) -> Option<HashMap<String, VariableInfo>> {
    let variables = let_variables(source, function)?;
    let written = variables.values().all(|v| matches!(v.type_name, TypeName::Named(_)));
    (written || !ready()).then_some(variables)
}

/// The top-level `let`s of `function` in `source`, where each binds one name; a type not
/// written out (or not valid as written) is `Unknown`.
pub(crate) fn let_variables(source: &str, function: &str) -> Option<HashMap<String, VariableInfo>> {
    let parsed = ast::SourceFile::parse(source, Edition::Edition2024).tree();
    let mut variables = HashMap::new();
    for body in functions_named(&parsed, function).filter_map(|f| f.body()) {
        for statement in body.statements() {
            let ast::Stmt::LetStmt(binding) = statement else { continue };
            let Some(ast::Pat::IdentPat(pattern)) = binding.pat() else { return None };
            let type_name = match binding.ty().map(|ty| ty.syntax().text().to_string()) {
                Some(written) if evcxr::is_type_valid(&written) => TypeName::Named(written),
                _ => TypeName::Unknown,
            };
            let is_mutable = pattern.mut_token().is_some();
            variables.insert(pattern.name()?.text().to_string(), VariableInfo { type_name, is_mutable });
        }
    }
    Some(variables)
}

/// The functions of `file` named `name` (evcxr's wrapper of a cell's statements).
pub(crate) fn functions_named<'a>(file: &ast::SourceFile, name: &'a str) -> impl Iterator<Item = ast::Fn> + 'a {
    file.items().filter_map(move |item| match item {
        ast::Item::Fn(f) if f.name().is_some_and(|n| n.text() == name) => Some(f),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(source: &str, ready: bool) -> Option<Vec<(String, Option<String>, bool)>> {
        let mut found: Vec<_> = variables_now(source, "w", || ready)?
            .into_iter()
            .map(|(name, v)| match v.type_name {
                TypeName::Named(t) => (name, Some(t), v.is_mutable),
                _ => (name, None, v.is_mutable),
            })
            .collect();
        found.sort();
        Some(found)
    }

    #[test]
    fn written_types_need_no_analysis() {
        let source = "fn w() { let a: Vec<u8> = vec![]; let mut b: i32 = 1; { let inner = 2; } }";
        let expected = vec![("a".into(), Some("Vec<u8>".into()), false), ("b".into(), Some("i32".into()), true)];
        assert_eq!(now(source, true), Some(expected));
        assert_eq!(now("fn w() { println!(); }", true), Some(vec![]));
        assert_eq!(now("fn other() { let a = 1; }", true), Some(vec![]));
    }

    #[test]
    fn an_unwritten_type_waits_for_a_ready_analysis_and_is_asked_of_rustc_otherwise() {
        let source = "fn w() { let a: u8 = 1; let b = vec![1]; let c: Vec<_> = vec![1]; }";
        assert_eq!(now(source, true), None);
        let asked = vec![("a".into(), Some("u8".into()), false), ("b".into(), None, false), ("c".into(), None, false)];
        assert_eq!(now(source, false), Some(asked));
    }

    #[test]
    fn a_pattern_binding_several_names_waits_for_the_analysis() {
        assert_eq!(now("fn w() { let (a, b) = (1, 2); }", false), None);
    }
}
