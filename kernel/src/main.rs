//! `dryml-kernel`: the Jupyter kernel binary, its install commands, and evcxr's child process.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "dryml-kernel", version, about = "DRYML Rust: a Jupyter kernel for Rust built on evcxr")]
struct Cli {
    /// The connection file Jupyter writes; this runs the kernel.
    #[arg(long, short = 'f', value_name = "FILE")]
    connection_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Install the `dryml-rust` kernelspec ("DRYML Rust").
    Install {
        #[command(flatten)]
        place: dryml_kernel::install::Place,
    },
    /// Remove the `dryml-rust` kernelspec.
    Uninstall {
        #[command(flatten)]
        place: dryml_kernel::install::Place,
    },
    /// A Slurm job's program for a closure sent from a cell (`Compute::on(Slurm)`): loads the
    /// cell's library from `$DRYML_JOB_DIR` and runs the closure.
    #[command(hide = true)]
    JobLib,
    /// Show, warm, collect or clear the machine's build cache (what `%cache` does in a notebook).
    Cache {
        #[command(subcommand)]
        action: Option<CacheAction>,
    },
}

#[derive(Subcommand)]
enum CacheAction {
    /// Where it is, its size and bound, its generations (the default).
    Show,
    /// Build `dryml` into it as a kernel would; with --torch also `tch` and dryml's torch
    /// feature, with --candle also candle and dryml's candle feature, with --burn burn.
    Warm {
        #[arg(long)]
        torch: bool,
        #[arg(long)]
        candle: bool,
        #[arg(long)]
        burn: bool,
    },
    /// Evict what was used least recently until it is within its bound.
    Gc,
    /// Empty it.
    Clear,
}

fn main() -> std::process::ExitCode {
    // As the analysis's rustc wrapper this never returns (kernel/analysis/src/load.rs).
    dryml_analysis::rustc_wrapper_hook();
    // As the cell crate's rustc wrapper this never returns: it pins the crate's metadata, builds
    // it for the debugger and records its command for builds without cargo (kernel/builds).
    dryml_builds::wrapper_hook();
    // In evcxr's child process these never return; in the kernel they do nothing.
    dryml_kernel::child::setup_if_child();
    // In evcxr's child: libtorch's CUDA half beside the libtorch a cell brings in.
    evcxr::set_after_load(dryml_kernel::torch::load_cuda_beside_libtorch);
    evcxr::runtime_hook();
    if let Some(socket) = std::env::var_os(dryml_analysis::SOCKET_ENV) {
        // The user's analysis process (kernel/analysis): one arena, as the kernel's.
        dryml_kernel::heap::one_arena();
        dryml_analysis::serve(std::path::Path::new(&socket));
    }
    dryml_kernel::torch::setup_env();
    dryml_kernel::cuda::setup_env();
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dryml-kernel: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn cache(action: CacheAction) -> anyhow::Result<()> {
    use dryml_kernel::session::cache::BuildCache;
    use dryml_sys::units::size;
    if let CacheAction::Warm { torch, candle, burn } = action {
        let started = std::time::Instant::now();
        dryml_kernel::warm_cache(torch, candle, burn)?;
        let what = [
            "dryml",
            if torch { ", tch" } else { "" },
            if candle { ", candle" } else { "" },
            if burn { ", burn" } else { "" },
        ]
        .concat();
        println!("built {what} into the cache in {:.1?}", started.elapsed());
        return Ok(());
    }
    let Some(cache) = BuildCache::from_env()? else {
        println!("the build cache is off (DRYML_BUILD_CACHE=off)");
        return Ok(());
    };
    let wait = std::time::Duration::from_secs(30);
    match action {
        CacheAction::Show | CacheAction::Warm { .. } => {
            print!("{}", dryml_kernel::magic::cache::render(&cache.report()).0);
        }
        CacheAction::Gc => println!("evicted {}", size(cache.collect(wait)?)),
        CacheAction::Clear => println!("cleared {}", size(cache.clear(wait)?)),
    }
    Ok(())
}

/// The log's writer: stderr, whose failures are dropped. A kernel whose stderr was a terminal
/// that closed (`jupyter console` in a window closed) got EIO, tracing-subscriber then reported
/// that with `eprintln!`, which panics: the panic took the task that logs the parent's end with
/// it, and the kernel outlived its console.
struct Stderr;

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(|| Stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DRYML_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let cli = Cli::parse();
    match (cli.command, cli.connection_file) {
        (Some(Command::Install { place }), _) => {
            let dir = dryml_kernel::install::install(&place)?;
            println!("Installed kernelspec dryml-rust (\"DRYML Rust\") in {}", dir.display());
        }
        (Some(Command::Uninstall { place }), _) => {
            let dir = dryml_kernel::install::uninstall(&place)?;
            println!("Removed kernelspec dryml-rust from {}", dir.display());
        }
        (Some(Command::Cache { action }), _) => cache(action.unwrap_or(CacheAction::Show))?,
        (Some(Command::JobLib), _) => dryml::__kernel::slurm::run_library().map_err(anyhow::Error::msg)?,
        (None, Some(file)) => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading connection file {}", file.display()))?;
            let info: dryml_kernel::protocol::ConnectionInfo =
                serde_json::from_str(&text).with_context(|| format!("parsing connection file {}", file.display()))?;
            dryml_kernel::run(info)?;
        }
        (None, None) => {
            anyhow::bail!("nothing to do: pass --connection-file FILE (Jupyter does), or `install`; see --help");
        }
    }
    Ok(())
}
