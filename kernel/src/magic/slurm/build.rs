//! Building a `%%compute --on slurm` cell's program (its source is [`codegen`]'s: the
//! notebook's items and the body in a crate of its own) with the notebook's dependencies in the
//! machine's build cache, so a second job rebuilds only its own crate; errors in cell lines.
//!
//! [`codegen`]: crate::magic::codegen

use crate::magic::codegen::Source;
use crate::protocol::ErrorContent;
use crate::session::state::CellState;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Writes the crate under `dir/crate` and builds it into `dir/program`. The build runs as the
/// cell (an interrupt kills it); errors come back in the cell's line numbers.
pub fn build(state: &CellState, dir: &Path, src: &Source, build_dir: Option<PathBuf>, lock: Option<&Path>, body_offset: usize) -> Result<f64, ErrorContent> {
    let io_err = |what: &str, e: std::io::Error| ErrorContent::new("SlurmError", format!("{what}: {e}"));
    let krate = dir.join("crate");
    std::fs::create_dir_all(krate.join("src")).map_err(|e| io_err(&format!("creating {}", krate.display()), e))?;
    std::fs::write(krate.join("Cargo.toml"), &src.cargo_toml).map_err(|e| io_err("writing Cargo.toml", e))?;
    std::fs::write(krate.join("src/main.rs"), &src.main).map_err(|e| io_err("writing main.rs", e))?;
    // The notebook's resolved versions, so the job builds what the cells were built with.
    if let Some(lock) = lock.filter(|l| l.exists()) {
        let _ = std::fs::copy(lock, krate.join("Cargo.lock"));
    }
    let mut cmd = Command::new("cargo");
    cmd.args(["build", "--message-format=json-diagnostic-short"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", krate.join("target"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(b) = build_dir {
        cmd.env("CARGO_BUILD_BUILD_DIR", b);
    }
    let t0 = Instant::now();
    state.begin_cell();
    let out = cmd.spawn().and_then(|mut child| {
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let err_thread = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
            s
        });
        let messages: Vec<Value> = BufReader::new(stdout).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect();
        let status = child.wait()?;
        Ok((status, messages, err_thread.join().unwrap_or_default()))
    });
    state.end_cell();
    let interrupted = state.interrupted.load(Ordering::SeqCst);
    let (status, messages, stderr) = out.map_err(|e| io_err("running cargo", e))?;
    if interrupted {
        return Err(crate::session::errors::interrupted(false, &[]));
    }
    if !status.success() {
        return Err(compile_error(src, &messages, &stderr, body_offset));
    }
    let built = krate.join("target/debug").join(&src.bin);
    std::fs::rename(&built, dir.join("program")).map_err(|e| io_err(&format!("moving {}", built.display()), e))?;
    let _ = std::fs::remove_dir_all(krate.join("target"));
    Ok(t0.elapsed().as_secs_f64())
}

/// The build's errors, each in the cell's lines where it points into the body.
fn compile_error(src: &Source, messages: &[Value], stderr: &str, body_offset: usize) -> ErrorContent {
    let mut lines = Vec::new();
    let mut first = None;
    for m in messages.iter().filter(|m| m["reason"] == "compiler-message") {
        let msg = &m["message"];
        if msg["level"] != "error" {
            continue;
        }
        let text = msg["message"].as_str().unwrap_or_default();
        let span = msg["spans"].as_array().and_then(|s| s.iter().find(|s| s["is_primary"] == true));
        let line = span.and_then(|s| s["line_start"].as_u64()).unwrap_or(0) as usize;
        let col = span.and_then(|s| s["column_start"].as_u64()).unwrap_or(0);
        let code = msg["code"]["code"].as_str().map(|c| format!("[{c}] ")).unwrap_or_default();
        let described = if let Some((_, v)) = src.input_lines.iter().find(|(l, _)| *l == line) {
            format!("{code}the job cannot take `{}` (type `{}`): {text}", v.name, v.ty)
        } else if line >= src.body_line && line < src.body_line + src.body_lines.max(1) {
            format!("{code}{text}\n  --> cell line {}, column {col}", line - src.body_line + 1 + body_offset)
        } else {
            let file = span.and_then(|s| s["file_name"].as_str()).unwrap_or("?");
            format!("{code}{text}\n  --> {file}:{line}:{col} (the job's program, from the notebook's items)")
        };
        first.get_or_insert_with(|| described.lines().next().unwrap_or_default().to_string());
        lines.push(described);
    }
    if lines.is_empty() {
        // Not rustc's: a dependency that does not resolve, a missing toolchain.
        let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim_start().starts_with("Compiling") && !l.trim().is_empty()).collect();
        let text = tail[tail.len().saturating_sub(12)..].join("\n");
        return ErrorContent::new("CompilationError", format!("building the job's program failed:\n{text}"));
    }
    let evalue = first.unwrap_or_default();
    let mut traceback = vec![format!("CompilationError: {evalue}"), "(building the Slurm job's program)".to_string()];
    traceback.extend(lines);
    ErrorContent { ename: "CompilationError".into(), evalue, traceback }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::magic::codegen::Var;

    /// A job's program errors point at the cell's lines, or at the input that cannot cross.
    #[test]
    fn errors_point_at_the_cell() {
        let inputs = [Var { name: "w".into(), ty: "Vec<f64>".into() }];
        let p = crate::magic::codegen::example_program(&inputs);
        let s = p.source();
        let msg = |line: usize| {
            serde_json::json!({"reason": "compiler-message", "message": {"level": "error", "message": "mismatched types", "code": {"code": "E0308"},
                "spans": [{"is_primary": true, "line_start": line, "column_start": 3, "file_name": "src/main.rs"}]}})
        };
        let e = compile_error(&s, &[msg(s.body_line + 1)], "", 1);
        assert_eq!(e.evalue, "[E0308] mismatched types");
        assert!(e.traceback.iter().any(|t| t.contains("--> cell line 3, column 3")), "{:?}", e.traceback);
        let e = compile_error(&s, &[msg(s.input_lines[0].0)], "", 1);
        assert!(e.evalue.contains("the job cannot take `w` (type `Vec<f64>`)"), "{}", e.evalue);
    }
}
