//! rustc's types for a first cell's `let`s while the analysis loads (evcxr patch, part 11): what
//! a try's error says of a variable stored as the probe, or as the type rustc gave it.
//!
//! rustc writes a type by its last segment alone wherever that name is unique (`Tensor`,
//! `ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>`), in scope or not. A name the cell cannot see is
//! written by a path to it the cell or the notebook's `use`s write (`tch::Tensor::ones(..)`), else
//! at the root of the crate the cell names (`ndarray::Dim`); for std's, rustc's "cannot find
//! type" suggests the `use`. The next try's rustc checks the guess: a stored value's type must be
//! the value's own. The analysis is waited for only where that fails, or where rustc names no
//! type a cell can write.

use crate::names::{PRELUDE, PRIMITIVES, STD_ROOTS};
use evcxr::{Definitions, Probed};
use ra_ap_syntax::{ast, AstNode, Edition};

/// What `probed` reads of rustc's error: its code, message, primary label, the type its note
/// says was found, its text and the paths of the `use`s its help suggests.
pub(crate) struct Rustc<'a> {
    pub code: Option<&'a str>,
    pub message: &'a str,
    pub label: Option<&'a str>,
    pub found: Option<&'a str>,
    pub text: &'a str,
    pub imports: Vec<&'a str>,
}

/// The type a mismatch's note says was found, quoted (`` `ArrayBase<OwnedRepr<f64>, Dim<..>>` ``):
/// its label shortens a long one (`ArrayBase<OwnedRepr<f64>, ...>`).
pub(crate) fn found_in_notes(error: &serde_json::Value) -> Option<&str> {
    let children = error["children"].as_array().into_iter().flatten();
    let notes = children.filter_map(|c| c["message"].as_str());
    let found = notes
        .filter(|m| m.starts_with("expected "))
        .find_map(|m| m.lines().find_map(|l| l.trim().strip_prefix("found ")));
    found.and_then(|f| f.find('`').map(|at| &f[at..])).filter(|f| f.len() > 1 && f.ends_with('`'))
}

/// The paths of the `use` items rustc's help on `error` suggests ("consider importing this
/// struct": `use tch::Tensor;`).
pub(crate) fn suggested_imports(error: &serde_json::Value) -> Vec<&str> {
    let children = error["children"].as_array().into_iter().flatten();
    let importing = children.filter(|c| c["message"].as_str().is_some_and(|m| m.starts_with("consider importing")));
    let spans = importing.flat_map(|c| c["spans"].as_array().into_iter().flatten());
    let replacements = spans.filter_map(|span| span["suggested_replacement"].as_str());
    replacements.filter_map(|r| r.trim().strip_prefix("use ")?.strip_suffix(';')).collect()
}

/// A try's error while a first cell's types are guessed. At a variable stored as the probe,
/// rustc's mismatch ("expected `EvcxrTypeProbe`, found `Vec<{integer}>`") names its type. At one
/// given rustc's type, "cannot find type `X`" with a suggested `use` writes `X` by its path; any
/// other error but evcxr's own cases (a moved value, a missing one) says that type does not build
/// here. Elsewhere only an error that names the probe is ours. Ours and not taken: wait for the
/// analysis's types.
pub(crate) fn probed(error: Rustc<'_>, type_now: Option<&str>, seen: &Seen<'_>) -> Probed {
    let evcxr_case =
        matches!(error.code, None | Some("E0382" | "E0562")) || error.message.starts_with("cannot find value");
    match type_now {
        Some(evcxr::TYPE_PROBE) => {
            let found = error.label.and_then(|l| l.strip_prefix("expected `")?.strip_prefix(evcxr::TYPE_PROBE));
            let found = found.and_then(|l| l.strip_prefix("`, found ")).filter(|_| error.code == Some("E0308"));
            // The note's type where the label's is shortened.
            let found = found.map(|f| error.found.filter(|_| f.contains("...")).unwrap_or(f));
            found.and_then(rustc_type).map_or(Probed::Wait, |t| Probed::Type(seen.written(&t)))
        }
        Some(now) if error.message.starts_with("cannot find type `") => {
            let name = error.message["cannot find type `".len()..].split('`').next().unwrap_or_default();
            let path = error.imports.iter().find(|p| p.rsplit("::").next() == Some(name));
            path.and_then(|path| written_by_path(now, name, path)).map_or(Probed::Wait, Probed::Type)
        }
        Some(_) if !evcxr_case => Probed::Wait,
        None if error.text.contains(evcxr::TYPE_PROBE) => Probed::Wait,
        _ => Probed::Theirs,
    }
}

