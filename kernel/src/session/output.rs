//! Kernel side of the child's output socket: publishes user stdout as it arrives, turns `dryml`
//! display lines into `display_data`/`update_display_data`/`clear_output`, and signals the
//! session when a cell's output is complete.

use super::state::CellState;
use crate::child::{TAG_CONTROL, TAG_OUT, TAG_SYNC};
use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Listens at `path`; each child (a new one after every restart) connects once.
pub fn listen(path: &Path, state: Arc<CellState>, sync_tx: crossbeam_channel::Sender<()>) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("dryml-stream-accept".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let (state, sync_tx) = (state.clone(), sync_tx.clone());
                let _ = std::thread::Builder::new()
                    .name("dryml-stream".into())
                    .spawn(move || serve(conn, &state, &sync_tx));
            }
        })?;
    Ok(())
}

fn serve(mut conn: UnixStream, state: &CellState, sync_tx: &crossbeam_channel::Sender<()>) {
    // Bytes of a UTF-8 character split across two writes wait here.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let mut head = [0u8; 5];
        if conn.read_exact(&mut head).is_err() {
            break;
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut payload = vec![0u8; len];
        if conn.read_exact(&mut payload).is_err() {
            break;
        }
        match head[0] {
            TAG_OUT => {
                carry.extend_from_slice(&payload);
                let valid = match std::str::from_utf8(&carry) {
                    Ok(_) => carry.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => carry.len(),
                };
                let text = String::from_utf8_lossy(&carry[..valid]).into_owned();
                carry.drain(..valid);
                state.stream("stdout", &text);
            }
            TAG_SYNC => {
                let _ = sync_tx.send(());
            }
            TAG_CONTROL => control(&String::from_utf8_lossy(&payload), state),
            other => tracing::warn!("unknown frame tag {other} from the child"),
        }
    }
}

/// `DRYML_PANIC`, `DRYML_DISPLAY {json}`, `DRYML_CLEAR {json}`, `DRYML_ERROR {json}` and
/// `DRYML_POLLING {json}` lines from the child.
fn control(line: &str, state: &CellState) {
    use dryml::protocol::{CLEAR, DISPLAY, ERROR, PANIC, POLLING};
    if line == PANIC {
        state.panicked.store(true, Ordering::SeqCst);
        return;
    }
    let (kind, body) = line.split_once(' ').unwrap_or((line, "{}"));
    let body: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => {
            state.stream("stderr", &format!("dryml: bad {kind} message from the cell: {e}\n"));
            return;
        }
    };
    if kind == POLLING {
        if body["on"].as_bool().unwrap_or(false) {
            state.polling.fetch_add(1, Ordering::SeqCst);
        } else {
            let _ = state.polling.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
        return;
    }
    if kind == ERROR {
        let text = |k: &str| body[k].as_str().unwrap_or("").to_string();
        *state.raised.lock().unwrap() = Some((text("ename"), text("evalue")));
        return;
    }
    let Some(io) = state.io() else { return };
    match kind {
        DISPLAY => {
            let update = body["update"].as_bool().unwrap_or(false);
            let mut content = json!({
                "data": body["data"].clone(),
                "metadata": body.get("metadata").cloned().unwrap_or(json!({})),
                "transient": {},
            });
            if let Some(id) = body["display_id"].as_str() {
                content["transient"] = json!({"display_id": id});
            }
            let msg_type = if update { "update_display_data" } else { "display_data" };
            io.publish(msg_type, content);
        }
        CLEAR => {
            let wait = body["wait"].as_bool().unwrap_or(false);
            io.publish("clear_output", json!({"wait": wait}));
        }
        other => tracing::warn!("unknown control line {other} from the child"),
    }
}
