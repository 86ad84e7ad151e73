//! Every piece of Rust the magics generate for the notebook's process or a Slurm job:
//! `%%compute` and `%%sweep` here (sandboxes) and on Slurm (the submission and the job's
//! program), and what `%jobs` and `%repo load` run. The `::dryml::...` paths generated code
//! names live in this file only.

use dryml_magics::{ComputeOptions, SweepOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The identifiers a cell body mentions (over-inclusive: fields and paths count too).
pub fn identifiers(body: &str) -> BTreeSet<&str> {
    body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// Whether the body ends with an expression (its value is shown) rather than a statement.
pub fn ends_with_value(body: &str) -> Result<bool, crate::syntax::TooDeep> {
    crate::syntax::with_block(body, |b| matches!(b.stmts.last(), Some(syn::Stmt::Expr(_, None))))
        .map(|shows| shows.unwrap_or(false))
}

/// The code a `%%compute` cell runs in the notebook's process. The body goes into a closure
/// that runs in the sandbox: there each notebook variable it names is shadowed by a bitwise
/// copy owned by the sandbox (the fork has its own memory, and ends without dropping them), so
/// the body may move or change them and the notebook's stay as they were. `--update`
/// variables come back through serde. With `--use-existing`/`--dont-create`, a context that
/// fits runs the body as a plain block instead.
pub fn compute(o: &ComputeOptions, body: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    for u in &o.update {
        if !vars.contains_key(u) {
            return Err(format!("--update {u}: the notebook has no variable `{u}` to update"));
        }
    }
    let names = identifiers(body);
    let used: Vec<&String> = vars.keys().filter(|v| names.contains(v.as_str())).collect();
    let shows = ends_with_value(body).map_err(|deep| format!("{deep}; split the cell, or run it without %%compute"))?;
    let mut c = String::from("{\n#[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*;\n");
    c.push_str(&format!(
        "let __dryml_compute = ::dryml::Compute::new(&::dryml::compute::context::Requests::parse({:?}).expect(\"checked by the kernel\"))",
        o.requests.to_text()
    ));
    if let Some(t) = o.timeout {
        c.push_str(&format!(".timeout(::std::time::Duration::from_secs_f64({t:?}))"));
    }
    if let Some(m) = o.mem_limit {
        c.push_str(&format!(".mem_limit({m}u64)"));
    }
    c.push_str(&format!(
        ".verbose({}).use_existing({}).dont_create({});\n",
        o.verbose, o.use_existing, o.dont_create
    ));
    let show_here = if shows { "::dryml::__kernel::cell::Shown(format!(\"{:?}\", __dryml_value))" } else { "::dryml::__kernel::cell::Shown(String::new())" };
    let sandbox = {
        let mut s = String::from(
            "let __dryml_result = ::dryml::__kernel::cell::run_cell(&__dryml_compute, |__dryml_out: &mut ::dryml::__kernel::cell::Cell| -> ::std::result::Result<(), ::dryml::__kernel::cell::CellError> {\n",
        );
        for v in &used {
            s.push_str(&format!("#[allow(unused_mut, unused_variables)] let mut {v} = unsafe {{ ::std::ptr::read(&{v}) }};\n"));
        }
        // Dropped first if the body leaves early: the sandbox ends before the copies would drop.
        s.push_str("let __dryml_keep = ::dryml::__kernel::cell::Keep::new();\n");
        // An object brought back goes into compute in the sandbox only (its `load_compute`).
        for u in &o.update {
            s.push_str(&format!("if let Err(e) = (&mut &mut ::dryml::__kernel::carry::Hook(&mut {u})).load_compute() {{ return Err(::dryml::__kernel::cell::CellError::new(e)); }}\n"));
        }
        s.push_str(&format!("#[allow(unused_variables)] let __dryml_value = {{\n{body}\n}};\n"));
        for u in &o.update {
            s.push_str(&format!(
                "if let Err(e) = (&mut &mut ::dryml::__kernel::carry::Hook(&mut {u})).save_compute() {{ return Err(::dryml::__kernel::cell::CellError::new(e)); }}\n__dryml_out.update_bytes({u:?}, (&&&::dryml::__kernel::carry::Out(&{u})).encode());\n"
            ));
        }
        if shows {
            s.push_str("__dryml_out.show(&__dryml_value);\n");
        }
        s.push_str("__dryml_out.finish();\nOk(())\n});\n::dryml::__kernel::cell::print_report();\n");
        // Errors end the cell through the kernel (not `?`), after it returns: nothing is lost.
        s.push_str("match __dryml_result {\nOk(mut __dryml_result) => {\n");
        for u in &o.update {
            s.push_str(&format!(
                "match __dryml_result.take_bytes({u:?}).map_err(|e| e.message()).and_then(|b| (&&&::dryml::__kernel::carry::In::of(&{u})).decode(&b)) {{ Ok(v) => {u} = v, \
                 Err(e) => ::dryml::__kernel::cell::raise(&::dryml::ComputeError::Failed(format!(\"--update {u}: {{e}}\"))) }}\n"
            ));
        }
        s.push_str("__dryml_result.shown()\n}\nErr(e) => { ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }\n}\n");
        s
    };
    if o.use_existing || o.dont_create {
        c.push_str(&format!(
            "match ::dryml::__kernel::cell::where_to_run(&__dryml_compute) {{\nErr(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }}\nOk(Some(__dryml_ctx)) => {{\nlet __dryml_t0 = ::std::time::Instant::now();\n\
             #[allow(unused_variables)] let __dryml_value = {{\n{body}\n}};\n\
             ::dryml::__kernel::cell::record_here(__dryml_ctx, __dryml_t0.elapsed());\n::dryml::__kernel::cell::print_report();\n{show_here}\n}}\n\
             Ok(None) => {{\n{sandbox}}}\n}}\n"
        ));
    } else {
        c.push_str(&sandbox);
    }
    c.push('}');
    if !shows {
        c.push(';');
    }
    Ok(c)
}

/// The code a local `%%sweep` cell runs: `dryml::sweep` over the definitions, in sandboxes.
pub fn sweep(opts: &SweepOptions, body: &str) -> String {
    format!(
        "match ::dryml::Compute::new(&::dryml::compute::context::Requests::parse({reqs:?}).expect(\"checked by the kernel\")).sweep(&{defs}, {repo:?}, {{\n{body}\n}}) {{\n\
         Ok(r) => ::dryml::__kernel::cell::Shown(format!(\"{{r:?}}\")),\nErr(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }}\n}}",
        defs = opts.defs,
        reqs = opts.requests.to_text(),
        repo = opts.repo,
    )
}

/// A variable crossing to the job: its name and the type evcxr knows it by.
#[derive(Debug, Clone)]
pub struct Var {
    pub name: String,
    pub ty: String,
}

/// Opens a block that gathers the variables a job takes (`__dryml_job`).
fn inputs(dir: &Path, inputs: &[Var]) -> String {
    let mut c = String::from("{\n#[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*;\n");
    c.push_str(&format!("let mut __dryml_job = ::dryml::__kernel::slurm::follow::Submission::open({:?});\n", dir.display().to_string()));
    for v in inputs {
        c.push_str(&format!("__dryml_job.input({n:?}, {t:?}, (&&&::dryml::__kernel::carry::Out(&{n})).encode());\n", n = v.name, t = v.ty));
    }
    c
}

/// The notebook process's half: send the variables, submit, follow, take the updates back.
pub fn submit(dir: &Path, inputs: &[Var], updates: &[Var], shows: bool, detach: bool) -> String {
    let mut c = self::inputs(dir, inputs);
    c.push_str(&format!("match __dryml_job.run({detach}) {{\nOk(mut __dryml_result) => {{\n"));
    if !detach {
        for v in updates {
            c.push_str(&format!(
                "match __dryml_result.take_bytes({n:?}).map_err(|e| e.message()).and_then(|b| (&&&::dryml::__kernel::carry::In::of(&{n})).decode(&b)) {{ Ok(v) => {n} = v, \
                 Err(e) => ::dryml::__kernel::cell::raise(&::dryml::ComputeError::Failed(format!(\"--update {n}: {{e}}\"))) }}\n",
                n = v.name
            ));
        }
    }
    c.push_str("__dryml_result.shown()\n}\nErr(e) => { ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }\n}\n}");
    if !(shows || detach) {
        c.push(';');
    }
    c
}

/// The code a `%%sweep --on slurm` cell runs: the definitions written, the array submitted.
pub fn sweep_submit(dir: &Path, inputs: &[Var], opts: &SweepOptions, detach: bool) -> String {
    let mut c = self::inputs(dir, inputs);
    c.push_str(&format!(
        "match ::dryml::__kernel::slurm::array::submit(__dryml_job, &{defs}, {repo:?}, {detach}) {{\nOk(r) => ::dryml::__kernel::cell::Shown(format!(\"{{r:?}}\")),\nErr(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }}\n}}\n}}",
        defs = opts.defs,
        repo = opts.repo,
    ));
    c
}

/// What the program is made of.
pub struct Program<'a> {
    /// The package and program name: this kernel's own (`Claim::job_crate`) in the machine's
    /// build cache, where jobs of other kernels build too.
    pub name: &'a str,
    /// The notebook's crate attributes, `extern crate`s and items.
    pub items: &'a str,
    /// `Cargo.toml` dependency lines (`name = {...}`).
    pub deps: &'a str,
    pub body: &'a str,
    pub inputs: &'a [Var],
    pub updates: &'a [Var],
    pub shows: bool,
    /// The body is a sweep's closure, run by `dryml::__kernel::slurm::array::task_main` per array task.
    pub sweep: bool,
    pub opt_level: &'a str,
    /// Lines above the body in the cell (its magic lines), for errors in the cell's numbering.
    pub body_offset: usize,
}

/// Where the body starts in `main.rs`, and which lines read which input.
pub struct Source {
    /// The program cargo writes (`target/debug/<bin>`).
    pub bin: String,
    pub main: String,
    pub cargo_toml: String,
    pub body_line: usize,
    pub body_lines: usize,
    pub(crate) input_lines: Vec<(usize, Var)>,
}

impl Program<'_> {
    pub fn source(&self) -> Source {
        let mut deps = self.deps.to_string();
        if !deps.lines().any(|l| l.trim_start().starts_with("dryml ") || l.trim_start().starts_with("dryml=")) {
            deps.push_str(&format!("dryml = {{ path = {:?} }}\n", crate::paths::runtime().display().to_string()));
        }
        let cargo_toml = format!(
            "# Generated by DRYML Rust for a `%%compute --on slurm` cell.\n[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [[bin]]\nname = \"{name}\"\npath = \"src/main.rs\"\n\n[dependencies]\n{deps}\n\
             # As the notebook's cells are built (evcxr's dev profile, the notebook's opt-level).\n\
             [profile.dev]\nopt-level = {}\ndebug = false\nstrip = \"debuginfo\"\ndebug-assertions = true\ncodegen-units = 16\nincremental = true\noverflow-checks = true\n\n\
             # Not part of any workspace the job directory may be under.\n[workspace]\n",
            self.opt_level,
            name = self.name,
        );
        let mut m = String::from(
            "// Generated by DRYML Rust from a `%%compute --on slurm` cell: the notebook's items, then the cell.\n\
             #![allow(unused_imports, unused_mut, unused_variables, unused_braces, dead_code)]\n",
        );
        m.push_str(self.items);
        if !self.items.ends_with('\n') {
            m.push('\n');
        }
        m.push_str(
            "fn main() {\n#[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*;\n\
             ::dryml::__kernel::slurm::job::main(|__dryml_io: &mut ::dryml::__kernel::slurm::job::Io| -> ::std::result::Result<(), ::dryml::__kernel::cell::CellError> {\n",
        );
        let mut input_lines = Vec::new();
        for v in self.inputs {
            input_lines.push((m.lines().count() + 1, v.clone()));
            // An object goes into compute (its `load_compute`) before the body.
            m.push_str(&format!(
                "let mut {n}: {t} = (&&&::dryml::__kernel::carry::In::<{t}>::new()).decode(&__dryml_io.input_bytes({n:?})?).map_err(|e| ::dryml::__kernel::cell::CellError::new(format!(\"`{n}`: {{e}}\")))?; \
                 let __dryml_keep_{n} = ::dryml::__kernel::cell::Keep::new(); \
                 (&mut &mut ::dryml::__kernel::carry::Hook(&mut {n})).load_compute().map_err(::dryml::__kernel::cell::CellError::new)?;\n",
                n = v.name,
                t = v.ty
            ));
        }
        m.push_str(if self.sweep { "let __dryml_train = {\n" } else { "let __dryml_value = {\n" });
        let body_line = m.lines().count() + 1;
        m.push_str(self.body);
        if !self.body.ends_with('\n') {
            m.push('\n');
        }
        m.push_str("};\n");
        if self.sweep {
            m.push_str("::dryml::__kernel::slurm::array::task_main(__dryml_train);\n");
        }
        for v in self.updates {
            m.push_str(&format!(
                "(&mut &mut ::dryml::__kernel::carry::Hook(&mut {n})).save_compute().map_err(::dryml::__kernel::cell::CellError::new)?; __dryml_io.update_bytes({n:?}, (&&&::dryml::__kernel::carry::Out(&{n})).encode())?;\n",
                n = v.name
            ));
        }
        if self.shows {
            m.push_str("__dryml_io.show(&__dryml_value);\n");
        }
        // Ends the program here, past the copies of the notebook's variables (see `dryml::ending`).
        m.push_str("__dryml_io.finish()\n});\n}\n");
        Source { bin: self.name.to_string(), main: m, cargo_toml, body_line, body_lines: self.body.lines().count(), input_lines }
    }
}

