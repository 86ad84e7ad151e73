//! A Slurm job's directory, the record every side reads: the notebook's process writes the
//! cell's library, the program, the batch script, `request.json`, the inputs and the job id; the job
//! its updated variables and `result.json`, or `error.json`; the batch script `end.json`. So a
//! job's outcome never depends on Slurm's accounting, and a new kernel can pick a job up.

use crate::compute::cell::{CellError, CellResult};
use crate::compute::ending::Early;
use crate::sys::fs::{write_atomic, Durability};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The batch script names the job's directory to the program through this.
pub const DIR_ENV: &str = "DRYML_JOB_DIR";

/// One job's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDir {
    pub path: PathBuf,
}

/// What the batch script wrote when the program ended (`end.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct End {
    pub exit_code: i32,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    /// The batch script was sent SIGTERM (Slurm's time limit, `scancel`, preemption).
    pub terminated: bool,
    pub node: String,
    pub seconds: f64,
}

/// What the program wrote when the body failed (`error.json`).
#[derive(Debug, Clone, PartialEq)]
pub enum JobError {
    Panic(String),
    /// The body returned an error through `?`, or an input did not read.
    Error(String),
}

/// What the program wrote when the body finished (`result.json` and `updates/`).
pub struct Finished {
    pub result: CellResult,
    pub peak_rss: u64,
    pub seconds: f64,
}

impl JobDir {
    pub fn new(path: impl Into<PathBuf>) -> JobDir {
        JobDir { path: path.into() }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The kernel's description of the job: the cell, requests, options, variables in and out.
    pub fn request(&self) -> io::Result<Value> {
        let text = std::fs::read_to_string(self.file("request.json"))?;
        serde_json::from_str(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("request.json: {e}")))
    }

    pub fn write_request(&self, request: &Value) -> io::Result<()> {
        write_atomic(&self.file("request.json"), format!("{request:#}\n").as_bytes(), Durability::Fsync)
    }

    /// Writes `job.sh` under `options`: a sweep's array script or a single job's.
    pub fn write_script(&self, sweep: bool, options: &[String]) -> io::Result<()> {
        let name = format!("dryml-{}", super::notebook_name());
        let script =
            if sweep { array_script(&self.path, &name, options) } else { batch_script(&self.path, &name, options) };
        write_atomic(&self.file("job.sh"), script.as_bytes(), Durability::Fsync)
    }

    /// The Slurm job id, once submitted.
    pub fn slurm_id(&self) -> Option<u64> {
        std::fs::read_to_string(self.file("slurm_id")).ok()?.trim().parse().ok()
    }

    pub fn set_slurm_id(&self, id: u64) -> io::Result<()> {
        write_atomic(&self.file("slurm_id"), format!("{id}\n").as_bytes(), Durability::Fsync)
    }

    fn var_file(&self, folder: &str, name: &str) -> PathBuf {
        self.path.join(folder).join(format!("{name}.msgpack"))
    }

    pub fn write_input(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        std::fs::create_dir_all(self.file("inputs"))?;
        write_atomic(&self.var_file("inputs", name), bytes, Durability::Fsync)
    }

    /// The job's output so far (`sbatch --output`): stdout and stderr, Slurm's own lines too.
    pub fn output(&self) -> PathBuf {
        self.file("output.log")
    }

