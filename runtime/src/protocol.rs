//! The line protocol between cells and the kernel, shared so both sides spell it the same way.

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
/// Sent by the kernel's output pump when evcxr reports that a cell panicked.
pub const PANIC: &str = "DRYML_PANIC";