/// A job's program for the tests: a body that changes `inputs` and shows a value.
#[cfg(test)]
pub(crate) fn example_program(inputs: &[Var]) -> Program<'_> {
    Program {
        name: "job_k0123456789ab",
        items: "fn twice(x: f64) -> f64 { 2.0 * x }\n",
        deps: "dryml = { path = \"/x/runtime\" }\n",
        body: "w.push(twice(1.0));\nw.len()",
        inputs,
        updates: inputs,
        shows: true,
        sweep: false,
        opt_level: "1",
        body_offset: 1,
    }
}

/// `%jobs wait` of a sweep: its tasks followed to their end, their table shown.
pub fn sweep_wait(dir: &str) -> String {
    format!(
        "match ::dryml::__kernel::slurm::array::wait({:?}) {{ Ok(r) => ::dryml::__kernel::cell::Shown(format!(\"{{r:?}}\")), Err(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }} }}",
        dir
    )
}

/// `%jobs wait`: the job followed to its end, its value shown.
pub fn job_wait(dir: &str) -> String {
    format!(
        "match ::dryml::__kernel::slurm::follow::wait({:?}) {{ Ok(mut r) => r.shown(), Err(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }} }}",
        dir
    )
}

/// `%jobs result`'s wait: the job followed to its end, with its `updates` delivered.
pub fn job_wait_for(d: &str, updates: &[&str]) -> String {
    let wanted: Vec<String> = updates.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "match ::dryml::__kernel::slurm::follow::wait_for({d:?}, &[{}]) {{ Ok(mut r) => r.shown(), Err(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }} }}",
        wanted.join(", ")
    )
}

