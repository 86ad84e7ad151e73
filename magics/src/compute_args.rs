//! The arguments of `%context`, `%%compute` and `%%sweep`: resource requests in the text form
//! or the JSON form (`%context {"tf": {"gpu/0": 0.5}}`), read into one grammar so both give the
//! same values and the same errors, plus the cell magics' options.

use crate::args::{flag_token, is_ident, keep_list, option_token, positional_token, ArgError, Args};
use crate::tokens::Token;
use dryml::__kernel::slurm::JobOptions;
use dryml::compute::context::Requests;
pub use dryml_sys::units::parse_size;
use serde_json::Value;

/// What a `%context` line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextCommand {
    Show,
    Set { requests: Requests, restart: bool },
    Check(Requests),
}

/// Reads `%context`'s arguments. Errors point at the token.
pub fn context_command(args: &Args, tokens: &[Token]) -> Result<ContextCommand, ArgError> {
    let restart = args.flag("restart");
    let check = args.positionals.first().is_some_and(|p| p == "check");
    if check && restart {
        return Err((
            "check and --restart do not go together".into(),
            tokens.iter().position(|t| t.text == "--restart"),
        ));
    }
    let skip = usize::from(check);
    if args.positionals.len() == skip {
        return match (check, restart) {
            (false, false) => Ok(ContextCommand::Show),
            (true, _) => Err(("check needs the REQS to check, as in `%context check tf num_gpus=1`".into(), None)),
            (_, true) => Err(("--restart needs the REQS of the new context".into(), None)),
        };
    }
    let requests = requests_of(args, tokens, skip)?;
    Ok(if check { ContextCommand::Check(requests) } else { ContextCommand::Set { requests, restart } })
}

/// The requests in the positionals from `skip` on: JSON when they start with `{`.
fn requests_of(args: &Args, tokens: &[Token], skip: usize) -> Result<Requests, ArgError> {
    let words = &args.positionals[skip..];
    if words.is_empty() {
        return Ok(Requests::parse(dryml::compute::context::DEFAULT_FRAMEWORK).expect("the default request parses"));
    }
    let first = positional_token(tokens, skip);
    if words[0].starts_with('{') {
        let json = match args.raw.find('{') {
            Some(at) => args.raw[at..].trim(),
            None => "",
        };
        return requests_from_json(json).map_err(|m| (m, first));
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    Requests::parse_tokens(&refs).map_err(|e| (e.message, e.token.and_then(|k| positional_token(tokens, skip + k))))
}

/// `%%compute`'s arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeOptions {
    pub requests: Requests,
    pub update: Vec<String>,
    pub timeout: Option<f64>,
    pub mem_limit: Option<u64>,
    pub verbose: bool,
    pub use_existing: bool,
    pub dont_create: bool,
    /// `--on slurm`: run the cell as a Slurm job instead of a local sandbox.
    pub slurm: Option<SlurmJob>,
}

/// `%%compute --on slurm`'s own choices: the job's options, in the one type `%slurm`'s settings
/// and a cell's `Slurm` use too (what they leave out comes from `%slurm`), and whether to wait.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlurmJob {
    /// Submit and return at once (`%jobs` follows it later).
    pub detach: bool,
    /// `--partition`, `--account`, `--qos`, `--sbatch` (passed as they are, after `%slurm
    /// sbatch=...`); the time and memory come from `--timeout` and `--mem-limit`.
    pub options: JobOptions,
}

/// Reads `%%compute`'s arguments. Errors point at the token.
pub fn compute_options(args: &Args, tokens: &[Token]) -> Result<ComputeOptions, ArgError> {
    let update = match args.value("update") {
        Some(v) => keep_list(v).map_err(|m| (m.replace("--keep", "--update"), option_token(tokens, "update")))?,
        None => Vec::new(),
    };
    debug_assert!(update.iter().all(|n| is_ident(n)));
    let (timeout, mem_limit) = limits(args, tokens)?;
    let slurm = slurm_job(args, tokens)?;
    if slurm.is_some() {
        for o in ["use-existing", "dont-create"] {
            if args.flag(o) {
                return Err((
                    format!("--{o} is about the notebook's own context and does not go with --on slurm"),
                    flag_token(tokens, o),
                ));
            }
        }
    }
    Ok(ComputeOptions {
        slurm,
        requests: requests_of(args, tokens, 0)?,
        update,
        timeout,
        mem_limit,
        verbose: args.flag("verbose"),
        use_existing: args.flag("use-existing"),
        dont_create: args.flag("dont-create"),
    })
}

/// `--timeout S` and `--mem-limit SIZE`.
fn limits(args: &Args, tokens: &[Token]) -> Result<(Option<f64>, Option<u64>), ArgError> {
    let timeout = match args.value("timeout") {
        Some(v) => Some(v.parse::<f64>().ok().filter(|t| t.is_finite() && *t > 0.0).ok_or_else(|| {
            (format!("--timeout must be a positive number of seconds, got `{v}`"), option_token(tokens, "timeout"))
        })?),
        None => None,
    };
    let mem_limit = match args.value("mem-limit") {
        Some(v) => Some(parse_size(v).map_err(|m| (format!("--mem-limit: {m}"), option_token(tokens, "mem-limit")))?),
        None => None,
    };
    Ok((timeout, mem_limit))
}

