//! The architecture's invariants, read from the sources: the kernel's, the magics' and the
//! runtime's modules form layers with no cycle, and so do the files of every folder; the
//! session knows nothing of magics; only the protocol touches ZeroMQ and it names neither
//! evcxr nor the engine; the protocol and the engine name no `dryml`; `magics/` does no I/O;
//! `runtime/` depends on no crate of ours outside it, and `runtime/sys` on none at all; the
//! analysis's host and queries know nothing of the process, and a kernel's end of it only the
//! wire format.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// Source text without comments, so prose may name what code must not.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Each top-level module of a crate (`kernel`, `magics`, `runtime`) and the top-level modules
/// its code names: `crate::m::...`, `crate::{m::..., ...}`, or an item the crate root re-exports
/// from `m` (`crate::Args` for `pub use args::Args`). The root itself is the crate's face, not a
/// module of the graph.
fn module_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(ROOT).join(krate).join("src");
    let top_of = |file: &Path| {
        let rel = file.strip_prefix(&src).unwrap();
        rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string()
    };
    let files = rust_files(&src);
    let modules: BTreeSet<String> = files.iter().map(|f| top_of(f)).filter(|t| t != "lib" && t != "main").collect();
    // `pub use m::{A, b};` and `pub use m::A;` at the root: which module each name is from.
    let mut from_module: BTreeMap<String, String> = BTreeMap::new();
    for root in ["lib.rs", "main.rs"].map(|r| src.join(r)).iter().filter(|r| r.exists()) {
        for (module, names) in reexports(&code_of(root)) {
            if modules.contains(&module) {
                for name in names {
                    from_module.insert(name, module.clone());
                }
            }
        }
    }
    let path = regex::Regex::new(r"crate::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let top = top_of(file);
        if top == "lib" || top == "main" {
            continue;
        }
        let deps = graph.entry(top.clone()).or_default();
        for c in path.captures_iter(&code_of(file)) {
            for first in c[1].trim_matches(['{', '}']).split(',').map(|p| p.split("::").next().unwrap().trim()) {
                let module =
                    if modules.contains(first) { Some(first) } else { from_module.get(first).map(String::as_str) };
                if let Some(m) = module.filter(|m| *m != top) {
                    deps.insert(m.to_string());
                }
            }
        }
    }
    graph
}

/// The first import cycle of the graph, as `a -> b -> a`.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    // Depth-first search for a back edge.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if done.contains(n) {
            return None;
        }
        if let Some(i) = path.iter().position(|p| p == n) {
            return Some(format!("{} -> {n}", path[i..].join(" -> ")));
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(cycle) = visit(d, g, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Panics with the cycle if the graph has one.
fn assert_acyclic(graph: &BTreeMap<String, BTreeSet<String>>) {
    if let Some(cycle) = find_cycle(graph) {
        panic!("import cycle: {cycle}");
    }
}

/// The module path of a source file under `src`: `magic/cell.rs` is `magic::cell`,
/// `magic/experiment/mod.rs` is `magic::experiment`, the crate root is empty.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .strip_prefix(src)
        .unwrap()
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Every path a `crate::`, `super::` or `self::` reference names, braces expanded
/// (`super::{a::B, c}` gives `super::a::B` and `super::c`).
fn referenced_paths(code: &str) -> Vec<String> {
    fn expand(prefix: &str, group: &str, out: &mut Vec<String>) {
        let (mut depth, mut start) = (0, 0);
        let mut parts = Vec::new();
        for (i, ch) in group.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&group[start..]);
        for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            match part.find('{') {
                Some(b) => expand(&format!("{prefix}{}", &part[..b]), &part[b + 1..part.len() - 1], out),
                None => out.push(format!("{prefix}{part}")),
            }
        }
    }
    let start = regex::Regex::new(r"(?:^|[^:\w])((?:crate|self|super)(?:::super)*::)").unwrap();
    let mut out = Vec::new();
    for c in start.captures_iter(code) {
        let m = c.get(1).unwrap();
        let rest = &code[m.end()..];
        if rest.starts_with('{') {
            let (mut depth, mut end) = (0, rest.len());
            for (i, ch) in rest.char_indices() {
                depth += (ch == '{') as i32 - (ch == '}') as i32;
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            expand(m.as_str(), &rest[1..end], &mut out);
        } else {
            let len = rest.find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':')).unwrap_or(rest.len());
            out.push(format!("{}{}", m.as_str(), rest[..len].trim_end_matches(':')));
        }
    }
    out
}

/// A file's re-exports of its child modules' names (`pub use m::{A, b};`, `pub(crate) use
/// self::m::A;`): each module with the names it gives.
fn reexports(code: &str) -> Vec<(String, Vec<String>)> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r"(?m)^pub(?:\([a-z]+\))? use (?:self::)?([a-z_][a-z0-9_]*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*);",
        )
        .unwrap()
    });
    re.captures_iter(code)
        .map(|c| {
            let names = c[2].trim_matches(['{', '}']).split(',').map(str::trim).filter(|n| !n.is_empty());
            (c[1].to_string(), names.map(str::to_string).collect())
        })
        .collect()
}

