//! Runs tracked on an MLflow server: parameters, metrics by step, tags and artifacts, written
//! first to a queue on disk ([`spool`]) and sent from there over MLflow's REST API ([`send`],
//! the `mlflow` feature, which the kernel has). A server that is down loses nothing: the calls
//! wait in the queue, in order, and go when it answers.
//!
//! In a notebook, `%%experiment NAME --mlflow URI` and `%%sweep … --mlflow URI` track every
//! network trained in the cell without more code; in code:
//!
//! ```
//! # let spool = std::env::temp_dir().join(format!("dryml-doc-track-{}", std::process::id()));
//! # std::env::set_var("DRYML_MLFLOW_SPOOL", &spool);
//! let mlflow = dryml::track::mlflow("http://127.0.0.1:5000");
//! let run = mlflow.start_run("digits", "lr=0.1").unwrap();
//! run.log_params(&[("lr".into(), "0.1".into())]).unwrap();
//! for epoch in 1..=3 {
//!     run.log_metric("loss", 1.0 / epoch as f64, epoch).unwrap();
//! }
//! run.end().unwrap();
//! // In a kernel the calls go after the cell; elsewhere (with the `mlflow` feature):
//! // mlflow.flush(std::time::Duration::from_secs(10))?;
//! # std::fs::remove_dir_all(&spool).unwrap();
//! ```

#[cfg(feature = "mlflow")]
pub mod send;
pub mod spool;

use crate::objects::{Object, Provenance};
use serde_json::{json, Value};
use spool::Spool;
use std::path::Path;
use std::sync::Mutex;

/// What went wrong with a tracked call.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackError {
    /// The queue could not be written: the call is not recorded.
    Spool(String),
    /// The run has ended; nothing more goes to it.
    Ended(String),
    /// The server did not take the queued calls (they stay queued), or this build cannot send.
    Send(String),
}

impl std::fmt::Display for TrackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrackError::Spool(m) => write!(f, "MLflow queue: {m}"),
            TrackError::Ended(k) => write!(f, "MLflow run {k} has ended"),
            TrackError::Send(m) => write!(f, "MLflow: {m}"),
        }
    }
}

impl std::error::Error for TrackError {}

/// An MLflow tracking server, by its URI (`http://host:port`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mlflow {
    uri: String,
}

/// The server at `uri` (`http://host:port`, no trailing slash needed).
pub fn mlflow(uri: &str) -> Mlflow {
    Mlflow { uri: uri.trim_end_matches('/').to_string() }
}

impl Mlflow {
    /// Its URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// A new run named `name` in the experiment `experiment` (made on the server if missing).
    pub fn start_run(&self, experiment: &str, name: &str) -> Result<Run, TrackError> {
        Run::start(&self.uri, experiment, name, None)
    }

    /// Sends what is queued for this server, waiting at most `timeout`; the calls sent.
    #[cfg(feature = "mlflow")]
    pub fn flush(&self, timeout: std::time::Duration) -> Result<usize, TrackError> {
        let pass = send::send_uri(&spool::dir(), &self.uri, timeout);
        match pass.down {
            Some(why) => Err(TrackError::Send(format!("{why}; {} calls stay queued", pass.pending))),
            None => Ok(pass.sent),
        }
    }

    /// Without the `mlflow` feature nothing here sends: in a kernel, the kernel does.
    #[cfg(not(feature = "mlflow"))]
    pub fn flush(&self, _timeout: std::time::Duration) -> Result<usize, TrackError> {
        Err(TrackError::Send(format!(
            "this build of dryml has no HTTP client (its `mlflow` feature); the calls stay queued in {}",
            spool::dir().display()
        )))
    }
}

/// One run on the server: the calls made on it are queued in order. Dropped without
/// [`Run::end`], it ends as `FINISHED` (or `FAILED` while a panic unwinds).
#[derive(Debug)]
pub struct Run {
    uri: String,
    experiment: String,
    key: String,
    ended: bool,
}

impl Run {
    fn start(uri: &str, experiment: &str, name: &str, parent: Option<&str>) -> Result<Run, TrackError> {
        let key = crate::objects::object::uuid_v4();
        let op = json!({"op": "start", "key": key, "experiment": experiment, "name": name,
            "parent": parent, "time": now_ms()});
        Spool::for_uri(uri).append(&op)?;
        Ok(Run { uri: uri.to_string(), experiment: experiment.to_string(), key, ended: false })
    }

