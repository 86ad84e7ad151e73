//! The DRYML Rust kernel: Jupyter protocol over ZeroMQ, the evcxr engine, the magic host, the CLI.

pub mod child;
pub mod engine;
pub mod experiment;
pub mod gpu;
pub mod history;
pub mod install;
pub mod is_complete;
pub mod meter;
pub mod outbox;
pub mod server;
pub mod stream;
pub mod wire;