/// `%jobs result`: one `--update` variable of the job in directory `d`, defined as `name`.
pub fn job_update(name: &str, u: &Var, d: &str) -> String {
    // The traits are imported inside the block: a cell's `use` would stay in the notebook.
    format!(
        "let {name}: {t} = {{ #[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*; \
         (&&&::dryml::__kernel::carry::In::<{t}>::new()).decode(&::dryml::__kernel::slurm::follow::update_bytes({d:?}, {n:?})).unwrap_or_else(|e| panic!(\"`{n}`: {{e}}\")) }};\n",
        t = u.ty,
        n = u.name
    )
}

/// `%repo load ID as VAR`: the object built in the notebook as `Box<dyn dryml::Object>`.
pub fn repo_load(var: &str, dir: &str, id: &str) -> String {
    // evcxr names a variable's type from what is in scope, hence the `use`.
    format!(
        "use dryml::Object;\nlet {var}: Box<dyn dryml::Object> = dryml::Repo::open({dir:?}).and_then(|r| r.by_id({id:?})).unwrap_or_else(|e| panic!(\"{{e}}\"));"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(line: &str) -> ComputeOptions {
        let p = dryml_magics::parse_cell(line).unwrap();
        let inv = p.cell_magic.unwrap();
        match inv.cell_call() {
            Some(dryml_magics::CellCall::Compute(o)) => o.clone(),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn compute_cells_become_sandbox_code() {
        let vars: BTreeMap<String, String> =
            [("model", "Vec<f64>"), ("data", "Vec<u8>"), ("unused", "i32")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        let code = compute(&opts("%%compute tf --update model --timeout 2"), "model.push(data.len() as f64);\nmodel.len()", &vars).unwrap();
        assert!(code.contains("let mut model = unsafe { ::std::ptr::read(&model) };"), "{code}");
        assert!(code.contains("let mut data = unsafe"), "{code}");
        let (copies, keep) = (code.find("let mut data = unsafe").unwrap(), code.find("::dryml::__kernel::cell::Keep::new()").unwrap());
        assert!(copies < keep && keep < code.find("model.push").unwrap(), "the guard comes after the copies, before the body: {code}");
        assert!(!code.contains("let mut unused"), "variables the body does not name are not copied");
        assert!(code.contains("Requests::parse(\"tf\")"), "{code}");
        assert!(code.contains(".timeout(::std::time::Duration::from_secs_f64(2.0))"));
        assert!(code.contains("match __dryml_result.take_bytes(\"model\")"), "{code}");
        assert!(code.contains("(&mut &mut ::dryml::__kernel::carry::Hook(&mut model)).load_compute()"), "{code}");
        assert!(!code.contains('?'), "errors go through the kernel, not evcxr's `?`: {code}");
        assert!(!code.contains("where_to_run"));
        // A body ending in a statement shows nothing.
        let code = compute(&opts("%%compute --use-existing"), "let x = 1;", &vars).unwrap();
        assert!(code.ends_with("};"), "{code}");
        assert!(code.contains("where_to_run(&__dryml_compute)"));
        let e = compute(&opts("%%compute --update nope"), "1", &vars).unwrap_err();
        assert_eq!(e, "--update nope: the notebook has no variable `nope` to update");
    }

    #[test]
    fn values_and_statements() {
        for (body, shows) in [("1 + 1", true), ("let a = 1;", false), ("for i in 0..2 {}", true), ("x.push(1);", false), ("fn f() {}", false), ("(", false)] {
            assert_eq!(ends_with_value(body), Ok(shows), "{body}");
        }
    }

    #[test]
    fn job_programs_place_the_body_and_inputs() {
        let inputs = [Var { name: "w".into(), ty: "Vec<f64>".into() }];
        let p = crate::magic::codegen::example_program(&inputs);
        let s = p.source();
        assert!(s.main.contains("let mut w: Vec<f64> = (&&&::dryml::__kernel::carry::In::<Vec<f64>>::new()).decode(&__dryml_io.input_bytes(\"w\")?)"), "{}", s.main);
        assert!(s.main.contains("__dryml_io.update_bytes(\"w\", (&&&::dryml::__kernel::carry::Out(&w)).encode())?;"));
        assert_eq!(s.main.lines().nth(s.body_line - 1), Some("w.push(twice(1.0));"));
        assert!(s.cargo_toml.contains("dryml = { path = \"/x/runtime\" }") && s.cargo_toml.contains("opt-level = 1"));
        assert!(s.cargo_toml.contains("[package]\nname = \"job_k0123456789ab\"") && s.bin == "job_k0123456789ab", "{}", s.cargo_toml);
    }
}
