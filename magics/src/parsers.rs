//! Each magic's parser: its checked arguments read into its typed call, with the checks its
//! grammar cannot say. The registry's rows name them.

use crate::args::{is_ident, keep_list, option_token, positional_token, ArgError, Args};
use crate::call::{
    CacheCall, Call, CellCall, EnvCall, ExperimentCall, JobsCall, LineCall, LoggerCall, Preload, Query, RepoCall,
    SlurmCall, SlurmSetting,
};
use crate::compute_args::parse_size;
use crate::tokens::Token;

pub(crate) fn env_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    env_check(args, tokens)?;
    let call = if args.flag("unset") {
        EnvCall::Unset(args.positionals.clone())
    } else {
        match args.positionals.as_slice() {
            [] => EnvCall::Show(None),
            [one] => match one.split_once('=') {
                Some((n, v)) => EnvCall::Set { name: n.into(), value: v.into() },
                None => EnvCall::Show(Some(one.clone())),
            },
            [name, value, ..] => EnvCall::Set { name: name.clone(), value: value.clone() },
        }
    };
    Ok(Call::Line(LineCall::Env(call)))
}

fn env_check(args: &Args, tokens: &[Token]) -> Result<(), ArgError> {
    let valid_name =
        |n: &str| !n.is_empty() && !n.contains('=') && !n.contains('\0') && !n.chars().any(char::is_whitespace);
    let pos_index = |k: usize| positional_token(tokens, k);
    if args.flag("unset") {
        if args.positionals.is_empty() {
            return Err(("--unset needs the NAME of a variable".into(), None));
        }
        for (k, n) in args.positionals.iter().enumerate() {
            if !valid_name(n) {
                return Err((format!("`{n}` is not a valid variable name"), pos_index(k)));
            }
        }
        return Ok(());
    }
    match args.positionals.as_slice() {
        [] => Ok(()),
        [one] => {
            let name = one.split_once('=').map(|(n, _)| n).unwrap_or(one);
            if valid_name(name) {
                Ok(())
            } else {
                Err((format!("`{name}` is not a valid variable name"), pos_index(0)))
            }
        }
        [name, _value] => {
            if valid_name(name) {
                Ok(())
            } else {
                Err((format!("`{name}` is not a valid variable name"), pos_index(0)))
            }
        }
        _ => Err(("expected at most NAME and VALUE; quote a value with spaces".into(), pos_index(2))),
    }
}

const EXPERIMENT_SUBCOMMANDS: &[&str] = &["start", "keep", "data", "finish"];

pub(crate) fn experiment_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let Some(sub) = args.positionals.first() else {
        return Err((format!("expected a subcommand: {}", EXPERIMENT_SUBCOMMANDS.join(", ")), None));
    };
    let rest = &args.positionals[1..];
    let call = match sub.as_str() {
        "start" if rest.len() > 1 => {
            return Err(("start takes at most one NAME; quote a name with spaces".into(), positional_token(tokens, 2)))
        }
        "start" => ExperimentCall::Start {
            name: rest.first().cloned(),
            preload: preload_opt(args, tokens)?,
            tensorboard: tensorboard_opt(args, tokens)?,
            mlflow: crate::compute_args::mlflow_opt(args, tokens)?,
        },
        "keep" if rest.is_empty() => return Err(("keep needs the NAMEs of variables to keep".into(), None)),
        "keep" => match rest.iter().position(|n| !is_ident(n)) {
            Some(k) => return Err((format!("`{}` is not a variable name", rest[k]), positional_token(tokens, k + 1))),
            None => ExperimentCall::Keep(rest.to_vec()),
        },
        _ if args.value("preload").is_some() => {
            return Err((format!("--preload goes with start, not {sub}"), option_token(tokens, "preload")))
        }
        _ if args.value("tensorboard").is_some() => {
            return Err((format!("--tensorboard goes with start, not {sub}"), option_token(tokens, "tensorboard")))
        }
        _ if args.value("mlflow").is_some() => {
            return Err((format!("--mlflow goes with start, not {sub}"), option_token(tokens, "mlflow")))
        }
        "data" | "finish" if !rest.is_empty() => {
            return Err((format!("{sub} takes no arguments, got `{}`", rest[0]), positional_token(tokens, 1)))
        }
        "data" => ExperimentCall::Data,
        "finish" => ExperimentCall::Finish,
        other => {
            return Err((
                format!("unknown subcommand `{other}` (expected {})", EXPERIMENT_SUBCOMMANDS.join(", ")),
                positional_token(tokens, 0),
            ))
        }
    };
    Ok(Call::Line(LineCall::Experiment(call)))
}

