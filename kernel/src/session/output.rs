//! Kernel side of the child's output socket: publishes user stdout as it arrives, turns `dryml`
//! display lines into `display_data`/`update_display_data`/`clear_output`, and signals the
//! session when a cell's output is complete; [`mime_bundle`] makes a cell's value its bundle.

use super::comms::Comms;
use super::state::CellState;
use crate::child::{TAG_CONTROL, TAG_OUT, TAG_SYNC};
use crate::protocol::published::{Published, StreamName, Transient};
use serde_json::Value;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

/// Listens at `path`; each child (a new one after every restart) connects once.
pub fn listen(
    path: &Path,
    state: Arc<CellState>,
    comms: Arc<Comms>,
    sync_tx: crossbeam_channel::Sender<u64>,
) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new().name("dryml-stream-accept".into()).spawn(move || {
        for conn in listener.incoming().flatten() {
            let (state, comms, sync_tx) = (state.clone(), comms.clone(), sync_tx.clone());
            let serving = move || serve(conn, &state, &comms, &sync_tx);
            let _ = std::thread::Builder::new().name("dryml-stream".into()).spawn(serving);
        }
    })?;
    Ok(())
}

fn serve(mut conn: UnixStream, state: &CellState, comms: &Comms, sync_tx: &crossbeam_channel::Sender<u64>) {
    // The same socket carries the frontend's comm messages the other way.
    match conn.try_clone() {
        Ok(back) => comms.connected(back, state.request_io()),
        Err(e) => tracing::warn!("comms disabled: {e}"),
    }
    // Bytes of a UTF-8 character split across two writes wait here.
    let mut carry: Vec<u8> = Vec::new();
    while let Some((tag, payload)) = crate::child::read_frame(&mut conn) {
        match tag {
            TAG_OUT => {
                carry.extend_from_slice(&payload);
                let valid = match std::str::from_utf8(&carry) {
                    Ok(_) => carry.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => carry.len(),
                };
                let text = String::from_utf8_lossy(&carry[..valid]).into_owned();
                carry.drain(..valid);
                state.stream(StreamName::Stdout, &text);
            }
            TAG_SYNC => match std::str::from_utf8(&payload).ok().and_then(|n| n.parse().ok()) {
                Some(n) => {
                    let _ = sync_tx.send(n);
                }
                None => tracing::warn!("a sync frame without its cell end's number"),
            },
            TAG_CONTROL => control(&String::from_utf8_lossy(&payload), state, comms),
            other => tracing::warn!("unknown frame tag {other} from the child"),
        }
    }
}

/// `DRYML_PANIC`, `DRYML_DISPLAY {json}`, `DRYML_CLEAR {json}`, `DRYML_ERROR {json}` and
/// `DRYML_POLLING {json}` lines from the child, and `DRYML_COMM {json}`, a comm's message.
fn control(line: &str, state: &CellState, comms: &Comms) {
    use dryml_sys::protocol::{CLEAR, COMM, DISPLAY, ERROR, PANIC, POLLING};
    let (kind, body) = line.split_once(' ').unwrap_or((line, "{}"));
    if kind == PANIC {
        // The backtrace of a panic that ends the cell (kept by the child's panic hook).
        let trace = serde_json::from_str::<Value>(body).ok().and_then(|v| v["backtrace"].as_str().map(str::to_string));
        state.panicked(trace);
        return;
    }
    let body: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => {
            state.stream(StreamName::Stderr, &format!("dryml: bad {kind} message from the cell: {e}\n"));
            return;
        }
    };
    if kind == POLLING {
        state.polling(body["on"].as_bool().unwrap_or(false));
        return;
    }
    if kind == COMM {
        // Not `state.io()`: a hidden eval's quiet does not apply to a widget's messages.
        comms.from_child(&body, state.request_io());
        return;
    }
    if kind == ERROR {
        let text = |k: &str| body[k].as_str().unwrap_or("").to_string();
        state.raised(text("ename"), text("evalue"));
        return;
    }
    let Some(io) = state.io() else { return };
    match kind {
        DISPLAY => {
            let id = body["display_id"].as_str();
            let update = match (&body["update"], id) {
                (Value::String(a), Some(id)) if a == "auto" => state.mark_shown(io.parent().msg_id(), id),
                (v, _) => v.as_bool().unwrap_or(false),
            };
            let data = body["data"].clone();
            let metadata = body.get("metadata").cloned().unwrap_or_else(|| Value::Object(Default::default()));
            let transient = Transient { display_id: id.map(str::to_string) };
            io.publish(if update {
                Published::UpdateDisplayData { data, metadata, transient }
            } else {
                Published::DisplayData { data, metadata, transient }
            });
        }
        CLEAR => {
            let wait = body["wait"].as_bool().unwrap_or(false);
            io.publish(Published::ClearOutput { wait });
        }
        other => tracing::warn!("unknown control line {other} from the child"),
    }
}

/// What `:timing` shows for a cell that took `took`: evcxr_jupyter's grey line, and its text.
pub fn took(took: std::time::Duration) -> Value {
    let ms = took.as_millis();
    let html = format!("<span style=\"color: rgba(0,0,0,0.4);\">Took {ms}ms</span>");
    crate::protocol::published::Bundle::html(format!("Took {ms}ms"), html).value()
}

