//! The kernel's side of Jupyter comms: the open comms and the targets the notebook's process
//! registered, relayed both ways between the frontend and evcxr's child, whose `dryml` holds the
//! other end (`dryml::widgets::comm`). Comm messages from the frontend are handled on the shell
//! task at once, so they reach the child while a cell runs.

use crate::protocol::{CommRequest, Io};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

use crate::child::{TAG_COMM, TAG_WIDGETS};
/// The target JupyterLab's widget manager opens a comm to when it attaches to a kernel (to read
/// every widget's state at once; refused here, it falls back to `comm_info` and each model's
/// `request_state`). Its `comm_open` is how the kernel knows widgets render.
pub const WIDGET_CONTROL: &str = "jupyter.widget.control";

#[derive(Default)]
struct Inner {
    /// Open comms and their targets.
    open: BTreeMap<String, String>,
    /// Targets the child registered: the frontend's `comm_open` to one of these is relayed.
    targets: BTreeSet<String>,
    /// The child's output socket, written the other way.
    child: Option<UnixStream>,
    /// The last frontend comm message since a cell began: what the child says in answer goes
    /// out as its output (ipykernel's parent for a comm handler's messages).
    parent: Option<Io>,
    /// The frontend's widget manager announced itself (kept for a replaced child).
    widgets: bool,
}

fn frame(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 5);
    frame.push(tag);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

#[derive(Default)]
pub struct Comms {
    inner: Mutex<Inner>,
}

fn publish(io: &Io, op: &str, comm_id: &str, target: Option<&str>, data: &Value, metadata: &Value) {
    let mut content = json!({"comm_id": comm_id, "data": data});
    let msg_type = match op {
        "open" => {
            content["target_name"] = json!(target.unwrap_or_default());
            content["metadata"] = metadata.clone();
            "comm_open"
        }
        "close" => "comm_close",
        _ => "comm_msg",
    };
    if op != "open" && !metadata.is_null() {
        content["metadata"] = metadata.clone();
    }
    io.publish(msg_type, content);
}

impl Comms {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new child connected (the first, or one after a restart): the old child's comms are
    /// gone, and the frontend is told so.
    pub fn connected(&self, mut child: UnixStream, io: Option<Io>) {
        let _ = child.set_write_timeout(Some(Duration::from_secs(2)));
        let old = {
            let mut g = self.lock();
            g.targets.clear();
            g.parent = None;
            if g.widgets {
                let _ = child.write_all(&frame(TAG_WIDGETS, b""));
            }
            g.child = Some(child);
            std::mem::take(&mut g.open)
        };
        if let Some(io) = io {
            for id in old.keys() {
                publish(&io, "close", id, None, &json!({}), &Value::Null);
            }
        }
    }

    /// A cell began: what the child sends from now on is that cell's output.
    pub fn cell_began(&self) {
        self.lock().parent = None;
    }

    /// A `DRYML_COMM` line from the child: published on iopub, and the table kept.
    pub fn from_child(&self, body: &Value, cell: Option<Io>) {
        let op = body["op"].as_str().unwrap_or("msg");
        let id = body["comm_id"].as_str().unwrap_or_default();
        let target = body["target_name"].as_str();
        let io = {
            let mut g = self.lock();
            match op {
                "target" => {
                    g.targets.extend(target.map(str::to_string));
                    return;
                }
                "open" => {
                    g.open.insert(id.to_string(), target.unwrap_or_default().to_string());
                }
                "close" => {
                    g.open.remove(id);
                }
                _ => {}
            }
            g.parent.clone().or(cell)
        };
        if let Some(io) = io {
            publish(&io, op, id, target, &body["data"], &body["metadata"]);
        }
    }

    /// A comm message from the frontend: relayed to the child when it is for a registered target
    /// or an open comm; otherwise refused as ipykernel does, with a `comm_close`.
    pub fn from_frontend(&self, req: CommRequest, io: &Io) {
        let mut g = self.lock();
        if req.op == "open" && req.target_name.as_deref() == Some(WIDGET_CONTROL) && !g.widgets {
            g.widgets = true;
            if let Some(c) = g.child.as_mut() {
                let _ = c.write_all(&frame(TAG_WIDGETS, b""));
            }
        }
        let known = match req.op {
            "open" => req.target_name.as_ref().is_some_and(|t| g.targets.contains(t)),
            _ => g.open.contains_key(&req.comm_id),
        };
        if !known {
            drop(g);
            match req.op {
                "open" => tracing::info!("comm_open to target {:?}, which nothing registered: closed", req.target_name),
                _ => tracing::info!("{} for comm {}, which is not open: ignored", req.op, req.comm_id),
            }
            if req.op != "close" {
                publish(io, "close", &req.comm_id, None, &json!({}), &Value::Null);
            }
            return;
        }
        match req.op {
            "open" => {
                g.open.insert(req.comm_id.clone(), req.target_name.clone().unwrap_or_default());
            }
            "close" => {
                g.open.remove(&req.comm_id);
            }
            _ => {}
        }
        g.parent = Some(io.clone());
        let msg = json!({
            "op": req.op, "comm_id": req.comm_id, "target_name": req.target_name,
            "data": req.data, "metadata": req.metadata,
        });
        let frame = frame(TAG_COMM, msg.to_string().as_bytes());
        let sent = g.child.as_mut().is_some_and(|c| c.write_all(&frame).is_ok());
        if !sent {
            tracing::warn!("a comm message could not reach the child");
        }
    }

    /// `comm_info_reply`'s `comms`: the open comms, of `target` alone when it names one.
    pub fn info(&self, target: Option<&str>) -> Value {
        let g = self.lock();
        let comms: serde_json::Map<String, Value> = g
            .open
            .iter()
            .filter(|(_, t)| target.is_none_or(|want| want == t.as_str()))
            .map(|(id, t)| (id.clone(), json!({"target_name": t})))
            .collect();
        Value::Object(comms)
    }
}
