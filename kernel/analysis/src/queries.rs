//! What evcxr asks of a crate's analysis: the types of a function's `let`s, completions and
//! hovers, each read from the selected crate of a [`Host`].

use crate::host::{Host, EDITION};
use crate::lets::functions_named;
use anyhow::{bail, Result};
use evcxr::{Completion, Completions, TypeName, VariableInfo};
use ra_ap_hir::{HirDisplay, Semantics};
use ra_ap_ide::{CompletionItemKind, FilePosition, FileRange, HoverConfig, RootDatabase};
use ra_ap_ide_db::SymbolKind;
use ra_ap_syntax::ast::{self, AstNode, HasName};
use ra_ap_syntax::{TextRange, TextSize};
use std::collections::HashMap;

/// The variables that the top-level `let`s of `function` bind, each with its type where the
/// analysis can write it as code, the last binding of a name winning.
pub(crate) fn variables(host: &Host, function: &str) -> HashMap<String, VariableInfo> {
    bindings(host, function).into_iter().map(|(name, info, _)| (name, info)).collect()
}

/// Whether the selected crate of `host` types the standard library's prelude: a function of that
/// alone, added to its source for a moment.
pub(crate) fn prelude_types(host: &mut Host) -> Result<bool> {
    if !host.with_sysroot {
        return Ok(true);
    }
    let source = host.ws.source.clone();
    let probed = host.set_source(format!("{source}\nfn dryml_prelude_probe() {{ let p = Some(vec![1u8]); }}\n"), false);
    let typed = probed.is_ok()
        && variables(host, "dryml_prelude_probe")
            .remove("p")
            .is_some_and(|p| p.type_name == TypeName::Named("Option<Vec<u8>>".into()));
    // The crate's own source back, whatever the probe did.
    host.set_source(source, false)?;
    probed.map(|()| typed)
}

/// Why each binding of `function` with no type has none, for the log line of a miss.
pub(crate) fn why_unknown(host: &Host, function: &str) -> Vec<String> {
    let mut whys: Vec<String> =
        bindings(host, function).into_iter().filter_map(|(name, _, why)| Some(format!("`{name}`: {}", why?))).collect();
    whys.sort();
    whys
}

fn bindings(host: &Host, function: &str) -> Vec<(String, VariableInfo, Option<String>)> {
    let db = host.analysis.raw_database();
    let sema = Semantics::new(db);
    let file = ra_ap_base_db::EditionedFileId::new(db, host.ws.file, EDITION);
    let parsed = sema.parse(file);
    let mut found = Vec::new();
    ra_ap_hir::attach_db(db, || {
        for body in functions_named(&parsed, function).filter_map(|f| f.body()) {
            let Some(module) = sema.scope(body.syntax()).map(|scope| scope.module()) else {
                continue;
            };
            for statement in body.statements() {
                let ast::Stmt::LetStmt(binding) = statement else { continue };
                let Some(pattern) = binding.pat() else { continue };
                // A written type is the whole pattern's: it names a binding's only where the
                // binding is the pattern.
                let bindings = pattern.syntax().descendants().filter_map(ast::IdentPat::cast);
                for ident in bindings {
                    let Some(name) = ident.name() else { continue };
                    let whole = ident.syntax() == pattern.syntax();
                    let written = binding.ty().filter(|_| whole);
                    let (type_name, why) = type_of(&sema, module, &ident, written);
                    let is_mutable = ident.mut_token().is_some();
                    found.retain(|(other, _, _)| *other != name.text());
                    found.push((name.text().to_string(), VariableInfo { type_name, is_mutable }, why));
                }
            }
        }
    });
    found
}

