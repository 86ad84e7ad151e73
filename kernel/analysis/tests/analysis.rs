//! The analysis as evcxr's context uses it, on real crates with the real sysroot: in the test's
//! process, and in an analysis process of this crate's binary, shared and killed.

use anyhow::{Context, Result};
use dryml_analysis::{Client, Local, Standby};
use evcxr::{Analysis, TypeName};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A crate as evcxr writes one, with `dependencies` in its Cargo.toml.
fn cell_crate(dir: &Path, name: &str, dependencies: &str) -> Result<PathBuf> {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("src"))?;
    let toml = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [lib]\npath = \"src/lib.rs\"\n\n[dependencies]\n{dependencies}\n"
    );
    std::fs::write(root.join("Cargo.toml"), toml)?;
    Ok(root)
}

const CELL: &str = "fn quadruple(x: i32) -> i32 { x * 4 }\n\
fn evcxr_analysis_wrapper() {\n\
    let counts = std::collections::HashMap::<String, usize>::new();\n\
    let mut total = counts.values().sum::<usize>();\n\
    let (first, _) = (vec![1u8], 2);\n\
    let double = |x: i32| x * 2;\n\
    let mut calls = 0u32;\n\
    let mut count = move || { calls += 1; calls };\n\
    let owned = vec![1u8];\n\
    let give = move || owned;\n\
    let length = |s: &str| s.len();\n\
    let say = |s: String| println!(\"{s}\");\n\
    let same = |x| x;\n\
    let adder = |x: i32| move |y: i32| x + y;\n\
    let pointer = quadruple;\n\
    let written: Vec<u16> = Vec::new();\n\
}\n";

fn named(t: &str) -> TypeName {
    TypeName::Named(t.to_owned())
}

fn assert_cell_types(analysis: &mut dyn Analysis) -> Result<()> {
    let variables = analysis.variables_in(CELL.to_owned(), "evcxr_analysis_wrapper")?;
    // Not imported in the cell: its path as the cell can write it.
    assert_eq!(variables["counts"].type_name, named("std::collections::HashMap<String, usize>"));
    assert_eq!(variables["total"].type_name, named("usize"));
    assert!(variables["total"].is_mutable && !variables["counts"].is_mutable);
    assert_eq!(variables["first"].type_name, named("Vec<u8>"));
    // A closure is kept as the trait object of its kind and signature, where it can be written.
    let boxed = |t: &str| TypeName::Boxed(t.to_owned());
    assert_eq!(variables["double"].type_name, boxed("Box<dyn Fn(i32) -> i32>"));
    assert_eq!(variables["count"].type_name, boxed("Box<dyn FnMut() -> u32>"));
    assert_eq!(variables["give"].type_name, boxed("Box<dyn FnOnce() -> Vec<u8>>"));
    assert_eq!(variables["length"].type_name, boxed("Box<dyn Fn(&str) -> usize>"));
    assert_eq!(variables["say"].type_name, boxed("Box<dyn Fn(String)>"));
    assert_eq!(variables["same"].type_name, TypeName::Closure);
    assert_eq!(variables["adder"].type_name, TypeName::Closure);
    // A function as its pointer.
    assert_eq!(variables["pointer"].type_name, named("fn(i32) -> i32"));
    assert_eq!(variables["written"].type_name, named("Vec<u16>"));
    assert_eq!(variables.len(), 14, "{:?}", variables.keys());
    Ok(())
}

/// The completions' codes at the end of `source`.
fn completed(analysis: &Local, source: &str) -> Result<Vec<String>> {
    let c = analysis.shared().completions_in(source.to_owned(), source.len(), false)?;
    Ok(c.completions.into_iter().map(|c| c.code).collect())
}

