//! Code that runs inside evcxr's child process (our own binary, re-executed) before evcxr's
//! runtime loop: streams user stdout to the kernel as it is written and handles SIGINT.
//!
//! evcxr reads the child's stdout line by line, so `print!` without a newline would only show
//! at the next newline. Here fd 1 is swapped for a pipe that a pump thread reads: user bytes go
//! straight to the kernel over a Unix socket; evcxr's own protocol lines (`EVCXR_...`) go on to
//! evcxr's pipe unchanged; `DRYML_...` lines from the `dryml` crate (displays) go to the kernel.

mod pump;

use pump::start_pump;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT while a cell runs; `dryml::interrupted()` finds it by name with `dlsym`. The
/// exported names are `dryml_sys::protocol::symbols`'s; the e2e interrupt and batching tests
/// fail if these items drift from them.
#[no_mangle]
#[used]
pub static dryml_interrupt_flag: AtomicBool = AtomicBool::new(false);

/// `dryml::batch`'s table of batch sizes, one per process: every cell's copy of dryml reads and
/// writes through these, so a size learned in one cell is there in the next.
#[no_mangle]
///
/// # Safety
/// `out` is null or valid for one write of `[u64; 2]`, as `dryml::batch` passes it.
pub unsafe extern "C" fn dryml_batch_get(key: u64, out: *mut [u64; 2]) -> bool {
    unsafe { dryml::__kernel::batch::table_get(key, out) }
}

#[no_mangle]
pub extern "C" fn dryml_batch_record(key: u64, size: u64) {
    dryml::__kernel::batch::table_record(key, size)
}

/// Set when the kernel says the frontend renders widgets; `dryml::widgets::available()` reads it.
#[no_mangle]
#[used]
pub static dryml_widgets_available: AtomicBool = AtomicBool::new(false);

/// Where an open experiment has every network write its TensorBoard run; every cell's copy of
/// `dryml` reads it here (`dryml::models::tensorboard::ambient`).
///
/// # Safety
/// As `dryml::__kernel::tensorboard::ambient_into`'s.
#[no_mangle]
pub unsafe extern "C" fn dryml_tensorboard_dir(out: *mut u8, cap: usize) -> usize {
    unsafe { dryml::__kernel::tensorboard::ambient_into(out, cap) }
}

/// The child's registry of comms: every cell's copy of `dryml` registers its comms' handlers
/// here, and the comm reader (below) delivers the frontend's messages through it.
///
/// # Safety
/// As `dryml::__kernel::comm::register`'s.
#[no_mangle]
pub unsafe extern "C" fn dryml_comm_register(
    kind: u8,
    key: *const u8,
    len: usize,
    f: dryml::__kernel::comm::Callback,
    ctx: *const std::ffi::c_void,
) {
    unsafe { dryml::__kernel::comm::register(kind, key, len, f, ctx) }
}

/// # Safety
/// As `dryml::__kernel::comm::unregister`'s.
#[no_mangle]
pub unsafe extern "C" fn dryml_comm_unregister(kind: u8, key: *const u8, len: usize) {
    unsafe { dryml::__kernel::comm::unregister(kind, key, len) }
}

use dryml_sys::protocol::{FLUSH_FDS_ENV, STREAM_ENV};

/// Socket frame tags, child to kernel.
pub const TAG_OUT: u8 = b'O';
pub const TAG_SYNC: u8 = b'S';
pub const TAG_CONTROL: u8 = b'J';
/// Socket frame tags, kernel to child: a comm message from the frontend, word that the
/// frontend renders widgets (no payload), and the directory an experiment's networks write
/// their TensorBoard runs to (empty: none).
pub const TAG_COMM: u8 = b'C';
pub const TAG_WIDGETS: u8 = b'W';
pub const TAG_TENSORBOARD: u8 = b'T';
/// Kernel to child: a shared library to load ahead of the cell that links it (its path).
pub const TAG_PRELOAD: u8 = b'P';

const MARKERS: [&[u8]; 2] = [b"EVCXR_", b"DRYML_"];

