//! The contract between the kernel and `dryml::__kernel`, checked where it is written: every
//! template of `magic/codegen.rs` (`%%compute` in its forms, `%%sweep`, the Slurm job, `%jobs`,
//! `%repo load`), filled in as a notebook would fill it, and the other code the kernel writes
//! into cells (the child's start-up cell, a cell's value shown, `%xp`'s clean-up, the debugger's
//! Variables panel, `%env`'s settings), must compile against this checkout's `dryml`, so a
//! change on either side fails here and not in a user's cell.

use dryml_kernel::magic::cell::Cell;
use dryml_kernel::magic::codegen::{self, Var};
use dryml_magics::CellCall;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The typed call of a `%%compute` or `%%sweep` line.
fn call(line: &str) -> CellCall {
    let parsed = dryml_magics::parse_cell(&format!("{line}\nbody")).unwrap();
    parsed.cell_magic.unwrap().cell_call().unwrap_or_else(|| panic!("{line}")).clone()
}

/// The notebook's variables, as a cell's function declares them and the kernel knows them.
const VARS: &str = "
    let mut model: Vec<f64> = vec![1.0];
    let mut steps: u32 = 0;
    let data: Vec<u8> = vec![3; 10];
    let defs: Vec<dryml::ObjectDef> = Vec::new();
";