#[test]
fn a_cells_lets_get_their_types_and_std_completes_and_hovers() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let root = cell_crate(dir.path(), "types", "")?;
    let mut local = Local::new(&root)?;
    local.prefetch();
    assert_cell_types(&mut local)?;
    // Loaded: once the priming thread has seen its snapshot cancelled, nothing would wait.
    wait_for("ready", || local.ready());

    let source = "fn evcxr_analysis_wrapper() {\n    let v = vec![1u8];\n    v.";
    let codes = completed(&local, source)?;
    assert!(codes.iter().any(|c| c == "len()"), "{codes:?}");
    let start = "fn evcxr_analysis_wrapper() {\n    std::collections::Hash";
    let codes = completed(&local, start)?;
    assert!(codes.iter().any(|c| c == "HashMap"), "{codes:?}");
    assert!(!codes.iter().any(|c| c == "BTreeMap"), "not what was typed: {codes:?}");

    let source = "fn evcxr_analysis_wrapper() { let v: Vec<u8> = Vec::with_capacity(3); }";
    let at = source.find("with_capacity").unwrap() as u32;
    let (text, markdown) = local.shared().hover_in(source.into(), at, false)?.expect("a hover");
    assert!(text.contains("fn with_capacity(capacity: usize)"), "{text}");
    assert!(markdown.contains("```rust"), "{markdown}");
    // A hover's source stays off the disk when asked (a build may be reading it).
    assert!(!std::fs::read_to_string(root.join("src/lib.rs"))?.contains("with_capacity"));

    // Beside a running cell: the last cell's variables are in scope, the offsets are the code's.
    let beside = local.beside();
    let code = "let n = 1;\n:dep rand\nwritten.le";
    let c = beside.completions(code, code.len())?;
    assert!(c.completions.iter().any(|c| c.code == "len()"), "{:?}", c.completions);
    assert_eq!((c.start_offset, c.end_offset), (code.len() - 2, code.len()));
    assert!(beside.completions(":dep ra", 7)?.completions.is_empty());
    // A position past the code or inside a character completes nothing (and takes no kernel down).
    assert!(beside.completions("é", 1)?.completions.is_empty());
    assert!(beside.completions("ab", 3)?.completions.is_empty());
    let (text, _) = beside.hover("written")?.expect("a hover");
    assert!(text.contains("Vec<u16>"), "{text}");
    assert!(!std::fs::read_to_string(root.join("src/lib.rs"))?.contains("written.le"));
    Ok(())
}

#[test]
fn items_of_a_path_dependency_complete() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let helper = cell_crate(dir.path(), "helper", "")?;
    std::fs::write(helper.join("src/lib.rs"), "pub mod metrics { pub fn accuracy() -> f64 { 1.0 } }")?;
    let dependency = format!("helper = {{ path = {:?} }}", helper.display().to_string());
    let root = cell_crate(dir.path(), "uses", &dependency)?;
    let mut local = Local::new(&root)?;
    let codes = completed(&local, "fn evcxr_analysis_wrapper() {\n    helper::metrics::acc")?;
    assert_eq!(codes, ["accuracy()"]);
    let cell = "fn evcxr_analysis_wrapper() { let a = helper::metrics::accuracy(); }";
    let variables = local.variables_in(cell.to_owned(), "evcxr_analysis_wrapper")?;
    assert_eq!(variables["a"].type_name, named("f64"));
    Ok(())
}

/// The pids of the analysis processes serving `socket_dir`.
fn servers(socket_dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let var = format!("{}={}", dryml_analysis::SOCKET_ENV, socket_dir.display());
        if environ.split(|b| *b == 0).any(|v| v.starts_with(var.as_bytes())) {
            pids.push(pid);
        }
    }
    pids
}

