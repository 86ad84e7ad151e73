//! The kernel's side of Jupyter comms: the open comms and the targets the notebook's process
//! registered, relayed both ways between the frontend and evcxr's child, whose `dryml` holds the
//! other end (`dryml::widgets::comm`). Comm messages from the frontend are handled on the shell
//! task at once, so they reach the child while a cell runs. The same link tells the child the
//! directory an experiment's networks write TensorBoard runs to.

use crate::protocol::published::Published;
use crate::protocol::{CommOp, CommRequest, Io};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

use crate::child::{frame, TAG_COMM, TAG_PRELOAD, TAG_TENSORBOARD, TAG_WIDGETS};
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
    /// Keeps the table of open comms and the widget states in step with a message either way.
    fn track(&mut self, m: &CommRequest) {
        let state = m.data["state"].as_object();
        match (&m.op, state) {
            (CommOp::Open { target_name }, state) => {
                self.open.insert(m.comm_id.clone(), target_name.clone());
                if let (WIDGET, Some(s)) = (target_name.as_str(), state) {
                    self.states.insert(m.comm_id.clone(), s.clone());
                }
            }
            (CommOp::Msg, Some(s)) if m.data["method"] == "update" => {
                if let Some(mine) = self.states.get_mut(&m.comm_id) {
                    mine.extend(s.clone());
                }
            }
            (CommOp::Msg, _) => {}
            (CommOp::Close, _) => {
                self.open.remove(&m.comm_id);
                self.states.remove(&m.comm_id);
            }
        }
    }

    /// The control comm's answer to `request_states`.
    fn all_states(&self) -> Value {
        let states = (self.states.iter())
            .map(|(id, s)| {
                let model = Model {
                    model_name: s.get("_model_name"),
                    model_module: s.get("_model_module"),
                    model_module_version: s.get("_model_module_version"),
                    state: s,
                };
                (id.as_str(), model)
            })
            .collect();
        let update = UpdateStates { method: "update_states", states, buffer_paths: [] };
        serde_json::to_value(update).expect("widget states serialise")
    }
}

/// The widget manager's answer to `request_states`: every widget's model and state.
#[derive(serde::Serialize)]
struct UpdateStates<'a> {
    method: &'static str,
    states: BTreeMap<&'a str, Model<'a>>,
    buffer_paths: [(); 0],
}

/// A widget's model, as the manager rebuilds it.
#[derive(serde::Serialize)]
struct Model<'a> {
    model_name: Option<&'a Value>,
    model_module: Option<&'a Value>,
    model_module_version: Option<&'a Value>,
    state: &'a serde_json::Map<String, Value>,
}

/// A comm message as the child reads it.
#[derive(serde::Serialize)]
struct ToChild<'a> {
    op: &'static str,
    comm_id: &'a str,
    target_name: Option<&'a str>,
    data: &'a Value,
    metadata: &'a Value,
}

/// An open comm in `comm_info_reply`.
#[derive(serde::Serialize)]
struct CommInfo<'a> {
    target_name: &'a str,
}

#[derive(Default)]
pub struct Comms {
    inner: Mutex<Inner>,
}

/// A comm message on iopub; its metadata is the message's own, as ipykernel sends it.
fn publish(io: &Io, m: CommRequest) {
    let CommRequest { op, comm_id, data, metadata } = m;
    let message = match op {
        CommOp::Open { target_name } => Published::CommOpen { comm_id, target_name, data },
        CommOp::Close => Published::CommClose { comm_id, data },
        CommOp::Msg => Published::CommMsg { comm_id, data },
    };
    let metadata = if metadata.is_object() { metadata } else { Value::Object(Default::default()) };
    io.publish_with(message, metadata);
}

