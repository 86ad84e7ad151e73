//! Every piece of Rust the magics generate for the notebook's process or a Slurm job:
//! `%%compute` and `%%sweep` here (sandboxes) and on Slurm (the submission and the job's
//! program), and what `%jobs` and `%repo load` run. The `::dryml::...` paths generated code
//! names live in this file only.

use dryml_magics::{ComputeOptions, SweepOptions};
use std::collections::{BTreeMap, BTreeSet};

/// The identifiers a cell body mentions (over-inclusive: fields and paths count too).
pub fn identifiers(body: &str) -> BTreeSet<&str> {
    body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// The lines (1-based) of `code` where each copy of `body` starts: the generated code holds
/// the body as its own lines, so its errors name the cell's lines.
pub fn body_starts(code: &str, body: &str) -> Vec<usize> {
    if body.trim().is_empty() {
        return Vec::new();
    }
    let framed = format!("\n{body}\n");
    code.match_indices(&framed).map(|(at, _)| code[..at].matches('\n').count() + 2).collect()
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
    c.push_str(&format!(".verbose({}).use_existing({}).dont_create({});\n", o.verbose, o.use_existing, o.dont_create));
    let show_here = if shows {
        "::dryml::__kernel::cell::Shown(format!(\"{:?}\", __dryml_value))"
    } else {
        "::dryml::__kernel::cell::Shown(String::new())"
    };
    let sandbox = {
        let mut s = String::from(
            "let __dryml_result = ::dryml::__kernel::cell::run_cell(&__dryml_compute, |__dryml_out: &mut ::dryml::__kernel::cell::Cell| -> ::std::result::Result<(), ::dryml::__kernel::cell::CellError> {\n",
        );
        for v in &used {
            s.push_str(&format!(
                "#[allow(unused_mut, unused_variables)] let mut {v} = unsafe {{ ::std::ptr::read(&{v}) }};\n"
            ));
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

/// A `%%compute --on slurm` or `%%sweep --on slurm` cell as code for the notebook's process.
pub struct Job<'a> {
    /// The job's `request.json` as the kernel knows it: `dryml::__kernel::slurm::ship_cell`
    /// adds what the notebook's process knows (the library, the entry, where the body is).
    pub request: &'a serde_json::Value,
    pub body: &'a str,
    /// The notebook variables the body names, sent to the job.
    pub inputs: &'a [Var],
    /// Those that come back (`--update`).
    pub updates: &'a [Var],
    /// The body ends with a value, which is shown.
    pub shows: bool,
    /// A `%%sweep`'s definitions and repo: the body is a closure trained per array task.
    pub sweep: Option<&'a SweepOptions>,
    pub detach: bool,
}

/// The job's code, and the line of that code where the body starts.
pub struct JobCode {
    pub code: String,
    pub body_line: usize,
}

impl Job<'_> {
    /// The job's entry is a function of the cell (it captures nothing: the variables are read
    /// from the job's inputs), so the cell's library, sent to the node as `Compute::on(Slurm)`
    /// sends a closure's, runs it there; the rest of the code sends the variables and submits.
    pub fn code(&self) -> JobCode {
        let mut c = String::from(
            "{\n#[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*;\n\
             #[allow(unused_mut, unused_variables, unused_braces, unused_imports, dead_code)]\n\
             extern \"C\" fn __dryml_job_entry() {\n#[allow(unused_imports)] use ::dryml::__kernel::carry::prelude::*;\n\
             ::dryml::__kernel::slurm::job::main(|__dryml_io: &mut ::dryml::__kernel::slurm::job::Io| -> ::std::result::Result<(), ::dryml::__kernel::cell::CellError> {\n",
        );
        for v in self.inputs {
            // An object goes into compute (its `load_compute`) before the body.
            c.push_str(&format!(
                "let mut {n}: {t} = (&&&::dryml::__kernel::carry::In::<{t}>::new()).decode(&__dryml_io.input_bytes({n:?})?).map_err(|e| ::dryml::__kernel::cell::CellError::new(format!(\"`{n}`: {{e}}\")))?; \
                 let __dryml_keep_{n} = ::dryml::__kernel::cell::Keep::new(); \
                 (&mut &mut ::dryml::__kernel::carry::Hook(&mut {n})).load_compute().map_err(::dryml::__kernel::cell::CellError::new)?;\n",
                n = v.name,
                t = v.ty
            ));
        }
        c.push_str(if self.sweep.is_some() { "let __dryml_train = {\n" } else { "let __dryml_value = {\n" });
        let body_line = c.lines().count() + 1;
        c.push_str(self.body);
        if !self.body.ends_with('\n') {
            c.push('\n');
        }
        c.push_str("};\n");
        if self.sweep.is_some() {
            c.push_str("::dryml::__kernel::slurm::array::task_main(__dryml_train);\n");
        }
        for v in self.updates {
            c.push_str(&format!(
                "(&mut &mut ::dryml::__kernel::carry::Hook(&mut {n})).save_compute().map_err(::dryml::__kernel::cell::CellError::new)?; __dryml_io.update_bytes({n:?}, (&&&::dryml::__kernel::carry::Out(&{n})).encode())?;\n",
                n = v.name
            ));
        }
        if self.shows {
            c.push_str("__dryml_io.show(&__dryml_value);\n");
        }
        // Ends the job's process here, past the copies of the notebook's variables.
        c.push_str("__dryml_io.finish()\n});\n}\n");
        // `line!()` is where this line is in the library's source, which the job's panics name.
        let back = c.lines().count() + 1 - body_line;
        c.push_str(&format!(
            "match ::dryml::__kernel::slurm::ship_cell(__dryml_job_entry as extern \"C\" fn() as usize, line!() - {back}, {:?}) {{\nOk(mut __dryml_job) => {{\n",
            self.request.to_string()
        ));
        for v in self.inputs {
            c.push_str(&format!(
                "__dryml_job.input({n:?}, {t:?}, (&&&::dryml::__kernel::carry::Out(&{n})).encode());\n",
                n = v.name,
                t = v.ty
            ));
        }
        let detach = self.detach;
        match self.sweep {
            Some(o) => c.push_str(&format!(
                "match ::dryml::__kernel::slurm::array::submit(__dryml_job, &{defs}, {repo:?}, {detach}) {{\nOk(r) => ::dryml::__kernel::cell::Shown(format!(\"{{r:?}}\")),\nErr(e) => {{ ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }}\n}}\n",
                defs = o.defs,
                repo = o.repo,
            )),
            None => {
                c.push_str(&format!("match __dryml_job.run({detach}) {{\nOk(mut __dryml_result) => {{\n"));
                if !detach {
                    for v in self.updates {
                        c.push_str(&format!(
                            "match __dryml_result.take_bytes({n:?}).map_err(|e| e.message()).and_then(|b| (&&&::dryml::__kernel::carry::In::of(&{n})).decode(&b)) {{ Ok(v) => {n} = v, \
                             Err(e) => ::dryml::__kernel::cell::raise(&::dryml::ComputeError::Failed(format!(\"--update {n}: {{e}}\"))) }}\n",
                            n = v.name
                        ));
                    }
                }
                c.push_str("__dryml_result.shown()\n}\nErr(e) => { ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }\n}\n");
            }
        }
        c.push_str(
            "}\nErr(e) => { ::dryml::__kernel::cell::raise(&e); ::dryml::__kernel::cell::Shown(String::new()) }\n}\n}",
        );
        if self.sweep.is_none() && !(self.shows || self.detach) {
            c.push(';');
        }
        JobCode { code: c, body_line }
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
/// An object of one of dryml's framework models (`type_name`) names its path, so the kernel
/// builds dryml with that framework's feature and the type is registered.
pub fn repo_load(var: &str, dir: &str, id: &str, type_name: &str) -> String {
    let model = dryml::models::FRAMEWORK_MODELS.iter().find(|m| m.0 == type_name);
    let named = model.map_or(String::new(), |(_, path, _)| format!("use {path} as _;\n"));
    // evcxr names a variable's type from what is in scope, hence the `use`.
    format!(
        "{named}use dryml::Object;\nlet {var}: Box<dyn dryml::Object> = dryml::Repo::open({dir:?}).and_then(|r| r.by_id({id:?})).unwrap_or_else(|e| panic!(\"{{e}}\"));"
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
        let vars: BTreeMap<String, String> = [("model", "Vec<f64>"), ("data", "Vec<u8>"), ("unused", "i32")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let code = compute(
            &opts("%%compute tf --update model --timeout 2"),
            "model.push(data.len() as f64);\nmodel.len()",
            &vars,
        )
        .unwrap();
        assert!(code.contains("let mut model = unsafe { ::std::ptr::read(&model) };"), "{code}");
        assert!(code.contains("let mut data = unsafe"), "{code}");
        let (copies, keep) =
            (code.find("let mut data = unsafe").unwrap(), code.find("::dryml::__kernel::cell::Keep::new()").unwrap());
        assert!(
            copies < keep && keep < code.find("model.push").unwrap(),
            "the guard comes after the copies, before the body: {code}"
        );
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
        // Its body stands on lines of its own, twice (here and in a sandbox).
        let starts = body_starts(&code, "let x = 1;");
        assert_eq!(starts.len(), 2, "{code}");
        assert!(starts.iter().all(|&l| code.lines().nth(l - 1) == Some("let x = 1;")), "{code}");
        let e = compute(&opts("%%compute --update nope"), "1", &vars).unwrap_err();
        assert_eq!(e, "--update nope: the notebook has no variable `nope` to update");
    }

    #[test]
    fn values_and_statements() {
        for (body, shows) in [
            ("1 + 1", true),
            ("let a = 1;", false),
            ("for i in 0..2 {}", true),
            ("x.push(1);", false),
            ("fn f() {}", false),
            ("(", false),
        ] {
            assert_eq!(ends_with_value(body), Ok(shows), "{body}");
        }
    }

    #[test]
    fn a_job_is_a_function_of_the_cell_that_reads_its_inputs() {
        let w = [Var { name: "w".into(), ty: "Vec<f64>".into() }];
        let request = serde_json::json!({"kind": "compute", "body": "a \"quoted\" body"});
        let job = Job {
            request: &request,
            body: "w.push(1.0);\nw.len()",
            inputs: &w,
            updates: &w,
            shows: true,
            sweep: None,
            detach: false,
        };
        let JobCode { code, body_line } = job.code();
        let lines: Vec<&str> = code.lines().collect();
        assert_eq!(lines[body_line - 1], "w.push(1.0);");
        let entry = code.find("extern \"C\" fn __dryml_job_entry()").unwrap();
        let decode = code.find("let mut w: Vec<f64> = (&&&::dryml::__kernel::carry::In::<Vec<f64>>::new()).decode(&__dryml_io.input_bytes(\"w\")?)").unwrap();
        let ship = code.find("ship_cell(__dryml_job_entry as extern \"C\" fn() as usize, line!() - ").unwrap();
        assert!(
            entry < decode
                && decode < code.find("w.push(1.0)").unwrap()
                && code.find("__dryml_io.update_bytes(\"w\"").unwrap() < ship,
            "{code}"
        );
        // `line!()` on the ship line, less the distance back, is the body's first line.
        let ship_line = code[..ship].lines().count();
        let back: usize = code[ship..].split("line!() - ").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
        assert_eq!(ship_line - back, body_line, "{code}");
        assert!(code.contains(&format!("{:?}", request.to_string())), "the request is one string literal");
        assert!(
            code.contains("__dryml_job.input(\"w\", \"Vec<f64>\"")
                && code.contains("match __dryml_result.take_bytes(\"w\")"),
            "{code}"
        );
        assert!(!code.ends_with(';'), "a value is shown");
        let parsed = dryml_magics::parse_cell("%%sweep defs --repo /r --on slurm").unwrap();
        let Some(dryml_magics::CellCall::Sweep(sweep)) = parsed.cell_magic.as_ref().unwrap().cell_call() else {
            panic!("a sweep")
        };
        let job = Job { sweep: Some(sweep), inputs: &[], updates: &[], shows: false, ..job };
        let code = job.code().code;
        assert!(
            code.contains("let __dryml_train = {\nw.push(1.0);") && code.contains("array::task_main(__dryml_train)"),
            "{code}"
        );
        assert!(
            code.contains("array::submit(__dryml_job, &defs, \"/r\", false)") && !code.contains("__dryml_job.run("),
            "{code}"
        );
    }
}