/// A binding's type: as written where that is a type evcxr can store, else as inferred; where
/// neither, why.
fn type_of(
    sema: &Semantics<'_, RootDatabase>,
    module: ra_ap_hir::Module,
    ident: &ast::IdentPat,
    written: Option<ast::Type>,
) -> (TypeName, Option<String>) {
    if let Some(text) = written.map(|ty| ty.syntax().text().to_string()) {
        if evcxr::is_type_valid(&text) {
            return (TypeName::Named(text), None);
        }
    }
    let Some(inferred) = sema.type_of_pat(&ast::Pat::IdentPat(ident.clone())) else {
        return (TypeName::Unknown, Some("no type inferred".into()));
    };
    let ty = inferred.original();
    if ty.is_closure() {
        return match kept_closure(sema, module, &ty) {
            Ok(boxed) => (TypeName::Boxed(boxed), None),
            Err(why) => (TypeName::Closure, Some(why)),
        };
    }
    let shown = || ty.display(sema.db, module.krate(sema.db).to_display_target(sema.db)).to_string();
    let as_code = ty.display_source_code(sema.db, module.into(), true);
    // An iterator whose type names a closure (`map(|x| ..)`) is kept as a boxed iterator, and a
    // function (`let p = h;`) as its pointer.
    if !as_code.as_ref().is_ok_and(|text| writable(text)) {
        if let Ok(pointer) = function_pointer(sema, module, &ty) {
            return (TypeName::Named(pointer), None);
        }
        if let Some(item) = ty.clone().iterator_item(sema.db) {
            if let Some(item) = item.display_source_code(sema.db, module.into(), true).ok().filter(|t| writable(t)) {
                return (TypeName::Boxed(format!("Box<dyn Iterator<Item = {item}>>")), None);
            }
        }
    }
    match as_code {
        Ok(text) if evcxr::is_type_valid(&text) => (TypeName::Named(text), None),
        Ok(text) => (TypeName::Unknown, Some(format!("`{text}` is not a type evcxr stores"))),
        Err(error) => {
            let apart = crates_apart(sema.db, module.krate(sema.db), &ty);
            (TypeName::Unknown, Some(format!("`{}` not writable from the cell ({error:?}){apart}", shown())))
        }
    }
}

/// Whether `text` is a type a cell can write and store: valid, and no `impl Trait` (what a
/// closure returning a closure, or an adapter over one, shows).
fn writable(text: &str) -> bool {
    evcxr::is_type_valid(text) && !text.contains("impl ")
}

/// A function item's type as the pointer it coerces to (`fn(i32) -> i32`).
fn function_pointer(
    sema: &Semantics<'_, RootDatabase>,
    module: ra_ap_hir::Module,
    ty: &ra_ap_hir::Type<'_>,
) -> Result<String, String> {
    let callable = ty.as_callable(sema.db).ok_or("not callable")?;
    if !matches!(callable.kind(), ra_ap_hir::CallableKind::Function(_)) || callable.receiver_param(sema.db).is_some() {
        return Err("not a function".into());
    }
    signature(sema, module, &callable).map(|(params, result)| format!("fn({params}){result}"))
}

/// A callable's parameters and result (` -> T`, empty for `()`) as the cell can write them.
fn signature(
    sema: &Semantics<'_, RootDatabase>,
    module: ra_ap_hir::Module,
    callable: &ra_ap_hir::Callable<'_>,
) -> Result<(String, String), String> {
    let db = sema.db;
    let write = |t: &ra_ap_hir::Type<'_>| match t.display_source_code(db, module.into(), true) {
        Ok(text) if writable(&text) => Ok(text),
        _ => Err(format!(
            "its `{}` has no type the cell can write",
            t.display(db, module.krate(db).to_display_target(db))
        )),
    };
    let params = callable.params().iter().map(|p| write(p.ty())).collect::<Result<Vec<_>, _>>()?;
    let result = callable.return_type();
    let result = if result.is_unit() { String::new() } else { format!(" -> {}", write(&result)?) };
    Ok((params.join(", "), result))
}