/// A message that closes `comm_id`.
fn closing(comm_id: &str) -> CommRequest {
    CommRequest {
        op: CommOp::Close,
        comm_id: comm_id.to_string(),
        data: Value::Object(Default::default()),
        metadata: Value::Object(Default::default()),
    }
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
                publish(&io, closing(id));
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

    /// Has the child load `lib` on a thread of its own, beside the build of the cell that needs
    /// it; false when the child could not be told.
    pub fn preload(&self, lib: &std::path::Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let frame = frame(TAG_PRELOAD, lib.as_os_str().as_bytes());
        self.lock().child.as_mut().is_some_and(|c| c.write_all(&frame).is_ok())
    }

    /// A cell began: what the child sends from now on is that cell's output.
    pub fn cell_began(&self) {
        self.lock().parent = None;
    }

    /// A `DRYML_COMM` line from the child: a target it registered, or a comm message, which is
    /// published on iopub and kept in the table.
    pub fn from_child(&self, body: &Value, cell: Option<Io>) {
        let target = || body["target_name"].as_str().unwrap_or_default().to_string();
        let op = match body["op"].as_str().unwrap_or("msg") {
            "target" => {
                self.lock().targets.insert(target());
                return;
            }
            "open" => CommOp::Open { target_name: target() },
            "close" => CommOp::Close,
            _ => CommOp::Msg,
        };
        let m = CommRequest::read(op, body);
        let io = {
            let mut g = self.lock();
            g.track(&m);
            g.parent.clone().or(cell)
        };
        if let Some(io) = io {
            publish(&io, m);
        }
    }

    /// A comm message from the frontend: relayed to the child when it is for a registered target
    /// or an open comm; otherwise refused as ipykernel does, with a `comm_close`.
    pub fn from_frontend(&self, req: CommRequest, io: &Io) {
        let mut g = self.lock();
        let control = match req.op.target() {
            Some(target) => target == WIDGET_CONTROL,
            None => g.open.get(&req.comm_id).is_some_and(|t| t == WIDGET_CONTROL),
        };
        if control {
            return self.control(g, req, io);
        }
        let known = match req.op.target() {
            Some(target) => g.targets.contains(target),
            None => g.open.contains_key(&req.comm_id),
        };
        if !known {
            drop(g);
            match req.op.target() {
                Some(target) => tracing::info!("comm_open to target {target:?}, which nothing registered: closed"),
                None => tracing::info!("{} for comm {}, which is not open: ignored", req.op.name(), req.comm_id),
            }
            if req.op != CommOp::Close {
                publish(io, closing(&req.comm_id));
            }
            return;
        }
        g.track(&req);
        g.parent = Some(io.clone());
        let msg = ToChild {
            op: req.op.name(),
            comm_id: &req.comm_id,
            target_name: req.op.target(),
            data: &req.data,
            metadata: &req.metadata,
        };
        let frame = frame(TAG_COMM, &serde_json::to_vec(&msg).expect("a comm message serialises"));
        let sent = g.child.as_mut().is_some_and(|c| c.write_all(&frame).is_ok());
        if !sent {
            tracing::warn!("a comm message could not reach the child");
        }
    }

    /// The widget manager's control comm, answered here: it opens it when it attaches (so widgets
    /// render: the child is told), asks for every state, and closes it.
    fn control(&self, mut g: std::sync::MutexGuard<'_, Inner>, req: CommRequest, io: &Io) {
        match req.op {
            CommOp::Open { .. } => {
                g.open.insert(req.comm_id, WIDGET_CONTROL.to_string());
                if !g.widgets {
                    g.widgets = true;
                    if let Some(c) = g.child.as_mut() {
                        let _ = c.write_all(&frame(TAG_WIDGETS, b""));
                    }
                }
            }
            CommOp::Close => {
                g.open.remove(&req.comm_id);
            }
            CommOp::Msg if req.data["method"] == "request_states" => {
                let data = g.all_states();
                drop(g);
                publish(
                    io,
                    CommRequest {
                        op: CommOp::Msg,
                        comm_id: req.comm_id,
                        data,
                        metadata: Value::Object(Default::default()),
                    },
                );
            }
            CommOp::Msg => {}
        }
    }

    /// `comm_info_reply`'s `comms`: the open comms, of `target` alone when it names one.
    pub fn info(&self, target: Option<&str>) -> Value {
        let g = self.lock();
        let comms: serde_json::Map<String, Value> = g
            .open
            .iter()
            .filter(|(_, t)| target.is_none_or(|want| want == t.as_str()))
            .map(|(id, t)| (id.clone(), serde_json::to_value(CommInfo { target_name: t }).expect("serialises")))
            .collect();
        Value::Object(comms)
    }
}