/// The type rustc's mismatch found (`` `Vec<{integer}>` ``, `integer`, `floating-point number`),
/// with rustc's defaults for literals not yet inferred; None where it names no type that can be
/// written (a closure, a function item).
fn rustc_type(found: &str) -> Option<String> {
    let type_name = match found {
        "integer" => "i32".to_owned(),
        "floating-point number" => "f64".to_owned(),
        _ => found.strip_prefix('`')?.strip_suffix('`')?.replace("{integer}", "i32").replace("{float}", "f64"),
    };
    (!type_name.contains(['{', '}', '`']) && evcxr::is_type_valid(&type_name)).then_some(type_name)
}

/// What the cell and the notebook show of where a type's names are.
pub(crate) struct Seen<'a> {
    /// The cell's code.
    pub cell: &'a str,
    pub definitions: &'a Definitions<'a>,
}

impl Seen<'_> {
    /// `type_name` (rustc's) with each name the cell does not see written by a path to it.
    fn written(&self, type_name: &str) -> String {
        let defs = self.definitions;
        let cells_uses = self.cell.lines().filter(|l| l.trim_start().starts_with("use "));
        let notebooks = defs.unnamed.iter().copied().filter(|c| c.trim_start().starts_with("use "));
        let uses: Vec<&str> = notebooks.chain(cells_uses).collect();
        let glob = uses.iter().any(|u| u.contains('*'));
        let mut out = type_name.to_owned();
        let names: std::collections::BTreeSet<String> =
            root_names(type_name).into_iter().map(|(name, _)| name).collect();
        for name in names {
            let known = [PRIMITIVES, PRELUDE, STD_ROOTS].iter().any(|list| list.contains(&name.as_str()))
                || defs.items.contains_key(name.as_str())
                || crate_names(defs).any(|krate| krate == name)
                || uses.iter().any(|u| words(u).any(|w| w == name));
            if known {
                continue;
            }
            // A path the cell or notebook writes; else, where no glob `use` may bring the name,
            // the root of the crate the cell names first.
            let texts = std::iter::once(self.cell).chain(defs.items.values().copied());
            let path = texts.into_iter().find_map(|text| path_to(text, &name)).or_else(|| {
                let krate = (!glob).then(|| first_crate_named(self.cell, defs)).flatten();
                krate.map(|krate| format!("{krate}::{name}"))
            });
            if let Some(path) = path {
                out = written_by_path(&out, &name, &path).unwrap_or(out);
            }
        }
        out
    }
}

/// The words (identifiers) of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty())
}

/// A path `text` writes that ends at `name` (`tch::Tensor` of `tch::Tensor::ones(..)`).
fn path_to(text: &str, name: &str) -> Option<String> {
    let path_char = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut from = 0;
    while let Some(at) = text[from..].find(&format!("::{name}")).map(|i| i + from) {
        let end = at + 2 + name.len();
        from = end;
        if text[end..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let start = text[..at].rfind(|c: char| !path_char(c)).map_or(0, |i| i + 1);
        let path = text[start..end].trim_start_matches("::");
        if path.split("::").all(|s| !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_digit())) {
            return Some(path.to_owned());
        }
    }
    None
}