/// Panics with the cycle if files (or folders) that sit side by side in one folder of `krate`
/// name each other in a circle: `a.rs` names `b.rs`, `b.rs` names `a.rs` (or `a` through
/// `c`), at any depth. A folder's `mod.rs` and its children naming each other is not a cycle
/// (a parent holds its children); what a `mod.rs` re-exports from a child counts as that child.
/// Tests are left out (`tests.rs`, `testing.rs`, a trailing `mod tests { .. }`): they may name
/// every module they test.
fn assert_no_cycles_inside_folders(krate: &str) {
    let src = Path::new(ROOT).join(krate).join("src");
    let files = rust_files(&src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
    // `pub use child::{A, B}` in a folder's `mod.rs`: `folder::A` is `folder::child`'s.
    let mut owner: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for file in &files {
        let here = module_path(&src, file);
        for (module, names) in reexports(&code_of(file)) {
            let child = [here.clone(), vec![module]].concat();
            if modules.contains(&child) {
                for name in names {
                    owner.insert([here.clone(), vec![name]].concat(), child.clone());
                }
            }
        }
    }
    // Edges between siblings, kept per folder: folder -> (from, to).
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let here = module_path(&src, file);
        if here.iter().any(|m| m == "tests" || m == "testing") {
            continue;
        }
        let code = code_of(file);
        let code = code.split("#[cfg(test)]\nmod tests {").next().unwrap();
        // `super::` of `a/b.rs` is `a`; of `a/b/mod.rs` also `a`: the module's parent either way.
        for reference in referenced_paths(code) {
            let mut parts: Vec<&str> = reference.split("::").collect();
            let mut path: Vec<String> = match parts[0] {
                "crate" => vec![],
                _ => here.clone(),
            };
            while let Some(&first) = parts.first() {
                match first {
                    "crate" | "self" => {}
                    "super" => {
                        path.pop();
                    }
                    _ => break,
                }
                parts.remove(0);
            }
            // The longest prefix that is a module, or an item a `mod.rs` re-exports from one.
            let mut target = path.clone();
            for p in parts {
                target.push(p.to_string());
                if let Some(o) = owner.get(&target) {
                    target = o.clone();
                } else if !modules.contains(&target) {
                    target.pop();
                    break;
                }
            }
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common < here.len() && common < target.len() {
                let folder = here[..common].to_vec();
                graphs
                    .entry(folder)
                    .or_default()
                    .entry(here[common].clone())
                    .or_default()
                    .insert(target[common].clone());
            }
        }
    }
    let cycles: Vec<String> = graphs
        .iter()
        .filter_map(|(folder, graph)| {
            find_cycle(graph).map(|c| format!("inside {krate}/src/{}: import cycle: {c}", folder.join("/")))
        })
        .collect();
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn files_inside_a_folder_have_no_cycles() {
    for krate in ["kernel", "kernel/analysis", "kernel/builds", "magics", "runtime", "runtime/sys"] {
        assert_no_cycles_inside_folders(krate);
    }
}

#[test]
fn kernel_modules_form_layers_without_cycles() {
    let graph = module_graph("kernel");
    assert_acyclic(&graph);
    assert!(graph["protocol"].is_empty(), "the protocol names {:?}", graph["protocol"]);
    for low in ["session", "magic", "measure"] {
        assert!(!graph[low].contains("engine"), "{low} must not reach up into the engine");
    }
    assert!(!graph["session"].contains("magic"), "the session knows nothing of magics");
    // The Jupyter side links no ML code: what it shares with cells is `dryml_sys`.
    let names_dryml = regex::Regex::new(r"(^|[^:\w])dryml::").unwrap();
    for dir in ["protocol", "engine"] {
        for file in rust_files(&Path::new(ROOT).join("kernel/src").join(dir)) {
            assert!(!names_dryml.is_match(&code_of(&file)), "{} names dryml, the user's runtime", file.display());
        }
    }
    for file in rust_files(&Path::new(ROOT).join("kernel/src/session")) {
        assert!(
            !code_of(&file).contains("dryml_magics"),
            "the session knows nothing of magics: {} names dryml_magics",
            file.display()
        );
    }
}

#[test]
fn the_analysis_stands_on_its_host_and_a_kernels_side_holds_none() {
    let graph = module_graph("kernel/analysis");
    assert_acyclic(&graph);
    for low in ["host", "load", "queries", "wire", "beside", "lets"] {
        for high in ["local", "client", "server"] {
            assert!(!graph[low].contains(high), "{low} must not reach up into {high}");
        }
    }
    // The kernel's end of the process speaks the wire format, and reads cells' syntax only.
    let syntax_or_wire = ["wire", "beside", "lets"];
    for side in ["client", "beside", "lets"] {
        let named = &graph[side];
        assert!(named.iter().all(|d| syntax_or_wire.contains(&d.as_str())), "the {side} names {named:?}");
    }
}

#[test]
fn magics_modules_have_no_cycles() {
    let graph = module_graph("magics");
    assert_acyclic(&graph);
    // The tokens and the argument readers are the bottom every parser stands on.
    assert!(graph["tokens"].is_empty(), "{:?}", graph["tokens"]);
    assert!(graph["args"].iter().all(|d| d == "tokens"), "{:?}", graph["args"]);
}

#[test]
fn runtime_modules_have_no_cycles() {
    let graph = module_graph("runtime");
    assert_acyclic(&graph);
    // `__kernel` is the top, named only by the kernel and its code.
    for (part, deps) in &graph {
        assert!(!deps.contains("__kernel"), "{part} names __kernel, the kernel's side");
    }
}

#[test]
fn only_the_protocol_touches_zeromq_and_it_never_names_evcxr() {
    let src = Path::new(ROOT).join("kernel/src");
    for file in rust_files(&src) {
        let code = code_of(&file);
        let in_protocol = file.starts_with(src.join("protocol"));
        if in_protocol {
            assert!(!code.contains("evcxr"), "{} names evcxr", file.display());
        } else {
            assert!(!code.contains("zeromq::"), "{} uses ZeroMQ outside the protocol", file.display());
        }
    }
}

#[test]
fn magics_do_no_io_and_the_runtime_depends_on_nothing_of_ours() {
    for file in rust_files(&Path::new(ROOT).join("magics/src")) {
        let code = code_of(&file);
        for io in ["std::fs", "std::net", "std::process", "std::io", "println!", "eprintln!", "std::env"] {
            assert!(!code.contains(io), "{} uses {io}", file.display());
        }
    }
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("runtime/Cargo.toml")).unwrap();
    for ours in ["dryml-kernel", "dryml-magics"] {
        assert!(!manifest.contains(ours), "runtime/ depends on {ours}");
    }
    // The bottom crate, which the kernel and every cell link, names none of ours.
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("runtime/sys/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap_or("");
    assert!(!deps.contains("dryml"), "runtime/sys depends on a crate of ours:\n{deps}");
}

#[test]
fn no_source_file_passes_450_lines() {
    for file in SOURCES.iter().flat_map(|d| rust_files(&Path::new(ROOT).join(d))) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 450, "{} has {lines} lines (tests included); split it along a seam", file.display());
    }
}

