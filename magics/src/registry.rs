//! The registry table: every magic's name, kind, summary and argument grammar, in one place.

use crate::call::{CacheCall, Call, CellCall, EnvCall, ExperimentCall, JobsCall, LineCall, LoggerCall, Preload, Query, RepoCall, SlurmCall, SlurmSetting};
use crate::args::{is_ident, keep_list, option_token, positional_token, ArgError, Args};
use crate::tokens::Token;
pub use dryml::units::parse_seconds;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MagicKind {
    /// `%name args`: applies to the rest of the cell.
    Line,
    /// `%%name args`: the whole cell is its body.
    Cell,
}

impl MagicKind {
    pub fn prefix(self) -> &'static str {
        match self {
            MagicKind::Line => "%",
            MagicKind::Cell => "%%",
        }
    }
    pub(crate) fn word(self) -> &'static str {
        match self {
            MagicKind::Line => "line",
            MagicKind::Cell => "cell",
        }
    }
}

/// One element of a magic's argument grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSpec {
    /// `--long` or `-s`, no value.
    Flag { long: &'static str, short: Option<char>, help: &'static str },
    /// `--long VALUE` or `--long=VALUE`.
    Opt { long: &'static str, value: &'static str, help: &'static str },
    /// A positional argument; `many` takes all the rest.
    Pos { name: &'static str, required: bool, many: bool, help: &'static str },
}

/// Reads a magic's arguments, already checked against its grammar, into its typed call, with
/// the checks the grammar cannot say.
pub type Parse = fn(&Args, &[Token]) -> Result<Call, ArgError>;

#[derive(Debug)]
pub struct MagicSpec {
    pub name: &'static str,
    pub kind: MagicKind,
    pub summary: &'static str,
    pub usage: &'static str,
    pub details: &'static str,
    pub args: &'static [ArgSpec],
    pub parse: Parse,
}

/// Magics are identified by name and kind; the registry holds each once.
impl PartialEq for MagicSpec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.kind == other.kind
    }
}
impl Eq for MagicSpec {}

impl MagicSpec {
    pub fn display_name(&self) -> String {
        format!("{}{}", self.kind.prefix(), self.name)
    }

    /// The `%name?` help text.
    pub fn help_text(&self) -> String {
        let mut out = format!(
            "{}: {}\n\nUsage: {}\n",
            self.display_name(),
            self.summary,
            self.usage
        );
        if !self.args.is_empty() {
            out.push_str("\nArguments:\n");
            for a in self.args {
                let (left, help) = match a {
                    ArgSpec::Flag { long, short, help } => (
                        match short {
                            Some(s) => format!("-{s}, --{long}"),
                            None => format!("--{long}"),
                        },
                        help,
                    ),
                    ArgSpec::Opt { long, value, help } => (format!("--{long} {value}"), help),
                    ArgSpec::Pos { name, help, .. } => (name.to_string(), help),
                };
                out.push_str(&format!("  {left:<20} {help}\n"));
            }
        }
        if !self.details.is_empty() {
            out.push('\n');
            out.push_str(self.details);
            out.push('\n');
        }
        out
    }

