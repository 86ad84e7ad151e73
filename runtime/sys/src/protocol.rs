//! The line protocol between cells and the kernel, the environment variables that carry
//! its set-up, and the symbols the kernel exports: shared so both sides spell them alike.

/// The symbols the kernel binary exports (`kernel/build.rs` includes the same file).
pub mod symbols {
    include!("symbols.rs");
}

/// Set in evcxr's child by the kernel: the socket the child's output goes to.
pub const STREAM_ENV: &str = "DRYML_STREAM_SOCKET";
/// Set in evcxr's child by the kernel: its scratch directory, where the resource pool's files
/// and the last experiment's report live.
pub const STATE_DIR_ENV: &str = "DRYML_STATE_DIR";
/// A process's compute context (`dryml::compute::Context::encode`'s text).
pub const CONTEXT_ENV: &str = "DRYML_CONTEXT";
/// Where `dryml::track` queues its MLflow calls, when set (else the user's cache directory).
pub const MLFLOW_SPOOL_ENV: &str = "DRYML_MLFLOW_SPOOL";
/// The file in the state directory naming the MLflow run an open experiment or sweep logs to.
pub const MLFLOW_AMBIENT_FILE: &str = "mlflow.json";
/// The file in the state directory holding the last experiment's report.
pub const EXPERIMENT_LAST_FILE: &str = "experiment-last.tsv";

/// Set in evcxr's child by the kernel: the flusher's request and ack fds, "READ,WRITE".
pub const FLUSH_FDS_ENV: &str = "DRYML_FLUSH_FDS";
/// `DRYML_DISPLAY {"data": {...}, "update": bool, "display_id": "..."}`: a display (or update).
pub const DISPLAY: &str = "DRYML_DISPLAY";
/// `DRYML_CLEAR {"wait": bool}`: clear the cell's output.
pub const CLEAR: &str = "DRYML_CLEAR";
/// `DRYML_ERROR {"ename": "...", "evalue": "..."}`: the cell ends as this error once it returns.
pub const ERROR: &str = "DRYML_ERROR";
/// `DRYML_POLLING {"on": bool}`: a loop that stops between steps on interrupt is running (or has
/// ended), so the kernel waits longer than its usual grace period before killing the process.
pub const POLLING: &str = "DRYML_POLLING";
/// `DRYML_STDERR_SYNC<n>`: written to the child's stderr by its output pump at its n-th cell
/// end, after anything the cell wrote there: the kernel publishes stderr lines up to it before
/// the cell's `idle`.
pub const STDERR_SYNC: &str = "DRYML_STDERR_SYNC";
/// The output (content: `n`) the child's output pump adds to its n-th cell end's evcxr outputs,
/// so the kernel knows which stdout and stderr syncs are that cell's and which came late from
/// an earlier one.
pub const SYNC_MIME: &str = "application/x-dryml-sync";
/// Sent by the kernel's output pump when evcxr reports that a cell panicked.
pub const PANIC: &str = "DRYML_PANIC";
/// `DRYML_COMM {"op": "open"|"msg"|"close"|"target", "comm_id", "target_name", "data",
/// "metadata"}`: a comm message from a cell, or a comm target it registered.
pub const COMM: &str = "DRYML_COMM";