    pub fn end(&self) -> Option<End> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(self.file("end.json")).ok()?).ok()?;
        let code = v["exit_code"].as_i64()? as i32;
        // A shell reports a child killed by signal N as 128 + N.
        let signal = (code > 128 && code < 128 + 65).then_some(code - 128);
        Some(End {
            exit_code: code,
            signal,
            terminated: v["terminated"].as_bool().unwrap_or(false),
            node: v["node"].as_str().unwrap_or_default().to_string(),
            seconds: v["seconds"].as_f64().unwrap_or(0.0),
        })
    }

    pub fn error(&self) -> Option<JobError> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(self.file("error.json")).ok()?).ok()?;
        let message = v["message"].as_str().unwrap_or_default().to_string();
        Some(if v["kind"] == "panic" { JobError::Panic(message) } else { JobError::Error(message) })
    }

    /// The body's results, once `result.json` (written after every update) is there.
    pub fn finished(&self) -> io::Result<Option<Finished>> {
        let text = match std::fs::read_to_string(self.file("result.json")) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("result.json: {e}")))?;
        let mut updates = Vec::new();
        for name in v["updates"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            updates.push((name.to_string(), std::fs::read(self.var_file("updates", name))?));
        }
        Ok(Some(Finished {
            result: CellResult::new(updates, v["shown"].as_str().map(str::to_string)),
            peak_rss: v["peak_rss"].as_u64().unwrap_or(0),
            seconds: v["seconds"].as_f64().unwrap_or(0.0),
        }))
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Panic(m) | JobError::Error(m) => f.write_str(m),
        }
    }
}

/// The job's side: what the job's entry in the cell's library calls.
pub struct Io {
    dir: JobDir,
    updates: Vec<String>,
    shown: Option<String>,
    t0: Instant,
}

impl Io {
    /// The notebook's variable `name`, as the notebook sent it.
    pub fn input<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, CellError> {
        let bytes = std::fs::read(self.dir.var_file("inputs", name))
            .map_err(|e| CellError::new(format!("reading the notebook's variable `{name}`: {e}")))?;
        rmp_serde::from_slice(&bytes)
            .map_err(|e| CellError::new(format!("the notebook's variable `{name}` did not deserialize: {e}")))
    }

    /// The notebook's variable `name` as it was sent (see [`crate::compute::carry`]).
    pub fn input_bytes(&mut self, name: &str) -> Result<Vec<u8>, CellError> {
        std::fs::read(self.dir.var_file("inputs", name))
            .map_err(|e| CellError::new(format!("reading the notebook's variable `{name}`: {e}")))
    }

    /// Sends bytes [`crate::compute::carry::Out`] made back as the notebook's variable `name`.
    pub fn update_bytes(&mut self, name: &str, encoded: Result<Vec<u8>, String>) -> Result<(), CellError> {
        let bytes = encoded.map_err(|e| CellError::new(format!("--update {name}: {e}")))?;
        std::fs::create_dir_all(self.dir.file("updates"))
            .map_err(|e| CellError::new(format!("--update {name}: {e}")))?;
        write_atomic(&self.dir.var_file("updates", name), &bytes, Durability::Fsync)
            .map_err(|e| CellError::new(format!("--update {name}: writing it: {e}")))?;
        self.updates.push(name.to_string());
        Ok(())
    }

    /// Sends `value` back as the notebook's variable `name` (`--update`).
    pub fn update<T: Serialize>(&mut self, name: &str, value: &T) -> Result<(), CellError> {
        let bytes = rmp_serde::to_vec(value)
            .map_err(|e| CellError::new(format!("--update {name}: the value does not serialize: {e}")))?;
        std::fs::create_dir_all(self.dir.file("updates"))
            .map_err(|e| CellError::new(format!("--update {name}: {e}")))?;
        write_atomic(&self.dir.var_file("updates", name), &bytes, Durability::Fsync)
            .map_err(|e| CellError::new(format!("--update {name}: writing it: {e}")))?;
        self.updates.push(name.to_string());
        Ok(())
    }

    /// The cell's value, shown as evcxr shows one (its `Debug` form).
    pub fn show<T: fmt::Debug>(&mut self, value: &T) {
        self.shown = Some(format!("{value:?}"));
    }

    /// Ends the body: writes `result.json` and exits, dropping nothing.
    pub fn finish(&mut self) -> ! {
        let result = json!({
            "updates": self.updates,
            "shown": self.shown,
            "peak_rss": crate::sys::procfs::status(std::process::id(), ["VmHWM:"])[0],
            "seconds": self.t0.elapsed().as_secs_f64(),
        });
        if let Err(e) = write_atomic(&self.dir.file("result.json"), format!("{result}\n").as_bytes(), Durability::Fsync)
        {
            eprintln!("dryml: writing result.json: {e}");
            crate::compute::ending::exit_now(1);
        }
        crate::compute::ending::exit_now(0)
    }
}