    /// The queue's name for it (the server's run id is known once it is sent).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// A run nested under this one (MLflow's `mlflow.parentRunId`), in the same experiment.
    pub fn start_child(&self, name: &str) -> Result<Run, TrackError> {
        Run::start(&self.uri, &self.experiment, name, Some(&self.key))
    }

    fn put(&self, mut op: Value) -> Result<(), TrackError> {
        if self.ended {
            return Err(TrackError::Ended(self.key.clone()));
        }
        op["key"] = json!(self.key);
        Spool::for_uri(&self.uri).append(&op)
    }

    /// Parameters, `(name, value)`: set once per run, as MLflow's are.
    pub fn log_params(&self, params: &[(String, String)]) -> Result<(), TrackError> {
        self.put(json!({"op": "params", "params": params}))
    }

    /// One metric's value at `step`.
    pub fn log_metric(&self, name: &str, value: f64, step: u64) -> Result<(), TrackError> {
        self.log_metrics(&[(name.to_string(), value)], step)
    }

    /// Several metrics at `step`; values that are not finite are left out (JSON has none).
    pub fn log_metrics(&self, metrics: &[(String, f64)], step: u64) -> Result<(), TrackError> {
        let t = now_ms();
        let m: Vec<Value> =
            metrics.iter().filter(|(_, v)| v.is_finite()).map(|(k, v)| json!([k, v, step, t])).collect();
        self.put(json!({"op": "metrics", "metrics": m}))
    }

    /// Tags, `(name, value)`: a later value replaces an earlier.
    pub fn set_tags(&self, tags: &[(String, String)]) -> Result<(), TrackError> {
        self.put(json!({"op": "tags", "tags": tags}))
    }

    /// How a result was made, as tags `dryml.<part>` (`dryml.git.commit`, `dryml.crate.tch`).
    pub fn log_provenance(&self, p: &Provenance) -> Result<(), TrackError> {
        self.set_tags(&provenance_tags(p))
    }

    /// An object's definition as parameters (`type`, `args.lr`, `args.layers.0.units`), its
    /// provenance as tags and its metrics (numbers, flattened the same way) at `step`.
    pub fn log_object(&self, obj: &dyn Object, step: u64) -> Result<(), TrackError> {
        let def = obj.definition();
        let mut params = vec![("type".to_string(), def.type_name.clone())];
        flatten("args", &def.args, &mut params);
        self.log_params(&params)?;
        self.set_tags(&[("dryml.object".into(), obj.meta().id.clone())])?;
        self.log_provenance(&Provenance::of(obj))?;
        let mut metrics = Vec::new();
        if let Some(m) = &obj.meta().metrics {
            flatten("", m, &mut metrics);
        }
        // A closure's one number is the metric `value`.
        let name = |k: String| if k.is_empty() { "value".to_string() } else { k };
        let numbers: Vec<(String, f64)> =
            metrics.into_iter().filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (name(k), v))).collect();
        if numbers.is_empty() {
            return Ok(());
        }
        self.log_metrics(&numbers, step)
    }

    /// A copy of `file` as the run's artifact `name` (copied into the queue now, so the file
    /// may change or go after).
    pub fn log_artifact(&self, file: &Path, name: &str) -> Result<(), TrackError> {
        let copy = spool::artifact_path(&self.key, name)?;
        let bytes = std::fs::read(file).map_err(|e| TrackError::Spool(format!("{}: {e}", file.display())))?;
        dryml_sys::fs::write_atomic(&copy, &bytes, dryml_sys::fs::Durability::NoFsync)
            .map_err(|e| TrackError::Spool(format!("{}: {e}", copy.display())))?;
        self.put(json!({"op": "artifact", "file": copy, "name": name}))
    }

    /// The object saved as the artifact `model.dryml` (`dryml::load_object` reads it back).
    pub fn log_model(&self, obj: &dyn Object) -> Result<(), TrackError> {
        let copy = spool::artifact_path(&self.key, "model.dryml")?;
        crate::save_object(obj, &copy).map_err(|e| TrackError::Spool(e.to_string()))?;
        self.put(json!({"op": "artifact", "file": copy, "name": "model.dryml"}))
    }

    /// Ends it as `FINISHED`.
    pub fn end(mut self) -> Result<(), TrackError> {
        self.finish("FINISHED")
    }

    /// Ends it as `FAILED`.
    pub fn fail(mut self) -> Result<(), TrackError> {
        self.finish("FAILED")
    }

    fn finish(&mut self, status: &str) -> Result<(), TrackError> {
        let r = self.put(json!({"op": "end", "status": status, "time": now_ms()}));
        self.ended = true;
        r
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.finish(if std::thread::panicking() { "FAILED" } else { "FINISHED" });
        }
    }
}

