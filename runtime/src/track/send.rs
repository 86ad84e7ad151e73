//! The sender: replays a server's queue ([`super::spool`]) over MLflow's REST API, in order,
//! with `ureq`. What was sent is kept beside the queue (the offset reached and the server's ids
//! for the queue's runs), written after each call, so a pass cut short (the server gone, the
//! kernel killed) goes on where it stopped. One sender at a time per queue (an `flock`).
//!
//! No maintained Rust client of MLflow exists (`mlflow` 0.1, `mlflow-client` 0.0.1, `mlflow_rs`
//! 0.1 and `trs-mlflow` 0.7 were read: stale or partial); the calls are MLflow's documented
//! REST API 2.0.

use super::spool;
use crate::sys::lock;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one pass over a queue did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// The server.
    pub uri: String,
    /// Calls the server took.
    pub sent: usize,
    /// Calls still queued.
    pub pending: usize,
    /// Why the pass stopped with calls queued (the server down, refusing, or too slow).
    pub down: Option<String>,
    /// Calls the server rejected for good (a bad name, say): said once and left out.
    pub rejected: Vec<String>,
}

/// How a call failed: `Retry` leaves it queued, `Reject` leaves it out.
enum Fail {
    Retry(String),
    Reject(String),
}

/// What was sent of a queue, kept beside it.
#[derive(Default)]
struct Sent {
    offset: u64,
    /// Queue key to the server's run id and artifact URI.
    runs: BTreeMap<String, (String, String)>,
    experiments: BTreeMap<String, String>,
    /// Runs started and not yet ended: the queue is removed only when none is left.
    open: Vec<String>,
}

impl Sent {
    fn read(path: &Path) -> Sent {
        let Some(v) = std::fs::read(path).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()) else {
            return Sent::default();
        };
        let strs = |k: &str| -> BTreeMap<String, String> {
            v[k].as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").into())).collect())
                .unwrap_or_default()
        };
        let runs = v["runs"].as_object().map(|m| {
            m.iter()
                .map(|(k, r)| (k.clone(), (r[0].as_str().unwrap_or("").into(), r[1].as_str().unwrap_or("").into())))
                .collect()
        });
        let open = v["open"].as_array().map(|a| a.iter().filter_map(|k| k.as_str().map(String::from)).collect());
        Sent {
            offset: v["offset"].as_u64().unwrap_or(0),
            runs: runs.unwrap_or_default(),
            experiments: strs("experiments"),
            open: open.unwrap_or_default(),
        }
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        let runs: Map<String, Value> = self.runs.iter().map(|(k, (id, a))| (k.clone(), json!([id, a]))).collect();
        let v = json!({"offset": self.offset, "runs": runs, "experiments": self.experiments, "open": self.open});
        dryml_sys::fs::write_atomic(path, v.to_string().as_bytes(), dryml_sys::fs::Durability::NoFsync)
    }
}

/// Sends every queue in `dir` (each server's), each for at most `timeout`.
pub fn send_all(dir: &Path, timeout: Duration) -> Vec<Pass> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl")).collect();
    files.sort();
    files.iter().filter_map(|f| send_file(f, timeout)).collect()
}

/// Sends the queue of the server at `uri` in `dir`.
pub fn send_uri(dir: &Path, uri: &str, timeout: Duration) -> Pass {
    let file = dir.join(spool::file_name(uri));
    send_file(&file, timeout).unwrap_or_else(|| Pass { uri: uri.to_string(), ..Pass::default() })
}

