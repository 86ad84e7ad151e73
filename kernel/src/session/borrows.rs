//! Borrows of the notebook's variables kept between cells (issue 60): no borrow outlives its
//! cell's function, so `let r = &v;` is not stored. Its expression is kept instead: each later
//! cell that names `r` makes it again from `v` first thing, and one that moves or drops `v`
//! fails to compile (the cell's last statement borrows `v`), its error naming `r`.

use ra_ap_syntax::ast::{self, HasArgList, HasModuleItem, HasName, RangeItem};
use ra_ap_syntax::{AstNode, Edition};
use regex::Regex;
use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, MutexGuard};

static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap());

/// Methods that only borrow their receiver, so that a view made again is the same view.
const VIEWS: &[&str] = &[
    "iter",
    "iter_mut",
    "as_slice",
    "as_mut_slice",
    "as_str",
    "as_bytes",
    "as_ref",
    "as_mut",
    "as_deref",
    "as_deref_mut",
    "as_path",
    "chars",
    "bytes",
    "lines",
    "split_whitespace",
    "keys",
    "values",
    "values_mut",
    "windows",
    "chunks",
    "chunks_exact",
    "first",
    "last",
    "get",
    "get_mut",
    "split_at",
    "view",
    "view_mut",
    "row",
    "column",
    "rows",
    "columns",
    "outer_iter",
    "axis_iter",
    "slice",
    "slice_mut",
    "borrow",
    "borrow_mut",
];

/// Lazy iterator adapters: a view's chain made again runs nothing until a cell uses it.
const ADAPTERS: &[&str] = &[
    "map",
    "filter",
    "filter_map",
    "enumerate",
    "zip",
    "skip",
    "take",
    "step_by",
    "rev",
    "cloned",
    "copied",
    "chain",
    "flat_map",
    "flatten",
    "peekable",
    "skip_while",
    "take_while",
];

/// One kept borrow: `let [mut] name = expr;`, made again in each cell that names `name`.
#[derive(Clone, Debug, PartialEq)]
pub struct Borrow {
    pub name: String,
    mutable: bool,
    expr: String,
    /// The notebook's variables (stored ones, or kept borrows) that `expr` names.
    names: Vec<String>,
}

impl Borrow {
    /// How the cell that defined it wrote it.
    pub fn statement(&self) -> String {
        format!("let {}{} = {};", if self.mutable { "mut " } else { "" }, self.name, self.expr)
    }
}

/// The notebook's kept borrows, in the order they were made (each after those it names).
#[derive(Debug, Default)]
pub struct Borrows(Mutex<Vec<Borrow>>);

/// What a cell does to the kept borrows: those it makes, and the names it lets go (by
/// `drop(name)` or a `let` of the name that is not a borrow).
#[derive(Debug, Default)]
struct Effect {
    made: Vec<Borrow>,
    released: HashSet<String>,
    /// Those of `released` a `let` gave a value of its own, which evcxr stores.
    redefined: HashSet<String>,
}

impl Borrows {
    fn kept(&self) -> MutexGuard<'_, Vec<Borrow>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What evcxr's hook does with them in the cell `code`, `stored` being the notebook's
    /// stored variables: the kept borrows it names are made first (with those they are made
    /// from), the new ones and the kept ones are not stored, and its last statement borrows
    /// each variable a borrow is made from that the cell names, so that moving one fails.
    pub fn around(&self, code: &str, stored: &[&str]) -> evcxr::CellBorrows {
        let kept = self.kept();
        let stored: HashSet<&str> = stored.iter().copied().collect();
        let live: Vec<&Borrow> = alive(&kept, &stored);
        let effect = effect(code, &stored, &kept);
        let words: HashSet<&str> = WORD.find_iter(code).map(|m| m.as_str()).collect();
        let needed = needed(&live, |name| words.contains(name));
        let before: String = needed.iter().map(|b| format!("#[allow(unused)] {}\n", b.statement())).collect();
        let mut roots: Vec<&str> = Vec::new();
        let held = live.iter().copied().filter(|b| !effect.released.contains(&b.name));
        for borrow in held.chain(&effect.made) {
            for root in roots_of(borrow, &live) {
                if words.contains(root) && !roots.contains(&root) {
                    roots.push(root);
                }
            }
        }
        let after = roots.iter().map(|root| format!("let _ = &{root};\n")).collect();
        let mut not_stored: HashSet<String> = effect.made.iter().map(|b| b.name.clone()).collect();
        not_stored.extend(kept.iter().map(|b| b.name.clone()).filter(|name| !effect.redefined.contains(name)));
        evcxr::CellBorrows { not_stored, before, after }
    }

