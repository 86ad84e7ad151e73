//! What a stored variable's type was built from (evcxr's `TypeOrigins`, patch part eight), so
//! that no cell reads a value as a type it was not made as.
//!
//! evcxr pins the cell crate's `-C metadata` while this is set, so the notebook's types keep their
//! `TypeId`s whatever its dependencies; what tells a changed type is this module. Each kept
//! variable's origin is the definitions its type name reaches, followed through the notebook's items
//! (structs, enums, unions, aliases, traits, modules, constants and `use` imports; never functions
//! or `impl` blocks, which change no layout) to the external crates they name, each with a hash of
//! its definition (tokens without whitespace or comments) or of its line in Cargo.toml. Types of
//! external crates keep their crates' own `TypeId`s, which change with the crate's metadata:
//! evcxr's check catches those.
//!
//! Where a type name reaches a name that is neither a notebook item, a crate, the prelude nor a
//! generic parameter (a glob import's), every crate glob-imported by the notebook counts too.
//! Left out: a dependency's layout changed under a name the notebook does not follow (cargo
//! unifying a transitive crate's features with a newly added crate's), which no type name shows.

use crate::names::{definition, hash_of, type_name_roots, KNOWN, PRELUDE, STD_ROOTS};
use crate::probe;
use evcxr::{Definitions, Probed};
use ra_ap_syntax::ast;
use ra_ap_syntax::{AstNode, Edition};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// Each definition a type name reaches, with a hash of it.
type Origin = BTreeMap<String, u64>;

/// DRYML Rust's rules for what a type is built from, and the origins of the kept variables' types.
#[derive(Debug, Default)]
pub struct Origins(Mutex<Kept>);

#[derive(Debug, Default)]
struct Kept {
    /// A hash of the definitions the variables were last kept under.
    definitions: u64,
    /// Each kept variable's type, and that type's origin then.
    variables: HashMap<String, (String, Origin)>,
    /// What the last cell dropped, each with why: those `changed` named, less those the cell
    /// made again once it was kept.
    dropped: Vec<(String, String)>,
    /// The code of the cell being run, for `probed`.
    cell: String,
}

impl Origins {
    /// The code of the cell about to run: where a type rustc names by its last segment is.
    pub fn set_cell(&self, code: &str) {
        code.clone_into(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).cell);
    }

    /// The variables the last cell dropped (or, had it failed, would have), each with why; once.
    pub fn take_dropped(&self) -> Vec<(String, String)> {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).dropped)
    }
}

/// A failed cell's compile errors that name a variable it dropped (`dropped`, each with why) say
/// why it is gone, as rustc's help.
pub fn explain_dropped(errors: &mut [evcxr::CompilationError], dropped: &[(String, String)]) {
    for error in errors {
        let message = error.message();
        for (_, why) in dropped.iter().filter(|(name, _)| message.contains(&format!("`{name}`"))) {
            if let Some(children) = error.json["children"].as_array_mut() {
                children.push(serde_json::json!({"level": "help", "message": why, "spans": []}));
            }
        }
    }
}

impl evcxr::TypeOrigins for Origins {
    fn kept(&self, variables: &[(&str, &str)], definitions: &Definitions<'_>) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hash = definitions_hash(definitions);
        let same = kept.definitions == hash;
        // A variable the cell made again is stored anew; its old value went silently.
        kept.dropped.retain(|(name, _)| !variables.iter().any(|&(kept, _)| kept == name));
        let mut old = std::mem::take(&mut kept.variables);
        let mut by_type: HashMap<&str, Origin> = HashMap::new();
        for &(name, type_name) in variables {
            // Worked out again only where the definitions changed, or for a new variable or type.
            let origin = match old.remove(name) {
                Some((then, origin)) if same && then == type_name => origin,
                _ => by_type.entry(type_name).or_insert_with(|| origin(type_name, definitions)).clone(),
            };
            kept.variables.insert(name.to_owned(), (type_name.to_owned(), origin));
        }
        kept.definitions = hash;
    }