/// One pass over the queue `file`; `None` when there is none, or another process sends it.
pub fn send_file(file: &Path, timeout: Duration) -> Option<Pass> {
    let lock_file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(file.with_extension("lock")).ok()?;
    lock::try_exclusive(&lock_file).then_some(())?;
    let bytes = std::fs::read(file).ok()?;
    let sent_path = file.with_extension("sent");
    let mut sent = Sent::read(&sent_path);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout.min(Duration::from_secs(10))))
        .http_status_as_error(false)
        .build()
        .into();
    let until = Instant::now() + timeout;
    let mut pass = Pass::default();
    let lines: Vec<&[u8]> =
        bytes.get(sent.offset as usize..).unwrap_or_default().split_inclusive(|&b| b == b'\n').collect();
    let whole: Vec<&[u8]> = lines.iter().copied().filter(|l| l.ends_with(b"\n")).collect();
    let mut i = 0;
    while i < whole.len() {
        let op: Value = serde_json::from_slice(whole[i]).unwrap_or(Value::Null);
        pass.uri = op["uri"].as_str().unwrap_or_default().to_string();
        // A run of metric lines of one run goes as one call.
        let mut batch = vec![op];
        while batch[0]["op"] == "metrics" && i + batch.len() < whole.len() && batch.len() < 200 {
            let next: Value = serde_json::from_slice(whole[i + batch.len()]).unwrap_or(Value::Null);
            if next["op"] != "metrics" || next["key"] != batch[0]["key"] {
                break;
            }
            batch.push(next);
        }
        if Instant::now() > until {
            pass.down = Some(format!("{} did not take the queue within {:.0} s", pass.uri, timeout.as_secs_f64()));
            break;
        }
        match apply(&agent, &mut sent, &batch, file.parent().unwrap_or(Path::new("."))) {
            Ok(()) => pass.sent += batch.len(),
            Err(Fail::Retry(why)) => {
                pass.down = Some(why);
                break;
            }
            Err(Fail::Reject(why)) => pass.rejected.push(why),
        }
        sent.offset += whole[i..i + batch.len()].iter().map(|l| l.len() as u64).sum::<u64>();
        i += batch.len();
        if sent.write(&sent_path).is_err() {
            pass.down = Some(format!("{}: cannot be written", sent_path.display()));
            break;
        }
    }
    pass.pending = whole.len() - i;
    if pass.down.is_none() && sent.open.is_empty() {
        compact(file, &sent_path, sent.offset);
    }
    Some(pass)
}

/// Removes a queue sent whole, unless a line came since (under the writers' lock).
fn compact(file: &Path, sent_path: &Path, offset: u64) {
    let Ok(f) = std::fs::File::open(file) else { return };
    if lock::exclusive(&f).is_ok() && f.metadata().is_ok_and(|m| m.len() == offset) {
        // The record first: cut short between the two, the queue is sent again (never skipped).
        let _ = std::fs::remove_file(sent_path);
        let _ = std::fs::remove_file(file);
    }
}

/// One call (or a batch of one run's metrics) on the server.
fn apply(agent: &ureq::Agent, sent: &mut Sent, batch: &[Value], dir: &Path) -> Result<(), Fail> {
    let op = &batch[0];
    let uri = op["uri"].as_str().ok_or_else(|| Fail::Reject(format!("a queued line without a server: {op}")))?;
    let key = op["key"].as_str().unwrap_or_default();
    let what = op["op"].as_str().unwrap_or_default();
    if what == "start" {
        let experiment = op["experiment"].as_str().unwrap_or("Default");
        let exp_id = experiment_id(agent, uri, sent, experiment)?;
        let mut tags = vec![json!({"key": "mlflow.runName", "value": op["name"]})];
        if let Some(parent) = op["parent"].as_str() {
            let (pid, _) = sent
                .runs
                .get(parent)
                .ok_or_else(|| Fail::Reject(format!("run {key}: its parent run {parent} never reached {uri}")))?;
            tags.push(json!({"key": "mlflow.parentRunId", "value": pid}));
        }
        let body = json!({"experiment_id": exp_id, "run_name": op["name"], "start_time": op["time"], "tags": tags});
        let r = call(agent, uri, "runs/create", &body)?;
        let info = &r["run"]["info"];
        let id =
            info["run_id"].as_str().ok_or_else(|| Fail::Reject(format!("{uri}: runs/create gave no run id: {r}")))?;
        sent.runs.insert(key.to_string(), (id.to_string(), info["artifact_uri"].as_str().unwrap_or("").to_string()));
        sent.open.push(key.to_string());
        return Ok(());
    }
    let (id, artifacts) = sent
        .runs
        .get(key)
        .cloned()
        .ok_or_else(|| Fail::Reject(format!("{what} for run {key}, which never reached {uri}")))?;
    match what {
        "params" => log_batch(agent, uri, &id, "params", &op["params"], 100),
        "tags" => log_batch(agent, uri, &id, "tags", &op["tags"], 100),
        "metrics" => {
            let all: Vec<Value> =
                batch.iter().flat_map(|b| b["metrics"].as_array().cloned().unwrap_or_default()).collect();
            let m: Vec<Value> =
                all.iter().map(|m| json!({"key": m[0], "value": m[1], "step": m[2], "timestamp": m[3]})).collect();
            for chunk in m.chunks(1000) {
                call(agent, uri, "runs/log-batch", &json!({"run_id": id, "metrics": chunk}))?;
            }
            Ok(())
        }
        "artifact" => artifact(agent, uri, &artifacts, op),
        "end" => {
            call(agent, uri, "runs/update", &json!({"run_id": id, "status": op["status"], "end_time": op["time"]}))?;
            sent.open.retain(|k| k != key);
            let _ = std::fs::remove_dir_all(dir.join("artifacts").join(key));
            Ok(())
        }
        other => Err(Fail::Reject(format!("a queued call MLflow has no name for: {other}"))),
    }
}

