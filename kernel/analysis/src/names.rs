//! Names as the type walks read them: Rust's prelude, the primitives, std's roots, and one item's
//! text parsed into its hash and the first segments of the paths it names.

use ra_ap_syntax::ast;
use ra_ap_syntax::{AstNode, Edition};
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// The types and traits of Rust's prelude.
#[rustfmt::skip]
pub(crate) const PRELUDE: &[&str] = &[
    "Self", "Vec", "Option", "Result", "Box", "String", "Fn", "FnMut", "FnOnce", "Send", "Sync",
    "Sized", "Unpin", "Copy", "Clone", "Default", "PartialEq", "Eq", "PartialOrd", "Ord",
    "Iterator", "IntoIterator", "DoubleEndedIterator", "ExactSizeIterator", "Extend",
    "FromIterator", "ToString", "ToOwned", "From", "Into", "TryFrom", "TryInto", "AsRef", "AsMut",
    "Drop",
];

/// Names that need no definition beyond the prelude: its variants, and layout attributes' words.
pub(crate) const KNOWN: &[&str] = &["Some", "None", "Ok", "Err", "Debug", "Hash", "Display"];

/// The primitive types.
#[rustfmt::skip]
pub(crate) const PRIMITIVES: &[&str] = &[
    "bool", "char", "str", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64",
    "u128", "usize", "f32", "f64",
];

/// The roots of paths that name no notebook item or external crate.
pub(crate) const STD_ROOTS: &[&str] = &["std", "core", "alloc", "crate", "self", "super"];

pub(crate) fn hash_of(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// An item as the walk sees it: its tokens' hash and the first segments of the paths it names
/// outside its attributes (a path's later segments resolve through its first).
pub(crate) struct Definition {
    pub hash: u64,
    pub roots: Vec<String>,
}

/// Parses one item's text; `None` for a function, which no type's layout depends on.
pub(crate) fn definition(text: &str) -> Option<Definition> {
    let file = ast::SourceFile::parse(text, Edition::Edition2024).tree();
    let item = file.syntax().children().find_map(ast::Item::cast);
    if matches!(item, Some(ast::Item::Fn(_))) {
        return None;
    }
    let mut tokens = String::new();
    for token in file.syntax().descendants_with_tokens().filter_map(|e| e.into_token()) {
        if !token.kind().is_trivia() {
            tokens.push_str(token.text());
            tokens.push(' ');
        }
    }
    let generics: HashSet<String> = file
        .syntax()
        .descendants()
        .filter_map(ast::GenericParam::cast)
        .filter_map(|p| match p {
            ast::GenericParam::TypeParam(t) => ast::HasName::name(&t).map(|n| n.text().to_string()),
            ast::GenericParam::ConstParam(c) => ast::HasName::name(&c).map(|n| n.text().to_string()),
            ast::GenericParam::LifetimeParam(_) => None,
        })
        .collect();
    // A path's first segment only (its later ones resolve through it; `crate::G` through `G`),
    // outside attributes: derives and `repr` words are hashed with the item but name nothing to
    // follow. A struct's own name and its fields' are no paths, so a field called like a module
    // is not followed.
    let roots = file
        .syntax()
        .descendants()
        .filter_map(ast::Path::cast)
        .filter(|p| p.qualifier().is_none() && !p.syntax().ancestors().any(|a| ast::Attr::can_cast(a.kind())))
        .filter_map(|p| {
            let first = p.segment()?.name_ref()?.text().to_string();
            if !matches!(first.as_str(), "crate" | "self" | "super") {
                return Some(first);
            }
            let parent = p.syntax().parent().and_then(ast::Path::cast)?;
            Some(parent.segment()?.name_ref()?.text().to_string())
        })
        .filter(|r| !generics.contains(r))
        .collect();
    Some(Definition { hash: hash_of(&tokens), roots })
}

/// The first segments of the paths in a type name as the analyzer wrote it.
pub(crate) fn type_name_roots(type_name: &str) -> Vec<String> {
    let text = format!("type T = {type_name};");
    definition(&text).map(|d| d.roots).unwrap_or_default()
}
/// Definitions of `items` (each named by its second word), `unnamed` items and `deps`.
#[cfg(test)]
pub(crate) fn defs<'a>(items: &[&'a str], unnamed: &[&'a str], deps: &[(&'a str, &'a str)]) -> evcxr::Definitions<'a> {
    let name_of = |code: &'a str| {
        code.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).nth(1).unwrap()
    };
    evcxr::Definitions {
        items: items.iter().map(|code| (name_of(code), *code)).collect(),
        unnamed: unnamed.to_vec(),
        deps: deps.iter().map(|(name, config)| (*name, (*name, *config))).collect(),
    }
}
