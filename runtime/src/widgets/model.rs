//! A widget's model: the state both sides keep in step over a `jupyter.widget` comm (ipywidgets'
//! protocol, version 2), the observers of its keys, and how it shows in a cell.

use super::comm::Comm;
use crate::display::wire::{emit, in_kernel};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// The widget protocol's version, sent in each `comm_open`'s metadata.
pub const PROTOCOL_VERSION: &str = "2.1.0";
/// `@jupyter-widgets/controls`' and `@jupyter-widgets/base`'s versions in ipywidgets 8.
pub const CONTROLS_VERSION: &str = "2.0.0";
/// The view mime type JupyterLab's widget manager renders.
pub const VIEW_MIME: &str = "application/vnd.jupyter.widget-view+json";

type Observer = Box<dyn Fn(&Value) + Send + Sync>;

struct Shared {
    state: Mutex<Map<String, Value>>,
    /// By key; `custom` for custom messages (a button's click).
    observers: Mutex<Vec<(String, Observer)>>,
}

/// One widget's model: its comm and state. Clones are the same model.
#[derive(Clone)]
pub struct Model {
    comm: Comm,
    shared: Arc<Shared>,
    /// What its text form says (`IntSlider`).
    kind: &'static str,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}(", self.kind)?;
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut first = true;
        for key in ["value", "description", "index", "_options_labels", "min", "max"] {
            if let Some(v) = state.get(key).filter(|v| !v.is_null() && *v != "") {
                write!(f, "{}{key}={v}", if first { "" } else { ", " })?;
                first = false;
            }
        }
        write!(f, ")")
    }
}

impl Model {
    /// Opens the model's comm with its whole state: `model` and `view` are the JavaScript class
    /// names (`IntSliderModel`, `IntSliderView`) in `module` at `version`.
    pub fn open(kind: &'static str, module: &str, version: &str, model: &str, view: &str, state: Value) -> Model {
        let mut full = json!({
            "_model_name": model, "_model_module": module, "_model_module_version": version,
            "_view_name": view, "_view_module": module, "_view_module_version": version,
        });
        if let (Some(f), Value::Object(s)) = (full.as_object_mut(), state) {
            f.extend(s);
        }
        let data = json!({"state": full, "buffer_paths": []});
        let comm = Comm::open("jupyter.widget", data, json!({"version": PROTOCOL_VERSION}));
        let state = match full {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let shared = Arc::new(Shared { state: Mutex::new(state), observers: Mutex::new(Vec::new()) });
        let (weak, reply) = (Arc::downgrade(&shared), comm.clone());
        comm.on_msg(move |data| {
            if let Some(shared) = weak.upgrade() {
                incoming(&shared, &reply, data);
            }
        });
        Model { comm, shared, kind }
    }

    /// A model of `@jupyter-widgets/controls` 2.0.
    pub fn control(kind: &'static str, model: &str, view: &str, state: Value) -> Model {
        Model::open(kind, "@jupyter-widgets/controls", CONTROLS_VERSION, model, view, state)
    }

    /// The model's id (its comm's), which views and containers name.
    pub fn id(&self) -> &str {
        self.comm.id()
    }

    /// Its comm.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// A key of its state, as the frontend last set it or this side did.
    pub fn get(&self, key: &str) -> Value {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned().unwrap_or(Value::Null)
    }

    /// Sets keys of its state on both sides; their observers run.
    pub fn set(&self, changes: Value) {
        let Value::Object(changes) = changes else { return };
        self.comm.send(json!({"method": "update", "state": changes, "buffer_paths": []}));
        apply(&self.shared, &changes);
    }

    /// Calls `f` with `key`'s new value whenever either side changes it (on the child's comm
    /// thread when the frontend did). `custom` hears custom messages' content.
    pub fn observe(&self, key: &str, f: impl Fn(&Value) + Send + Sync + 'static) {
        self.shared.observers.lock().unwrap_or_else(|e| e.into_inner()).push((key.to_string(), Box::new(f)));
    }

    /// Closes the widget: its views say so, and the frontend forgets the model.
    pub fn close(&self) {
        self.comm.close(json!({}));
    }

    /// The widget-view bundle's JSON for this model.
    fn view(&self) -> Value {
        json!({"version_major": 2, "version_minor": 0, "model_id": self.id()})
    }

    /// Shows the widget as a new output of the running cell.
    pub fn show(&self) {
        let text = format!("{self:?}");
        if !in_kernel() {
            println!("{text}");
            return;
        }
        let data = json!({VIEW_MIME: self.view(), "text/plain": text});
        emit(format!("{} {{\"data\":{data},\"update\":false}}", crate::sys::protocol::DISPLAY));
    }

    /// How evcxr shows the widget as a cell's value.
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT {VIEW_MIME}\n{}\nEVCXR_END_CONTENT", self.view());
        // One line: evcxr reads the block up to its end marker.
        let text = format!("{self:?}").replace('\n', " ");
        println!("EVCXR_BEGIN_CONTENT text/plain\n{text}\nEVCXR_END_CONTENT");
    }
}

fn apply(shared: &Shared, changes: &Map<String, Value>) {
    shared.state.lock().unwrap_or_else(|e| e.into_inner()).extend(changes.clone());
    let observers = shared.observers.lock().unwrap_or_else(|e| e.into_inner());
    for (key, value) in changes {
        for (_, f) in observers.iter().filter(|(k, _)| k == key) {
            f(value);
        }
    }
}

/// A message from the frontend: a state update, a request for the whole state, or a custom
/// message (a click).
fn incoming(shared: &Shared, comm: &Comm, data: &Value) {
    match data["method"].as_str() {
        Some("update") => {
            if let Some(changes) = data["state"].as_object() {
                apply(shared, changes);
            }
        }
        Some("request_state") => {
            let state = shared.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
            comm.send(json!({"method": "update", "state": state, "buffer_paths": []}));
        }
        Some("custom") => {
            let observers = shared.observers.lock().unwrap_or_else(|e| e.into_inner());
            for (_, f) in observers.iter().filter(|(k, _)| k == "custom") {
                f(&data["content"]);
            }
        }
        _ => {}
    }
}

/// What every widget is: a model shown in a cell.
pub trait Widget {
    /// Its model.
    fn model(&self) -> &Model;
}

impl Widget for Model {
    fn model(&self) -> &Model {
        self
    }
}

/// A model reference as containers' `children` name it.
pub(super) fn reference(w: &dyn Widget) -> Value {
    json!(format!("IPY_MODEL_{}", w.model().id()))
}

#[cfg(test)]
pub(super) fn from_frontend(model: &Model, data: Value) -> bool {
    super::hub::deliver(json!({"op": "msg", "comm_id": model.id(), "data": data}).to_string().as_bytes())
}
