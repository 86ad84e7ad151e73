//! The architecture's invariants, read from the sources: the kernel's, the magics' and the
//! runtime's modules form layers with no cycle, the session knows nothing of magics, only the protocol touches ZeroMQ and it names neither evcxr nor the engine,
//! `magics/` does no I/O, and `runtime/` depends on no crate of ours outside it.

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
    let reexport = regex::Regex::new(r"(?m)^pub use ([a-z_][a-z0-9_]*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut from_module: BTreeMap<String, String> = BTreeMap::new();
    for root in ["lib.rs", "main.rs"].map(|r| src.join(r)).iter().filter(|r| r.exists()) {
        for c in reexport.captures_iter(&code_of(root)) {
            if modules.contains(&c[1]) {
                for name in c[2].trim_matches(['{', '}']).split(',') {
                    from_module.insert(name.trim().to_string(), c[1].to_string());
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
                let module = if modules.contains(first) { Some(first) } else { from_module.get(first).map(String::as_str) };
                if let Some(m) = module.filter(|m| *m != top) {
                    deps.insert(m.to_string());
                }
            }
        }
    }
    graph
}

/// Panics with the cycle if the graph has one.
fn assert_acyclic(graph: &BTreeMap<String, BTreeSet<String>>) {
    // Depth-first search for a back edge.
    fn visit(n: &str, g: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if done.contains(n) {
            return;
        }
        if let Some(i) = path.iter().position(|p| p == n) {
            panic!("import cycle: {} -> {n}", path[i..].join(" -> "));
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            visit(d, g, path, done);
        }
        path.pop();
        done.insert(n.to_string());
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        visit(n, graph, &mut Vec::new(), &mut done);
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
    for file in rust_files(&Path::new(ROOT).join("kernel/src/session")) {
        assert!(!code_of(&file).contains("dryml_magics"), "the session knows nothing of magics: {} names dryml_magics", file.display());
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
    // `sys` is the bottom layer; `__kernel` is the top, named only by the kernel and its code.
    assert!(graph["sys"].is_empty(), "sys names {:?}", graph["sys"]);
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
}

#[test]
fn no_source_file_passes_600_lines() {
    for file in ["kernel/src", "runtime/src"].iter().flat_map(|d| rust_files(&Path::new(ROOT).join(d))) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 600, "{} has {lines} lines (tests included); split it along a seam", file.display());
    }
}