    fn changed(&self, variables: &[(&str, &str)], definitions: &Definitions<'_>) -> Vec<(String, String)> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.dropped.clear();
        // Nothing kept, nothing to drop: no cell pays for hashing the notebook's items.
        if kept.variables.is_empty() || kept.definitions == definitions_hash(definitions) {
            return Vec::new();
        }
        let mut now: HashMap<&str, Origin> = HashMap::new();
        let mut stale = Vec::new();
        for &(name, type_name) in variables {
            let Some((_, then)) = kept.variables.get(name) else { continue };
            let now = now.entry(type_name).or_insert_with(|| origin(type_name, definitions));
            if let Some(why) = staleness(name, type_name, then, now) {
                stale.push((name.to_owned(), why));
            }
        }
        kept.dropped.clone_from(&stale);
        stale
    }

    fn probed(&self, error: &evcxr::CompilationError, type_now: Option<&str>, defs: &Definitions<'_>) -> Probed {
        let spans = error.json["spans"].as_array().into_iter().flatten();
        let label = spans.filter(|span| span["is_primary"] == true).find_map(|span| span["label"].as_str());
        let text = error.json.get("rendered").map_or_else(|| error.json.to_string(), |r| r.to_string());
        let message = error.message();
        let imports = probe::suggested_imports(&error.json);
        let found = probe::found_in_notes(&error.json);
        let rustc = probe::Rustc { code: error.code(), message: &message, label, found, text: &text, imports };
        let cell = self.0.lock().unwrap_or_else(|e| e.into_inner()).cell.clone();
        probe::probed(rustc, type_now, &probe::Seen { cell: &cell, definitions: defs })
    }

    fn parameter(&self, type_name: &str) -> String {
        with_static_lifetimes(type_name)
    }
}

/// `type_name` with each elided reference lifetime made `'static`, as a stored variable's is. As
/// a parameter's type an elided lifetime is the function's own, and the analysis code's store of
/// that parameter fails (E0521). Those of `fn` pointers and `Fn` traits belong to the signature.
fn with_static_lifetimes(type_name: &str) -> String {
    use ra_ap_syntax::SyntaxKind;
    const PREFIX: &str = "type T = ";
    let parsed = ast::SourceFile::parse(&format!("{PREFIX}{type_name};"), Edition::Edition2024);
    if !parsed.errors().is_empty() {
        return type_name.to_owned();
    }
    let signature = |kind| {
        matches!(
            kind,
            SyntaxKind::FN_PTR_TYPE | SyntaxKind::PARENTHESIZED_ARG_LIST | SyntaxKind::RET_TYPE | SyntaxKind::FOR_TYPE
        )
    };
    let mut at: Vec<usize> = parsed
        .syntax_node()
        .descendants()
        .filter_map(ast::RefType::cast)
        .filter(|r| r.lifetime().is_none() && !r.syntax().ancestors().any(|a| signature(a.kind())))
        .filter_map(|r| r.amp_token())
        .map(|amp| usize::from(amp.text_range().end()) - PREFIX.len())
        .collect();
    at.sort_unstable_by(|a, b| b.cmp(a));
    let mut out = type_name.to_owned();
    for offset in at {
        out.insert_str(offset, "'static ");
    }
    out
}

/// A hash of everything a type's origin reads.
fn definitions_hash(definitions: &Definitions<'_>) -> u64 {
    let mut items: Vec<_> = definitions.items.iter().collect();
    items.sort();
    let mut deps: Vec<_> = definitions.deps.iter().collect();
    deps.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (items, &definitions.unnamed, deps).hash(&mut hasher);
    hasher.finish()
}

/// What `type_name` was built from, given the notebook's items and dependencies now.
fn origin(type_name: &str, definitions: &Definitions<'_>) -> Origin {
    let mut out = Origin::new();
    let mut seen = HashSet::new();
    let mut todo = type_name_roots(type_name);
    let mut unresolved = false;
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) || STD_ROOTS.contains(&name.as_str()) {
            continue;
        }
        if let Some(code) = definitions.items.get(name.as_str()) {
            if let Some(def) = definition(code) {
                out.insert(name, def.hash);
                todo.extend(def.roots);
            }
        } else if let Some((krate, config)) = definitions.deps.get(name.as_str()) {
            out.insert(format!("crate {krate}"), hash_of(config));
        } else if name.starts_with(|c: char| c.is_ascii_uppercase())
            && !KNOWN.contains(&name.as_str())
            && !PRELUDE.contains(&name.as_str())
        {
            unresolved = true;
        }
    }
    if unresolved {
        for code in &definitions.unnamed {
            let Some(rest) = code.trim_start().strip_prefix("use ") else { continue };
            let root = rest.trim_start_matches("::").split("::").next().unwrap_or("").trim();
            if let Some((krate, config)) = definitions.deps.get(root) {
                out.insert(format!("crate {krate}"), hash_of(config));
            }
        }
    }
    out
}