    /// Checks tokens against the grammar. Errors carry the index of the offending token.
    pub(crate) fn validate(&self, tokens: &[Token], raw: &str) -> Result<(Args, Call), ArgError> {
        let mut args = Args { raw: raw.trim().to_string(), raw_line: raw.to_string(), ..Args::default() };
        let positional: Vec<&ArgSpec> = self
            .args
            .iter()
            .filter(|a| matches!(a, ArgSpec::Pos { .. }))
            .collect();
        let takes_many = positional
            .iter()
            .any(|a| matches!(a, ArgSpec::Pos { many: true, .. }));
        let mut i = 0;
        let mut only_positional = false;
        while i < tokens.len() {
            let tok = &tokens[i];
            let text = tok.text.as_str();
            if !only_positional && !tok.quoted && text == "--" {
                only_positional = true;
            } else if !only_positional && !tok.quoted && text.starts_with("--") {
                let (name, inline) = match text[2..].split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (&text[2..], None),
                };
                match self.find_long(name) {
                    Some(ArgSpec::Flag { long, .. }) => {
                        if inline.is_some() {
                            return Err((format!("flag --{long} takes no value"), Some(i)));
                        }
                        args.options.insert(long.to_string(), None);
                    }
                    Some(ArgSpec::Opt { long, value, .. }) => {
                        let v = match inline {
                            Some(v) => v,
                            None => {
                                i += 1;
                                match tokens.get(i) {
                                    Some(t) => t.text.clone(),
                                    None => {
                                        return Err((
                                            format!("option --{long} needs a value {value}"),
                                            Some(i - 1),
                                        ))
                                    }
                                }
                            }
                        };
                        args.options.insert(long.to_string(), Some(v));
                    }
                    _ => return Err((self.unknown_option(text), Some(i))),
                }
            } else if !only_positional
                && !tok.quoted
                && text.len() == 2
                && text.starts_with('-')
                && text.as_bytes()[1].is_ascii_alphabetic()
            {
                let c = text.as_bytes()[1] as char;
                match self.args.iter().find(
                    |a| matches!(a, ArgSpec::Flag { short: Some(s), .. } if *s == c),
                ) {
                    Some(ArgSpec::Flag { long, .. }) => {
                        args.options.insert(long.to_string(), None);
                    }
                    _ => return Err((self.unknown_option(text), Some(i))),
                }
            } else {
                if args.positionals.len() >= positional.len() && !takes_many {
                    return Err((
                        if positional.is_empty() {
                            format!("takes no arguments, got `{text}`")
                        } else {
                            format!("unexpected argument `{text}`")
                        },
                        Some(i),
                    ));
                }
                args.positionals.push(tok.text.clone());
            }
            i += 1;
        }
        for (idx, p) in positional.iter().enumerate() {
            if let ArgSpec::Pos { name, required: true, .. } = p {
                if args.positionals.len() <= idx {
                    return Err((format!("missing required argument {name}"), None));
                }
            }
        }
        let call = (self.parse)(&args, tokens)?;
        Ok((args, call))
    }

    fn find_long(&self, name: &str) -> Option<&ArgSpec> {
        self.args.iter().find(|a| match a {
            ArgSpec::Flag { long, .. } | ArgSpec::Opt { long, .. } => *long == name,
            ArgSpec::Pos { .. } => false,
        })
    }

    fn unknown_option(&self, text: &str) -> String {
        let known: Vec<String> = self
            .args
            .iter()
            .filter_map(|a| match a {
                ArgSpec::Flag { long, .. } | ArgSpec::Opt { long, .. } => Some(format!("--{long}")),
                ArgSpec::Pos { .. } => None,
            })
            .collect();
        if known.is_empty() {
            format!("unknown option `{text}` (this magic has no options)")
        } else {
            format!("unknown option `{text}` (known: {})", known.join(", "))
        }
    }
}

fn env_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
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
    let valid_name = |n: &str| {
        !n.is_empty() && !n.contains('=') && !n.contains('\0') && !n.chars().any(char::is_whitespace)
    };
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
        _ => Err((
            "expected at most NAME and VALUE; quote a value with spaces".into(),
            pos_index(2),
        )),
    }
}

const EXPERIMENT_SUBCOMMANDS: &[&str] = &["start", "keep", "data", "finish"];

