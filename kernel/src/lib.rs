//! The DRYML Rust kernel: the Jupyter protocol over ZeroMQ ([`protocol`]), the engine that
//! runs cells ([`engine`]) through the evcxr session ([`session`]), the magic host ([`magic`]),
//! memory and GPU measurement ([`measure`]), the kernel's own heap ([`heap`]), what runs
//! inside evcxr's child ([`child`]), and the bridge from JupyterLab's debugger to lldb-dap
//! ([`debug`]).

pub mod child;
pub mod cuda;
pub mod debug;
pub mod display_table;
pub mod engine;
pub mod heap;
pub mod history;
pub mod install;
pub mod magic;
pub mod measure;
pub mod paths;
pub mod protocol;
pub mod session;
pub mod syntax;
pub mod torch;

/// Serves a kernel for the connection file's `info` until a client shuts it down.
pub fn run(info: protocol::ConnectionInfo) -> anyhow::Result<()> {
    heap::one_arena();
    let scratch = scratch_with_evcxr_dir()?;
    let kernel = engine::handler::JupyterHandler::new(scratch.clone());
    let result = kernel.and_then(|k| protocol::serve(&info, std::sync::Arc::new(k)));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// This process's scratch directory, with evcxr building under it unless the user chose
/// `EVCXR_TMPDIR`. Call while single-threaded (it sets the environment).
fn scratch_with_evcxr_dir() -> anyhow::Result<std::path::PathBuf> {
    let scratch = paths::scratch()?;
    if std::env::var_os("EVCXR_TMPDIR").is_none() {
        let evcxr_dir = scratch.join("evcxr");
        std::fs::create_dir_all(&evcxr_dir)?;
        std::env::set_var("EVCXR_TMPDIR", &evcxr_dir);
    }
    Ok(scratch)
}

/// `dryml-kernel cache warm`: builds `dryml` (with `torch`, also `tch` and dryml's torch
/// feature; with `candle` and `burn`, those and dryml's features for them) into the machine's
/// build cache exactly as a first cell naming them would, so the first kernels after set-up find
/// them built. Each framework is its own notebook's build, as a notebook naming only it gets;
/// with all three, also the build of a notebook naming every framework (compare.ipynb's).
pub fn warm_cache(torch: bool, candle: bool, burn: bool) -> anyhow::Result<()> {
    if torch && torch::available().is_none() {
        anyhow::bail!("no libtorch in the venv ({}): cannot build tch", paths::venv().display());
    }
    let scratch = scratch_with_evcxr_dir()?;
    let mut cells = vec![if torch { "tch::" } else { "dryml::" }];
    if candle {
        cells.push("candle_core::");
    }
    if burn {
        cells.push("burn::");
    }
    // What notebooks/compare.ipynb names.
    if torch && candle && burn {
        cells.push("tch:: candle_core:: burn:: linfa::");
    }
    let result = cells.into_iter().enumerate().try_for_each(|(i, cell)| {
        let state = std::sync::Arc::new(session::state::CellState::default());
        let mut s =
            session::Session::start(state, Default::default(), &scratch.join(format!("stream-{i}.sock")), &scratch)?;
        match s.build_cache() {
            Ok(Some(_)) => {}
            Ok(None) => anyhow::bail!("the build cache is off ({}=off): nothing to warm", session::cache::DIR_ENV),
            Err(e) => anyhow::bail!("the build cache is not usable: {e}"),
        }
        s.prepare_deps(cell).map_err(|e| anyhow::anyhow!("{}: {}", e.ename, e.evalue))
    });
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