extern "C" fn on_sigint(_: libc::c_int) {
    dryml_interrupt_flag.store(true, Ordering::SeqCst);
}

/// Called first thing in `main`. Does nothing unless this process is evcxr's child.
pub fn setup_if_child() {
    if std::env::var_os("EVCXR_IS_RUNTIME").is_none() {
        return;
    }
    // evcxr starts its child with RUST_BACKTRACE=1, so every panic, even one the cell catches,
    // printed a backtrace. The user's own setting is put back; without it, the start-up cell's
    // panic hook keeps the backtrace and it is shown only when the panic ends the cell.
    match std::env::var_os(USER_BACKTRACE_ENV) {
        Some(v) => std::env::set_var("RUST_BACKTRACE", v),
        None => std::env::remove_var("RUST_BACKTRACE"),
    }
    // SIGINT must not kill the child: the kernel decides between waiting and killing.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    if let Some(path) = std::env::var_os(STREAM_ENV) {
        if let Err(e) = start_pump(std::path::Path::new(&path)) {
            eprintln!("dryml-kernel: streaming output disabled: {e}");
        }
    }
    if let Some(lib) = std::env::var_os(STARTUP_LIB_ENV) {
        if let Err(e) = load_startup(&lib) {
            eprintln!("{STARTUP_FAILED} {}: {e}", lib.to_string_lossy());
        }
    }
    let parent = unsafe { libc::getppid() };
    // The debugger's lldb-dap is the kernel's child too, so a sibling: where Yama lets only
    // ancestors ptrace, this lets the kernel and what it starts attach, and no one else.
    // (Without Yama the call fails, and nothing is needed.)
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, parent as libc::c_ulong, 0, 0, 0);
    }
    // A kernel killed with SIGKILL cannot stop its child, which would go on running (a loop
    // following a Slurm job, say) with no one to see it: the child ends when it is orphaned.
    let _ = std::thread::Builder::new().name("dryml-orphan-watch".into()).spawn(move || loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        if unsafe { libc::getppid() } != parent {
            unsafe { libc::_exit(1) };
        }
    });
}

/// The start-up library the child loads (`session::startup`), and the stderr line by which it
/// tells the kernel that it could not (the first cell then carries the flusher).
pub const STARTUP_LIB_ENV: &str = "DRYML_STARTUP_LIB";
pub const STARTUP_FAILED: &str = "DRYML_STARTUP_FAILED";
/// The start-up library's exported function, called once it is loaded.
pub const STARTUP_ENTRY: &str = "dryml_start_flusher";

/// Loads the start-up library and starts its flusher (after the pump, whose pipes it uses).
fn load_startup(lib: &std::ffi::OsStr) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(lib.as_bytes()).map_err(|e| e.to_string())?;
    let dl_error = || unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".to_string()
        } else {
            std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    };
    // SAFETY: the library is ours (`session::startup`), and its entry takes and returns nothing.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            return Err(dl_error());
        }
        let entry = std::ffi::CString::new(STARTUP_ENTRY).expect("no NUL");
        let f = libc::dlsym(handle, entry.as_ptr());
        if f.is_null() {
            return Err(dl_error());
        }
        std::mem::transmute::<*mut libc::c_void, extern "C" fn()>(f)();
    }
    Ok(())
}

/// The kernel's own `RUST_BACKTRACE`, passed to the child (evcxr overrides the real one).
pub const USER_BACKTRACE_ENV: &str = "DRYML_USER_RUST_BACKTRACE";

/// Reads the backtrace the start-up cell's panic hook kept (cells link their own copy of std,
/// whose panic hook is not this binary's): the length of the text, copied into the buffer when it
/// fits, then forgotten.
type BacktraceTaker = extern "C" fn(*mut u8, usize) -> usize;

static BACKTRACE_TAKER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Called by the child's start-up cell (`FLUSHER_CELL`) with its taker.
#[no_mangle]
pub extern "C" fn dryml_register_backtrace_taker(f: BacktraceTaker) {
    BACKTRACE_TAKER.store(f as usize, Ordering::SeqCst);
}