/// `--on slurm` and the options that go with it; they are errors without it.
fn slurm_job(args: &Args, tokens: &[Token]) -> Result<Option<SlurmJob>, ArgError> {
    let slurm = match args.value("on") {
        None | Some("local") => None,
        Some("slurm") => Some(SlurmJob {
            detach: args.flag("detach"),
            options: JobOptions {
                partition: args.value("partition").map(str::to_string),
                account: args.value("account").map(str::to_string),
                qos: args.value("qos").map(str::to_string),
                sbatch: args
                    .value("sbatch")
                    .map(|v| v.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
                ..JobOptions::default()
            },
        }),
        Some(other) => {
            return Err((format!("--on takes `local` or `slurm`, not `{other}`"), option_token(tokens, "on")))
        }
    };
    if slurm.is_none() {
        for o in ["detach", "partition", "account", "qos", "sbatch"] {
            if args.options.contains_key(o) {
                let at = if args.flag(o) && args.value(o).is_none() {
                    flag_token(tokens, o)
                } else {
                    option_token(tokens, o)
                };
                return Err((format!("--{o} goes with --on slurm"), at));
            }
        }
    }
    Ok(slurm)
}

/// `%%sweep`'s arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepOptions {
    /// The notebook variable holding the definitions (`Vec<ObjectDef>`).
    pub defs: String,
    /// The repo the trained objects go to (made if missing).
    pub repo: String,
    pub requests: Requests,
    pub timeout: Option<f64>,
    pub mem_limit: Option<u64>,
    pub slurm: Option<SlurmJob>,
    /// `--mlflow URI`: a parent run on the server, a child run per definition.
    pub mlflow: Option<String>,
}

/// Reads `%%sweep DEFS --repo DIR [REQS] [--on slurm ...]`. Errors point at the token.
pub fn sweep_options(args: &Args, tokens: &[Token]) -> Result<SweepOptions, ArgError> {
    let defs = args
        .positionals
        .first()
        .cloned()
        .ok_or_else(|| ("needs DEFS, the variable holding the definitions (a Vec<ObjectDef>)".to_string(), None))?;
    if !is_ident(&defs) {
        return Err((
            format!("`{defs}` is not a variable name (DEFS comes first, then the requests)"),
            positional_token(tokens, 0),
        ));
    }
    let repo = args
        .value("repo")
        .map(str::to_string)
        .ok_or_else(|| ("needs --repo DIR, where the trained objects go".to_string(), None))?;
    let (timeout, mem_limit) = limits(args, tokens)?;
    let slurm = slurm_job(args, tokens)?;
    if slurm.is_none() && (timeout.is_some() || mem_limit.is_some()) {
        let o = if timeout.is_some() { "timeout" } else { "mem-limit" };
        return Err((
            format!("--{o} applies to a sweep's Slurm tasks (--on slurm); a local sweep's sandboxes take none yet"),
            option_token(tokens, o),
        ));
    }
    let mlflow = mlflow_opt(args, tokens)?;
    if slurm.is_some() && mlflow.is_some() {
        return Err((
            "--mlflow goes with a local sweep for now; a Slurm task does not reach the kernel's queue".into(),
            option_token(tokens, "mlflow"),
        ));
    }
    Ok(SweepOptions { defs, repo, requests: requests_of(args, tokens, 1)?, timeout, mem_limit, slurm, mlflow })
}

/// Parses `{"framework": {"key": number, ...}, ...}`. Errors name the place in the JSON.
pub fn requests_from_json(text: &str) -> Result<Requests, String> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!("not valid JSON at line {}, column {}: {e}", e.line(), e.column()))?;
    let Value::Object(frameworks) = v else {
        return Err("expected a JSON object of frameworks, as in {\"tf\": {\"gpu/0\": 0.5}}".into());
    };
    // The text grammar does the checking: one token per framework and per key=value. Keys at
    // the top (`{"num_gpus": 1}`) are `default`'s, so they go first, before any framework.
    let mut tokens = Vec::new();
    let mut places = Vec::new();
    for (k, val) in frameworks.iter().filter(|(_, v)| !v.is_object()) {
        let Value::Number(n) = val else {
            return Err(format!(
                "\"{k}\": expected an object of keys (a framework's) or a number (a key of `default`'s), got {val}"
            ));
        };
        tokens.push(format!("{k}={n}"));
        places.push(format!("\"{k}\""));
    }
    for (fw, keys) in frameworks.iter().filter(|(_, v)| v.is_object()) {
        tokens.push(fw.clone());
        places.push(format!("\"{fw}\""));
        let Value::Object(keys) = keys else {
            return Err(format!("\"{fw}\": expected an object of keys, as in {{\"num_gpus\": 1}}"));
        };
        for (k, val) in keys {
            let Value::Number(n) = val else {
                return Err(format!("\"{fw}\".\"{k}\": expected a number, got {val}"));
            };
            tokens.push(format!("{k}={n}"));
            places.push(format!("\"{fw}\".\"{k}\""));
        }
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    Requests::parse_tokens(&refs).map_err(|e| match e.token {
        Some(i) => format!("{} (at {})", e.message, places[i]),
        None => e.message,
    })
}

/// `--mlflow URI`: an `http://` server (MLflow's own `mlflow server` speaks plain HTTP).
pub(crate) fn mlflow_opt(args: &Args, tokens: &[Token]) -> Result<Option<String>, ArgError> {
    match args.value("mlflow") {
        Some(u) if !u.starts_with("http://") => Err((
            format!("--mlflow {u}: expected a tracking server's http:// URI, as in http://127.0.0.1:5000"),
            option_token(tokens, "mlflow"),
        )),
        v => Ok(v.map(str::to_string)),
    }
}