    /// The stored variables a cell naming `words` loads for the borrows it names.
    pub fn roots_named(&self, named: impl Fn(&str) -> bool) -> Vec<String> {
        let kept = self.kept();
        let all: Vec<&Borrow> = kept.iter().collect();
        let needed = needed(&all, named);
        needed.iter().flat_map(|b| b.names.iter().cloned()).collect()
    }

    /// After the cell `code` ran: the borrows it made are kept, those it let go are not, and
    /// those whose variables are gone (`stored` after the cell) go too. Returns what the user
    /// should hear of the last.
    pub fn commit(&self, code: Option<&str>, stored: &[&str]) -> Vec<String> {
        let mut kept = self.kept();
        let stored_set: HashSet<&str> = stored.iter().copied().collect();
        if let Some(code) = code {
            let effect = effect(code, &stored_set, &kept);
            kept.retain(|b| !effect.released.contains(&b.name) && !effect.made.iter().any(|m| m.name == b.name));
            kept.extend(effect.made);
        }
        let mut gone = Vec::new();
        loop {
            let alive: HashSet<String> = alive(&kept, &stored_set).iter().map(|b| b.name.clone()).collect();
            let Some(at) = kept.iter().position(|b| !alive.contains(&b.name)) else { break };
            let b = kept.remove(at);
            let missing: Vec<&str> = b.names.iter().map(String::as_str).filter(|n| !alive.contains(*n)).collect();
            gone.push(format!(
                "`{}` ({}) is gone: `{}` is no longer kept",
                b.name,
                b.statement(),
                missing.join("`, `")
            ));
        }
        gone
    }

    /// A kept borrow made from `root`: its name and its statement.
    pub fn of_root(&self, root: &str) -> Option<(String, String)> {
        let kept = self.kept();
        let all: Vec<&Borrow> = kept.iter().collect();
        kept.iter().find(|b| roots_of(b, &all).contains(&root)).map(|b| (b.name.clone(), b.statement()))
    }
}

/// The kept borrows all of whose names are stored variables or kept borrows alive before them.
fn alive<'a>(kept: &'a [Borrow], stored: &HashSet<&str>) -> Vec<&'a Borrow> {
    let mut live: Vec<&Borrow> = Vec::new();
    for b in kept {
        if b.names.iter().all(|n| stored.contains(n.as_str()) || live.iter().any(|l| &l.name == n)) {
            live.push(b);
        }
    }
    live
}

/// The borrows of `live` that `named` names, with those they are made from, in `live`'s order.
fn needed<'a>(live: &[&'a Borrow], named: impl Fn(&str) -> bool) -> Vec<&'a Borrow> {
    let mut want: HashSet<&str> = live.iter().map(|b| b.name.as_str()).filter(|n| named(n)).collect();
    for b in live.iter().rev() {
        if want.contains(b.name.as_str()) {
            want.extend(b.names.iter().map(String::as_str));
        }
    }
    live.iter().copied().filter(|b| want.contains(b.name.as_str())).collect()
}

