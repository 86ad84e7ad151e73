//! The DRYML Rust kernel: Jupyter protocol over ZeroMQ, the evcxr engine, the magic host, the CLI.

pub mod child;
pub mod contexts;
pub mod engine;
pub mod experiment;
pub mod gpu;
pub mod history;
pub mod install;
pub mod is_complete;
pub mod meter;
pub mod outbox;
pub mod repo;
pub mod server;
pub mod stream;
pub mod table;
pub mod torch;
pub mod wire;

/// Writes a file so readers see the old or the new contents, never half of one (write, rename).
pub fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}