/// The first dependency `cell` writes a path from (`ndarray::`), by the name paths use
/// (`candle_core` for the dependency `candle-core`).
fn first_crate_named(cell: &str, definitions: &Definitions<'_>) -> Option<String> {
    let named = crate_names(definitions).filter_map(|name| Some((cell.find(&format!("{name}::"))?, name)));
    let alone =
        |(at, _): &(usize, String)| !cell[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
    named.filter(alone).min().map(|(_, name)| name)
}

/// The notebook's dependencies by the names paths use (`candle_core` for `candle-core`).
fn crate_names<'a>(definitions: &'a Definitions<'_>) -> impl Iterator<Item = String> + 'a {
    definitions.deps.keys().map(|dep| dep.replace('-', "_"))
}

/// The first segments of `type_name`'s paths, each with its range in it.
fn root_names(type_name: &str) -> Vec<(String, (usize, usize))> {
    const PREFIX: &str = "type T = ";
    let parsed = ast::SourceFile::parse(&format!("{PREFIX}{type_name};"), Edition::Edition2024);
    let roots = parsed.syntax_node().descendants().filter_map(ast::Path::cast).filter(|p| p.qualifier().is_none());
    let names = roots.filter_map(|p| p.segment()?.name_ref());
    let at = |range: ra_ap_syntax::TextRange| {
        (usize::from(range.start()) - PREFIX.len(), usize::from(range.end()) - PREFIX.len())
    };
    names.map(|n| (n.text().to_string(), at(n.syntax().text_range()))).collect()
}

/// `type_name` with each path that starts at `name` (`Dim<..>`, not `a::Dim`) starting at `path`
/// instead; None where no path starts there.
fn written_by_path(type_name: &str, name: &str, path: &str) -> Option<String> {
    let mut at: Vec<(usize, usize)> =
        root_names(type_name).into_iter().filter(|(n, _)| n == name).map(|(_, at)| at).collect();
    at.sort_unstable_by(|a, b| b.cmp(a));
    let mut out = type_name.to_owned();
    for &(start, end) in &at {
        out.replace_range(start..end, path);
    }
    (!at.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::defs;

    /// What `probed` sees in a cell `cell` of a notebook with `uses` and the crates `deps`.
    fn seen<'a>(cell: &'a str, definitions: &'a Definitions<'a>) -> Seen<'a> {
        Seen { cell, definitions }
    }

    fn error<'a>(code: Option<&'a str>, message: &'a str, text: &'a str) -> Rustc<'a> {
        Rustc { code, message, label: None, found: None, text, imports: Vec::new() }
    }

    #[test]
    fn rustcs_found_type_is_taken_with_its_literals_defaults_where_it_can_be_written() {
        for (found, taken) in [
            ("`Vec<{integer}>`", Some("Vec<i32>")),
            ("`(P, {float})`", Some("(P, f64)")),
            ("integer", Some("i32")),
            ("floating-point number", Some("f64")),
            ("`&str`", Some("&str")),
            // By their last segments: the next try says where a name the cell cannot see is.
            ("`HashMap<u8, u8>`", Some("HashMap<u8, u8>")),
            ("`ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>`", Some("ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>")),
            // Not a type a cell can write: the analysis's.
            ("closure", None),
            ("`{closure@src/lib.rs:3:9: 3:12}`", None),
            ("fn item", None),
        ] {
            let label = format!("expected `EvcxrTypeProbe`, found {found}");
            let error = Rustc { label: Some(&label), ..error(Some("E0308"), "mismatched types", "") };
            let definitions = defs(&["struct P { x: i32 }"], &[], &[]);
            match (probed(error, Some(evcxr::TYPE_PROBE), &seen("", &definitions)), taken) {
                (Probed::Type(type_name), Some(taken)) => assert_eq!(type_name, taken, "{found}"),
                (Probed::Wait, None) => {}
                _ => panic!("{found}: not {taken:?}"),
            }
        }
    }

    #[test]
    fn a_name_the_cell_cannot_see_is_written_by_a_path_to_it_the_notebook_writes() {
        let deps = [
            ("tch", "tch = \"0.26\""),
            ("ndarray", "ndarray = \"0.16\""),
            ("polars", "polars = \"0.46\""),
            ("candle-core", "candle-core = \"0.11\""),
        ];
        let plain = defs(&["struct P { x: i32 }"], &[], &deps);
        for (cell, found, written) in [
            // The cell's own path to it.
            ("let t = tch::Tensor::ones([2], (tch::Kind::Float, tch::Device::Cpu));", "Tensor", "tch::Tensor"),
            (
                "let m = std::collections::HashMap::<u8, P>::new();",
                "HashMap<u8, P>",
                "std::collections::HashMap<u8, P>",
            ),
            // Else at the root of the crate the cell names first.
            (
                "let a = ndarray::Array2::<f64>::zeros((2, 2));",
                "ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>",
                "ndarray::ArrayBase<ndarray::OwnedRepr<f64>, ndarray::Dim<[usize; 2]>>",
            ),
            // A dependency whose name has a hyphen, by the name paths use.
            ("let x = candle_core::Tensor::new(&[1f32], &dev)?.sum_all()?;", "Shape", "candle_core::Shape"),
            // Seen already, or named by no path and no crate: as rustc wrote it.
            ("let v = vec![P { x: 1 }];", "Vec<P>", "Vec<P>"),
            ("let t = make();", "Tensor", "Tensor"),
        ] {
            assert_eq!(seen(cell, &plain).written(found), written, "{cell}");
        }
        // A name a `use` brings is left to it; one a glob may bring too, unless the cell writes it.
        let glob = defs(&[], &["use polars::prelude::*;"], &deps);
        assert_eq!(seen("let df = polars::df!(\"a\" => [1])?;", &glob).written("DataFrame"), "DataFrame");
        assert_eq!(
            seen("let t = tch::Tensor::zeros([1], tch::kind::FLOAT_CPU);", &glob).written("Tensor"),
            "tch::Tensor"
        );
        assert_eq!(
            seen("use tch::Tensor;\nlet t = tch::Tensor::zeros([1], tch::kind::FLOAT_CPU);", &plain).written("Tensor"),
            "Tensor"
        );
        let named = defs(&[], &["use ndarray::{Array2, Dim};"], &deps);
        let cell = "let a = ndarray::Array2::<f64>::zeros((2, 2));";
        assert_eq!(
            seen(cell, &named).written("ArrayBase<f64, Dim<[usize; 2]>>"),
            "ndarray::ArrayBase<f64, Dim<[usize; 2]>>"
        );
    }

    #[test]
    fn a_type_the_label_shortens_is_the_notes() {
        let label = "expected `EvcxrTypeProbe`, found `ArrayBase<OwnedRepr<f64>, ...>`";
        let found = Some("`ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>`");
        let error = Rustc { label: Some(label), found, ..error(Some("E0308"), "mismatched types", "") };
        let definitions = defs(&[], &[], &[]);
        let Probed::Type(type_name) = probed(error, Some(evcxr::TYPE_PROBE), &seen("", &definitions)) else { panic!() };
        assert_eq!(type_name, "ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>");
        let note = serde_json::json!({"children": [{"message": "expected struct `EvcxrTypeProbe`\n   found struct `Vec<u8>`"}]});
        assert_eq!(found_in_notes(&note), Some("`Vec<u8>`"));
    }

    #[test]
    fn a_name_the_cell_cannot_see_is_written_by_the_path_rustc_suggests() {
        let now = "ArrayBase<OwnedRepr<f64>, Dim<[usize; 2]>>";
        let cannot_find = |name: &str, imports| {
            let message = format!("cannot find type `{name}` in this scope");
            probed(Rustc { imports, ..error(Some("E0412"), &message, "") }, Some(now), &seen("", &defs(&[], &[], &[])))
        };
        let Probed::Type(written) = cannot_find("Dim", vec!["ndarray::Dim"]) else { panic!("not taken") };
        assert_eq!(written, "ArrayBase<OwnedRepr<f64>, ndarray::Dim<[usize; 2]>>");
        // A suggestion of another name, or none: the analysis's types.
        assert!(matches!(cannot_find("Dim", vec!["ndarray::Dimension"]), Probed::Wait));
        assert!(matches!(cannot_find("Dim", vec![]), Probed::Wait));
        // A path's later segment of that name is not its start.
        assert_eq!(written_by_path("a::Dim<Dim>", "Dim", "b::Dim").as_deref(), Some("a::Dim<b::Dim>"));
        assert_eq!(written_by_path("a::Dim", "Dim", "b::Dim"), None);
    }

    #[test]
    fn a_guessed_types_errors_are_ours_a_cells_own_are_evcxrs() {
        let is = |probe: Probed, expected: &str| match probe {
            Probed::Theirs => expected == "theirs",
            Probed::Wait => expected == "wait",
            Probed::Type(_) => false,
        };
        let cases = [
            // At the probe, an error that is no mismatch naming a type: the analysis's types.
            (error(Some("E0277"), "the trait bound is not satisfied", ""), Some(evcxr::TYPE_PROBE), "wait"),
            // At rustc's type: one that does not build here, but a move or a missing value is evcxr's.
            (error(Some("E0308"), "mismatched types", ""), Some("Vec<i32>"), "wait"),
            (error(Some("E0382"), "use of moved value: `v`", ""), Some("Vec<i32>"), "theirs"),
            (error(Some("E0425"), "cannot find value `v` in this scope", ""), Some("Vec<i32>"), "theirs"),
            // At no guessed variable: only an error naming the probe.
            (error(Some("E0277"), "`EvcxrTypeProbe` doesn't implement `Debug`", "EvcxrTypeProbe"), None, "wait"),
            (error(Some("E0308"), "mismatched types", "expected `u8`, found `&str`"), None, "theirs"),
        ];
        for (error, type_now, expected) in cases {
            let message = error.message;
            let definitions = defs(&[], &[], &[]);
            assert!(
                is(probed(error, type_now, &seen("", &definitions)), expected),
                "{message} at {type_now:?}: not {expected}"
            );
        }
    }
}
