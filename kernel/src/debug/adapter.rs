//! lldb-dap, the debugger the bridge forwards to: a child process speaking the Debug Adapter
//! Protocol on its stdin and stdout (`Content-Length` framing), with a reader thread that hands
//! each response to whoever waits on its `request_seq` and each event to the bridge.

use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The largest message read from the adapter; a longer claim ends the session, unallocated.
const MAX_MESSAGE: usize = 64 << 20;

/// Writes one DAP message.
pub fn write_message(w: &mut impl Write, msg: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg)?;
    write!(w, "Content-Length: {}\r\n\r\n", body.len())?;
    w.write_all(&body)?;
    w.flush()
}

/// Reads one DAP message; `None` at the end of the stream.
pub fn read_message(r: &mut impl BufRead) -> std::io::Result<Option<Value>> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length:") {
            length = Some(n.trim().parse::<usize>().map_err(|_| bad(format!("a bad Content-Length: {n:?}")))?);
        }
    }
    let n = length.ok_or_else(|| bad("a message without Content-Length".into()))?;
    if n > MAX_MESSAGE {
        return Err(bad(format!("a message of {n} bytes (at most {MAX_MESSAGE})")));
    }
    let mut body = vec![0; n];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| bad(format!("a message that is not JSON: {e}")))
}

/// The lldb-dap program: `DRYML_LLDB_DAP`, else the first of `lldb-dap`, `lldb-dap-19`, ...
/// on the `PATH`.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DRYML_LLDB_DAP") {
        return Some(PathBuf::from(p));
    }
    let names = ["lldb-dap", "lldb-dap-21", "lldb-dap-20", "lldb-dap-19", "lldb-dap-18"];
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|d| names.iter().map(move |n| d.join(n))).find(|p| p.is_file())
}

type Waiting = Arc<Mutex<HashMap<i64, Sender<Value>>>>;

/// A running lldb-dap.
pub struct Adapter {
    child: Child,
    stdin: Mutex<ChildStdin>,
    seq: AtomicI64,
    waiting: Waiting,
    /// Its output ended (it exited or crashed).
    gone: Arc<AtomicBool>,
    /// It is being stopped (its end is no news).
    quitting: Arc<AtomicBool>,
}

impl Adapter {
    /// Starts `program`; its events go to `on_event`, on the reader thread, which calls
    /// `on_exit` if it exits before it is dropped.
    pub fn start(
        program: &Path,
        on_event: impl Fn(Value) + Send + 'static,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Adapter> {
        let mut child = Command::new(program)
            .arg("--repl-mode=variable")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let waiting: Waiting = Arc::default();
        let gone = Arc::new(AtomicBool::new(false));
        let quitting = Arc::new(AtomicBool::new(false));
        let (w, g, q) = (waiting.clone(), gone.clone(), quitting.clone());
        std::thread::Builder::new().name("lldb-dap reader".into()).spawn(move || {
            loop {
                match read_message(&mut stdout) {
                    Ok(Some(msg)) if msg["type"] == "response" => {
                        let waiter = msg["request_seq"]
                            .as_i64()
                            .and_then(|s| w.lock().unwrap_or_else(PoisonError::into_inner).remove(&s));
                        if let Some(tx) = waiter {
                            let _ = tx.send(msg);
                        }
                    }
                    Ok(Some(msg)) if msg["type"] == "event" => on_event(msg),
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            g.store(true, Ordering::SeqCst);
            // Whoever still waits hears that no answer will come.
            w.lock().unwrap_or_else(PoisonError::into_inner).clear();
            if !q.load(Ordering::SeqCst) {
                on_exit();
            }
        })?;
        Ok(Adapter { child, stdin: Mutex::new(stdin), seq: AtomicI64::new(1), waiting, gone, quitting })
    }

    /// It has exited (or crashed).
    pub fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a request; the receiver gets its response.
    pub fn send(&self, command: &str, arguments: Option<&Value>) -> Result<Receiver<Value>, String> {
        if self.gone.load(Ordering::SeqCst) {
            return Err("lldb-dap has exited".into());
        }
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let msg = super::dap::value(&super::dap::Outgoing { seq, kind: "request", command, arguments });
        let (tx, rx) = channel();
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner).insert(seq, tx);
        let mut stdin = self.stdin.lock().unwrap_or_else(PoisonError::into_inner);
        write_message(&mut *stdin, &msg).map_err(|e| format!("lldb-dap does not take requests: {e}"))?;
        Ok(rx)
    }

    /// Sends a request and waits for its response, at most `timeout`.
    pub fn request(&self, command: &str, arguments: Option<&Value>, timeout: Duration) -> Result<Value, String> {
        wait(&self.send(command, arguments)?, command, timeout)
    }
}

/// A response from `rx`, at most `timeout` away.
pub fn wait(rx: &Receiver<Value>, command: &str, timeout: Duration) -> Result<Value, String> {
    rx.recv_timeout(timeout).map_err(|e| match e {
        std::sync::mpsc::RecvTimeoutError::Timeout => {
            format!("lldb-dap did not answer `{command}` within {} s", timeout.as_secs())
        }
        std::sync::mpsc::RecvTimeoutError::Disconnected => format!("lldb-dap exited before it answered `{command}`"),
    })
}

impl Drop for Adapter {
    fn drop(&mut self) {
        self.quitting.store(true, Ordering::SeqCst);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_framed_by_their_byte_length() {
        let msg = json!({"seq": 1, "type": "request", "command": "evaluate", "arguments": {"expression": "héllo ∑"}});
        let mut bytes = Vec::new();
        write_message(&mut bytes, &msg).unwrap();
        write_message(&mut bytes, &json!({"seq": 2})).unwrap();
        let body = serde_json::to_vec(&msg).unwrap();
        assert!(bytes.starts_with(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes()));
        let mut r = std::io::Cursor::new(bytes);
        assert_eq!(read_message(&mut r).unwrap(), Some(msg));
        assert_eq!(read_message(&mut r).unwrap(), Some(json!({"seq": 2})));
        assert_eq!(read_message(&mut r).unwrap(), None);
    }

    #[test]
    fn a_bad_or_huge_frame_is_an_error_not_an_allocation() {
        let read = |s: &str| read_message(&mut std::io::Cursor::new(s.as_bytes().to_vec()));
        assert!(read("Content-Length: 1152921504606846976\r\n\r\n{}").unwrap_err().to_string().contains("at most"));
        assert!(read("Content-Length: x\r\n\r\n").unwrap_err().to_string().contains("bad Content-Length"));
        assert!(read("\r\n{}").unwrap_err().to_string().contains("without Content-Length"));
        assert!(read("Content-Length: 3\r\n\r\n{x}").unwrap_err().to_string().contains("not JSON"));
    }
}
