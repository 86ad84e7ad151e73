//! Every piece of Rust the magics generate for the notebook's process or a Slurm job: a call of
//! one of `dryml`'s shims (`dryml::__kernel::compute_cell!`, `job_cell!`, `cell::sweep`, ...)
//! with the options, the variables and the body filled in; the shims themselves are compiled
//! and run in `dryml`'s tests. The `::dryml::...` paths generated code names live here only.

use super::cell::Cell;
use dryml_magics::{ComputeOptions, SweepOptions};
use std::collections::BTreeMap;

/// The lines (1-based) of `code` where each copy of `body` starts: the generated code holds
/// the body as its own lines, so its errors name the cell's lines.
pub fn body_starts(code: &str, body: &str) -> Vec<usize> {
    if body.trim().is_empty() {
        return Vec::new();
    }
    let framed = format!("\n{body}\n");
    code.match_indices(&framed).map(|(at, _)| code[..at].matches('\n').count() + 2).collect()
}

/// The code a `%%compute` cell runs in the notebook's process: `dryml`'s `compute_cell!` shim
/// (see there) filled in with the options, the notebook variables the body names and the body,
/// on lines of its own so its errors name the cell's lines.
pub fn compute(o: &ComputeOptions, cell: &Cell<'_>, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let body = cell.body();
    for u in &o.update {
        if !vars.contains_key(u) {
            return Err(format!("--update {u}: the notebook has no variable `{u}` to update"));
        }
    }
    let used: Vec<&str> = vars.keys().filter(|v| cell.names().contains(v.as_str())).map(|v| v.as_str()).collect();
    let shows = cell.shows().map_err(|deep| format!("{deep}; split the cell, or run it without %%compute"))?;
    let spec = format!(
        "::dryml::__kernel::cell::Spec {{ requests: {:?}, timeout: {:?}, mem_limit: {:?}, verbose: {}, use_existing: {}, dont_create: {} }}",
        o.requests.to_text(),
        o.timeout,
        o.mem_limit,
        o.verbose,
        o.use_existing,
        o.dont_create
    );
    let place = if o.use_existing || o.dont_create { "here_or_sandbox" } else { "sandbox" };
    Ok(format!(
        "{{ ::dryml::__kernel::compute_cell!({spec}; [{}] [{}]; {place} {}; {{\n{body}\n}}) }}{}",
        used.join(" "),
        o.update.join(" "),
        if shows { "show" } else { "quiet" },
        if shows { "" } else { ";" }
    ))
}

/// The code a local `%%sweep` cell runs: `dryml::sweep` over the definitions, in sandboxes.
pub fn sweep(opts: &SweepOptions, body: &str) -> String {
    format!(
        "{{ ::dryml::__kernel::cell::sweep({reqs:?}, &{defs}, {repo:?}, {{\n{body}\n}}) }}",
        defs = opts.defs,
        reqs = opts.requests.to_text(),
        repo = opts.repo,
    )
}

/// A variable crossing to the job: its name and the type evcxr knows it by.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Var {
    pub name: String,
    #[serde(rename = "type")]
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
    /// `dryml`'s `job_cell!` shim (see there) filled in: the request, the variables sent with
    /// their types as evcxr knows them, those that come back, and the body on its own lines.
    pub fn code(&self) -> JobCode {
        let inputs: Vec<String> = self.inputs.iter().map(|v| format!("{}: {}", v.name, v.ty)).collect();
        let updates: Vec<&str> = self.updates.iter().map(|v| v.name.as_str()).collect();
        let mode = match self.sweep {
            Some(o) => format!("sweep({}, {:?}, {})", o.defs, o.repo, self.detach),
            None => {
                let wait = if self.detach { "detach" } else { "wait" };
                format!("run({wait}) {}", if self.shows { "show" } else { "quiet" })
            }
        };
        let mut code = format!(
            "{{ ::dryml::__kernel::job_cell!({:?}; [{}] [{}]; {mode}; {{\n{}",
            self.request.to_string(),
            inputs.join(", "),
            updates.join(" "),
            self.body
        );
        if !self.body.ends_with('\n') {
            code.push('\n');
        }
        code.push_str("}) }");
        if self.sweep.is_none() && !(self.shows || self.detach) {
            code.push(';');
        }
        // The shim's `line!() + 1`: the body starts on the line after the macro's first.
        JobCode { code, body_line: 2 }
    }
}