/// The source directories the room rules hold for.
const SOURCES: [&str; 6] =
    ["kernel/src", "kernel/analysis/src", "kernel/builds/src", "runtime/src", "runtime/sys/src", "magics/src"];

#[test]
fn no_impl_passes_200_lines() {
    let is_test = |f: &Path| f.ends_with("tests.rs") || f.components().any(|c| c.as_os_str() == "tests");
    for file in SOURCES.iter().flat_map(|d| rust_files(&Path::new(ROOT).join(d))).filter(|f| !is_test(f)) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let indent = line.len() - line.trim_start().len();
            if !(line.trim_start().starts_with("impl") && line.ends_with('{')) {
                continue;
            }
            // Its end: the first `}` at its indentation.
            let closes = |l: &&str| l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}');
            let end = lines[at + 1..].iter().position(closes).map_or(lines.len(), |n| at + 1 + n);
            let n = end - at + 1;
            assert!(n <= 200, "{}:{} `{}` is {n} lines; split it along a seam", file.display(), at + 1, line.trim());
        }
    }
}

#[test]
fn the_readme_and_architecture_read_as_documents() {
    for (name, most) in [("README.md", 220), ("ARCHITECTURE.md", 100)] {
        let text = std::fs::read_to_string(Path::new(ROOT).join(name)).unwrap();
        assert!(text.lines().count() <= most, "{name} has more than {most} lines: say less");
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            in_code ^= line.trim_start().starts_with("```");
            let chars = line.chars().count();
            assert!(in_code || chars <= 200, "{name}:{} has {chars} characters: say less", n + 1);
        }
    }
}

#[test]
fn the_cells_shared_state_is_changed_only_through_its_methods() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("kernel/src/session/state.rs")).unwrap();
    let body = text.split("pub struct CellState {").nth(1).expect("CellState").split("\n}").next().unwrap();
    let public: Vec<&str> = body.lines().map(str::trim).filter(|l| l.starts_with("pub")).collect();
    assert!(public.is_empty(), "CellState's fields are for its methods: {public:?}");
}

/// The protocol's and the session's messages are types; `json!` builds an empty map (a slot of
/// metadata) anywhere, and more only where the content is the user's (display bundles, a comm's
/// payload), outside tests.
#[test]
fn messages_are_types_not_json() {
    let users = ["kernel/src/session/comms.rs", "kernel/src/session/output.rs", "kernel/src/session/mod.rs"];
    for dir in ["kernel/src/protocol", "kernel/src/session"] {
        for file in rust_files(&Path::new(ROOT).join(dir)) {
            let rel = file.strip_prefix(ROOT).unwrap().to_string_lossy().into_owned();
            let code = code_of(&file);
            let code = code.split("#[cfg(test)]").next().unwrap();
            for (n, line) in code.lines().enumerate() {
                let rest = line.replace("json!({})", "");
                if rest.contains("json!(") {
                    assert!(users.contains(&rel.as_str()), "{rel}:{}: a message built as JSON: {}", n + 1, line.trim());
                }
            }
        }
    }
}