/// Why a variable stored as `type_name` with `then` must go, given `now`, in one sentence
/// that says what to do; `None` if it may be read.
fn staleness(var_name: &str, type_name: &str, then: &Origin, now: &Origin) -> Option<String> {
    if then == now {
        return None;
    }
    let changed: Vec<&String> = then
        .iter()
        .filter(|(name, hash)| now.get(*name) != Some(hash))
        .map(|(name, _)| name)
        .chain(now.keys().filter(|name| !then.contains_key(*name)))
        .collect();
    let (crates, items): (Vec<&String>, Vec<&String>) = changed.into_iter().partition(|n| n.starts_with("crate "));
    let mut why = Vec::new();
    if !items.is_empty() {
        let names: Vec<String> = items.iter().map(|n| format!("`{n}`")).collect();
        why.push(format!("{} {} been redefined", names.join(", "), if names.len() == 1 { "has" } else { "have" }));
    }
    if !crates.is_empty() {
        let names: Vec<String> = crates.iter().map(|n| format!("`{}`", &n["crate ".len()..])).collect();
        why.push(format!("the dependency {} changed", names.join(", ")));
    }
    Some(format!(
        "`{var_name}` was a `{type_name}` as defined when it was made; {}, so `{var_name}` was dropped (its old value cannot be read as the new type). Run the cell that makes it again.",
        why.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::defs;

    #[test]
    fn a_redefined_struct_drops_the_variable_saying_why() {
        let then = origin("Vec<P>", &defs(&["struct P { x: i32 }"], &[], &[]));
        assert_eq!(then.keys().collect::<Vec<_>>(), ["P"]);
        let now = origin("Vec<P>", &defs(&["struct P { x: i64 }"], &[], &[]));
        let why = staleness("p", "Vec<P>", &then, &now).expect("P changed");
        assert!(why.contains("`P` has been redefined") && why.contains("Run the cell that makes it again"), "{why}");
    }

    #[test]
    fn whitespace_and_comments_change_no_origin_and_a_function_is_no_definition() {
        let spaced = defs(&["struct P {\n    // the x\n    x:   i32,\n}"], &[], &[]);
        assert_eq!(origin("P", &spaced), origin("P", &defs(&["struct P { x: i32, }"], &[], &[])));
        assert!(definition("fn f() -> u8 { 1 }").is_none());
    }

    #[test]
    fn aliases_fields_and_modules_are_followed_but_generics_and_field_names_are_not() {
        let items =
            ["type A = B<u8>;", "struct B<T> { c: C, t: T, std: u8 }", "struct C(m::D);", "mod m { pub struct D; }"];
        let then = origin("A", &defs(&items, &[], &[]));
        assert_eq!(then.keys().collect::<Vec<_>>(), ["A", "B", "C", "m"]);
        let mut changed = items;
        changed[3] = "mod m { pub struct D(u64); }";
        let why = staleness("a", "A", &then, &origin("A", &defs(&changed, &[], &[]))).expect("m changed");
        assert!(why.contains("`m` has been redefined"), "{why}");
    }

    #[test]
    fn a_dependency_counts_as_its_line_in_cargo_toml_by_path_or_by_glob_import() {
        let before = [("ndarray", "ndarray = \"0.16\"")];
        let after = [("ndarray", "ndarray = { version = \"0.16\", features = [\"serde\"] }")];
        let then = origin("ndarray::Array1<f32>", &defs(&[], &[], &before));
        assert_eq!(then.keys().collect::<Vec<_>>(), ["crate ndarray"]);
        let why =
            staleness("x", "ndarray::Array1<f32>", &then, &origin("ndarray::Array1<f32>", &defs(&[], &[], &after)));
        assert!(why.expect("the crate changed").contains("the dependency `ndarray` changed"));
        // `Array1` resolves through no item: the crates the notebook glob-imports count.
        let globs = ["use ndarray::prelude::*;"];
        assert_eq!(origin("Array1<f32>", &defs(&[], &globs, &before)), then);
        assert!(origin("Vec<u8>", &defs(&[], &globs, &before)).is_empty(), "the prelude needs no crate");
        // A generic parameter is no name to resolve.
        let generic = defs(&["struct W<T> { t: T }"], &globs, &before);
        assert_eq!(origin("W<u8>", &generic).keys().collect::<Vec<_>>(), ["W"]);
        // Nor are an attribute's paths (`serde_with::serde_as`): hashed with the item, never followed.
        let mut attributed = defs(&[], &[], &[("serde_with", "serde_with = \"3\"")]);
        attributed.items.insert("R", "#[serde_with::serde_as]\n#[derive(Debug)]\n#[repr(C)]\nstruct R { x: i32 }");
        assert_eq!(origin("R", &attributed).keys().collect::<Vec<_>>(), ["R"]);
    }

    #[test]
    fn an_unchanged_origin_keeps_the_variable() {
        let then = origin("Vec<P>", &defs(&["struct P { x: i32 }"], &[], &[]));
        assert_eq!(staleness("p", "Vec<P>", &then, &then), None);
    }

    #[test]
    fn elided_reference_lifetimes_become_static_but_not_a_signatures() {
        let s = with_static_lifetimes;
        assert_eq!(s("&str"), "&'static str");
        assert_eq!(s("[&str; 2]"), "[&'static str; 2]");
        assert_eq!(s("(&mut [u8], &&str)"), "(&'static mut [u8], &'static &'static str)");
        assert_eq!(s("Vec<&'static str>"), "Vec<&'static str>");
        assert_eq!(s("Box<dyn Fn(&str) -> &str>"), "Box<dyn Fn(&str) -> &str>");
        assert_eq!(s("(fn(&u8) -> &u8, &i32)"), "(fn(&u8) -> &u8, &'static i32)");
        assert_eq!(s("Vec<i32>"), "Vec<i32>");
        assert_eq!(s("not a type ("), "not a type (");
    }

    #[test]
    fn what_a_cell_kept_is_dropped_once_its_definitions_change_and_nothing_else() {
        use evcxr::TypeOrigins;
        let origins = Origins::default();
        let (p, q) = ("struct P { x: i32 }", "struct Q;");
        origins.kept(&[("p", "Vec<P>"), ("q", "Q"), ("n", "u8")], &defs(&[p, q], &[], &[]));
        let stored = [("p", "Vec<P>"), ("q", "Q"), ("n", "u8"), ("new", "P")];
        assert!(origins.changed(&stored, &defs(&[p, q], &[], &[])).is_empty());
        let now = defs(&["struct P { x: i64 }", q], &["use std::fmt;"], &[]);
        let stale = origins.changed(&stored, &now);
        // `new` was never kept: nothing says what it was made as.
        assert_eq!(stale.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["p"]);
        assert!(stale[0].1.contains("`P` has been redefined"), "{stale:?}");
        // Kept again under the new definitions (p made anew), nothing has changed since.
        origins.kept(&[("p", "Vec<P>"), ("q", "Q")], &now);
        assert!(origins.changed(&stored, &now).is_empty());
        // A variable kept with another type takes that type's origin.
        origins.kept(&[("p", "Q"), ("q", "Q")], &now);
        let q2 = defs(&["struct P { x: i64 }", "struct Q(u8);"], &["use std::fmt;"], &[]);
        let gone = origins.changed(&[("p", "Q"), ("q", "Q")], &q2);
        assert_eq!(gone.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["p", "q"]);
    }

    #[test]
    fn what_a_cell_dropped_is_told_once_but_not_what_it_made_again() {
        use evcxr::TypeOrigins;
        let origins = Origins::default();
        let p = defs(&["struct P(u8);"], &[], &[]);
        origins.kept(&[("a", "P"), ("b", "P"), ("n", "u8")], &p);
        let now = defs(&["struct P(u16);"], &[], &[]);
        let stored = [("a", "P"), ("b", "P"), ("n", "u8")];
        assert_eq!(origins.changed(&stored, &now).len(), 2);
        // The cell made `b` again: only `a` went, and that is said once.
        origins.kept(&[("b", "P"), ("n", "u8")], &now);
        let dropped = origins.take_dropped();
        assert!(dropped.len() == 1 && dropped[0].1.starts_with("`a` was a `P`"), "{dropped:?}");
        assert!(origins.take_dropped().is_empty());
        // The next cell drops nothing: nothing of the last is said again.
        assert!(origins.changed(&[("b", "P")], &now).is_empty());
        origins.kept(&[("b", "P")], &now);
        assert!(origins.take_dropped().is_empty());
    }
}