/// The analysis processes' logs in `dir`, for a failure's message.
fn logs(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
            text += &format!("{}:\n{log}", entry.path().display());
        }
    }
    text
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "still not: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_kernels_share_one_process_that_comes_back_when_killed_and_ends_with_the_last() -> Result<()> {
    let (dir, sockets, program) = process_dir()?;
    let (a, b) = (cell_crate(dir.path(), "a", "")?, cell_crate(dir.path(), "b", "")?);
    let mut first = Client::new(program.clone(), Some(sockets.clone()), &a);
    let mut second = Client::new(program, Some(sockets.clone()), &b);
    assert_cell_types(&mut first).context("the first kernel")?;
    assert_cell_types(&mut second).context("the second kernel")?;
    let serving = servers(&sockets);
    assert_eq!(serving.len(), 1, "one process for both kernels: {serving:?}");

    // Killed: the next request starts another, which loads and answers.
    // SAFETY: kill sends a signal to a process this test started.
    assert_eq!(unsafe { libc::kill(serving[0] as i32, libc::SIGKILL) }, 0);
    wait_for("the killed process gone", || !servers(&sockets).contains(&serving[0]));
    assert_cell_types(&mut first).with_context(|| format!("the first kernel, after the kill; {}", logs(&sockets)))?;
    let again = servers(&sockets);
    assert!(again.len() == 1 && again[0] != serving[0], "{again:?}");

    // The second kernel reconnects to the new one; the process ends with its last kernel.
    assert_cell_types(&mut second).context("the second kernel, after the kill")?;
    assert_eq!(servers(&sockets), again);
    wait_for("the first to close", || first.release().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(servers(&sockets), again, "the second kernel still connected");
    wait_for("the second to close", || second.release().unwrap());
    wait_for("the process ended", || servers(&sockets).is_empty());
    Ok(())
}

#[test]
fn a_process_starts_at_a_notebooks_first_need_and_a_restart_rejoins_it() -> Result<()> {
    let (dir, sockets, program) = process_dir()?;
    let crates: Vec<PathBuf> = ["a", "b", "c"].iter().map(|n| cell_crate(dir.path(), n, "")).collect::<Result<_>>()?;
    let client = |root: &Path| Client::new(program.clone(), Some(sockets.clone()), root);
    // A Cargo.toml written (each cell's) starts nothing; the first Tab starts the load.
    let mut first = client(&crates[0]);
    first.prefetch();
    std::thread::sleep(Duration::from_millis(500));
    assert!(servers(&sockets).is_empty(), "a notebook that asked nothing has no process");
    assert!(!first.ready(), "nothing was loaded");
    wait_for("the first's load", || first.ready());
    let serving = servers(&sockets);
    assert_eq!(serving.len(), 1, "{serving:?}");
    // Another notebook's Cargo.toml joins the process that runs.
    let mut second = client(&crates[1]);
    second.prefetch();
    wait_for("the second joined", || second.release().unwrap());
    // The last one gone, a kernel that comes within a few seconds (a restart's) rejoins it.
    wait_for("the first to close", || first.release().unwrap());
    let mut restarted = client(&crates[2]);
    restarted.prefetch();
    wait_for("the restarted joined", || restarted.release().unwrap());
    assert_eq!(servers(&sockets), serving, "the same process");
    wait_for("the process ended", || servers(&sockets).is_empty());
    Ok(())
}

/// A temporary directory, the folder in it where kernels meet their analysis process, and the
/// binary that serves it.
fn process_dir() -> Result<(tempfile::TempDir, PathBuf, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let sockets = dir.path().join("sockets");
    std::fs::create_dir(&sockets)?;
    Ok((dir, sockets, own_bin("dryml-analysis-serve", env!("CARGO_BIN_EXE_dryml-analysis-serve"))))
}

/// The package's binary `name`, as cargo gives it to this run: the machine's build directory,
/// which clones share, may hold this test as another checkout compiled it, with its path in `env!`.
fn own_bin(name: &str, compiled: &str) -> std::path::PathBuf {
    std::env::var_os(format!("CARGO_BIN_EXE_{name}")).map_or_else(|| compiled.into(), Into::into)
}