fn vars() -> BTreeMap<String, String> {
    [("model", "Vec<f64>"), ("steps", "u32"), ("data", "Vec<u8>"), ("defs", "Vec<dryml::ObjectDef>")]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

/// Each template as the body of a function of its own, the notebook's variables in scope.
fn cells() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let compute = |line: &str, body: &str| {
        let code = format!("{line}\n{body}");
        let parsed = dryml_magics::parse_cell(&code).unwrap();
        match parsed.cell_magic.as_ref().and_then(|inv| inv.cell_call()) {
            Some(CellCall::Compute(o)) => codegen::compute(o, &Cell::new(&parsed), &vars()).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    out.push(("compute_shows".into(), compute("%%compute tf", "model.len() + data.len()")));
    out.push(("compute_statement".into(), compute("%%compute", "let n = data.len();\nprintln!(\"{n}\");")));
    out.push((
        "compute_update".into(),
        compute(
            "%%compute num_cpus=1 --update model,steps --timeout 2 --mem-limit 1G",
            "model.push(1.0);\nsteps += 1;",
        ),
    ));
    out.push(("compute_existing".into(), compute("%%compute --use-existing --verbose", "steps + 1")));
    out.push(("compute_dont_create".into(), compute("%%compute --dont-create", "model.clear();")));
    let sweep = match call("%%sweep defs --repo /tmp/swept") {
        CellCall::Sweep(o) => o,
        other => panic!("{other:?}"),
    };
    out.push(("sweep_local".into(), codegen::sweep(&sweep, "|fit: &mut Fit| fit.loss")));
    let var = |n: &str, t: &str| Var { name: n.into(), ty: t.into() };
    let request = serde_json::json!({"kind": "compute"});
    let inputs = [var("model", "Vec<f64>"), var("data", "Vec<u8>")];
    let updates = [var("model", "Vec<f64>")];
    for (name, shows, detach) in [("job", true, false), ("job_statement", false, false), ("job_detached", true, true)] {
        let body = if shows { "model.push(1.0);\nmodel.len()" } else { "model.push(1.0);" };
        let job =
            codegen::Job { request: &request, body, inputs: &inputs, updates: &updates, shows, sweep: None, detach };
        out.push((name.into(), job.code().code));
    }
    let job = codegen::Job {
        request: &request,
        body: "|fit: &mut Fit| fit.loss",
        inputs: &[],
        updates: &[],
        shows: false,
        sweep: Some(&sweep),
        detach: false,
    };
    out.push(("job_sweep".into(), job.code().code));
    out.push(("jobs_wait_sweep".into(), codegen::sweep_wait("/tmp/job")));
    out.push(("jobs_wait".into(), codegen::job_wait("/tmp/job")));
    out.push(("jobs_wait_for".into(), codegen::job_wait_for("/tmp/job", &["model"])));
    out.push(("jobs_update".into(), codegen::job_update("back", &var("model", "Vec<f64>"), "/tmp/job")));
    out.push(("repo_load".into(), codegen::repo_load("obj", "/tmp/repo", "abc", "Fit")));
    out.push(("child_startup".into(), dryml_kernel::child::FLUSHER_CELL.to_owned()));
    // A notebook's own ndarray (here dryml's release, which the check has offline).
    for (name, shown, ndarray) in
        [("display", false, false), ("display_tables", true, false), ("display_own_ndarray", true, true)]
    {
        let tables = dryml_kernel::session::display::Tables { shown, ndarray, ..Default::default() };
        let (before, after) = tables.around().unwrap();
        out.push((name.into(), format!("{before}\nmodel.len() + data.len()\n{after}")));
    }
    // Notebook habits: `!` lines, `%timeit`, `%%timeit`, `%%bash`.
    let body = |cell: &str| dryml_magics::parse_cell(cell).unwrap().body;
    out.push(("shell_lines".into(), body("!echo {model.len()} \"$HOME\" ${HOME}\nfor i in 0..2 {\n    !echo {i}\n}")));
    out.push(("timeit_line".into(), body("let r = %timeit -o -q -n 3 -r 2 model.iter().sum::<f64>();\nr.average()")));
    out.push(("timeit_cell".into(), body("%%timeit -n 2 -r 1 -o\nlet s: f64 = model.iter().sum();\ns")));
    out.push((
        "bash_cell".into(),
        dryml_kernel::magic::habits::script_code(dryml_magics::Shell::Bash, "echo \"$1\"\n", true),
    ));
    let names = ["model".to_string(), "steps".to_string()];
    out.push(("xp_cleanup".into(), dryml_kernel::magic::experiment::report::cleanup_code(&names)));
    out.push(("debug_values".into(), dryml_kernel::debug::values::code(&vars())));
    let env = [("DRYML_A", Some("a \"quoted\" \\ value\n\u{e9}")), ("DRYML_B", None)];
    out.push(("env_settings".into(), dryml_kernel::session::env::cell(env)));
    out.push(("env_show_one".into(), dryml_kernel::magic::env::show_code(Some("DRYML_A"))));
    out.push(("env_show_all".into(), dryml_kernel::magic::env::show_code(None)));
    out
}

#[test]
fn every_generated_template_compiles_against_dryml() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Path::new(ROOT).join("runtime").canonicalize().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"dryml-generated\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\n\
             dryml = {{ path = {:?} }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\
             ndarray = \"0.16\"\n\n[workspace]\n",
            runtime.display().to_string()
        ),
    )
    .unwrap();
    // The workspace's versions, so the check builds nothing new offline.
    std::fs::copy(Path::new(ROOT).join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    let mut lib = String::from(
        "#![allow(unused, clippy::all)]\n\
         use serde::{Deserialize, Serialize};\n\
         #[derive(Serialize, Deserialize)] pub struct Args { lr: f64 }\n\
         #[derive(dryml::Object)] pub struct Fit { args: Args, meta: dryml::Meta, loss: f64 }\n\
         impl dryml::Build for Fit { type Args = Args; fn build(args: Args, meta: dryml::Meta) -> Self { Fit { args, meta, loss: 0.0 } } }\n",
    );
    for (name, code) in cells() {
        // evcxr reads the lines before a cell's first Rust as its commands (`:dep`) or the shell's.
        let first = code.lines().find(|l| !l.trim().is_empty() && !l.starts_with("//")).unwrap_or("");
        assert!(!first.trim_start().starts_with([':', '!']), "{name}: evcxr reads {first:?} as a command:\n{code}");
        // A cell's code is statements; one ending in a value is that value's expression.
        lib.push_str(&format!("\npub fn {name}() {{\n{VARS}\nlet _ = {{\n{code}\n}};\n}}\n"));
    }
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), &lib).unwrap();
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["check", "--offline", "--quiet", "--message-format=short"])
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", Path::new(ROOT).join("target/generated-check"))
        .output()
        .unwrap();
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "generated code does not compile against dryml:\n{errors}\n--- src/lib.rs:\n{lib}");
}
