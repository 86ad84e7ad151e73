//! The kernel's side of Jupyter comms: the open comms and the targets the notebook's process
//! registered, relayed both ways between the frontend and evcxr's child, whose `dryml` holds the
//! other end (`dryml::widgets::comm`). Comm messages from the frontend are handled on the shell
//! task at once, so they reach the child while a cell runs. The same link tells the child the
//! directory an experiment's networks write TensorBoard runs to.

use crate::protocol::published::Published;
use crate::protocol::{CommRequest, Io};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

use crate::child::{frame, TAG_COMM, TAG_TENSORBOARD, TAG_WIDGETS};
/// The target JupyterLab's widget manager opens a comm to when it attaches to a kernel, to read
/// every widget's state at once (`request_states`); the kernel answers it from its copy of the
/// states. Its `comm_open` is also how the kernel knows widgets render.
pub const WIDGET_CONTROL: &str = "jupyter.widget.control";
/// The target of widget models.
pub const WIDGET: &str = "jupyter.widget";

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
    /// Every open widget model's state as both sides last set it (each passes through here), so
    /// a reloaded page gets them all at once on its control comm.
    states: BTreeMap<String, serde_json::Map<String, Value>>,
    /// Where an open experiment's networks write TensorBoard runs (empty: none; kept for a
    /// replaced child).
    tensorboard: Vec<u8>,
}

impl Inner {
    /// Keeps the widget states in step with a message either way.
    fn track(&mut self, op: &str, id: &str, target: Option<&str>, data: &Value) {
        let state = data["state"].as_object();
        match (op, state) {
            ("open", Some(s)) if target == Some(WIDGET) => {
                self.states.insert(id.to_string(), s.clone());
            }
            ("msg", Some(s)) if data["method"] == "update" => {
                if let Some(mine) = self.states.get_mut(id) {
                    mine.extend(s.clone());
                }
            }
            ("close", _) => {
                self.states.remove(id);
            }
            _ => {}
        }
    }

    /// The control comm's answer to `request_states`.
    fn all_states(&self) -> Value {
        let states: serde_json::Map<String, Value> = self
            .states
            .iter()
            .map(|(id, s)| {
                let model = json!({
                    "model_name": s.get("_model_name"), "model_module": s.get("_model_module"),
                    "model_module_version": s.get("_model_module_version"), "state": s,
                });
                (id.clone(), model)
            })
            .collect();
        json!({"method": "update_states", "states": states, "buffer_paths": []})
    }
}

#[derive(Default)]
pub struct Comms {
    inner: Mutex<Inner>,
}

/// A comm message on iopub; its metadata is the message's own, as ipykernel sends it.
fn publish(io: &Io, op: &str, comm_id: &str, target: Option<&str>, data: &Value, metadata: &Value) {
    let (comm_id, data) = (comm_id.to_string(), data.clone());
    let message = match op {
        "open" => Published::CommOpen { comm_id, target_name: target.unwrap_or_default().to_string(), data },
        "close" => Published::CommClose { comm_id, data },
        _ => Published::CommMsg { comm_id, data },
    };
    let metadata = if metadata.is_object() { metadata.clone() } else { json!({}) };
    io.publish_with(message, metadata);
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
            g.states.clear();
            g.parent = None;
            if g.widgets {
                let _ = child.write_all(&frame(TAG_WIDGETS, b""));
            }
            if !g.tensorboard.is_empty() {
                let _ = child.write_all(&frame(TAG_TENSORBOARD, &g.tensorboard));
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

    /// Tells the child where every network trained from now writes its TensorBoard run (empty:
    /// nowhere); false when the child could not be told.
    pub fn set_tensorboard(&self, dir: &[u8]) -> bool {
        let mut g = self.lock();
        g.tensorboard = dir.to_vec();
        g.child.as_mut().is_some_and(|c| c.write_all(&frame(TAG_TENSORBOARD, dir)).is_ok())
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
            g.track(op, id, target, &body["data"]);
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
        let control = match req.op {
            "open" => req.target_name.as_deref() == Some(WIDGET_CONTROL),
            _ => g.open.get(&req.comm_id).is_some_and(|t| t == WIDGET_CONTROL),
        };
        if control {
            return self.control(g, req, io);
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
        g.track(req.op, &req.comm_id, req.target_name.as_deref(), &req.data);
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

    /// The widget manager's control comm, answered here: it opens it when it attaches (so widgets
    /// render: the child is told), asks for every state, and closes it.
    fn control(&self, mut g: std::sync::MutexGuard<'_, Inner>, req: CommRequest, io: &Io) {
        match req.op {
            "open" => {
                g.open.insert(req.comm_id, WIDGET_CONTROL.to_string());
                if !g.widgets {
                    g.widgets = true;
                    if let Some(c) = g.child.as_mut() {
                        let _ = c.write_all(&frame(TAG_WIDGETS, b""));
                    }
                }
            }
            "close" => {
                g.open.remove(&req.comm_id);
            }
            _ if req.data["method"] == "request_states" => {
                let states = g.all_states();
                drop(g);
                publish(io, "msg", &req.comm_id, None, &states, &json!({}));
            }
            _ => {}
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
