//! The repo's index log: what other processes appended, read into memory, and records appended
//! under the lock, fsynced, after a torn line is ended.

use super::{check_id, io, Entry, Repo, RepoError, INDEX, LOCK};
use crate::objects::from_record;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom, Write};

impl Repo {
    /// Reads what was appended to the index since the last read (by any process).
    pub fn reload(&mut self) -> Result<(), RepoError> {
        let path = self.dir.join(INDEX);
        let mut f = std::fs::File::open(&path).map_err(io(&path))?;
        f.seek(SeekFrom::Start(self.offset)).map_err(io(&path))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(io(&path))?;
        // A line still being written (no newline yet) is read next time.
        let complete = buf.iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(0);
        for line in buf[..complete].split(|b| *b == b'\n') {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(line).ok().and_then(|v| self.apply_record(&v)) {
                Some(()) => {}
                None => self.skipped += 1,
            }
        }
        self.offset += complete as u64;
        Ok(())
    }

    pub(super) fn apply_record(&mut self, v: &Value) -> Option<()> {
        match v.get("op")?.as_str()? {
            "add" => {
                let (def, meta) = from_record(v.get("object")?).ok()?;
                // An id names a file: one that could reach outside the repo is never followed.
                check_id(&meta.id).ok()?;
                let size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
                let id = meta.id.clone();
                if let Some(old) = self.entries.remove(&id) {
                    self.unlink_type(&old.def.type_name, &id);
                }
                self.by_type.entry(def.type_name.clone()).or_default().push(id.clone());
                self.entries.insert(id, Entry { def, meta, size });
            }
            "delete" => {
                let id = v.get("id")?.as_str()?;
                check_id(id).ok()?;
                if let Some(old) = self.entries.remove(id) {
                    self.unlink_type(&old.def.type_name, id);
                }
            }
            _ => return None,
        }
        Some(())
    }

    pub(super) fn unlink_type(&mut self, type_name: &str, id: &str) {
        if let Some(ids) = self.by_type.get_mut(type_name) {
            ids.retain(|i| i != id);
        }
    }

    /// The index lock: held while object files are replaced and their records appended.
    pub(super) fn lock(&self) -> Result<std::fs::File, RepoError> {
        let lock_path = self.dir.join(LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        crate::sys::lock::exclusive(&lock).map_err(io(&lock_path))?;
        Ok(lock)
    }

    /// Appends records to the index, fsynced; the caller holds the lock (`_held`).
    pub(super) fn append_locked(&self, _held: &std::fs::File, records: &[Value]) -> Result<(), RepoError> {
        let path = self.dir.join(INDEX);
        let mut f = std::fs::OpenOptions::new().read(true).append(true).open(&path).map_err(io(&path))?;
        let mut text = String::new();
        // A torn line left by a crash is ended first, so it cannot swallow this record.
        let len = f.metadata().map_err(io(&path))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            f.seek(SeekFrom::Start(len - 1)).map_err(io(&path))?;
            f.read_exact(&mut last).map_err(io(&path))?;
            if last[0] != b'\n' {
                text.push('\n');
            }
        }
        for r in records {
            text.push_str(&r.to_string());
            text.push('\n');
        }
        f.write_all(text.as_bytes()).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))
    }
}