/// `%jobs wait` of a sweep: its tasks followed to their end, their table shown.
pub fn sweep_wait(dir: &str) -> String {
    format!("{{ ::dryml::__kernel::cell::show(::dryml::__kernel::slurm::array::wait({dir:?})) }}")
}

/// `%jobs wait`: the job followed to its end, its value shown.
pub fn job_wait(dir: &str) -> String {
    format!("{{ ::dryml::__kernel::cell::show_result(::dryml::__kernel::slurm::follow::wait({dir:?})) }}")
}

/// `%jobs result`'s wait: the job followed to its end, with its `updates` delivered.
pub fn job_wait_for(d: &str, updates: &[&str]) -> String {
    let wanted: Vec<String> = updates.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "{{ ::dryml::__kernel::cell::show_result(::dryml::__kernel::slurm::follow::wait_for({d:?}, &[{}])) }}",
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

    /// `compute` for the cell of `line` above `body`.
    fn compute_of(line: &str, body: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
        let code = format!("{line}\n{body}");
        let p = dryml_magics::parse_cell(&code).unwrap();
        match p.cell_magic.as_ref().and_then(|inv| inv.cell_call()) {
            Some(dryml_magics::CellCall::Compute(o)) => compute(o, &Cell::new(&p), vars),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn compute_cells_fill_in_the_shim() {
        let vars: BTreeMap<String, String> = [("model", "Vec<f64>"), ("data", "Vec<u8>"), ("unused", "i32")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let body = "model.push(data.len() as f64);\nmodel.len()";
        let code = compute_of("%%compute tf --update model --timeout 2", body, &vars).unwrap();
        assert_eq!(
            code,
            format!(
                "{{ ::dryml::__kernel::compute_cell!(::dryml::__kernel::cell::Spec {{ requests: \"tf\", timeout: Some(2.0), \
                 mem_limit: None, verbose: false, use_existing: false, dont_create: false }}; [data model] [model]; \
                 sandbox show; {{\n{body}\n}}) }}"
            ),
            "variables the body does not name are not copied"
        );
        assert!(!code.contains('?'), "errors go through the kernel, not evcxr's `?`: {code}");
        // A body ending in a statement shows nothing; it stands on lines of its own.
        let code = compute_of("%%compute --use-existing --mem-limit 1k", "let x = 1;", &vars).unwrap();
        assert!(code.ends_with("here_or_sandbox quiet; {\nlet x = 1;\n}) };"), "{code}");
        assert!(code.contains("mem_limit: Some(1024), verbose: false, use_existing: true"), "{code}");
        let starts = body_starts(&code, "let x = 1;");
        assert_eq!(starts, [2], "{code}");
        let e = compute_of("%%compute --update nope", "1", &vars).unwrap_err();
        assert_eq!(e, "--update nope: the notebook has no variable `nope` to update");
    }

    #[test]
    fn a_job_fills_in_the_shim() {
        let w = [Var { name: "w".into(), ty: "Vec<f64>".into() }];
        let request = serde_json::json!({"kind": "compute", "body": "a \"quoted\"\nbody"});
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
        assert_eq!(
            lines[0],
            format!("{{ ::dryml::__kernel::job_cell!({:?}; [w: Vec<f64>] [w]; run(wait) show; {{", request.to_string()),
            "the request is one string literal on the shim's first line"
        );
        assert!(code.ends_with("w.len()\n}) }"), "a value is shown: {code}");
        let code = Job { detach: true, shows: false, ..job }.code().code;
        assert!(code.contains("run(detach) quiet;") && code.ends_with("}) }"), "{code}");
        let parsed = dryml_magics::parse_cell("%%sweep defs --repo /r --on slurm").unwrap();
        let Some(dryml_magics::CellCall::Sweep(sweep)) = parsed.cell_magic.as_ref().unwrap().cell_call() else {
            panic!("a sweep")
        };
        let job = Job { sweep: Some(sweep), inputs: &[], updates: &[], shows: false, ..job };
        let code = job.code().code;
        assert!(code.contains("[] []; sweep(defs, \"/r\", false); {\nw.push(1.0);"), "{code}");
    }
}