/// The backtrace of the panic that just ended a cell, if the hook kept one.
fn take_backtrace() -> Option<String> {
    let addr = BACKTRACE_TAKER.load(Ordering::SeqCst);
    if addr == 0 {
        return None;
    }
    // SAFETY: only `dryml_register_backtrace_taker` stores here, a function of this signature.
    let take: BacktraceTaker = unsafe { std::mem::transmute::<usize, BacktraceTaker>(addr) };
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = take(buf.as_mut_ptr(), buf.len());
    if n > buf.len() {
        buf.resize(n, 0);
        n = take(buf.as_mut_ptr(), buf.len());
    }
    (n > 0 && n <= buf.len()).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A frame of the output socket, either way: its tag, the payload's length (u32, little end
/// first), the payload.
pub fn frame(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 5);
    frame.push(tag);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// One frame of the output socket, either way: its tag and payload; `None` once it is closed.
pub fn read_frame(socket: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    socket.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut payload = vec![0u8; len];
    socket.read_exact(&mut payload).ok()?;
    Some((head[0], payload))
}

/// The child's start-up code: flush user stdout every 25 ms and on request, and the panic hook.
/// It must run against the std that cells link (evcxr uses `-Cprefer-dynamic`), not this
/// binary's: it is the body of the start-up library (`session::startup`), or, when that cannot
/// be built or loaded, prepended to the first cell of each child (a block statement, so it
/// defines nothing in the user's scope).
pub const FLUSHER_CELL: &str = r#"{
    use std::io::{Read, Write};
    // The panic hook of the std that cells link (not the binary's): a panic prints its message
    // and place, and its backtrace only when RUST_BACKTRACE asks; otherwise the backtrace is kept
    // for the kernel, which shows it when the panic ends the cell.
    static TRACE: std::sync::Mutex<(Option<std::backtrace::Backtrace>, Option<String>)> = std::sync::Mutex::new((None, None));
    extern "C" fn take(buf: *mut u8, cap: usize) -> usize {
        let mut t = TRACE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = t.0.take() {
            t.1 = Some(b.to_string());
        }
        let Some(text) = &t.1 else { return 0 };
        let n = text.len();
        if n <= cap {
            unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n) };
            t.1 = None;
        }
        n
    }
    unsafe extern "C" {
        fn dryml_register_backtrace_taker(f: extern "C" fn(*mut u8, usize) -> usize);
    }
    unsafe { dryml_register_backtrace_taker(take) };
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let payload = info.payload();
        let msg = payload.downcast_ref::<&str>().copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("Box<dyn Any>");
        let at = info.location().map(|l| l.to_string()).unwrap_or_default();
        let trace = std::backtrace::Backtrace::force_capture();
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "thread '{}' panicked at {at}:\n{msg}", thread.name().unwrap_or("<unnamed>"));
        if std::env::var("RUST_BACKTRACE").is_ok_and(|v| v != "0") {
            let _ = writeln!(err, "stack backtrace:\n{trace}");
        } else {
            *TRACE.lock().unwrap_or_else(|e| e.into_inner()) = (Some(trace), None);
        }
    }));
    use std::os::unix::io::FromRawFd;
    if let Ok(fds) = std::env::var("DRYML_FLUSH_FDS") {
        let mut it = fds.split(',').map(|s| s.parse::<i32>().unwrap_or(-1));
        let (r, w) = (it.next().unwrap_or(-1), it.next().unwrap_or(-1));
        if r >= 0 && w >= 0 {
            std::thread::spawn(move || {
                let mut req = unsafe { std::fs::File::from_raw_fd(r) };
                let mut ack = unsafe { std::fs::File::from_raw_fd(w) };
                let mut b = [0u8; 1];
                while req.read_exact(&mut b).is_ok() {
                    let _ = std::io::stdout().flush();
                    let _ = ack.write_all(&b);
                }
            });
            std::thread::spawn(|| loop {
                std::thread::sleep(std::time::Duration::from_millis(25));
                let _ = std::io::stdout().flush();
            });
        }
    }
};"#;

#[cfg(test)]
mod tests;
