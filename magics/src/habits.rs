//! The registry's rows for IPython's notebook habits: `%cd`, `%pwd`, `%load`, `%timeit`,
//! `%%bash`, `%%sh`, `%%writefile`, `%%timeit`, with their parsers. `!cmd` lines and `%timeit`
//! lines in a body are `body.rs`'s.

use crate::args::{ArgError, Args};
use crate::call::{Call, CellCall, LineCall, Shell};
use crate::registry::{ArgSpec, MagicKind, MagicSpec};
use crate::timeit::timeit_options;
use crate::tokens::Token;

const TIMEIT_DETAILS: &str = "The code is built once with the cell, at the notebook's optimisation\n\
level (1 unless `:opt` says otherwise), outside the timing. With no -n, the loop count grows 1,\n\
10, 100, ... until one run takes 0.2 s; then 7 runs (-r) of that many loops, and the mean and\n\
standard deviation per loop are printed as IPython prints them. Each call's value goes through\n\
`std::hint::black_box`, and the closure is reached through it each loop, so the optimiser can\n\
neither drop the work nor hoist it out of the loop. -o: the `dryml::timeit::TimeitResult` is\n\
the value (`let r = %timeit -o f(x);` keeps it).";

/// IPython's notebook habits.
pub static ROWS: &[MagicSpec] = &[
    MagicSpec {
        name: "cd",
        kind: MagicKind::Line,
        summary: "Change the working directory of cells, `!` lines and relative paths.",
        usage: "%cd [DIR | -]",
        details: "No DIR: the home directory. `-`: the directory before the last %cd. The kernel's own files\n\
never depend on it; a restarted process starts in it again.",
        args: &[ArgSpec::Pos { name: "DIR", required: false, many: false, help: "the new working directory" }],
        parse: |a: &Args, _: &[Token]| Ok(Call::Line(LineCall::Cd(a.positionals.first().cloned()))),
    },
    MagicSpec {
        name: "pwd",
        kind: MagicKind::Line,
        summary: "Show the working directory of cells.",
        usage: "%pwd",
        details: "",
        args: &[],
        parse: |_, _| Ok(Call::Line(LineCall::Pwd)),
    },
    MagicSpec {
        name: "load",
        kind: MagicKind::Line,
        summary: "Put a file's text into the cell, to edit and run.",
        usage: "%load PATH",
        details: "The front end replaces this cell's input with `// %load PATH` and the file's text\n\
(IPython's `set_next_input` payload). Clients that ignore payloads (nbconvert, papermill) leave\n\
the cell as it was.",
        args: &[ArgSpec::Pos {
            name: "PATH",
            required: true,
            many: false,
            help: "the file, relative to the working directory",
        }],
        parse: |a: &Args, _: &[Token]| Ok(Call::Line(LineCall::Load(a.positionals[0].clone()))),
    },
    MagicSpec {
        name: "timeit",
        kind: MagicKind::Line,
        summary: "Time a Rust expression: built once and optimised, run adaptively, IPython's line.",
        usage: "%timeit [-n N] [-r R] [-o] [-q] [-p P] EXPR",
        details: TIMEIT_DETAILS,
        args: &[ArgSpec::Raw {
            name: "[-n N] [-r R] [-o] [-q] [-p P] EXPR",
            help: "loops per run, runs, the result as a value, quiet, digits; the code",
        }],
        parse: |_, _| Ok(Call::Line(LineCall::Timeit)),
    },
    MagicSpec {
        name: "bash",
        kind: MagicKind::Cell,
        summary: "Run the cell as a bash script; output streams, interrupt stops it.",
        usage: "%%bash [--raise-error]",
        details: SCRIPT_DETAILS,
        args: &[ArgSpec::Flag { long: "raise-error", short: None, help: "a failing script ends the cell as an error" }],
        parse: |a: &Args, _: &[Token]| script(a, Shell::Bash),
    },
    MagicSpec {
        name: "sh",
        kind: MagicKind::Cell,
        summary: "Run the cell as an sh script; output streams, interrupt stops it.",
        usage: "%%sh [--raise-error]",
        details: SCRIPT_DETAILS,
        args: &[ArgSpec::Flag { long: "raise-error", short: None, help: "a failing script ends the cell as an error" }],
        parse: |a: &Args, _: &[Token]| script(a, Shell::Sh),
    },
    MagicSpec {
        name: "writefile",
        kind: MagicKind::Cell,
        summary: "Write the cell's text to a file (atomically), or append it with -a.",
        usage: "%%writefile [-a] PATH",
        details: "PATH is relative to the working directory (%cd). The file is written whole or not at all: a\n\
temporary file beside it, renamed over it.",
        args: &[
            ArgSpec::Flag { long: "append", short: Some('a'), help: "append to the file instead of replacing it" },
            ArgSpec::Pos { name: "PATH", required: true, many: false, help: "the file" },
        ],
        parse: |a: &Args, _: &[Token]| {
            Ok(Call::Cell(CellCall::WriteFile { append: a.flag("append"), path: a.positionals[0].clone() }))
        },
    },
    MagicSpec {
        name: "timeit",
        kind: MagicKind::Cell,
        summary: "Time the cell's Rust: built once and optimised, run adaptively, IPython's line.",
        usage: "%%timeit [-n N] [-r R] [-o] [-q] [-p P]",
        details: TIMEIT_DETAILS,
        args: &[ArgSpec::Raw {
            name: "[-n N] [-r R] [-o] [-q] [-p P]",
            help: "loops per run, runs, the result as a value, quiet, digits",
        }],
        parse: |a: &Args, _: &[Token]| {
            let (opts, rest) = timeit_options(&a.raw).map_err(|m| (m, None))?;
            if !rest.trim().is_empty() {
                return Err((format!("unexpected `{}`: the code to time is the cell's body", rest.trim()), None));
            }
            Ok(Call::Cell(CellCall::Timeit(opts)))
        },
    },
];

const SCRIPT_DETAILS: &str =
    "The script runs in the cell's process's working directory (%cd) and environment (%env), in a\n\
process group of its own, which interrupt stops. A failing script prints its exit status; with\n\
--raise-error the cell ends as CalledProcessError.";

fn script(a: &Args, shell: Shell) -> Result<Call, ArgError> {
    Ok(Call::Cell(CellCall::Script { shell, raise_error: a.flag("raise-error") }))
}
