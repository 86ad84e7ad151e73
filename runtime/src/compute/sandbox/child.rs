//! The sandbox's own side, in the forked child: the context applied, the body run, one frame of
//! its result (or its panic, or the interrupt) sent to the parent, and an end by `_exit`.

use super::*;

/// The sandbox side: apply the context, run, send one frame, and end without unwinding into
/// the caller's frames or running its destructors (see [`crate::compute::ending`]).
pub(super) fn child(
    fd: i32,
    ctx: &Context,
    machine: &Machine,
    verbose: bool,
    body: impl FnOnce() -> Result<Vec<u8>, String>,
) -> ! {
    set_result_fd(fd);
    // The caller's panic hook (evcxr's marks the notebook's cell as panicked) must not run
    // here, and nothing may unwind into the notebook's copies: a panic ends the sandbox (the
    // hook that does it was put in place before the fork).
    ending::install(Box::new(|why| end_early(why)));
    crate::compute::apply::apply_in_fork(ctx, machine);
    let start = procfs::statm(std::process::id()).map_or(0, |m| m.resident).to_le_bytes();
    if unsafe { libc::write(fd, start.as_ptr().cast(), 8) } != 8 {
        unsafe { libc::_exit(3) };
    }
    if verbose {
        let env: Vec<String> = ctx.env(machine).into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pin = ctx.cpu_set();
        eprintln!(
            "[sandbox pid {}] context {ctx}; {}; CPU affinity {}",
            std::process::id(),
            env.join(" "),
            if pin.is_empty() { "unchanged".to_string() } else { format!("{pin:?}") }
        );
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    match outcome {
        Ok(Ok(bytes)) => send_frame(OK, &bytes),
        Ok(Err(e)) => send_frame(FAIL, e.as_bytes()),
        // Only an unwind without a panic gets here (a panic ended the sandbox in its hook).
        Err(_) => end_early(Early::Unwound { interrupted: crate::display::interrupt::interrupted() }),
    }
}

/// The sandbox's end when its code stops early: one frame, then `_exit`.
fn end_early(why: Early) -> ! {
    match why {
        Early::Panicked { message, at } => {
            let at = at.map(|(file, line, _)| format!(" (at {file}:{line})")).unwrap_or_default();
            send_frame(PANIC, format!("{message}{at}").as_bytes())
        }
        Early::Unwound { interrupted: true } => send_frame(INTERRUPTED, b""),
        Early::Unwound { interrupted: false } => {
            send_frame(PANIC, b"the sandbox's code unwound without a panic (std::panic::resume_unwind)")
        }
        Early::Returned(Some(e)) => send_frame(FAIL, format!("the cell returned an error: {e}").as_bytes()),
        Early::Returned(None) => send_frame(FAIL, b"the %%compute body returned without finishing"),
    }
}

pub(super) static RESULT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

fn set_result_fd(fd: i32) {
    RESULT_FD.store(fd, std::sync::atomic::Ordering::SeqCst);
}

/// Writes the one result frame and ends the sandbox.
pub(in crate::compute) fn send_frame(tag: u8, bytes: &[u8]) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let fd = RESULT_FD.load(std::sync::atomic::Ordering::SeqCst);
    let mut data = Vec::with_capacity(bytes.len() + 9);
    data.push(tag);
    data.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    data.extend_from_slice(bytes);
    let mut off = 0;
    while off < data.len() {
        let n = unsafe { libc::write(fd, data[off..].as_ptr().cast(), data.len() - off) };
        if n <= 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            unsafe { libc::_exit(3) };
        }
        off += n as usize;
    }
    unsafe { libc::_exit(0) }
}

pub(in crate::compute) fn encode<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec(v).map_err(|e| format!("the sandbox's result does not serialize: {e}"))
}

pub(in crate::compute) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ComputeError> {
    rmp_serde::from_slice(bytes).map_err(|e| ComputeError::Failed(format!("{what} did not deserialize: {e}")))
}
