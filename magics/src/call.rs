//! What each magic was asked to do, as typed values. The registry's parsers build these once,
//! from the checked arguments; the kernel runs them without reading the arguments again, and
//! matches them exhaustively, so no arm silently stands for a subcommand.

use crate::compute_args::{ComputeOptions, ContextCommand, SweepOptions};
use serde_json::{Map, Value};

/// A line magic's or a cell magic's call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Line(LineCall),
    Cell(CellCall),
}

/// `%name ...`
#[derive(Debug, Clone, PartialEq)]
pub enum LineCall {
    Lsmagic,
    Env(EnvCall),
    Experiment(ExperimentCall),
    CellLogger(LoggerCall),
    Context(ContextCommand),
    Repo(RepoCall),
    Cache(CacheCall),
    Slurm(SlurmCall),
    Jobs(JobsCall),
    /// `%cd [DIR]`: None is the home directory, `-` the one before.
    Cd(Option<String>),
    Pwd,
    /// `%load PATH`: the file's text as the cell's next input.
    Load(String),
    /// `%timeit` runs where it stands in the body (`parse_cell` leaves it there); this is its
    /// row's call, for `%timeit?`.
    Timeit,
}

/// `%%name ...`: the magic wraps the cell's body.
#[derive(Debug, Clone, PartialEq)]
pub enum CellCall {
    Time,
    /// `%%parameters`: papermill's injected values, typed as the notebook declared them.
    Parameters,
    Experiment {
        name: Option<String>,
        keep: Vec<String>,
        preload: Option<Preload>,
        tensorboard: Option<String>,
        /// `--mlflow URI`: the MLflow server its run (and each network's, nested) goes to.
        mlflow: Option<String>,
    },
    Compute(ComputeOptions),
    Sweep(Box<SweepOptions>),
    /// `%%bash`, `%%sh`: the body is a script for the shell.
    Script {
        shell: Shell,
        /// `--raise-error`: a failing script ends the cell as an error.
        raise_error: bool,
    },
    /// `%%writefile [-a] PATH`: the body is the file's text.
    WriteFile {
        append: bool,
        path: String,
    },
    Timeit(crate::timeit::TimeitOptions),
}

impl CellCall {
    /// Whether the body is Rust (with `!` and `%timeit` lines), not text of another kind.
    pub fn takes_rust(&self) -> bool {
        !matches!(self, CellCall::Script { .. } | CellCall::WriteFile { .. } | CellCall::Parameters)
    }
}

/// The program a `%%bash` or `%%sh` cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Sh,
}

impl Shell {
    pub fn program(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Sh => "sh",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvCall {
    /// All variables, or one.
    Show(Option<String>),
    Set {
        name: String,
        value: String,
    },
    Unset(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExperimentCall {
    /// `tensorboard`: the directory every network trained during it writes its TensorBoard
    /// run to, and the experiment its figures.
    Start {
        name: Option<String>,
        preload: Option<Preload>,
        tensorboard: Option<String>,
        mlflow: Option<String>,
    },
    Keep(Vec<String>),
    Data,
    Finish,
}

/// A framework an experiment initialises before its starting sample (`--preload`), so the
/// memory its first use takes for good (libtorch, a CUDA context) is not reported as a leak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preload {
    Torch,
}

impl Preload {
    pub const NAMES: &'static [&'static str] = &["torch"];

    pub fn parse(s: &str) -> Option<Preload> {
        match s {
            "torch" | "tch" | "pytorch" => Some(Preload::Torch),
            _ => None,
        }
    }
}

/// `%cache`: the machine's build cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheCall {
    Show,
    /// Evict least recently used entries down to the bound now.
    Collect,
    Clear,
}

/// `%slurm`: where and how `%%compute --on slurm` jobs go.
#[derive(Debug, Clone, PartialEq)]
pub enum SlurmCall {
    Show,
    /// `key=value` settings; an empty value goes back to the default.
    Set(Vec<SlurmSetting>),
}

/// One `%slurm key=value`.
#[derive(Debug, Clone, PartialEq)]
pub enum SlurmSetting {
    /// The directory jobs are written to (shared with the nodes).
    Dir(Option<String>),
    Partition(Option<String>),
    Account(Option<String>),
    Qos(Option<String>),
    /// The default `--time`, in seconds.
    Time(Option<f64>),
    /// The default `--mem`, in bytes.
    Mem(Option<u64>),
    /// Shards per GPU (the cluster's `gres.conf`), for GPU shares.
    ShardsPerGpu(Option<u32>),
    /// Options passed to `sbatch` as they are.
    Sbatch(Vec<String>),
}

impl SlurmSetting {
    pub const KEYS: &'static [&'static str] =
        &["dir", "partition", "account", "qos", "time", "mem", "shards_per_gpu", "sbatch"];
}

/// `%jobs`: the notebook's Slurm jobs.
#[derive(Debug, Clone, PartialEq)]
pub enum JobsCall {
    List,
    /// Follow a job to its end (its output from the start), showing its value.
    Wait(u64),
    /// Wait, then bring its `--update` variables into the notebook (one of them as VAR).
    Result {
        id: u64,
        var: Option<String>,
    },
    Cancel(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggerCall {
    On,
    Compact,
    Off,
    Data,
    Reset,
    Plot,
}

impl ExperimentCall {
    /// The subcommand as written.
    pub fn name(&self) -> &'static str {
        match self {
            ExperimentCall::Start { .. } => "start",
            ExperimentCall::Keep(_) => "keep",
            ExperimentCall::Data => "data",
            ExperimentCall::Finish => "finish",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum RepoCall {
    Open {
        dir: String,
        create: bool,
    },
    Ls,
    Get(Query),
    Show(String),
    /// Two objects side by side: what differs in their arguments, metrics and provenance.
    Diff(String, String),
    Rm(String),
    Load {
        id: String,
        var: String,
    },
}

impl RepoCall {
    /// The subcommand as written.
    pub fn name(&self) -> &'static str {
        match self {
            RepoCall::Open { .. } => "open",
            RepoCall::Ls => "ls",
            RepoCall::Get(_) => "get",
            RepoCall::Show(_) => "show",
            RepoCall::Diff(..) => "diff",
            RepoCall::Rm(_) => "rm",
            RepoCall::Load { .. } => "load",
        }
    }
}

/// A `%repo get` query: what a `dryml::Selector` matches on, read from `TYPE key=value ...`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query {
    pub type_name: Option<String>,
    pub args: Option<Vec<Value>>,
    pub kwargs: Option<Map<String, Value>>,
}

impl Query {
    pub(crate) fn of(s: dryml::objects::Selector) -> Query {
        Query { type_name: s.type_name, args: s.args, kwargs: s.kwargs }
    }

    pub fn selector(&self) -> dryml::objects::Selector {
        let mut s = dryml::objects::Selector::any();
        s.type_name = self.type_name.clone();
        s.args = self.args.clone();
        s.kwargs = self.kwargs.clone();
        s
    }
}
