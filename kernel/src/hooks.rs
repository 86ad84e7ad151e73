//! Before-cell and after-cell hooks: the seam experiments and the cell logger plug into.

use serde_json::Value;
use std::time::Duration;

/// What a hook knows about the cell about to run (or just run).
#[derive(Debug, Clone)]
pub struct CellInfo {
    pub code: String,
    pub execution_count: i64,
    /// evcxr's child, where user code runs (0 if unknown).
    pub child_pid: u32,
}

/// What happened, for after-cell hooks.
#[derive(Debug, Clone)]
pub struct CellReport {
    pub elapsed: Duration,
    /// The `ename` when the cell failed.
    pub error: Option<String>,
    pub child_pid: u32,
}

/// A display a hook asks the kernel to publish after the cell (a mime bundle).
#[derive(Debug, Clone)]
pub struct HookOutput {
    pub data: Value,
}

/// Runs around every executed cell, on the engine thread.
pub trait CellHook: Send {
    fn before_cell(&mut self, _cell: &CellInfo) {}
    fn after_cell(&mut self, _cell: &CellInfo, _report: &CellReport) -> Vec<HookOutput> {
        Vec::new()
    }
}
