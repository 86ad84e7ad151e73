//! The DRYML Rust kernel: the Jupyter protocol over ZeroMQ ([`protocol`]), the engine that
//! runs cells ([`engine`]) through the evcxr session ([`session`]), the magic host ([`magic`]),
//! memory and GPU measurement ([`measure`]), and what runs inside evcxr's child ([`child`]).

pub mod child;
pub mod engine;
pub mod history;
pub mod install;
pub mod magic;
pub mod measure;
pub mod paths;
pub mod protocol;
pub mod session;
pub mod table;
pub mod torch;

/// Serves a kernel for the connection file's `info` until a client shuts it down.
pub fn run(info: jupyter_protocol::ConnectionInfo) -> anyhow::Result<()> {
    let scratch = paths::scratch()?;
    if std::env::var_os("EVCXR_TMPDIR").is_none() {
        let evcxr_dir = scratch.join("evcxr");
        std::fs::create_dir_all(&evcxr_dir)?;
        // Still single-threaded: the protocol's runtime and the engine start below.
        std::env::set_var("EVCXR_TMPDIR", &evcxr_dir);
    }
    let kernel = engine::kernel::Kernel::new(scratch.clone());
    let result = kernel.and_then(|k| protocol::serve(&info, std::sync::Arc::new(k)));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