fn experiment_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let Some(sub) = args.positionals.first() else {
        return Err((
            format!("expected a subcommand: {}", EXPERIMENT_SUBCOMMANDS.join(", ")),
            None,
        ));
    };
    let rest = &args.positionals[1..];
    let call = match sub.as_str() {
        "start" if rest.len() > 1 => {
            return Err(("start takes at most one NAME; quote a name with spaces".into(), positional_token(tokens, 2)))
        }
        "start" => ExperimentCall::Start { name: rest.first().cloned(), preload: preload_opt(args, tokens)? },
        "keep" if rest.is_empty() => return Err(("keep needs the NAMEs of variables to keep".into(), None)),
        "keep" => match rest.iter().position(|n| !is_ident(n)) {
            Some(k) => return Err((format!("`{}` is not a variable name", rest[k]), positional_token(tokens, k + 1))),
            None => ExperimentCall::Keep(rest.to_vec()),
        },
        _ if args.value("preload").is_some() => {
            return Err((format!("--preload goes with start, not {sub}"), option_token(tokens, "preload")))
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

fn experiment_cell_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let keep = match args.value("keep") {
        Some(v) => keep_list(v).map_err(|m| (m, option_token(tokens, "keep")))?,
        None => Vec::new(),
    };
    let preload = preload_opt(args, tokens)?;
    Ok(Call::Cell(CellCall::Experiment { name: args.positionals.first().cloned(), keep, preload }))
}

fn preload_opt(args: &Args, tokens: &[Token]) -> Result<Option<Preload>, ArgError> {
    match args.value("preload") {
        None => Ok(None),
        Some(v) => Preload::parse(v).map(Some).ok_or_else(|| {
            (format!("unknown framework `{v}` for --preload (known: {})", Preload::NAMES.join(", ")), option_token(tokens, "preload"))
        }),
    }
}

const REPO_SUBCOMMANDS: &[&str] = &["open", "ls", "get", "show", "rm", "load"];

fn repo_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
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
            let selector = dryml::repo::Selector::parse(&words).map_err(|(m, i)| (m, at(i + 1)))?;
            RepoCall::Get(Query::of(selector))
        }
        ("show", 1) => RepoCall::Show(rest[0].clone()),
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
            return Err((
                format!("unknown subcommand `{other}` (expected {})", REPO_SUBCOMMANDS.join(", ")),
                at(0),
            ))
        }
    };
    Ok(Call::Line(LineCall::Repo(call)))
}

const LOGGER_MODES: &[&str] = &["on", "off", "compact", "data", "reset", "plot"];

fn cell_logger_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let mode = match args.positionals.first().map(String::as_str) {
        None => return Err((format!("expected one of: {}", LOGGER_MODES.join(", ")), None)),
        Some("on") => LoggerCall::On,
        Some("off") => LoggerCall::Off,
        Some("compact") => LoggerCall::Compact,
        Some("data") => LoggerCall::Data,
        Some("reset") => LoggerCall::Reset,
        Some("plot") => LoggerCall::Plot,
        Some(m) => return Err((
            format!("unknown mode `{m}` (expected {})", LOGGER_MODES.join(", ")),
            positional_token(tokens, 0),
        )),
    };
    Ok(Call::Line(LineCall::CellLogger(mode)))
}

const CACHE_SUBCOMMANDS: &[&str] = &["gc", "clear"];

fn cache_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
    let call = match args.positionals.as_slice() {
        [] => CacheCall::Show,
        [s] if s == "gc" => CacheCall::Collect,
        [s] if s == "clear" => CacheCall::Clear,
        [s] => {
            return Err((
                format!("unknown subcommand `{s}` (expected {}, or nothing to show the cache)", CACHE_SUBCOMMANDS.join(" or ")),
                positional_token(tokens, 0),
            ))
        }
        [_, extra, ..] => return Err((format!("takes one subcommand, got also `{extra}`"), positional_token(tokens, 1))),
    };
    Ok(Call::Line(LineCall::Cache(call)))
}

fn slurm_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
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
                Some(t) => Some(parse_seconds(t).ok_or_else(|| bad("expected seconds, or a number with s, m, h or d"))?),
            }),
            "mem" => SlurmSetting::Mem(match &text {
                None => None,
                Some(t) => Some(crate::context::parse_size(t).map_err(|m| (format!("mem: {m}"), at))?),
            }),
            "shards_per_gpu" => SlurmSetting::ShardsPerGpu(match &text {
                None => None,
                Some(t) => Some(t.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| bad("expected a positive whole number"))?),
            }),
            "sbatch" => SlurmSetting::Sbatch(value.split_whitespace().map(str::to_string).collect()),
            _ => {
                let near = SlurmSetting::KEYS.iter().find(|k| strsim::levenshtein(k, key) <= 2).map(|k| format!("; did you mean `{k}`?")).unwrap_or_default();
                return Err((format!("unknown key `{key}` (keys: {}){near}", SlurmSetting::KEYS.join(", ")), at));
            }
        });
    }
    Ok(Call::Line(LineCall::Slurm(SlurmCall::Set(settings))))
}