/// evcxr's mime outputs as a Jupyter bundle; `text/plain` is added when a value shows only HTML.
pub(super) fn mime_bundle(outputs: evcxr::EvalOutputs) -> Option<Value> {
    // A cell ending in a loop or a call that returns nothing has no result to show (as Python's
    // None), rather than an `()` output under every such cell.
    let unit = outputs.content_by_mime_type.len() == 1 && outputs.get("text/plain") == Some("()");
    if outputs.content_by_mime_type.is_empty() || unit {
        return None;
    }
    let mut data = serde_json::Map::new();
    for (mime, content) in outputs.content_by_mime_type {
        let value = if mime.ends_with("json") {
            serde_json::from_str(&content).unwrap_or(Value::String(content))
        } else {
            Value::String(content)
        };
        data.insert(mime, value);
    }
    if !data.contains_key("text/plain") {
        let fallback = data
            .get("text/html")
            .and_then(Value::as_str)
            .map(dryml::__kernel::display::strip_tags)
            .unwrap_or_else(|| format!("<{}>", data.keys().cloned().collect::<Vec<_>>().join(", ")));
        data.insert("text/plain".into(), Value::String(fallback));
    }
    Some(Value::Object(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::published::ExecutionState;
    use crate::protocol::wire::Message;
    use crate::protocol::{Io, Outbox};
    use crate::session::state::Phase;
    use serde_json::json;
    use std::io::Write;
    use std::time::Duration;

    fn frame(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![tag];
        f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_childs_frames_become_messages_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.sock");
        let (iopub_tx, mut iopub) = tokio::sync::mpsc::unbounded_channel();
        let (other, _keep) = tokio::sync::mpsc::unbounded_channel();
        let (_input_tx, input) = crossbeam_channel::unbounded();
        let limits = crate::protocol::flow::Limits { delay: Duration::from_secs(3600), ..Default::default() };
        let out = Outbox::new(crate::protocol::flow::Flow::new(iopub_tx, limits), other.clone(), other, input);
        let parent = Message {
            identities: vec![],
            header: json!({"msg_id": "cell-1", "msg_type": "execute_request", "session": "s"}),
            parent_header: json!({}),
            metadata: json!({}),
            content: json!({}),
            buffers: vec![],
        };
        let state = Arc::new(CellState::default());
        state.set_io(Io::new(out, parent, true, 1));
        // A cell's user code runs: its loops' `DRYML_POLLING` lines count for it.
        state.begin_cell();
        let (sync_tx, sync_rx) = crossbeam_channel::unbounded();
        listen(&path, state.clone(), Arc::default(), sync_tx).unwrap();

        let mut child = UnixStream::connect(&path).unwrap();
        // "é" split across two writes arrives whole.
        child.write_all(&frame(TAG_OUT, b"h\xc3")).unwrap();
        child.write_all(&frame(TAG_OUT, b"\xa9llo")).unwrap();
        let display = br#"DRYML_DISPLAY {"data": {"text/plain": "7/8"}, "update": true, "display_id": "bar"}"#;
        child.write_all(&frame(TAG_CONTROL, display)).unwrap();
        child.write_all(&frame(TAG_CONTROL, br#"DRYML_POLLING {"on": true}"#)).unwrap();
        child.write_all(&frame(TAG_CONTROL, br#"DRYML_ERROR {"ename": "SandboxFailed", "evalue": "no"}"#)).unwrap();
        child.write_all(&frame(TAG_CONTROL, b"DRYML_CLEAR {not json")).unwrap();
        child.write_all(&frame(TAG_SYNC, b"7")).unwrap();
        // Frames on one connection are handled in order: after the sync, all of them were.
        assert_eq!(sync_rx.recv_timeout(Duration::from_secs(5)).expect("the sync frame"), 7);

        // Stream text waits for the next message: the status that ends a cell.
        state.io().unwrap().publish(Published::Status { execution_state: ExecutionState::Idle });
        let mut got = Vec::new();
        while let Ok(q) = iopub.try_recv() {
            let m = q.msg.clone();
            assert_eq!(m.parent_header["msg_id"], "cell-1");
            got.push((m.msg_type().to_string(), m.content));
        }
        let texts: Vec<&str> =
            got.iter().filter(|(t, _)| t == "stream").map(|(_, c)| c["text"].as_str().unwrap()).collect();
        // Text from writes close together goes out as one message.
        assert_eq!(texts[0], "héllo");
        assert!(texts[1].starts_with("dryml: bad DRYML_CLEAR message from the cell"), "{texts:?}");
        let update = got.iter().find(|(t, _)| t == "update_display_data").expect("the display update");
        assert_eq!(update.1["transient"]["display_id"], "bar");
        assert_eq!(update.1["data"]["text/plain"], "7/8");
        let Phase::Running(run) = state.phase() else { panic!("the cell runs") };
        assert_eq!(run.polling, 1);
        assert_eq!(state.take_raised(), Some(("SandboxFailed".into(), "no".into())));
    }
}
