//! How a sandbox or a job program ends: never by unwinding through, or returning past, the
//! notebook's values. A sandbox holds bitwise copies of the notebook's variables (a Slurm job,
//! copies read back from their bytes); their destructors belong to the notebook, so a copy must
//! not close a connection, flush a writer or remove a temporary directory in its name.
//!
//! The process that runs such code installs an [`Ender`]: then a panic ends it in the panic hook,
//! before anything unwinds (as under `panic = "abort"`), and a [`Keep`] guard, declared after
//! the copies, ends it when the code leaves early (`?`, `return`, `resume_unwind`) before the
//! copies would be dropped. The normal end leaves through `_exit` too, past every copy.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, Once};

/// Why the code ended early.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Early {
    /// A panic: its message, and where (file, line, column).
    Panicked { message: String, at: Option<(String, u32, u32)> },
    /// An unwind without a panic (`resume_unwind`), and whether the notebook was interrupted.
    Unwound { interrupted: bool },
    /// The body returned an error (the last one made with [`crate::compute::CellError`]), or
    /// returned without finishing.
    Returned(Option<String>),
}

/// What ends the process (it ends with [`exit_now`]; should it return, the process ends anyway).
pub(crate) type Ender = Box<dyn Fn(Early) + Send + Sync>;

/// The installed ender, a leaked `Box<Ender>`; null outside a sandbox or job. Atomic, not a
/// lock: a fork copies locks in whatever state another thread left them.
static ENDER: AtomicPtr<Ender> = AtomicPtr::new(std::ptr::null_mut());
static HOOKED: Once = Once::new();
static LAST_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Puts this crate's panic hook in front of the process's own, once; it ends a sandbox or job
/// and hands every other panic to the hook it found. Called before a fork: the hook's lock,
/// taken in a child while another thread of the parent was panicking, would never be released
/// (a sandbox forked by one test while another failed hung for good).
pub(crate) fn hook_panics() {
    HOOKED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if ENDER.load(Ordering::SeqCst).is_null() {
                return previous(info);
            }
            let message = crate::sys::panic_message(info.payload())
                .unwrap_or_else(|| "(a panic with a non-string payload)".into());
            let at = info.location().map(|l| (l.file().to_string(), l.line(), l.column()));
            end(Early::Panicked { message, at })
        }));
    });
}

/// Makes `ender` end this process on a panic (from the panic hook, so nothing unwinds) and when
/// a [`Keep`] is dropped. Called once the process is the sandbox or the job; a forked sandbox
/// finds the hook in place (its parent called [`hook_panics`]) and takes no lock.
pub(crate) fn install(ender: Ender) {
    // A sandbox within a sandbox replaces its parent's ender; the copy is left as it is, not
    // dropped, for what it holds belongs to the parent.
    ENDER.store(Box::into_raw(Box::new(ender)), Ordering::SeqCst);
    hook_panics();
}

fn end(why: Early) {
    // The ender is taken, not borrowed: a panic inside it must not come back here.
    let ender = ENDER.swap(std::ptr::null_mut(), Ordering::SeqCst);
    // Null: not a sandbox or job (a guard outside one), nothing to stop.
    if !ender.is_null() {
        let f = unsafe { Box::from_raw(ender) };
        f(why);
        exit_now(101);
    }
}

/// Ends the process as a body that returned `message` as its error.
pub(crate) fn end_returned(message: String) -> ! {
    end(Early::Returned(Some(message)));
    exit_now(1)
}

/// Remembers the error a body is about to return with `?`, for [`Keep`] to report.
pub(crate) fn record_error(message: &str) {
    *LAST_ERROR.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.to_string());
}

/// Declared after the notebook's copies in generated sandbox and job code: when it is dropped,
/// the code is leaving early, and the process ends before the copies can be dropped. The
/// normal end never drops it (the process ends with `_exit` first).
pub struct Keep(());

impl Keep {
    /// The guard, placed after the copies it protects.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Keep {
        Keep(())
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        let why = if std::thread::panicking() {
            Early::Unwound { interrupted: crate::display::interrupt::interrupted() }
        } else {
            Early::Returned(LAST_ERROR.lock().unwrap_or_else(|e| e.into_inner()).take())
        };
        end(why);
    }
}

/// Flushes the standard streams and ends the process at once: no destructor, no `atexit`.
pub(crate) fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    unsafe { libc::_exit(code) }
}
