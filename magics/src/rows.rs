//! The registry's rows for the magics of the three tools and the kernel's own (`habits.rs` has
//! IPython's notebook habits): name, kind, summary, help and argument grammar, each naming its
//! parser ([`crate::parsers`]).

use crate::call::{Call, CellCall, LineCall};
use crate::parsers::{
    cache_parse, cell_logger_parse, env_parse, experiment_cell_parse, experiment_parse, jobs_parse, repo_parse,
    slurm_parse,
};
use crate::registry::{ArgSpec, MagicKind, MagicSpec};

/// The magics of the three tools and the kernel's own.
pub static ROWS: &[MagicSpec] = &[
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
        name: "parameters",
        kind: MagicKind::Cell,
        summary: "Set parameters (papermill's injected cell), typed as the notebook declares them.",
        usage: "%%parameters\nNAME = JSON\n...",
        details: "Each line `NAME = VALUE` (VALUE in JSON) becomes `let NAME: T = ...;`, where T is the\ntype of the notebook's variable NAME (its `parameters` cell's `let`): integers, floats,\nbool, String, &str, Vec, Option, HashMap/BTreeMap with String keys, serde_json::Value.\nA name not declared takes the value's own type (i64, f64, bool, String, Vec). A value\nthat does not fit its type is an error naming the parameter. `papermill -k dryml-rust`\nwrites this cell (kernelspec/papermill).",
        args: &[],
        parse: |_, _| Ok(Call::Cell(CellCall::Parameters)),
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
        usage: "%experiment start [NAME] [--preload torch] [--tensorboard DIR] [--mlflow URI] | %experiment keep NAME... | %experiment data | %experiment finish",
        details: "start snapshots the notebook's variables and memory (finishing an open experiment first).\n\
keep marks variables to survive the finish. data shows the figures so far. finish deletes every\n\
variable created since the start, and every earlier one re-bound by a top-level `let` or `=`\n\
during it, except those kept; it then hands freed heap back to the system (malloc_trim) and\n\
reports consumed, peaked and reclaimed memory per device. Peaks are the kernel's own high-water\n\
mark (VmHWM), not a polling thread. Figures: `dryml::experiment::last()`.\n\
--preload torch loads libtorch (and makes the CUDA context, where there is CUDA) before the\n\
starting sample, as IPyExperimentsPytorch does: memory a framework takes once, for good, is then\n\
not reported as the experiment's. An experiment whose first cell names `tch` preloads it itself.\n\
--tensorboard DIR: until the finish, every network trained (in the notebook, a sandbox or a\n\
sweep) writes its TensorBoard run to DIR/<object id> (losses, weight histograms, definition);\n\
the finish writes the experiment's memory figures and report to DIR/<NAME>.\n\
--mlflow URI: the experiment is a run in the MLflow experiment NAME on that server (its memory\n\
figures, time and provenance); each network trained until the finish is a run nested in it (the\n\
definition, the loss per epoch, the provenance, the model). Calls wait in a queue while the server\n\
is down and go when it answers.",
        args: &[
            ArgSpec::Opt { long: "preload", value: "FRAMEWORK", help: "initialise a framework (torch) before the starting sample" },
            ArgSpec::Opt { long: "tensorboard", value: "DIR", help: "write every network's TensorBoard run, and the experiment's, to DIR" },
            ArgSpec::Opt { long: "mlflow", value: "URI", help: "log the experiment as a run on this MLflow server, each network trained as a run inside it" },
            ArgSpec::Pos { name: "SUBCOMMAND", required: true, many: false, help: "start, keep, data or finish" },
            ArgSpec::Pos { name: "ARGS", required: false, many: true, help: "NAME for start; variable names for keep" },
        ],
        parse: experiment_parse,
    },
    MagicSpec {
        name: "experiment",
        kind: MagicKind::Cell,
        summary: "Run this cell as an experiment: report its memory and delete the variables it made.",
        usage: "%%experiment [NAME] [--keep a,b] [--preload torch] [--tensorboard DIR] [--mlflow URI]",
        details: "The experiment starts before the cell and finishes after it, even when the cell fails.\n\
--preload torch: as for %experiment start (a body that names `tch` preloads it anyway).\n\
--tensorboard DIR: as for %experiment start, for the networks this cell trains.\n\
--mlflow URI: as for %experiment start: the cell is a run in the MLflow experiment NAME.",
        args: &[
            ArgSpec::Opt { long: "preload", value: "FRAMEWORK", help: "initialise a framework (torch) before the starting sample" },
            ArgSpec::Opt { long: "tensorboard", value: "DIR", help: "write every network's TensorBoard run, and the experiment's, to DIR" },
            ArgSpec::Opt { long: "mlflow", value: "URI", help: "log the experiment as a run on this MLflow server, each network trained as a run inside it" },
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
        parse: |a, t| crate::compute_args::context_command(a, t).map(|c| Call::Line(LineCall::Context(c))),
    },
    MagicSpec {
        name: "repo",
        kind: MagicKind::Line,
        summary: "Open a dryml object repo and list, query, show, compare, delete or load its objects.",
        usage: "%repo open DIR [--create] | %repo ls | %repo get TYPE [key=value ...] | %repo show ID | %repo diff A B | %repo rm ID | %repo load ID as VAR",
        details: "get: TYPE is a registered type name (or * for any); key=value pairs match named arguments as a\n\
subset (dotted keys reach nested ones: data.name=mnist), 0=..., 1=... positional ones. Values are\n\
JSON where they parse as JSON, else strings. ls and get read only the index, never object files.\n\
show prints how the object was made (git, cells, crates, toolchain, GPUs: its provenance); diff sets\n\
two objects' arguments, metrics and provenance side by side, the lines that differ.\n\
load builds the object in the notebook as VAR (a Box<dyn dryml::Object>; downcast_ref::<T>()).",
        args: &[
            ArgSpec::Flag { long: "create", short: None, help: "with open: make the repo if it does not exist" },
            ArgSpec::Pos { name: "SUBCOMMAND", required: false, many: false, help: "open, ls, get, show, diff, rm or load" },
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
        parse: |a, t| crate::compute_args::compute_options(a, t).map(|o| Call::Cell(CellCall::Compute(o))),
    },
    MagicSpec {
        name: "sweep",
        kind: MagicKind::Cell,
        summary: "Train every definition in DEFS (sandboxes here, or a Slurm job array) and add each trained object to a repo.",
        usage: "%%sweep DEFS --repo DIR [REQS] [--mlflow URI] [--on slurm [--detach] [--timeout S] [--mem-limit SIZE] [--partition P] [--account A] [--qos Q] [--sbatch \"OPTS\"]]",
        details: "DEFS names a notebook variable holding a Vec<ObjectDef>; the cell is a closure that trains one\n\
object and returns its metrics, its parameter typed: `|m: &mut Mlp| { ...; loss }`. Each definition\n\
is built, moved into compute (Build::load_compute), trained, moved back (save_compute) and added to the\n\
repo with its metrics. Here: sandboxes holding REQS, as many at once as the pool allows. --on slurm:\n\
one task of a job array per definition, built as %%compute --on slurm builds; each task adds its own\n\
object, so a notebook that dies loses nothing, and `%jobs wait ID` follows the sweep from a new kernel.",
        args: &[
            ArgSpec::Opt { long: "repo", value: "DIR", help: "the repo the trained objects go to (made if missing)" },
            ArgSpec::Opt { long: "mlflow", value: "URI", help: "a run on this MLflow server (experiment: the repo's folder name), a child run per definition" },
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
        parse: |a, t| crate::compute_args::sweep_options(a, t).map(|o| Call::Cell(CellCall::Sweep(Box::new(o)))),
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
(`dryml::__kernel::slurm::Settings::from_env()`, `Compute::on(Slurm)`) uses them too. `%slurm` alone shows the\n\
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
