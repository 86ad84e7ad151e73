//! The queue of MLflow calls on disk: one file of JSON lines per server, appended by every
//! process that tracks (the notebook's, its sandboxes, the kernel) and read by the sender.
//!
//! A line is one `write` to a file opened for appending, under a shared `flock`; the sender
//! removes a file it has sent whole only under the exclusive lock, and a writer that finds
//! its file removed opens the new one, so no line lands in a removed file.

use super::TrackError;
use serde_json::Value;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The queue's directory: `DRYML_MLFLOW_SPOOL`, else `dryml-rust/mlflow` in the user's cache
/// (kept across restarts, so a kernel sends what an earlier one could not).
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os(crate::sys::protocol::MLFLOW_SPOOL_ENV) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("dryml-rust").join("mlflow")
}

/// Where an artifact of the run `key` waits to be sent (the folder, made now, goes when the
/// run ends).
pub fn artifact_path(key: &str, name: &str) -> Result<PathBuf, TrackError> {
    let name: String = name.chars().map(|c| if c == '/' { '_' } else { c }).collect();
    let folder = dir().join("artifacts").join(key);
    std::fs::create_dir_all(&folder).map_err(|e| TrackError::Spool(format!("{}: {e}", folder.display())))?;
    Ok(folder.join(name))
}

/// The queue file of one server.
pub struct Spool {
    path: PathBuf,
    uri: String,
}

/// A file's name for a server: FNV-1a of its URI (stable across builds, unlike std's hasher).
pub fn file_name(uri: &str) -> String {
    let h = uri.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{h:016x}.jsonl")
}

impl Spool {
    /// The queue of the server at `uri`, in [`dir`].
    pub fn for_uri(uri: &str) -> Spool {
        Spool { path: dir().join(file_name(uri)), uri: uri.to_string() }
    }

    /// Appends `op` (with the server's URI) as one line.
    pub fn append(&self, op: &Value) -> Result<(), TrackError> {
        let mut op = op.clone();
        op["uri"] = Value::String(self.uri.clone());
        let mut line = op.to_string();
        line.push('\n');
        let fail = |e: std::io::Error| TrackError::Spool(format!("{}: {e}", self.path.display()));
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        loop {
            let mut f = OpenOptions::new().create(true).append(true).open(&self.path).map_err(fail)?;
            crate::sys::lock::shared(&f).map_err(fail)?;
            // Sent whole and removed while this waited: the next open makes a new file.
            if f.metadata().map_err(fail)?.nlink() == 0 {
                continue;
            }
            return f.write_all(line.as_bytes()).map_err(fail);
        }
    }
}
