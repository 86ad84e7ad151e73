//! The kernel's side of compute contexts: the machine record for the pool, the `%context`
//! table, and the code a `%%compute` cell becomes.

use crate::gpu::Gpu;
use dryml::context::Context;
use dryml::pool::{GpuInfo, Machine, Pool};
use dryml_magics::ComputeOptions;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The pool's devices: the CPUs sysinfo counts and the GPUs NVML shows the kernel (PCI bus
/// order, after the kernel's own `CUDA_VISIBLE_DEVICES`), named to CUDA by UUID.
pub fn machine(gpus: &[Gpu], totals: &[u64]) -> Machine {
    let cpus = sysinfo::System::new_with_specifics(
        sysinfo::RefreshKind::nothing().with_cpu(sysinfo::CpuRefreshKind::nothing()),
    )
    .map(|s| s.cpus().len())
    .unwrap_or(0);
    // sysinfo reads /proc; should it fail, the scheduler's count still holds.
    let cpus = if cpus > 0 { cpus } else { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) } as u32;
    let gpus = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| GpuInfo {
            index: i as u32,
            cuda_id: if g.uuid.is_empty() { i.to_string() } else { g.uuid.clone() },
            name: format!("{} ({})", g.name, g.bus_id),
            total_bytes: totals.get(i).copied().unwrap_or(0),
        })
        .collect();
    Machine { cpus, gpus }
}

/// `%context` alone: the notebook's context and every device of the pool with its holders.
pub fn pool_table(pool: &Pool, notebook: u32, ctx: Option<&Context>) -> Value {
    let head = match ctx {
        Some(c) => format!("Context of the notebook's process (pid {notebook}): {c}"),
        None => format!(
            "The notebook's process (pid {notebook}) has no context: context_check fails with NoContextError; set one with %context REQS"
        ),
    };
    let mut rows: Vec<[String; 4]> = Vec::new();
    for d in pool.machine.devices() {
        let name = match d.kind {
            dryml::pool::Kind::Cpu => "CPU".to_string(),
            dryml::pool::Kind::Gpu => pool.machine.gpu(d.index).map(|g| g.name.clone()).unwrap_or_default(),
        };
        let held: Vec<String> = pool
            .claims
            .iter()
            .filter(|c| c.device == d)
            .map(|c| format!("{} pid {} ({} {})", c.holder, c.pid, c.framework, dryml::pool::short(c.share)))
            .collect();
        rows.push([d.to_string(), name, dryml::pool::short(pool.free(d)), held.join(", ")]);
    }
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    let (text, html) = crate::table::render(&head, &["device", "name", "free", "held by"], &rows);
    let claims: Vec<Value> = pool
        .claims
        .iter()
        .map(|c| json!({"pid": c.pid, "holder": c.holder, "framework": c.framework, "device": c.device.to_string(), "share": c.share}))
        .collect();
    json!({
        "text/plain": text,
        "text/html": html,
        "application/json": {"context": ctx.map(|c| c.to_string()), "claims": claims},
    })
}