/// Parameters or tags (`[[name, value], ...]`) in calls of at most `per` each.
fn log_batch(agent: &ureq::Agent, uri: &str, id: &str, field: &str, pairs: &Value, per: usize) -> Result<(), Fail> {
    // MLflow's limits on a value's length (params 6000, tags 8000): longer ones are cut.
    let max = if field == "params" { 6000 } else { 8000 };
    let items: Vec<Value> = pairs
        .as_array()
        .map(|a| a.iter().map(|p| json!({"key": p[0], "value": cut(p[1].as_str().unwrap_or_default(), max)})).collect())
        .unwrap_or_default();
    for chunk in items.chunks(per) {
        call(agent, uri, "runs/log-batch", &json!({"run_id": id, field: chunk}))?;
    }
    Ok(())
}

fn cut(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The experiment's id, made on the server when it has none by that name.
fn experiment_id(agent: &ureq::Agent, uri: &str, sent: &mut Sent, name: &str) -> Result<String, Fail> {
    if let Some(id) = sent.experiments.get(name) {
        return Ok(id.clone());
    }
    let url = format!("{uri}/api/2.0/mlflow/experiments/get-by-name");
    let got = agent.get(&url).query("experiment_name", name).call();
    let id = match answer(uri, "experiments/get-by-name", got) {
        Ok(v) => v["experiment"]["experiment_id"].as_str().map(str::to_string),
        Err(Fail::Reject(why)) if why.contains("RESOURCE_DOES_NOT_EXIST") => None,
        Err(e) => return Err(e),
    };
    let id = match id {
        Some(id) => id,
        None => {
            let r = call(agent, uri, "experiments/create", &json!({"name": name}))?;
            r["experiment_id"].as_str().unwrap_or_default().to_string()
        }
    };
    sent.experiments.insert(name.to_string(), id.clone());
    Ok(id)
}

/// The artifact's upload: to the server's artifact proxy (`mlflow-artifacts:` runs), or a copy
/// where a run's artifacts are a local folder.
fn artifact(agent: &ureq::Agent, uri: &str, artifacts: &str, op: &Value) -> Result<(), Fail> {
    let file = Path::new(op["file"].as_str().unwrap_or_default());
    let name = op["name"].as_str().unwrap_or("artifact");
    let bytes = std::fs::read(file).map_err(|e| Fail::Reject(format!("artifact {}: {e}", file.display())))?;
    if let Some(rest) = artifacts.strip_prefix("mlflow-artifacts:") {
        // `mlflow-artifacts:/1/<run>/artifacts`, or with a host: `mlflow-artifacts://h:p/1/...`.
        let path = match rest.strip_prefix("//") {
            Some(r) => r.split_once('/').map_or("", |(_, p)| p),
            None => rest.trim_start_matches('/'),
        };
        let url = format!("{uri}/api/2.0/mlflow-artifacts/artifacts/{path}/{name}");
        answer(uri, "mlflow-artifacts", agent.put(&url).send(&bytes[..]))?;
    } else {
        let local = artifacts.strip_prefix("file://").unwrap_or(artifacts);
        if !local.starts_with('/') {
            return Err(Fail::Reject(format!("{uri}: artifacts at {artifacts}, which this sender cannot reach")));
        }
        let to = Path::new(local).join(name);
        dryml_sys::fs::write_atomic(&to, &bytes, dryml_sys::fs::Durability::Fsync)
            .map_err(|e| Fail::Retry(format!("artifact to {}: {e}", to.display())))?;
    }
    let _ = std::fs::remove_file(file);
    Ok(())
}

/// POSTs `body` to `/api/2.0/mlflow/<path>`; the answer's JSON.
fn call(agent: &ureq::Agent, uri: &str, path: &str, body: &Value) -> Result<Value, Fail> {
    let url = format!("{uri}/api/2.0/mlflow/{path}");
    let r = agent.post(&url).header("Content-Type", "application/json").send(body.to_string());
    answer(uri, path, r)
}

/// An answer's JSON; a failure that may pass (no connection, 5xx, 429) is `Retry`.
fn answer(uri: &str, path: &str, r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Value, Fail> {
    let mut r = r.map_err(|e| Fail::Retry(format!("{uri} did not answer {path}: {e}")))?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    match status {
        200..=299 => Ok(serde_json::from_str(&text).unwrap_or(Value::Null)),
        429 | 500..=599 => Err(Fail::Retry(format!("{uri} answered {path} with {status}: {}", cut(&text, 300)))),
        _ => Err(Fail::Reject(format!("{uri} refused {path} ({status}): {}", cut(&text, 300)))),
    }
}