pub(crate) fn experiment_cell_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let keep = match args.value("keep") {
        Some(v) => keep_list(v).map_err(|m| (m, option_token(tokens, "keep")))?,
        None => Vec::new(),
    };
    let (preload, tensorboard) = (preload_opt(args, tokens)?, tensorboard_opt(args, tokens)?);
    let mlflow = crate::compute_args::mlflow_opt(args, tokens)?;
    Ok(Call::Cell(CellCall::Experiment { name: args.positionals.first().cloned(), keep, preload, tensorboard, mlflow }))
}

fn tensorboard_opt(args: &Args, tokens: &[Token]) -> Result<Option<String>, ArgError> {
    match args.value("tensorboard") {
        Some("") => Err(("--tensorboard needs a directory".into(), option_token(tokens, "tensorboard"))),
        v => Ok(v.map(str::to_string)),
    }
}

fn preload_opt(args: &Args, tokens: &[Token]) -> Result<Option<Preload>, ArgError> {
    match args.value("preload") {
        None => Ok(None),
        Some(v) => Preload::parse(v).map(Some).ok_or_else(|| {
            (
                format!("unknown framework `{v}` for --preload (known: {})", Preload::NAMES.join(", ")),
                option_token(tokens, "preload"),
            )
        }),
    }
}

const REPO_SUBCOMMANDS: &[&str] = &["open", "ls", "get", "show", "diff", "rm", "load"];

pub(crate) fn repo_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let Some(sub) = args.positionals.first() else {
        return Err((format!("expected a subcommand: {}", REPO_SUBCOMMANDS.join(", ")), None));
    };
    let rest = &args.positionals[1..];
    let at = |k: usize| positional_token(tokens, k);
    if args.flag("create") && sub != "open" {
        return Err(("--create goes with `open`".into(), tokens.iter().position(|t| t.text == "--create")));
    }
    let call = match (sub.as_str(), rest.len()) {
        ("open", 1) => RepoCall::Open { dir: rest[0].clone(), create: args.flag("create") },
        ("open", _) => return Err(("open takes one DIR; quote a path with spaces".into(), at(2))),
        ("ls", 0) => RepoCall::Ls,
        ("ls", _) => return Err((format!("ls takes no arguments, got `{}`", rest[0]), at(1))),
        ("get", 0) => {
            return Err(("get needs a TYPE (or *), then key=value pairs, as in `%repo get Mlp lr=0.1`".into(), None))
        }
        ("get", _) => {
            let words: Vec<&str> = rest.iter().map(String::as_str).collect();
            let selector = dryml::objects::Selector::parse(&words).map_err(|(m, i)| (m, at(i + 1)))?;
            RepoCall::Get(Query::of(selector))
        }
        ("show", 1) => RepoCall::Show(rest[0].clone()),
        ("diff", 2) => RepoCall::Diff(rest[0].clone(), rest[1].clone()),
        ("diff", n) => return Err(("diff takes two IDs".into(), at(3).filter(|_| n > 2))),
        ("rm", 1) => RepoCall::Rm(rest[0].clone()),
        ("show" | "rm", n) => {
            return Err((format!("{sub} takes one ID"), at(if n == 0 { 0 } else { 2 }).filter(|_| n > 0)))
        }
        ("load", 3) if rest[1] == "as" && is_ident(&rest[2]) => {
            RepoCall::Load { id: rest[0].clone(), var: rest[2].clone() }
        }
        ("load", 3) if rest[1] == "as" => return Err((format!("`{}` is not a variable name", rest[2]), at(3))),
        ("load", _) => return Err(("expected `load ID as VAR`".into(), at(1))),
        (other, _) => {
            return Err((format!("unknown subcommand `{other}` (expected {})", REPO_SUBCOMMANDS.join(", ")), at(0)))
        }
    };
    Ok(Call::Line(LineCall::Repo(call)))
}

const LOGGER_MODES: &[&str] = &["on", "off", "compact", "data", "reset", "plot"];

pub(crate) fn cell_logger_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let mode = match args.positionals.first().map(String::as_str) {
        None => return Err((format!("expected one of: {}", LOGGER_MODES.join(", ")), None)),
        Some("on") => LoggerCall::On,
        Some("off") => LoggerCall::Off,
        Some("compact") => LoggerCall::Compact,
        Some("data") => LoggerCall::Data,
        Some("reset") => LoggerCall::Reset,
        Some("plot") => LoggerCall::Plot,
        Some(m) => {
            return Err((
                format!("unknown mode `{m}` (expected {})", LOGGER_MODES.join(", ")),
                positional_token(tokens, 0),
            ))
        }
    };
    Ok(Call::Line(LineCall::CellLogger(mode)))
}

const CACHE_SUBCOMMANDS: &[&str] = &["gc", "clear"];

