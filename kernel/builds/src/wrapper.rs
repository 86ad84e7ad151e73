//! The cell crate's rustc wrapper. Cargo runs the kernel's own binary as its
//! `RUSTC_WORKSPACE_WRAPPER` (the cell crate is its workspace's one member); the binary runs rustc
//! with the kernel's arguments (`args.rs`) and records the command once it built the library
//! (`record.rs`), for the next build without cargo.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Set in the builds' environment: the file the wrapper records the cell crate's command in.
pub const RECORD_ENV: &str = "DRYML_RUSTC_RECORD";
/// Set by evcxr's own rustc wrapper (its `RUSTC_WRAPPER`, this binary too, under `:cache` or
/// without static linking); cargo then runs `this this rustc ..` for the cell crate.
const EVCXR_WRAPPER_ENV: &str = "EVCXR_RUSTC_WRAPPER";
/// What evcxr sets for its own wrapper, which a command run again without cargo needs not.
const EVCXR_SO_PATH_ENV: &str = "EVCXR_EXECUTION_SO_PATH";

/// The builds' environment that makes `exe` the wrapper of the cell crate `name`, recording in
/// `record`.
pub fn build_env(exe: &Path, name: &str, record: &Path) -> [(&'static str, String); 3] {
    [
        ("RUSTC_WORKSPACE_WRAPPER", exe.display().to_string()),
        (crate::args::CRATE_NAME_ENV, name.to_owned()),
        (RECORD_ENV, record.display().to_string()),
    ]
}

/// First thing in the kernel's binary: as the cell crate's wrapper, runs rustc and exits. Returns
/// where this process is something else, evcxr's own wrapper among them.
pub fn wrapper_hook() {
    let Some(record) = std::env::var_os(RECORD_ENV) else {
        return;
    };
    let args = args_os();
    let Some(args) = args.iter().map(|a| a.to_str().map(str::to_owned)).collect::<Option<Vec<_>>>() else {
        pass_through(&args);
    };
    let outer = args.get(1).is_some_and(|first| is_this_binary(Path::new(first)));
    let cell = crate::args::names_cell_crate(&args);
    if std::env::var_os(EVCXR_WRAPPER_ENV).is_some() && (outer || !cell) {
        // evcxr's wrapper: around this one (`this this rustc`), or alone (a dependency).
        return;
    }
    if !cell {
        // A rustc cargo or a build script asked something of: nothing of ours.
        pass_through(&args_os());
    }
    let mut args = args;
    crate::args::cell_args(&mut args);
    let mut command = Command::new(&args[1]);
    command.args(&args[2..]);
    let status = match command.status() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("dryml rustc wrapper: running {}: {e}", args[1]);
            std::process::exit(1);
        }
    };
    let links = args.iter().any(|a| a.starts_with("--emit=") && a.contains("link"));
    // A failed build's command too: the cell's next try (its types fixed) runs it alone.
    if links {
        let own = [RECORD_ENV, crate::args::CRATE_NAME_ENV, EVCXR_WRAPPER_ENV, EVCXR_SO_PATH_ENV];
        crate::record::record(&command, Path::new(&record), &own);
    }
    std::process::exit(status.code().unwrap_or(1));
}

/// Whether `path` is this process's binary (whose file a rebuild may have replaced since).
fn is_this_binary(path: &Path) -> bool {
    let Ok(exe) = std::env::current_exe() else { return false };
    let exe = exe.to_string_lossy().trim_end_matches(" (deleted)").to_owned();
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    path == Path::new(&exe) || canonical(path).is_some_and(|p| Some(p) == canonical(Path::new(&exe)))
}

fn args_os() -> Vec<OsString> {
    std::env::args_os().collect()
}

/// Runs `args` (this binary's, then rustc's path and its arguments) as they are, and exits.
fn pass_through(args: &[OsString]) -> ! {
    let Some(rustc) = args.get(1) else {
        eprintln!("dryml rustc wrapper: no rustc to run");
        std::process::exit(1);
    };
    match Command::new(rustc).args(&args[2..]).status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("dryml rustc wrapper: running {}: {e}", rustc.to_string_lossy());
            std::process::exit(1);
        }
    }
}