/// The stored variables `borrow` is made from, through the borrows it names.
fn roots_of<'a>(borrow: &'a Borrow, live: &[&'a Borrow]) -> Vec<&'a str> {
    let mut roots = Vec::new();
    for name in &borrow.names {
        match live.iter().find(|b| &b.name == name) {
            Some(inner) if inner.name != borrow.name => roots.extend(roots_of(inner, live)),
            _ => roots.push(name.as_str()),
        }
    }
    roots
}

/// The cell's top-level statements, parsed as evcxr parses them; evcxr's `:` command lines are
/// left out. None where it is not Rust that parses (rustc will say why).
fn statements(code: &str) -> Option<Vec<Part>> {
    let rust: Vec<&str> = code.lines().map(|l| if l.trim_start().starts_with(':') { "" } else { l }).collect();
    let parsed = ast::SourceFile::parse(&format!("fn cell() {{\n{}\n}}", rust.join("\n")), Edition::Edition2024);
    if !parsed.errors().is_empty() {
        return None;
    }
    let Some(ast::Item::Fn(cell)) = parsed.tree().items().next() else { return None };
    let body = cell.body()?.stmt_list()?;
    let parts = body.statements().filter_map(|s| match s {
        ast::Stmt::LetStmt(l) => Some(Part::Let(l)),
        ast::Stmt::ExprStmt(e) => e.expr().map(Part::Expr),
        ast::Stmt::Item(_) => None,
    });
    Some(parts.chain(body.tail_expr().map(Part::Expr)).collect())
}

/// A top-level statement of a cell that can make or let go a borrow.
enum Part {
    Let(ast::LetStmt),
    Expr(ast::Expr),
}

/// The borrows the cell makes, and the names it lets go, in its statements' order.
fn effect(code: &str, stored: &HashSet<&str>, kept: &[Borrow]) -> Effect {
    let mut effect = Effect::default();
    let mut known: HashSet<String> = stored.iter().map(|s| s.to_string()).collect();
    known.extend(kept.iter().map(|b| b.name.clone()));
    for stmt in statements(code).unwrap_or_default() {
        match &stmt {
            Part::Let(local) => {
                let Some(ast::Pat::IdentPat(ident)) = local.pat() else { continue };
                let Some(name) = ident.name().map(|n| n.text().to_string()) else { continue };
                let init = local.initializer().filter(|_| local.let_else().is_none());
                let names: Option<Vec<String>> =
                    init.as_ref().and_then(borrow_names).map(|n| n.into_iter().filter(|n| known.contains(n)).collect());
                effect.made.retain(|b| b.name != name);
                match (init, names) {
                    (Some(expr), Some(names)) if !names.is_empty() => {
                        effect.released.remove(&name);
                        effect.redefined.remove(&name);
                        let expr = expr.syntax().text().to_string();
                        let mutable = ident.mut_token().is_some();
                        effect.made.push(Borrow { name: name.clone(), mutable, expr, names });
                    }
                    _ => {
                        effect.released.insert(name.clone());
                        effect.redefined.insert(name.clone());
                    }
                }
                known.insert(name);
            }
            Part::Expr(e) => {
                if let Some(name) = dropped(e) {
                    effect.made.retain(|b| b.name != name);
                    effect.released.insert(name);
                }
            }
        }
    }
    effect
}

/// The name in `drop(name)`.
fn dropped(expr: &ast::Expr) -> Option<String> {
    let ast::Expr::CallExpr(call) = expr else { return None };
    let func = call.expr().as_ref().and_then(single_name)?;
    let mut args = call.arg_list()?.args();
    let (Some(arg), None) = (args.next(), args.next()) else { return None };
    (func == "drop").then(|| single_name(&arg)).flatten()
}

fn single_name(expr: &ast::Expr) -> Option<String> {
    match expr {
        ast::Expr::PathExpr(p) => Some(p.path()?.as_single_name_ref()?.text().to_string()),
        ast::Expr::ParenExpr(p) => single_name(&p.expr()?),
        _ => None,
    }
}

/// The names `expr` reads where it is a borrow that can be made again with nothing else
/// happening: `&`/`&mut` of a place (fields, indexing, slicing), or a view method (then lazy
/// adapters) on one. None where it is anything else.
fn borrow_names(expr: &ast::Expr) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let is = match expr {
        ast::Expr::RefExpr(r) => r.expr().is_some_and(|e| place(&e, &mut names)),
        ast::Expr::MethodCallExpr(_) | ast::Expr::ParenExpr(_) => view(expr, &mut names),
        _ => false,
    };
    is.then_some(names)
}

fn place(expr: &ast::Expr, names: &mut Vec<String>) -> bool {
    match expr {
        ast::Expr::PathExpr(_) => single_name(expr).map(|n| names.push(n)).is_some(),
        ast::Expr::FieldExpr(f) => f.expr().is_some_and(|e| place(&e, names)),
        ast::Expr::IndexExpr(i) => {
            i.base().is_some_and(|e| place(&e, names)) && i.index().is_some_and(|e| plain(&e, names))
        }
        ast::Expr::ParenExpr(p) => p.expr().is_some_and(|e| place(&e, names)),
        ast::Expr::MethodCallExpr(_) => view(expr, names),
        _ => false,
    }
}

fn view(expr: &ast::Expr, names: &mut Vec<String>) -> bool {
    match expr {
        ast::Expr::MethodCallExpr(m) => {
            let Some(method) = m.name_ref().map(|n| n.text().to_string()) else { return false };
            let args: Vec<ast::Expr> = m.arg_list().map(|l| l.args().collect()).unwrap_or_default();
            let receiver = m.receiver();
            if VIEWS.contains(&method.as_str()) {
                receiver.is_some_and(|r| place(&r, names)) && args.iter().all(|a| plain(a, names))
            } else {
                let lazy =
                    |a: &ast::Expr, names: &mut Vec<String>| matches!(a, ast::Expr::ClosureExpr(_)) || plain(a, names);
                ADAPTERS.contains(&method.as_str())
                    && receiver.is_some_and(|r| view(&r, names))
                    && args.iter().all(|a| lazy(a, names))
            }
        }
        ast::Expr::ParenExpr(p) => p.expr().is_some_and(|e| view(&e, names)),
        _ => false,
    }
}