pub(crate) fn write_error(dir: &JobDir, kind: &str, message: &str) {
    let v = json!({"kind": kind, "message": message});
    if let Err(e) = write_atomic(&dir.file("error.json"), format!("{v}\n").as_bytes(), Durability::Fsync) {
        eprintln!("dryml: writing error.json: {e}");
    }
}

/// A panic's message and where: `boom at src/lib.rs:9:5` (the notebook maps the place to the
/// cell's lines).
pub(crate) fn panic_text(message: &str, at: &Option<(String, u32, u32)>) -> String {
    match at {
        Some((file, line, col)) => format!("{message} at {file}:{line}:{col}"),
        None => message.to_string(),
    }
}

/// Makes a job program end as [`crate::compute::ending`] says: a panic or an early return is recorded by
/// `record` and printed, then the program exits at once (101 for a panic, 1 for an error), so
/// neither unwinds past the copies of the notebook's variables.
pub(crate) fn end_without_unwinding(record: impl Fn(&str, &str) + Send + Sync + 'static) {
    crate::compute::ending::install(Box::new(move |why| {
        let (kind, message, code) = match why {
            Early::Panicked { message, at } => {
                // As Rust's own hook prints it.
                let thread = std::thread::current().name().unwrap_or("<unnamed>").to_string();
                let place = at.as_ref().map(|(f, l, c)| format!(" at {f}:{l}:{c}")).unwrap_or_default();
                eprintln!("thread '{thread}' panicked{place}:\n{message}");
                ("panic", panic_text(&message, &at), 101)
            }
            Early::Unwound { .. } => {
                ("panic", "the job's code unwound without a panic (std::panic::resume_unwind)".to_string(), 101)
            }
            Early::Returned(e) => {
                let m = e.unwrap_or_else(|| "the job's code returned early".into());
                eprintln!("Error: {m}");
                ("error", m, 1)
            }
        };
        record(kind, &message);
        crate::compute::ending::exit_now(code)
    }));
}

/// Runs a job's body: the generated program's `main`. Its results land in the job's directory;
/// a panic or an error is written to `error.json` (and printed) and ends the program with a
/// non-zero code, so Slurm records the job as failed too. The program ends in here, at once,
/// whatever happens: the body's copies of the notebook's variables are never dropped.
pub fn main(body: impl FnOnce(&mut Io) -> Result<(), CellError>) -> ! {
    let t0 = Instant::now();
    let Some(path) = std::env::var_os(DIR_ENV) else {
        eprintln!("dryml: {DIR_ENV} is not set: this program is started by its job's batch script (job.sh)");
        std::process::exit(2);
    };
    let dir = JobDir::new(path);
    let hook_dir = dir.clone();
    end_without_unwinding(move |kind, message| write_error(&hook_dir, kind, message));
    let mut io = Io { dir, updates: Vec::new(), shown: None, t0 };
    match body(&mut io) {
        Ok(()) => io.finish(),
        Err(e) => crate::compute::ending::end_returned(e.0),
    }
}

/// The batch script that runs `program` in `dir` under `options` (`#SBATCH` lines), kept in
/// the directory, so `sbatch job.sh` there runs the cell again. It writes `end.json` when the
/// program ends, also when Slurm sends SIGTERM (time limit, `scancel`); a SIGKILL leaves no
/// record, and the state then comes from Slurm.
pub fn batch_script(dir: &Path, name: &str, options: &[String]) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut s = script_header(name, &dir.join("output.log"), options);
    s.push_str(&format!(
        r#"# Written by DRYML Rust for a `%%compute --on slurm` cell: `sbatch job.sh` runs it again.
cd {dir}
export {env}={dir}
start=$EPOCHREALTIME
end() {{
    printf '{{"exit_code": %d, "terminated": %s, "node": "%s", "seconds": %s}}\n' \
        "$1" "$2" "$(hostname -s)" "$(awk "BEGIN {{ print $EPOCHREALTIME - $start }}")" > end.json.tmp
    mv -f end.json.tmp end.json
}}
trap 'kill -TERM $pid 2>/dev/null; wait $pid; end $? true; exit 143' TERM
{program} &
pid=$!
wait $pid
code=$?
end $code false
exit $code
"#,
        dir = q(dir),
        env = DIR_ENV,
        program = q(&dir.join("program")),
    ));
    s
}