/// The trait object a closure is kept as between cells (`Box<dyn FnMut(i32) -> i32>`: its kind
/// and signature), or why it has none (an async closure; a type the cell cannot write).
fn kept_closure(
    sema: &Semantics<'_, RootDatabase>,
    module: ra_ap_hir::Module,
    ty: &ra_ap_hir::Type<'_>,
) -> Result<String, String> {
    use ra_ap_hir::FnTrait;
    let db = sema.db;
    let kind = match ty.as_closure().map(|c| c.fn_trait(db)) {
        Some(FnTrait::Fn) => "Fn",
        Some(FnTrait::FnMut) => "FnMut",
        Some(FnTrait::FnOnce) => "FnOnce",
        _ => return Err("an async closure".into()),
    };
    let callable = ty.as_callable(db).ok_or("a closure without a signature")?;
    let (params, result) = signature(sema, module, &callable)?;
    Ok(format!("Box<dyn {kind}({params}){result}>"))
}

/// The types in `ty` defined in crates that `krate` does not depend on, even indirectly: a type
/// of another notebook's copy of a crate, for the log line of a miss.
fn crates_apart(db: &RootDatabase, krate: ra_ap_hir::Crate, ty: &ra_ap_hir::Type<'_>) -> String {
    let reached = krate.base().transitive_deps(db);
    let mut apart = Vec::new();
    let mut stack = vec![ty.clone()];
    while let Some(ty) = stack.pop() {
        if let Some(adt) = ty.as_adt() {
            let of = adt.module(db).krate(db);
            if !reached.contains(&of.base()) {
                let name = of.display_name(db).map_or_else(|| "?".into(), |n| n.to_string());
                apart.push(format!("{} of {name} {:?}", adt.name(db).as_str(), of.base()));
            }
        }
        stack.extend(ty.type_arguments());
    }
    if apart.is_empty() {
        String::new()
    } else {
        format!("; apart from the cell's crates: {}", apart.join(", "))
    }
}

/// The completions at `position` of the selected crate's source: those whose name continues
/// what is typed there, with the snippet placeholders of their code filled by their names.
pub(crate) fn completions(host: &Host, position: usize) -> Result<Completions> {
    let config = completion_config();
    let at = FilePosition { file_id: host.ws.file, offset: TextSize::from(position as u32) };
    let items = host.analysis.analysis().completions(&config, at, None).ok().flatten();
    let mut replaced: Option<TextRange> = None;
    let mut completions = Vec::new();
    for item in items.into_iter().flatten() {
        let mut edits = item.text_edit.iter();
        let (Some(edit), None) = (edits.next(), edits.next()) else {
            bail!("a completion of more than one edit at {position}");
        };
        let typed = host.ws.source.get(std::ops::Range::<usize>::from(edit.delete)).unwrap_or("");
        if !item.lookup().starts_with(typed) {
            continue;
        }
        match replaced {
            Some(range) if range != edit.delete => bail!("completions that replace different text"),
            _ => replaced = Some(edit.delete),
        }
        completions.push(Completion {
            code: without_placeholders(&edit.insert),
            kind: jupyter_kind(item.kind),
            label: item.label.primary.to_string(),
        });
    }
    let (start, end) = replaced.map_or((position, position), |r| (r.start().into(), r.end().into()));
    Ok(Completions { completions, start_offset: start, end_offset: end })
}