/// An index or argument that reads and changes nothing: a literal, a name, a range of them.
fn plain(expr: &ast::Expr, names: &mut Vec<String>) -> bool {
    match expr {
        ast::Expr::Literal(_) => true,
        ast::Expr::PathExpr(_) => {
            names.extend(single_name(expr));
            true
        }
        ast::Expr::RangeExpr(r) => r.start().iter().chain(r.end().iter()).all(|e| plain(e, names)),
        ast::Expr::ParenExpr(p) => p.expr().is_some_and(|e| plain(&e, names)),
        ast::Expr::RefExpr(r) => r.expr().is_some_and(|e| place(&e, names)),
        ast::Expr::PrefixExpr(p) => {
            p.op_kind() == Some(ast::UnaryOp::Neg) && p.expr().is_some_and(|e| plain(&e, names))
        }
        ast::Expr::FieldExpr(f) => f.expr().is_some_and(|e| plain(&e, names)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn around(b: &Borrows, code: &str, stored: &[&str]) -> (Vec<String>, String, String) {
        let cell = b.around(code, stored);
        let mut not_stored: Vec<String> = cell.not_stored.into_iter().collect();
        not_stored.sort();
        (not_stored, cell.before, cell.after)
    }

    #[test]
    fn a_borrow_is_not_stored_and_is_made_again_where_a_cell_names_it() {
        let b = Borrows::default();
        let cell = "let v = vec![1, 2, 3];\nlet r = &v;";
        let (not_stored, before, after) = around(&b, cell, &[]);
        assert_eq!(not_stored, ["r"]);
        assert_eq!((before.as_str(), after.as_str()), ("", "let _ = &v;\n"), "moving v in its cell fails");
        assert!(b.commit(Some(cell), &["v"]).is_empty());
        let (not_stored, before, after) = around(&b, "r.len()", &["v"]);
        assert_eq!(not_stored, ["r"]);
        assert_eq!(before, "#[allow(unused)] let r = &v;\n");
        assert_eq!(after, "", "a cell that names neither r nor v checks nothing");
        assert_eq!(b.roots_named(|n| n == "r"), ["v"]);
        let (_, before, after) = around(&b, "let w = v;", &["v"]);
        assert_eq!((before.as_str(), after.as_str()), ("", "let _ = &v;\n"));
        assert_eq!(b.of_root("v"), Some(("r".into(), "let r = &v;".into())));
    }

    #[test]
    fn views_slices_and_borrows_of_borrows_are_kept_in_order() {
        let b = Borrows::default();
        let cell = "let mut s = &mut v[1..n];\nlet it = v.iter().map(|x| x * 2);\nlet first = s.first();";
        assert!(b.commit(Some(cell), &["v", "n"]).is_empty());
        let kept: Vec<String> = b.kept().iter().map(Borrow::statement).collect();
        assert_eq!(kept, ["let mut s = &mut v[1..n];", "let it = v.iter().map(|x| x * 2);", "let first = s.first();"]);
        let (_, before, after) = around(&b, "first", &["v", "n"]);
        assert_eq!(before.lines().count(), 2, "first, and s it is made from: {before}");
        assert!(before.starts_with("#[allow(unused)] let mut s"), "{before}");
        assert_eq!(after, "");
        assert_eq!(b.roots_named(|n| n == "first"), ["v", "n", "s"]);
    }

    #[test]
    fn what_is_not_a_plain_borrow_is_stored_as_before() {
        let b = Borrows::default();
        for cell in
            ["let c = v.clone();", "let d = v.drain(..);", "let n = &v.len();", "let s = \"text\";", "let x = &5;"]
        {
            assert!(around(&b, cell, &["v"]).0.is_empty(), "{cell}");
        }
        assert!(around(&b, "let r = &w;", &["v"]).0.is_empty(), "w is no variable of the notebook");
        assert!(around(&b, "let r = &v\nlet q = 1;", &["v"]).0.is_empty(), "not Rust that parses");
    }

    #[test]
    fn a_borrow_is_let_go_by_drop_or_a_new_let_and_goes_with_its_variable() {
        let b = Borrows::default();
        b.commit(Some("let r = &v;\nlet q = &v;"), &["v"]);
        let (not_stored, _, after) = around(&b, "drop(r);\nlet w = v;", &["v"]);
        assert_eq!(not_stored, ["q", "r"], "r, made to be dropped, is not stored either");
        assert_eq!(after, "let _ = &v;\n", "q still holds v");
        assert_eq!(around(&b, "let r = 1;", &["v"]).0, ["q"], "a new r is stored");
        b.commit(Some("drop(r);"), &["v"]);
        b.commit(Some("let q = 5;"), &["v", "q"]);
        assert!(b.kept().is_empty());
        b.commit(Some("let r = &v;\nlet s = &r[0];"), &["v"]);
        let gone = b.commit(None, &[]);
        assert_eq!(gone.len(), 2, "{gone:?}");
        assert!(gone[0].contains("`r` (let r = &v;) is gone: `v`"), "{gone:?}");
    }
}