pub(crate) fn cache_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let call = match args.positionals.as_slice() {
        [] => CacheCall::Show,
        [s] if s == "gc" => CacheCall::Collect,
        [s] if s == "clear" => CacheCall::Clear,
        [s] => {
            return Err((
                format!(
                    "unknown subcommand `{s}` (expected {}, or nothing to show the cache)",
                    CACHE_SUBCOMMANDS.join(" or ")
                ),
                positional_token(tokens, 0),
            ))
        }
        [_, extra, ..] => {
            return Err((format!("takes one subcommand, got also `{extra}`"), positional_token(tokens, 1)))
        }
    };
    Ok(Call::Line(LineCall::Cache(call)))
}

pub(crate) fn slurm_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    if args.positionals.is_empty() {
        return Ok(Call::Line(LineCall::Slurm(SlurmCall::Show)));
    }
    let mut settings = Vec::new();
    for (k, word) in args.positionals.iter().enumerate() {
        let at = positional_token(tokens, k);
        let Some((key, value)) = word.split_once('=') else {
            return Err((format!("expected key=value, got `{word}` (keys: {})", SlurmSetting::KEYS.join(", ")), at));
        };
        let text = (!value.trim().is_empty()).then(|| value.trim().to_string());
        let bad = |what: &str| (format!("{key}: {what}, got `{value}`"), at);
        settings.push(match key {
            "dir" => SlurmSetting::Dir(text),
            "partition" => SlurmSetting::Partition(text),
            "account" => SlurmSetting::Account(text),
            "qos" => SlurmSetting::Qos(text),
            "time" => SlurmSetting::Time(match &text {
                None => None,
                Some(t) => Some(
                    dryml_sys::units::parse_seconds(t)
                        .ok_or_else(|| bad("expected seconds, or a number with s, m, h or d"))?,
                ),
            }),
            "mem" => SlurmSetting::Mem(match &text {
                None => None,
                Some(t) => Some(parse_size(t).map_err(|m| (format!("mem: {m}"), at))?),
            }),
            "shards_per_gpu" => SlurmSetting::ShardsPerGpu(match &text {
                None => None,
                Some(t) => Some(
                    t.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| bad("expected a positive whole number"))?,
                ),
            }),
            "sbatch" => SlurmSetting::Sbatch(value.split_whitespace().map(str::to_string).collect()),
            _ => {
                let near = SlurmSetting::KEYS
                    .iter()
                    .find(|k| strsim::levenshtein(k, key) <= 2)
                    .map(|k| format!("; did you mean `{k}`?"))
                    .unwrap_or_default();
                return Err((format!("unknown key `{key}` (keys: {}){near}", SlurmSetting::KEYS.join(", ")), at));
            }
        });
    }
    Ok(Call::Line(LineCall::Slurm(SlurmCall::Set(settings))))
}

pub(crate) fn jobs_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let p = &args.positionals;
    let id_at = |k: usize| -> Result<u64, ArgError> {
        let word = p.get(k).ok_or_else(|| (format!("{} needs a job ID, as in `%jobs {} 12`", p[0], p[0]), None))?;
        word.parse().map_err(|_| (format!("`{word}` is not a Slurm job ID (a number)"), positional_token(tokens, k)))
    };
    let extra = |k: usize| -> Result<(), ArgError> {
        match p.get(k) {
            Some(w) => Err((format!("unexpected `{w}`"), positional_token(tokens, k))),
            None => Ok(()),
        }
    };
    let call = match p.first().map(String::as_str) {
        None => JobsCall::List,
        Some("wait") => {
            let id = id_at(1)?;
            extra(2)?;
            JobsCall::Wait(id)
        }
        Some("cancel") => {
            let id = id_at(1)?;
            extra(2)?;
            JobsCall::Cancel(id)
        }
        Some("result") => {
            let id = id_at(1)?;
            let var = match p.get(2).map(String::as_str) {
                None => None,
                Some("as") => {
                    let v = p.get(3).ok_or_else(|| ("`as` needs a variable name".to_string(), None))?;
                    if !is_ident(v) {
                        return Err((format!("`{v}` is not a variable name"), positional_token(tokens, 3)));
                    }
                    extra(4)?;
                    Some(v.clone())
                }
                Some(w) => return Err((format!("expected `as VAR`, got `{w}`"), positional_token(tokens, 2))),
            };
            JobsCall::Result { id, var }
        }
        Some(other) => {
            return Err((
                format!("unknown subcommand `{other}` (expected wait, result or cancel, or nothing to list the jobs)"),
                positional_token(tokens, 0),
            ))
        }
    };
    Ok(Call::Line(LineCall::Jobs(call)))
}