fn jobs_parse(args: &Args, tokens: &[Token]) -> Result<Call, ArgError> {
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
        Some(other) => return Err((format!("unknown subcommand `{other}` (expected wait, result or cancel, or nothing to list the jobs)"), positional_token(tokens, 0))),
    };
    Ok(Call::Line(LineCall::Jobs(call)))
}

/// Every magic the kernel knows. `%lsmagic`, `%name?` and completion read this table only.
pub static REGISTRY: &[MagicSpec] = &[
    MagicSpec {
        name: "lsmagic",
        kind: MagicKind::Line,
        summary: "List the available magics.",
        usage: "%lsmagic",
        details: "",
        args: &[],
        parse: |_, _| Ok(Call::Line(LineCall::Lsmagic)),
    },
    MagicSpec {
        name: "time",
        kind: MagicKind::Cell,
        summary: "Run the cell and report wall, user and system time.",
        usage: "%%time",
        details: "User and system time are those of the process that runs the code (evcxr's child),\nmeasured from /proc before and after the cell; wall time includes compilation.",
        args: &[],
        parse: |_, _| Ok(Call::Cell(CellCall::Time)),
    },
    MagicSpec {
        name: "env",
        kind: MagicKind::Line,
        summary: "Show, set or unset environment variables of the process that runs cells.",
        usage: "%env | %env NAME | %env NAME=VALUE | %env NAME VALUE | %env --unset NAME...",
        details: "Settings are re-applied when the child process restarts.",
        args: &[
            ArgSpec::Flag { long: "unset", short: Some('u'), help: "remove the named variables" },
            ArgSpec::Pos { name: "NAME[=VALUE]", required: false, many: true, help: "variable to show or set" },
        ],
        parse: env_parse,
    },
    MagicSpec {
        name: "experiment",
        kind: MagicKind::Line,
        summary: "Run an experiment across cells: report its memory and delete the variables it made.",
        usage: "%experiment start [NAME] [--preload torch] | %experiment keep NAME... | %experiment data | %experiment finish",
        details: "start snapshots the notebook's variables and memory (finishing an open experiment first).\n\
keep marks variables to survive the finish. data shows the figures so far. finish deletes every\n\
variable created since the start, and every earlier one re-bound by a top-level `let` or `=`\n\
during it, except those kept; it then hands freed heap back to the system (malloc_trim) and\n\
reports consumed, peaked and reclaimed memory per device. Peaks are the kernel's own high-water\n\
mark (VmHWM), not a polling thread. Figures: `dryml::experiment::last()`.\n\
--preload torch loads libtorch (and makes the CUDA context, where there is CUDA) before the\n\
starting sample, as IPyExperimentsPytorch does: memory a framework takes once, for good, is then\n\
not reported as the experiment's. An experiment whose first cell names `tch` preloads it itself.",
        args: &[
            ArgSpec::Opt { long: "preload", value: "FRAMEWORK", help: "initialise a framework (torch) before the starting sample" },
            ArgSpec::Pos { name: "SUBCOMMAND", required: true, many: false, help: "start, keep, data or finish" },
            ArgSpec::Pos { name: "ARGS", required: false, many: true, help: "NAME for start; variable names for keep" },
        ],
        parse: experiment_parse,
    },
    MagicSpec {
        name: "experiment",
        kind: MagicKind::Cell,
        summary: "Run this cell as an experiment: report its memory and delete the variables it made.",
        usage: "%%experiment [NAME] [--keep a,b] [--preload torch]",
        details: "The experiment starts before the cell and finishes after it, even when the cell fails.\n\
--preload torch: as for %experiment start (a body that names `tch` preloads it anyway).",
        args: &[
            ArgSpec::Opt { long: "preload", value: "FRAMEWORK", help: "initialise a framework (torch) before the starting sample" },
            ArgSpec::Opt { long: "keep", value: "a,b", help: "variables to keep after the finish" },
            ArgSpec::Pos { name: "NAME", required: false, many: false, help: "a name for the report" },
        ],
        parse: experiment_cell_parse,
    },
    MagicSpec {
        name: "cell_logger",
        kind: MagicKind::Line,
        summary: "Report each cell's memory and time after it runs, and keep a per-cell log.",
        usage: "%cell_logger on|off|compact|data|reset|plot",
        details: "on/compact: a report after every cell (compact: one line). off: stop. data: the log as a\n\
table (HTML and JSON). reset: empty the log. plot: memory and time per cell as an SVG chart.\n\
△Consumed is the change in the process's resident memory; △Peaked, as in IPyExperiments, is\n\
memory used during the cell beyond that: the highest usage above the start, less △Consumed.",
        args: &[ArgSpec::Pos { name: "MODE", required: true, many: false, help: "on, off, compact, data, reset or plot" }],
        parse: cell_logger_parse,
    },
    MagicSpec {
        name: "context",
        kind: MagicKind::Line,
        summary: "Show, set or check the compute context of the notebook's process (DRYML's set_context).",
        usage: "%context | %context REQS | %context --restart REQS | %context check REQS",
        details: "REQS: framework names, each followed by key=value pairs, e.g. `tf gpu/0=0.5 torch num_gpus=0`,\n\
or the JSON form `{\"tf\": {\"gpu/0\": 0.5}}`. Keys: num_cpus and num_gpus (whole numbers, -1 for all\n\
that remain fully free), cpu/<i> and gpu/<i> (a share in (0, 1]). A framework naming no CPU gets one.\n\
Alone: the context and the pool (who holds what). REQS: claims the devices for this process, once;\n\
--restart: restarts the process (variables are lost) with the new context. check: fails with\n\
NoContextError or ContextIncompatibilityError unless the context satisfies REQS.",
        args: &[
            ArgSpec::Flag { long: "restart", short: None, help: "restart the process with this context (variables are lost)" },
            ArgSpec::Pos { name: "[check] REQS", required: false, many: true, help: "the resource requests" },
        ],
        parse: |a, t| crate::context::context_command(a, t).map(|c| Call::Line(LineCall::Context(c))),
    },
    MagicSpec {
        name: "repo",
        kind: MagicKind::Line,
        summary: "Open a dryml object repo and list, query, show, delete or load its objects.",
        usage: "%repo open DIR [--create] | %repo ls | %repo get TYPE [key=value ...] | %repo show ID | %repo rm ID | %repo load ID as VAR",
        details: "get: TYPE is a registered type name (or * for any); key=value pairs match named arguments as a\n\
subset (dotted keys reach nested ones: data.name=mnist), 0=..., 1=... positional ones. Values are\n\
JSON where they parse as JSON, else strings. ls and get read only the index, never object files.\n\
load builds the object in the notebook as VAR (a Box<dyn dryml::Object>; downcast_ref::<T>()).",
        args: &[
            ArgSpec::Flag { long: "create", short: None, help: "with open: make the repo if it does not exist" },
            ArgSpec::Pos { name: "SUBCOMMAND", required: false, many: false, help: "open, ls, get, show, rm or load" },
            ArgSpec::Pos { name: "ARGS", required: false, many: true, help: "the subcommand's arguments" },
        ],
        parse: repo_parse,
    },
    MagicSpec {
        name: "cache",
        kind: MagicKind::Line,
        summary: "Show, collect or clear the machine's build cache (dryml, tch and :dep crates, built once).",
        usage: "%cache | %cache gc | %cache clear",
        details: "Every kernel of this user builds in one cargo build directory per toolchain and libtorch\n\
($DRYML_BUILD_CACHE, default ~/.cache/dryml-rust/build; `off` for a private one per kernel), so a\n\
crate is compiled once per machine. Cargo decides what is fresh. The size bound\n\
($DRYML_BUILD_CACHE_LIMIT, default 10G) is kept at each kernel start by evicting what was used\n\
least recently, never what a build holds or what was used in the last hour. gc: do that now.\n\
clear: empty the cache (waits for builds in other kernels; the next build of each crate is cold).",
        args: &[ArgSpec::Pos { name: "SUBCOMMAND", required: false, many: true, help: "gc or clear" }],
        parse: cache_parse,
    },
    MagicSpec {
        name: "compute",
        kind: MagicKind::Cell,
        summary: "Run the cell in a sandbox process holding the requested context (DRYML's compute_context).",
        usage: "%%compute [REQS] [--update a,b] [--timeout S] [--mem-limit SIZE] [--verbose] [--use-existing] [--dont-create] [--on slurm [--detach] [--partition P] [--account A] [--qos Q] [--sbatch \"OPTS\"]]",
        details: "The sandbox is a fork of the notebook's process: it starts with copies of every variable, of any\n\
type, and nothing it does changes the notebook except the --update variables, which come back\n\
(their types must implement serde's Serialize and Deserialize). Its memory, CPUs and GPUs are\n\
released when it ends; the line after the output shows its time, peak memory and what it held.\n\
REQS default to `default` (one CPU). SIZE: bytes, or with K, M, G (powers of 1024).\n\
--on slurm: the cell runs on a Slurm node as a program of its own, built from the notebook's items\n\
(functions, types, `use`s) and the body with the notebook's :dep crates. The variables the body names\n\
travel to it as MessagePack (their types must implement Serialize and Deserialize), --update ones\n\
come back. num_cpus is --cpus-per-task, num_gpus --gres=gpu:N, GPU shares --gres=shard:N,\n\
--mem-limit --mem, --timeout --time. The job's directory (see %slurm) keeps the program, its batch\n\
script, the inputs, the output and the result. Interrupt cancels the job. --detach submits and\n\
returns at once; %jobs follows it, also from a new kernel.",
        args: &[
            ArgSpec::Opt { long: "update", value: "a,b", help: "variables to bring back from the sandbox" },
            ArgSpec::Opt { long: "timeout", value: "S", help: "stop the sandbox after S seconds" },
            ArgSpec::Opt { long: "mem-limit", value: "SIZE", help: "stop the sandbox when it holds SIZE beyond the notebook's memory" },
            ArgSpec::Flag { long: "verbose", short: Some('v'), help: "print the context, environment and CPU pinning the sandbox got" },
            ArgSpec::Flag { long: "use-existing", short: None, help: "run in the notebook's process if its context satisfies REQS (WrongContextError if not)" },
            ArgSpec::Flag { long: "dont-create", short: None, help: "never start a sandbox (NoContextError without a context)" },
            ArgSpec::Opt { long: "on", value: "WHERE", help: "local (a sandbox, the default) or slurm (a Slurm job)" },
            ArgSpec::Flag { long: "detach", short: None, help: "with --on slurm: submit and return at once" },
            ArgSpec::Opt { long: "partition", value: "P", help: "with --on slurm: the partition" },
            ArgSpec::Opt { long: "account", value: "A", help: "with --on slurm: the account" },
            ArgSpec::Opt { long: "qos", value: "Q", help: "with --on slurm: the QOS" },
            ArgSpec::Opt { long: "sbatch", value: "OPTS", help: "with --on slurm: more sbatch options, quoted" },
            ArgSpec::Pos { name: "REQS", required: false, many: true, help: "the resource requests" },
        ],
        parse: |a, t| crate::context::compute_options(a, t).map(|o| Call::Cell(CellCall::Compute(o))),
    },
    MagicSpec {
        name: "sweep",
        kind: MagicKind::Cell,
        summary: "Train every definition in DEFS (sandboxes here, or a Slurm job array) and add each trained object to a repo.",
        usage: "%%sweep DEFS --repo DIR [REQS] [--on slurm [--detach] [--timeout S] [--mem-limit SIZE] [--partition P] [--account A] [--qos Q] [--sbatch \"OPTS\"]]",
        details: "DEFS names a notebook variable holding a Vec<ObjectDef>; the cell is a closure that trains one\n\
object and returns its metrics, its parameter typed: `|m: &mut Mlp| { ...; loss }`. Each definition\n\
is built, moved into compute (Build::load_compute), trained, moved back (save_compute) and added to the\n\
repo with its metrics. Here: sandboxes holding REQS, as many at once as the pool allows. --on slurm:\n\
one task of a job array per definition, built as %%compute --on slurm builds; each task adds its own\n\
object, so a notebook that dies loses nothing, and `%jobs wait ID` follows the sweep from a new kernel.",
        args: &[
            ArgSpec::Opt { long: "repo", value: "DIR", help: "the repo the trained objects go to (made if missing)" },
            ArgSpec::Opt { long: "on", value: "WHERE", help: "local (sandboxes, the default) or slurm (a job array)" },
            ArgSpec::Flag { long: "detach", short: None, help: "with --on slurm: submit and return at once" },
            ArgSpec::Opt { long: "timeout", value: "S", help: "with --on slurm: each task's --time" },
            ArgSpec::Opt { long: "mem-limit", value: "SIZE", help: "with --on slurm: each task's --mem" },
            ArgSpec::Opt { long: "partition", value: "P", help: "with --on slurm: the partition" },
            ArgSpec::Opt { long: "account", value: "A", help: "with --on slurm: the account" },
            ArgSpec::Opt { long: "qos", value: "Q", help: "with --on slurm: the QOS" },
            ArgSpec::Opt { long: "sbatch", value: "OPTS", help: "with --on slurm: more sbatch options, quoted" },
            ArgSpec::Pos { name: "DEFS", required: true, many: false, help: "the variable holding the definitions" },
            ArgSpec::Pos { name: "REQS", required: false, many: true, help: "each task's resource requests" },
        ],
        parse: |a, t| crate::context::sweep_options(a, t).map(|o| Call::Cell(CellCall::Sweep(o))),
    },
    MagicSpec {
        name: "slurm",
        kind: MagicKind::Line,
        summary: "Show or set where and how Slurm jobs go (`%%compute --on slurm`, `%%sweep`, `Compute::on(Slurm)`).",
        usage: "%slurm | %slurm key=value ...",
        details: "Keys: dir (the jobs' directory, shared with the nodes; default ~/dryml-jobs, or $DRYML_SLURM_DIR),\n\
partition, account, qos, time (the default --time, in seconds or as 1h, 30m), mem (the default --mem,\n\
as 4G), shards_per_gpu (the cluster's shards per GPU, for GPU shares; read from the cluster when\n\
unset), sbatch (more options, quoted). Each starts from $DRYML_SLURM_<KEY>; an empty value goes back\n\
to it. The settings are set as those variables in the notebook's process, so code\n\
(`dryml::slurm::Settings::from_env()`, `Compute::on(Slurm)`) uses them too. `%slurm` alone shows the\n\
settings and whether the cluster answers.",
        args: &[ArgSpec::Pos { name: "SETTINGS", required: false, many: true, help: "key=value pairs" }],
        parse: slurm_parse,
    },
    MagicSpec {
        name: "jobs",
        kind: MagicKind::Line,
        summary: "List this notebook's Slurm jobs, follow one, fetch its results or cancel it.",
        usage: "%jobs | %jobs wait ID | %jobs result ID [as VAR] | %jobs cancel ID",
        details: "The jobs are read from their directories (see %slurm), so a new kernel finds the jobs an old one\n\
submitted. wait: the job's output from its start and its value. result: also its --update variables,\n\
under their own names, or as VAR when it has one.",
        args: &[
            ArgSpec::Pos { name: "SUBCOMMAND", required: false, many: false, help: "wait, result or cancel" },
            ArgSpec::Pos { name: "ARGS", required: false, many: true, help: "the job id (and `as VAR`)" },
        ],
        parse: jobs_parse,
    },
];