/// Milliseconds since the epoch, as MLflow's times are.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// `v` as `(path, text)` pairs, nested keys and array places joined by dots under `prefix`.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let join = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| flatten(&join(k), v, out)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| flatten(&join(&i.to_string()), v, out)),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Null => out.push((prefix.to_string(), "null".into())),
        v => out.push((prefix.to_string(), v.to_string())),
    }
}

/// [`Provenance::fields`] as MLflow tags: `dryml.` and the part, with characters MLflow's keys
/// do not allow as `_`.
pub fn provenance_tags(p: &Provenance) -> Vec<(String, String)> {
    let key = |k: &str| -> String {
        let k: String = k.replace(' ', ".");
        let k: String =
            k.chars().map(|c| if c.is_ascii_alphanumeric() || "_-./".contains(c) { c } else { '_' }).collect();
        format!("dryml.{k}")
    };
    p.fields().into_iter().map(|(k, v)| (key(&k), v)).collect()
}

/// Where an open experiment or sweep asked every network trained to log: a run of its own,
/// nested under the experiment's.
#[derive(Debug, Clone, PartialEq)]
pub struct Ambient {
    /// The server.
    pub uri: String,
    /// The MLflow experiment.
    pub experiment: String,
    /// The experiment's (or sweep's) run, by its queue key.
    pub parent: String,
}

impl Ambient {
    /// A run of its own under the ambient one.
    pub fn start_child(&self, name: &str) -> Result<Run, TrackError> {
        Run::start(&self.uri, &self.experiment, name, Some(&self.parent))
    }
}

/// The ambient run, as the kernel wrote it to its state directory (none outside a kernel).
pub fn ambient() -> Option<Ambient> {
    let dir = std::env::var_os(crate::sys::protocol::STATE_DIR_ENV)?;
    let bytes = std::fs::read(Path::new(&dir).join(crate::sys::protocol::MLFLOW_AMBIENT_FILE)).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Ambient { uri: s("uri")?, experiment: s("experiment")?, parent: s("parent")? })
}

/// Writes (or, with none, removes) the ambient run in `state_dir`: the kernel's side.
#[doc(hidden)]
pub fn set_ambient(state_dir: &Path, ambient: Option<&Ambient>) -> std::io::Result<()> {
    let path = state_dir.join(crate::sys::protocol::MLFLOW_AMBIENT_FILE);
    match ambient {
        Some(a) => {
            let v = json!({"uri": a.uri, "experiment": a.experiment, "parent": a.parent});
            dryml_sys::fs::write_atomic(&path, v.to_string().as_bytes(), dryml_sys::fs::Durability::NoFsync)
        }
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// The run a sweep's trial logs to in this process, which a network trained by the trial
/// logs its epochs into rather than a run of its own.
static ACTIVE: Mutex<Option<(String, String)>> = Mutex::new(None);

/// A queue entry to an existing run, by URI and key: what [`ACTIVE`] holds.
#[derive(Debug)]
pub(crate) struct Active(Run);

impl Active {
    /// The active run of this process, as a handle that does not end it.
    pub(crate) fn get() -> Option<Active> {
        let a = ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        Some(Active(Run { uri: a.0, experiment: String::new(), key: a.1, ended: false }))
    }

    pub(crate) fn run(&self) -> &Run {
        &self.0
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        // Not ours to end.
        self.0.ended = true;
    }
}

/// Runs `f` with `run` as this process's active run.
pub(crate) fn with_active<R>(run: &Run, f: impl FnOnce() -> R) -> R {
    fn set(v: Option<(String, String)>) {
        *ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = v;
    }
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            set(None);
        }
    }
    set(Some((run.uri.clone(), run.key.clone())));
    let _unset = Unset;
    f()
}

#[cfg(test)]
mod tests;
