//! Jupyter comms from a cell: [`Comm`] opens one to a frontend target (or is handed one the
//! frontend opened to a [`register_target`]), sends, closes and hears the other side.
//!
//! A cell's side of a comm lives in the notebook's process; the kernel relays: what a cell sends
//! is a `DRYML_COMM` line it publishes on iopub, and what the frontend sends reaches the comm's
//! handler on the child's comm thread, while a cell runs or between cells. Outside the kernel a
//! comm has no other side: it sends nothing and hears nothing.

use super::hub::{self, KIND_COMM, KIND_TARGET};
use crate::display::wire::{emit, in_kernel};
use serde_json::{json, Value};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type MsgHandler = Box<dyn Fn(&Value) + Send + Sync>;

struct Inner {
    id: String,
    target: String,
    closed: AtomicBool,
    on_msg: Mutex<Vec<MsgHandler>>,
    on_close: Mutex<Vec<MsgHandler>>,
}

/// One comm: an id both sides know, under a target name. Clones are the same comm.
#[derive(Clone)]
pub struct Comm {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Comm({} to {:?}{})",
            self.inner.id,
            self.inner.target,
            if self.is_closed() { ", closed" } else { "" }
        )
    }
}

/// A fresh comm id: 32 hex digits, as ipykernel's uuid4 hex.
fn new_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

fn line(op: &str, comm_id: &str, target: Option<&str>, data: &Value, metadata: &Value) {
    if !in_kernel() {
        return;
    }
    let mut v = json!({"op": op, "comm_id": comm_id, "data": data, "metadata": metadata});
    if let Some(t) = target {
        v["target_name"] = json!(t);
    }
    emit(format!("{} {v}", crate::sys::protocol::COMM));
}

extern "C" fn on_comm(ctx: *const c_void, msg: *const u8, len: usize) {
    // Nothing may unwind into the kernel binary's thread.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `ctx` is the `Inner` that `attach` leaked for this registration; `msg` a live slice.
        let inner = unsafe { &*(ctx as *const Inner) };
        let msg: Value = serde_json::from_slice(unsafe { std::slice::from_raw_parts(msg, len) }).unwrap_or_default();
        let data = &msg["data"];
        if msg["op"] == "close" {
            inner.closed.store(true, Ordering::SeqCst);
            for f in inner.on_close.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                f(data);
            }
        } else {
            for f in inner.on_msg.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                f(data);
            }
        }
    });
}

impl Comm {
    /// Opens a comm to the frontend's `target` (`jupyter.widget` for widgets), with `data` and
    /// `metadata` in its `comm_open`.
    pub fn open(target: &str, data: Value, metadata: Value) -> Comm {
        let comm = Comm::attach(new_id(), target);
        line("open", &comm.inner.id, Some(target), &data, &metadata);
        comm
    }

    /// The comm `id` (opened by the frontend), registered to hear its messages.
    fn attach(id: String, target: &str) -> Comm {
        let inner = Arc::new(Inner {
            id,
            target: target.to_string(),
            closed: AtomicBool::new(false),
            on_msg: Mutex::new(Vec::new()),
            on_close: Mutex::new(Vec::new()),
        });
        // The registry holds one count for as long as the child lives: a handler may run after
        // every clone in the notebook is gone (the frontend's close).
        let ctx = Arc::into_raw(inner.clone()) as *const c_void;
        let (register, _) = hub::functions();
        // SAFETY: a live slice, and `ctx` is never freed.
        unsafe { register(KIND_COMM, inner.id.as_ptr(), inner.id.len(), on_comm, ctx) };
        Comm { inner }
    }

    /// The comm's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The target it was opened to.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// Whether either side closed it.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Sends a `comm_msg` (nothing once closed).
    pub fn send(&self, data: Value) {
        if !self.is_closed() {
            line("msg", &self.inner.id, None, &data, &json!({}));
        }
    }

