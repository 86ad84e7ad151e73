//! The child's one registry of comms and comm targets: the kernel binary exports its copy
//! (`dryml_comm_register`, `dryml_comm_unregister`), every cell's copy of `dryml` registers
//! through those, and the child's comm reader delivers the kernel's messages here.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

/// Called with a message's JSON (`{"op", "comm_id", "target_name", "data", "metadata"}`) and
/// the context pointer given at registration. Must not unwind.
pub type Callback = extern "C" fn(ctx: *const c_void, msg: *const u8, len: usize);

/// What a registration is for: a comm's messages, or a target's `comm_open`s.
pub const KIND_COMM: u8 = 0;
pub const KIND_TARGET: u8 = 1;

#[derive(Clone, Copy)]
struct Entry {
    f: Callback,
    ctx: usize,
}

static HUB: Mutex<Option<[HashMap<String, Entry>; 2]>> = Mutex::new(None);

fn key(ptr: *const u8, len: usize) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller passes a live byte slice (see `register`).
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    std::str::from_utf8(bytes).ok().map(str::to_string)
}

/// Registers `f` for a comm id or a target name (`kind`); a later registration replaces it.
///
/// # Safety
/// `ptr` is valid for `len` bytes; `ctx` stays valid for as long as the entry is registered.
pub unsafe extern "C" fn register(kind: u8, ptr: *const u8, len: usize, f: Callback, ctx: *const c_void) {
    let Some(k) = key(ptr, len) else { return };
    let mut hub = HUB.lock().unwrap_or_else(|e| e.into_inner());
    let maps = hub.get_or_insert_with(Default::default);
    maps[usize::from(kind.min(1))].insert(k, Entry { f, ctx: ctx as usize });
}

/// Forgets a comm id or target name.
///
/// # Safety
/// `ptr` is valid for `len` bytes.
pub unsafe extern "C" fn unregister(kind: u8, ptr: *const u8, len: usize) {
    let Some(k) = key(ptr, len) else { return };
    if let Some(maps) = HUB.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        maps[usize::from(kind.min(1))].remove(&k);
    }
}

/// Hands one message from the kernel to the comm or target it names; false when none is
/// registered (the kernel then closes the comm). A `close` forgets the comm after its callback.
pub fn deliver(msg: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(msg) else { return false };
    let op = v["op"].as_str().unwrap_or("");
    let (kind, name) = match op {
        "open" => (KIND_TARGET, v["target_name"].as_str()),
        _ => (KIND_COMM, v["comm_id"].as_str()),
    };
    let Some(name) = name else { return false };
    // Copied out: a callback may register or send, which takes the lock.
    let entry =
        HUB.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m[usize::from(kind)].get(name).copied());
    let Some(e) = entry else { return false };
    (e.f)(e.ctx as *const c_void, msg.as_ptr(), msg.len());
    if op == "close" {
        // SAFETY: a live slice.
        unsafe { unregister(KIND_COMM, name.as_ptr(), name.len()) };
    }
    true
}

type Register = unsafe extern "C" fn(u8, *const u8, usize, Callback, *const c_void);
type Unregister = unsafe extern "C" fn(u8, *const u8, usize);

/// The kernel binary's registry when this copy runs in a cell; this copy's own elsewhere (a
/// program, the tests), where [`deliver`] reaches it.
pub(super) fn functions() -> (Register, Unregister) {
    static FNS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    let (r, u) = *FNS.get_or_init(|| {
        use crate::display::interrupt::kernel_symbol;
        use crate::sys::protocol::symbols::{COMM_REGISTER, COMM_UNREGISTER};
        match (kernel_symbol(COMM_REGISTER), kernel_symbol(COMM_UNREGISTER)) {
            (Some(r), Some(u)) => (r, u),
            _ => (register as Register as usize, unregister as Unregister as usize),
        }
    });
    // Both are `extern "C"` functions with exactly these signatures (kernel/src/child.rs).
    unsafe { (std::mem::transmute::<usize, Register>(r), std::mem::transmute::<usize, Unregister>(u)) }
}
