//! The arguments of `%context` and `%%compute`: resource requests in the text form or the JSON
//! form (`%context {"tf": {"gpu/0": 0.5}}`), read into one grammar so both give the same values
//! and the same errors, plus `%%compute`'s options.

use crate::args::{flag_token, is_ident, keep_list, option_token, positional_token, ArgError, Args};
use crate::tokens::Token;
use dryml::context::Requests;
pub use dryml::units::parse_size;
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
        return Err(("check and --restart do not go together".into(), tokens.iter().position(|t| t.text == "--restart")));
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
        return Ok(Requests::parse(dryml::context::DEFAULT_FRAMEWORK).expect("the default request parses"));
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

/// `%%compute --on slurm`'s own options; what they leave out comes from `%slurm`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlurmJob {
    /// Submit and return at once (`%jobs` follows it later).
    pub detach: bool,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Passed to `sbatch` as they are, after `%slurm sbatch=...`.
    pub sbatch: Vec<String>,
}

/// Reads `%%compute`'s arguments. Errors point at the token.
pub fn compute_options(args: &Args, tokens: &[Token]) -> Result<ComputeOptions, ArgError> {
    let update = match args.value("update") {
        Some(v) => keep_list(v)
            .map_err(|m| (m.replace("--keep", "--update"), option_token(tokens, "update")))?,
        None => Vec::new(),
    };
    debug_assert!(update.iter().all(|n| is_ident(n)));
    let (timeout, mem_limit) = limits(args, tokens)?;
    let slurm = slurm_job(args, tokens)?;
    if slurm.is_some() {
        for o in ["use-existing", "dont-create"] {
            if args.flag(o) {
                return Err((format!("--{o} is about the notebook's own context and does not go with --on slurm"), flag_token(tokens, o)));
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
        Some(v) => Some(
            v.parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| (format!("--timeout must be a positive number of seconds, got `{v}`"), option_token(tokens, "timeout")))?,
        ),
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
            partition: args.value("partition").map(str::to_string),
            account: args.value("account").map(str::to_string),
            qos: args.value("qos").map(str::to_string),
            sbatch: args.value("sbatch").map(|v| v.split_whitespace().map(str::to_string).collect()).unwrap_or_default(),
        }),
        Some(other) => return Err((format!("--on takes `local` or `slurm`, not `{other}`"), option_token(tokens, "on"))),
    };
    if slurm.is_none() {
        for o in ["detach", "partition", "account", "qos", "sbatch"] {
            if args.options.contains_key(o) {
                let at = if args.flag(o) && args.value(o).is_none() { flag_token(tokens, o) } else { option_token(tokens, o) };
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
}

/// Reads `%%sweep DEFS --repo DIR [REQS] [--on slurm ...]`. Errors point at the token.
pub fn sweep_options(args: &Args, tokens: &[Token]) -> Result<SweepOptions, ArgError> {
    let defs = args.positionals.first().cloned().ok_or_else(|| ("needs DEFS, the variable holding the definitions (a Vec<ObjectDef>)".to_string(), None))?;
    if !is_ident(&defs) {
        return Err((format!("`{defs}` is not a variable name (DEFS comes first, then the requests)"), positional_token(tokens, 0)));
    }
    let repo = args.value("repo").map(str::to_string).ok_or_else(|| ("needs --repo DIR, where the trained objects go".to_string(), None))?;
    let (timeout, mem_limit) = limits(args, tokens)?;
    let slurm = slurm_job(args, tokens)?;
    if slurm.is_none() && (timeout.is_some() || mem_limit.is_some()) {
        let o = if timeout.is_some() { "timeout" } else { "mem-limit" };
        return Err((format!("--{o} applies to a sweep's Slurm tasks (--on slurm); a local sweep's sandboxes take none yet"), option_token(tokens, o)));
    }
    Ok(SweepOptions { defs, repo, requests: requests_of(args, tokens, 1)?, timeout, mem_limit, slurm })
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
            return Err(format!("\"{k}\": expected an object of keys (a framework's) or a number (a key of `default`'s), got {val}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(magic: &str) -> Result<crate::Invocation, crate::MagicError> {
        crate::parse_cell(magic).map(|p| p.line_magics.into_iter().chain(p.cell_magic).next().unwrap())
    }

    #[test]
    fn context_lines() {
        use ContextCommand::*;
        let r = |t: &str| Requests::parse(t).unwrap();
        // (line, command)
        let table: Vec<(&str, ContextCommand)> = vec![
            ("%context", Show),
            ("%context tf gpu/0=0.5 torch num_gpus=0", Set { requests: r("tf gpu/0=0.5 torch num_gpus=0"), restart: false }),
            (r#"%context {"tf": {"gpu/0": 0.5}}"#, Set { requests: r("tf gpu/0=0.5"), restart: false }),
            (r#"%context --restart {"tf": {"num_cpus": 1}}"#, Set { requests: r("tf num_cpus=1"), restart: true }),
            ("%context check tf num_gpus=2", Check(r("tf num_gpus=2"))),
            (r#"%context check {"tf": {}}"#, Check(r("tf"))),
        ];
        for (line, want) in table {
            let inv = args_of(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let tokens = crate::tokenize(&inv.args.raw).unwrap();
            assert_eq!(context_command(&inv.args, &tokens).unwrap(), want, "{line}");
        }
    }

    #[test]
    fn bad_context_lines_point_at_the_token() {
        // (line, words of the message, 1-based column of the caret)
        let table: &[(&str, &str, usize)] = &[
            ("%context tf gpu/0=1.5", "tf: gpu/0 must be a fraction in (0, 1], got 1.5", 13),
            ("%context check tf tpu/0=1", "unknown key `tpu/0`", 19),
            ("%context --restart", "--restart needs the REQS", 19),
            ("%context check", "check needs the REQS", 15),
            ("%context check --restart tf", "do not go together", 16),
            (r#"%context {"tf": {"gpu/0": 2}}"#, "(at \"tf\".\"gpu/0\")", 10),
            ("%context gpu/0=1.5", "default: gpu/0 must be a fraction in (0, 1], got 1.5", 10),
            ("%%compute tf num_gpus=x", "num_gpus must be a whole number", 14),
            ("%%compute --update a,,b", "`` is not a variable name (expected --update a,b,c)", 20),
            ("%%compute --timeout -3", "--timeout must be a positive number of seconds, got `-3`", 21),
            ("%%compute --mem-limit 12Q", "--mem-limit: `12Q`: unknown unit `Q`", 23),
            ("%%compute --frobnicate", "unknown option `--frobnicate`", 11),
        ];
        for (line, words, col) in table {
            let e = args_of(line).expect_err(line);
            assert!(e.message.contains(words), "{line}: {}", e.message);
            assert_eq!(e.column, *col, "{line}: {}", e.message);
        }
    }

    #[test]
    fn missing_devices_point_at_their_token() {
        // (line, machine's cpus and gpus, 1-based column of the caret, words)
        let table: &[(&str, usize, usize, usize, &str)] = &[
            ("%context tf gpu/0=0.5 torch gpu/1=0.5", 2, 1, 29, "torch: gpu/1 does not exist (this machine has 1 gpu"),
            ("%context check tf cpu/4=1", 4, 0, 19, "tf: cpu/4 does not exist (this machine has 4 cpus"),
            ("%%compute --timeout 3 tf gpu/0=1", 2, 0, 26, "tf: gpu/0 does not exist"),
            (r#"%context {"tf": {"gpu/3": 1}}"#, 2, 2, 10, "tf: gpu/3 does not exist"),
        ];
        for (line, cpus, gpus, col, words) in table {
            let inv = args_of(line).unwrap();
            let tokens = crate::tokenize(&inv.args.raw).unwrap();
            let reqs = match inv.spec.kind {
                crate::MagicKind::Cell => compute_options(&inv.args, &tokens).unwrap().requests,
                crate::MagicKind::Line => match context_command(&inv.args, &tokens).unwrap() {
                    ContextCommand::Set { requests, .. } | ContextCommand::Check(requests) => requests,
                    ContextCommand::Show => unreachable!(),
                },
            };
            let e = inv.check_devices(&reqs, *cpus, *gpus).expect_err(line);
            assert!(e.message.contains(words), "{line}: {}", e.message);
            assert_eq!(e.column, *col, "{line}: {}", e.caret());
        }
        let inv = args_of("%context tf gpu/0=0.5").unwrap();
        assert!(inv.check_devices(&Requests::parse("tf gpu/0=0.5").unwrap(), 1, 1).is_ok());
    }

    #[test]
    fn compute_lines() {
        let inv = args_of("%%compute tf gpu/0=0.5 --update model,loss --timeout 2.5 --mem-limit 1.5G -v --dont-create").unwrap();
        let tokens = crate::tokenize(&inv.args.raw).unwrap();
        let o = compute_options(&inv.args, &tokens).unwrap();
        assert_eq!(o.requests, Requests::parse("tf gpu/0=0.5").unwrap());
        assert_eq!(o.update, vec!["model", "loss"]);
        assert_eq!((o.timeout, o.mem_limit), (Some(2.5), Some(3 << 29)));
        assert!(o.verbose && o.dont_create && !o.use_existing);
        let inv = args_of("%%compute").unwrap();
        let o = compute_options(&inv.args, &[]).unwrap();
        assert_eq!(o.requests, Requests::parse("default").unwrap());
    }

    #[test]
    fn json_and_text_forms_agree() {
        let table: &[(&str, &str)] = &[
            (r#"{"tf": {"gpu/0": 0.5}, "torch": {"num_gpus": 0}}"#, "tf gpu/0=0.5 torch num_gpus=0"),
            (r#"{"default": {}}"#, "default"),
            (r#"{"num_cpus": 2, "gpu/0": 0.5}"#, "num_cpus=2 gpu/0=0.5"),
            (r#"{"tf": {"num_gpus": 1}, "num_cpus": 2}"#, "default num_cpus=2 tf num_gpus=1"),
            (r#"{"tf": {"num_cpus": -1, "cpu/2": 1}}"#, "tf num_cpus=-1 cpu/2=1"),
        ];
        for (json, text) in table {
            assert_eq!(requests_from_json(json).unwrap(), Requests::parse(text).unwrap(), "{json}");
        }
    }

    #[test]
    fn json_errors_name_the_place() {
        let table: &[(&str, &str)] = &[
            (r#"{"tf": {"gpu/0": 1.5}}"#, "tf: gpu/0 must be a fraction in (0, 1], got 1.5 (at \"tf\".\"gpu/0\")"),
            (r#"{"tf": {"gpu/0": "half"}}"#, "\"tf\".\"gpu/0\": expected a number, got \"half\""),
            (r#"{"tf": {"num_gpus": 1.5}}"#, "num_gpus must be a whole number"),
            (r#"{"tf": "x"}"#, "\"tf\": expected an object of keys (a framework's) or a number"),
            (r#"{"tf": 1}"#, "default: unknown key `tf`"),
            (r#"{"num_gpus": 1, "default": {}}"#, "framework `default` is given twice (at \"default\")"),
            (r#"[1]"#, "expected a JSON object of frameworks"),
            (r#"{"tf": {"#, "not valid JSON at line 1"),
            (r#"{"tf": {"tpu/0": 1}}"#, "unknown key `tpu/0`"),
        ];
        for (json, words) in table {
            let e = requests_from_json(json).expect_err(json);
            assert!(e.contains(words), "{json}: {e}");
        }
    }
}
