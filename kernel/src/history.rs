//! Input history in SQLite, laid out as IPython's `history.sqlite` so it survives restarts:
//! a `sessions` table, one row per kernel run, and `history(session, line, source, source_raw)`.

use crate::protocol::messages::HistoryRequest;
use anyhow::{Context, Result};
use rusqlite::{params, Connection};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct History {
    conn: Connection,
    session: i64,
}

/// Where history lives: `$DRYML_HISTORY_FILE`, else the user's data dir.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("DRYML_HISTORY_FILE") {
        return PathBuf::from(p);
    }
    dirs::data_dir().unwrap_or_else(std::env::temp_dir).join("dryml-rust").join("history.sqlite")
}

impl History {
    pub fn open(path: &Path) -> Result<History> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating history directory {}", dir.display()))?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening history database {}", path.display()))?;
        Self::init(conn)
    }

    pub fn in_memory() -> Result<History> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<History> {
        // WAL and a busy timeout let several kernels share one file, as IPython's does.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let _ = conn.pragma_update(None, "journal_mode", "WAL");
        // In WAL mode NORMAL syncs at checkpoints, not every cell: a power cut can lose the last
        // few entries but never corrupts the file, and cells don't wait on fsync.
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS sessions (session integer primary key autoincrement,
                 start timestamp, end timestamp, num_cmds integer, remark text);
             CREATE TABLE IF NOT EXISTS history (session integer, line integer,
                 source text, source_raw text, PRIMARY KEY (session, line));
             CREATE TABLE IF NOT EXISTS output_history (session integer, line integer,
                 output text, PRIMARY KEY (session, line));",
        )?;
        conn.execute("INSERT INTO sessions (start, num_cmds, remark) VALUES (datetime('now'), 0, '')", [])?;
        let session = conn.last_insert_rowid();
        Ok(History { conn, session })
    }

    pub fn session(&self) -> i64 {
        self.session
    }

    pub fn store(&mut self, line: i64, source: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO history (session, line, source, source_raw) VALUES (?1, ?2, ?3, ?3)",
            params![self.session, line, source],
        )?;
        tx.execute(
            "UPDATE sessions SET num_cmds = ?2, end = datetime('now') WHERE session = ?1",
            params![self.session, line],
        )?;
        tx.commit()?;
        Ok(())
    }

    pub fn store_output(&self, line: i64, output: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO output_history (session, line, output) VALUES (?1, ?2, ?3)",
            params![self.session, line, output],
        )?;
        Ok(())
    }

    /// Answers a `history_request` with the `history` list of its reply.
    pub fn query(&self, req: &HistoryRequest) -> Result<Vec<Value>> {
        let select = "SELECT h.session, h.line, h.source, o.output FROM history h \
                      LEFT JOIN output_history o ON o.session = h.session AND o.line = h.line";
        let (sql, args, output): (String, Vec<rusqlite::types::Value>, bool) = match req {
            HistoryRequest::Range { session, start, stop, output } => {
                let session = if *session <= 0 { session + self.session } else { *session };
                let stop = stop.filter(|s| *s > 0).unwrap_or(i64::MAX);
                (
                    format!("{select} WHERE h.session = ?1 AND h.line >= ?2 AND h.line < ?3 ORDER BY h.line"),
                    vec![session.into(), (*start).into(), stop.into()],
                    *output,
                )
            }
            HistoryRequest::Search { pattern, n, unique, output } => {
                let n = n.filter(|n| *n > 0).unwrap_or(i64::MAX);
                let sql = if *unique {
                    format!(
                        "SELECT * FROM ({select} WHERE h.source GLOB ?1 AND h.rowid IN \
                             (SELECT max(rowid) FROM history GROUP BY source) \
                             ORDER BY h.session DESC, h.line DESC LIMIT ?2) ORDER BY 1, 2"
                    )
                } else {
                    format!(
                        "SELECT * FROM ({select} WHERE h.source GLOB ?1 \
                             ORDER BY h.session DESC, h.line DESC LIMIT ?2) ORDER BY 1, 2"
                    )
                };
                (sql, vec![pattern.clone().into(), n.into()], *output)
            }
            HistoryRequest::Tail { n, output } => {
                let n = n.filter(|n| *n > 0).unwrap_or(10);
                (
                    format!("SELECT * FROM ({select} ORDER BY h.session DESC, h.line DESC LIMIT ?1) ORDER BY 1, 2"),
                    vec![n.into()],
                    *output,
                )
            }
        };
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
            let session: i64 = r.get(0)?;
            let line: i64 = r.get(1)?;
            let source: String = r.get(2)?;
            let out: Option<String> = r.get(3)?;
            let entry = if output {
                serde_json::to_value((session, line, (source, out)))
            } else {
                serde_json::to_value((session, line, source))
            };
            Ok(entry.expect("a history entry serialises"))
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tail_range_search_and_persistence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        {
            let mut h = History::open(&path).unwrap();
            h.store(1, "let a = 1;").unwrap();
            h.store(2, "a + 1").unwrap();
        }
        let mut h = History::open(&path).unwrap();
        h.store(1, "let b = 2;").unwrap();
        let tail = h.query(&HistoryRequest::from_content(&json!({"hist_access_type": "tail", "n": 2}))).unwrap();
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0][2], "a + 1");
        assert_eq!(tail[1][2], "let b = 2;");
        let prev = h
            .query(&HistoryRequest::from_content(
                &json!({"hist_access_type": "range", "session": -1, "start": 1, "stop": 3}),
            ))
            .unwrap();
        assert_eq!(prev.len(), 2);
        let search =
            h.query(&HistoryRequest::from_content(&json!({"hist_access_type": "search", "pattern": "let*"}))).unwrap();
        assert_eq!(search.len(), 2);
        h.store_output(1, "2").unwrap();
        let with_out = h
            .query(&HistoryRequest::from_content(&json!({"hist_access_type": "range", "session": 0, "output": true})))
            .unwrap();
        assert_eq!(with_out[0][2][1], "2");
    }
}