/// The batch script of a sweep's job array (`--array` is added when the sweep's size is known):
/// each task runs the program, which trains definition `$SLURM_ARRAY_TASK_ID` and records its
/// outcome in `tasks/`, its output in `tasks/<index>.log`.
pub fn array_script(dir: &Path, name: &str, options: &[String]) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut s = script_header(name, &dir.join("tasks").join("%a.log"), options);
    s.push_str(&format!(
        "# Written by DRYML Rust for a `%%sweep --on slurm` cell: `sbatch job.sh` runs the sweep again.\ncd {dir}\nexport {env}={dir}\nexec {program}\n",
        dir = q(dir),
        env = DIR_ENV,
        program = q(&dir.join("program")),
    ));
    s
}

/// A batch script's first lines: the shell, the job's name, where its output goes, its options.
fn script_header(name: &str, output: &Path, options: &[String]) -> String {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!(
        "#SBATCH --job-name={}\n",
        name.replace(|c: char| !(c.is_alphanumeric() || "-_.".contains(c)), "_")
    ));
    s.push_str(&format!("#SBATCH --output={}\n", output.display()));
    for o in options {
        s.push_str(&format!("#SBATCH {o}\n"));
    }
    s
}

/// `s` in single quotes for a shell script.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back() {
        let tmp = std::env::temp_dir().join(format!("dryml-jobdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let dir = JobDir::new(&tmp);
        assert!(dir.finished().unwrap().is_none() && dir.end().is_none() && dir.slurm_id().is_none());
        dir.set_slurm_id(42).unwrap();
        assert_eq!(dir.slurm_id(), Some(42));
        std::fs::write(
            dir.file("end.json"),
            r#"{"exit_code": 137, "terminated": false, "node": "n1", "seconds": 1.5}"#,
        )
        .unwrap();
        assert_eq!(
            dir.end().unwrap(),
            End { exit_code: 137, signal: Some(9), terminated: false, node: "n1".into(), seconds: 1.5 }
        );
        write_error(&dir, "panic", "boom at src/lib.rs:3:1");
        assert_eq!(dir.error(), Some(JobError::Panic("boom at src/lib.rs:3:1".into())));
        let mut io = Io { dir: dir.clone(), updates: Vec::new(), shown: None, t0: Instant::now() };
        assert!(io.update("w", &vec![1.5f64, 2.0]).is_ok());
        dir.write_input("w", &rmp_serde::to_vec(&7u32).unwrap()).unwrap();
        assert_eq!(io.input::<u32>("w").ok(), Some(7));
        assert!(io.input::<u32>("nope").err().unwrap().0.starts_with("reading the notebook's variable `nope`"));
        std::fs::write(
            dir.file("result.json"),
            r#"{"updates": ["w"], "shown": "3", "peak_rss": 1024, "seconds": 0.5}"#,
        )
        .unwrap();
        let mut f = dir.finished().unwrap().unwrap();
        assert_eq!(f.result.take::<Vec<f64>>("w").unwrap(), vec![1.5, 2.0]);
        assert_eq!((f.result.shown().0, f.peak_rss), ("3".to_string(), 1024));
        let script = batch_script(&tmp, "my cell", &["--cpus-per-task=2".into()]);
        assert!(
            script.contains("#SBATCH --job-name=my_cell\n") && script.contains("#SBATCH --cpus-per-task=2\n"),
            "{script}"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