/// The identifiers a cell body mentions (over-inclusive: fields and paths count too).
fn identifiers(body: &str) -> BTreeSet<&str> {
    body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// Whether the body ends with an expression (its value is shown) rather than a statement.
fn ends_with_value(body: &str) -> bool {
    match syn::parse_str::<syn::Block>(&format!("{{\n{body}\n}}")) {
        Ok(b) => matches!(b.stmts.last(), Some(syn::Stmt::Expr(_, None))),
        Err(_) => false,
    }
}

/// The code a `%%compute` cell runs in the notebook's process. The body goes into a closure
/// that runs in the sandbox: there each notebook variable it names is shadowed by a bitwise
/// copy owned by the sandbox (the fork has its own memory, and ends without dropping them), so
/// the body may move or change them and the notebook's stay as they were. `--update`
/// variables come back through serde. With `--use-existing`/`--dont-create`, a context that
/// fits runs the body as a plain block instead.
pub fn compute_code(o: &ComputeOptions, body: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    for u in &o.update {
        if !vars.contains_key(u) {
            return Err(format!("--update {u}: the notebook has no variable `{u}` to update"));
        }
    }
    let names = identifiers(body);
    let used: Vec<&String> = vars.keys().filter(|v| names.contains(v.as_str())).collect();
    let shows = ends_with_value(body);
    let mut c = String::from("{\n");
    c.push_str(&format!(
        "let __dryml_compute = ::dryml::compute::Compute::new(&::dryml::context::Requests::parse({:?}).expect(\"checked by the kernel\"))",
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
    let show_here = if shows { "::dryml::compute::Shown(format!(\"{:?}\", __dryml_value))" } else { "::dryml::compute::Shown(String::new())" };
    let sandbox = {
        let mut s = String::from(
            "let __dryml_result = __dryml_compute.run_cell(|__dryml_out: &mut ::dryml::compute::Cell| -> ::std::result::Result<(), ::dryml::compute::CellError> {\n",
        );
        for v in &used {
            s.push_str(&format!("#[allow(unused_mut, unused_variables)] let mut {v} = unsafe {{ ::std::ptr::read(&{v}) }};\n"));
        }
        s.push_str(&format!("#[allow(unused_variables)] let __dryml_value = {{\n{body}\n}};\n"));
        for u in &o.update {
            s.push_str(&format!("__dryml_out.update({u:?}, &{u});\n"));
        }
        if shows {
            s.push_str("__dryml_out.show(&__dryml_value);\n");
        }
        s.push_str("__dryml_out.finish();\nOk(())\n});\n::dryml::compute::print_report();\n");
        // Errors end the cell through the kernel (not `?`), after it returns: nothing is lost.
        s.push_str("match __dryml_result {\nOk(mut __dryml_result) => {\n");
        for u in &o.update {
            s.push_str(&format!(
                "match __dryml_result.take({u:?}) {{ Ok(v) => {u} = v, Err(e) => ::dryml::compute::raise(&e) }}\n"
            ));
        }
        s.push_str("__dryml_result.shown()\n}\nErr(e) => { ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }\n}\n");
        s
    };
    if o.use_existing || o.dont_create {
        c.push_str(&format!(
            "match __dryml_compute.where_to_run() {{\nErr(e) => {{ ::dryml::compute::raise(&e); ::dryml::compute::Shown(String::new()) }}\nOk(Some(__dryml_ctx)) => {{\nlet __dryml_t0 = ::std::time::Instant::now();\n\
             #[allow(unused_variables)] let __dryml_value = {{\n{body}\n}};\n\
             ::dryml::compute::record_here(__dryml_ctx, __dryml_t0.elapsed());\n::dryml::compute::print_report();\n{show_here}\n}}\n\
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

/// Pins every thread of the notebook's process to the context's CPUs.
pub fn pin(pid: u32, ctx: &Context) {
    dryml::context::pin_threads(Some(pid), &ctx.cpu_set());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(line: &str) -> ComputeOptions {
        let p = dryml_magics::parse_cell(line).unwrap();
        let inv = p.cell_magic.unwrap();
        let tokens = dryml_magics::tokenize(&inv.args.raw).unwrap();
        dryml_magics::compute_options(&inv.args, &tokens).unwrap()
    }

    #[test]
    fn compute_cells_become_sandbox_code() {
        let vars: BTreeMap<String, String> =
            [("model", "Vec<f64>"), ("data", "Vec<u8>"), ("unused", "i32")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        let code = compute_code(&opts("%%compute tf --update model --timeout 2"), "model.push(data.len() as f64);\nmodel.len()", &vars).unwrap();
        assert!(code.contains("let mut model = unsafe { ::std::ptr::read(&model) };"), "{code}");
        assert!(code.contains("let mut data = unsafe"), "{code}");
        assert!(!code.contains("let mut unused"), "variables the body does not name are not copied");
        assert!(code.contains("Requests::parse(\"tf\")"), "{code}");
        assert!(code.contains(".timeout(::std::time::Duration::from_secs_f64(2.0))"));
        assert!(code.contains("match __dryml_result.take(\"model\") { Ok(v) => model = v,"), "{code}");
        assert!(!code.contains('?'), "errors go through the kernel, not evcxr's `?`: {code}");
        assert!(!code.contains("where_to_run"));
        // A body ending in a statement shows nothing.
        let code = compute_code(&opts("%%compute --use-existing"), "let x = 1;", &vars).unwrap();
        assert!(code.ends_with("};"), "{code}");
        assert!(code.contains("where_to_run()"));
        let e = compute_code(&opts("%%compute --update nope"), "1", &vars).unwrap_err();
        assert_eq!(e, "--update nope: the notebook has no variable `nope` to update");
    }

    #[test]
    fn values_and_statements() {
        for (body, shows) in [("1 + 1", true), ("let a = 1;", false), ("for i in 0..2 {}", true), ("x.push(1);", false), ("fn f() {}", false), ("(", false)] {
            assert_eq!(ends_with_value(body), shows, "{body}");
        }
    }
}