/// A snippet as plain code: `${1:name}` becomes `name`, tab stops (`$0`, `$1`) go.
fn without_placeholders(snippet: &str) -> String {
    let mut out = String::with_capacity(snippet.len());
    let mut rest = snippet;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            rest = &after[digits..];
        } else if let Some(body) = after.strip_prefix('{') {
            let number = body.bytes().take_while(u8::is_ascii_digit).count();
            match (body[number..].strip_prefix(':'), body.find('}')) {
                (Some(name), Some(close)) if number > 0 => {
                    out.push_str(&name[..close - number - 1]);
                    rest = &body[close + 1..];
                }
                _ => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The hover at `at` of the selected crate's source, as plain text and as Markdown.
pub(crate) fn hover(host: &Host, at: u32) -> Result<Option<(String, String)>> {
    let range = FileRange { file_id: host.ws.file, range: TextRange::empty(at.into()) };
    let analysis = host.analysis.analysis();
    let text = analysis.hover(&hover_config(false), range);
    let markdown = analysis.hover(&hover_config(true), range);
    match (text, markdown) {
        (Ok(text), Ok(markdown)) => {
            Ok(text.zip(markdown).map(|(text, markdown)| (text.info.markup.into(), markdown.info.markup.into())))
        }
        _ => bail!("the hover at {at} was cancelled"),
    }
}

pub(crate) fn hover_config(markdown: bool) -> HoverConfig<'static> {
    HoverConfig {
        links_in_hover: true,
        memory_layout: None,
        documentation: true,
        keywords: true,
        format: if markdown { ra_ap_ide::HoverDocFormat::Markdown } else { ra_ap_ide::HoverDocFormat::PlainText },
        max_trait_assoc_items_count: None,
        max_fields_count: Some(5),
        max_enum_variants_count: Some(5),
        max_subst_ty_len: ra_ap_ide::SubstTyLen::Unlimited,
        show_drop_glue: false,
        ra_fixture: ra_ap_ide::RaFixtureConfig::default(),
    }
}

fn completion_config() -> ra_ap_ide::CompletionConfig<'static> {
    use ra_ap_ide_db::imports::insert_use::{ImportGranularity, InsertUseConfig};
    ra_ap_ide::CompletionConfig {
        enable_postfix_completions: true,
        enable_imports_on_the_fly: false,
        enable_self_on_the_fly: true,
        enable_private_editable: true,
        enable_term_search: true,
        enable_auto_iter: true,
        enable_auto_await: true,
        term_search_fuel: 400,
        full_function_signatures: true,
        callable: Some(ra_ap_ide::CallableSnippets::FillArguments),
        add_semicolon_to_unit: true,
        add_colons_to_module: true,
        snippet_cap: ra_ap_ide_db::SnippetCap::new(true),
        insert_use: InsertUseConfig {
            granularity: ImportGranularity::Item,
            enforce_granularity: false,
            prefix_kind: ra_ap_hir::PrefixKind::ByCrate,
            group: false,
            skip_glob_imports: false,
        },
        prefer_no_std: false,
        prefer_prelude: false,
        prefer_absolute: false,
        snippets: Vec::new(),
        limit: None,
        fields_to_resolve: ra_ap_ide::CompletionFieldsToResolve::empty(),
        exclude_flyimport: Vec::new(),
        exclude_traits: &[],
        ra_fixture: ra_ap_ide::RaFixtureConfig::default(),
    }
}

/// A completion's kind as Jupyter's frontends name them.
fn jupyter_kind(kind: CompletionItemKind) -> &'static str {
    use SymbolKind as S;
    match kind {
        CompletionItemKind::Keyword => "keyword",
        CompletionItemKind::SymbolKind(symbol) => match symbol {
            S::Function | S::Method | S::Macro | S::ProcMacro | S::Derive => "function",
            S::Attribute | S::BuiltinAttr | S::DeriveHelper => "function",
            S::Struct | S::Enum | S::Union | S::Trait | S::TypeAlias => "class",
            S::TypeParam | S::SelfType => "class",
            S::Module | S::CrateRoot | S::ToolModule => "module",
            _ => "instance",
        },
        _ => "instance",
    }
}

#[cfg(test)]
mod tests {
    use super::without_placeholders as plain;

    #[test]
    fn snippets_become_code() {
        assert_eq!(plain("push(${1:value})$0"), "push(value)");
        assert_eq!(plain("insert(${1:k}, ${2:v})"), "insert(k, v)");
        assert_eq!(plain("len()"), "len()");
        assert_eq!(plain("a $ b ${x}"), "a $ b ${x}");
    }
}