    /// Closes the comm from this side: a `comm_close` with `data`, and no more messages either way.
    pub fn close(&self, data: Value) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        line("close", &self.inner.id, None, &data, &json!({}));
        let (_, unregister) = hub::functions();
        // SAFETY: a live slice.
        unsafe { unregister(KIND_COMM, self.inner.id.as_ptr(), self.inner.id.len()) };
    }

    /// Calls `f` with each `comm_msg`'s data from the frontend, on the child's comm thread.
    pub fn on_msg(&self, f: impl Fn(&Value) + Send + Sync + 'static) {
        self.inner.on_msg.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(f));
    }

    /// Calls `f` with the data of the frontend's `comm_close`.
    pub fn on_close(&self, f: impl Fn(&Value) + Send + Sync + 'static) {
        self.inner.on_close.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(f));
    }
}

type TargetHandler = Box<dyn Fn(Comm, &Value) + Send + Sync>;

struct Target {
    name: String,
    f: TargetHandler,
}

extern "C" fn on_open(ctx: *const c_void, msg: *const u8, len: usize) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `ctx` is the `Target` that `register_target` leaked; `msg` a live slice.
        let target = unsafe { &*(ctx as *const Target) };
        let msg: Value = serde_json::from_slice(unsafe { std::slice::from_raw_parts(msg, len) }).unwrap_or_default();
        let Some(id) = msg["comm_id"].as_str() else { return };
        (target.f)(Comm::attach(id.to_string(), &target.name), &msg["data"]);
    });
}

/// Accepts the frontend's `comm_open`s to `name`: `f` gets each new comm and its opening data,
/// on the child's comm thread. Until a target is registered, the kernel closes such comms at
/// once; registering a name again replaces its handler. Gone with the process (a restart).
pub fn register_target(name: &str, f: impl Fn(Comm, &Value) + Send + Sync + 'static) {
    let target = Box::into_raw(Box::new(Target { name: name.to_string(), f: Box::new(f) }));
    let (register, _) = hub::functions();
    // SAFETY: a live slice; the target is leaked, so it outlives its registration.
    unsafe { register(KIND_TARGET, name.as_ptr(), name.len(), on_open, target as *const c_void) };
    line("target", "", Some(name), &Value::Null, &json!({}));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_frontends_messages_reach_the_comms_handlers_until_it_closes() {
        let comm = Comm::open("test.target", json!({"a": 1}), json!({}));
        let (tx, rx) = mpsc::channel();
        let (tx2, closed) = mpsc::channel();
        comm.on_msg(move |d| tx.send(d.clone()).unwrap());
        comm.on_close(move |d| tx2.send(d.clone()).unwrap());
        let msg = json!({"op": "msg", "comm_id": comm.id(), "data": {"x": 5}});
        assert!(hub::deliver(msg.to_string().as_bytes()));
        assert_eq!(rx.try_recv().unwrap(), json!({"x": 5}));
        assert!(hub::deliver(
            json!({"op": "close", "comm_id": comm.id(), "data": {"bye": true}}).to_string().as_bytes()
        ));
        assert_eq!(closed.try_recv().unwrap(), json!({"bye": true}));
        assert!(comm.is_closed());
        // Forgotten once closed: a late message finds no one.
        assert!(!hub::deliver(msg.to_string().as_bytes()));
        // An unknown comm or a message that is not JSON is refused, not a panic.
        assert!(!hub::deliver(br#"{"op": "msg", "comm_id": "nobody", "data": {}}"#));
        assert!(!hub::deliver(b"not json"));
    }

    #[test]
    fn a_target_gets_the_comms_the_frontend_opens_and_a_panicking_handler_costs_nothing() {
        let (tx, rx) = mpsc::channel();
        register_target("test.open", move |comm, data| {
            tx.send((comm.id().to_string(), data.clone())).unwrap();
            comm.on_msg(|_| panic!("a handler's bug"));
        });
        let open = json!({"op": "open", "comm_id": "c1", "target_name": "test.open", "data": {"hello": 1}});
        assert!(hub::deliver(open.to_string().as_bytes()));
        assert_eq!(rx.try_recv().unwrap(), ("c1".to_string(), json!({"hello": 1})));
        assert!(hub::deliver(json!({"op": "msg", "comm_id": "c1", "data": {}}).to_string().as_bytes()));
        assert!(!hub::deliver(json!({"op": "open", "comm_id": "c2", "target_name": "unknown"}).to_string().as_bytes()));
    }
}
