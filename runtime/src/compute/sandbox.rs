//! Sandboxed compute, DRYML's `compute_context`: run a closure in a forked child process that
//! holds a context from the pool, and get its serde-serialized result back.
//!
//! The child is a `fork` of the caller, so it starts with copies of everything the closure
//! uses, whatever their types; only the result (and updated objects) cross back, as MessagePack
//! over a pipe (binary, so a 1 MB buffer stays about 1 MB), in one frame that states its length,
//! so a frame cut short is told from a result. The child ends with `_exit`: no destructor of
//! the caller's state runs twice. Its claims
//! are released when it ends, whether it returned, panicked, timed out, ran out of its memory
//! limit or was killed. What a context can enforce is listed in [`crate::compute::context::Context::env`].

mod child;
mod fork;
mod wait;

use crate::compute::context::{self, Context, ContextError, Requests};
use crate::compute::ending::{self, Early};
use crate::compute::outcome::{ComputeError, SandboxReport, LAST};
use crate::compute::pool::Machine;
use crate::sys::procfs;
pub(super) use child::{decode, encode, send_frame};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant};

/// How often the parent checks the sandbox's memory, the clock and the interrupt flag.
const POLL_MS: i32 = 5;

/// A compute call's options, DRYML's `compute_context(...)` arguments.
#[derive(Debug, Clone, Default)]
pub struct Compute {
    reqs: Requests,
    timeout: Option<Duration>,
    mem_limit: Option<u64>,
    use_existing: bool,
    dont_create: bool,
    verbose: bool,
}

pub(super) enum Place {
    Here(Context),
    Sandbox,
}

/// Frame tags of the result pipe.
pub(super) const OK: u8 = 0;
const PANIC: u8 = 1;
pub(super) const FAIL: u8 = 2;
const INTERRUPTED: u8 = 3;

impl Compute {
    /// Options that ask for `reqs` ([`Requests::parse`](crate::compute::context::Requests::parse)) and nothing else.
    pub fn new(reqs: &Requests) -> Compute {
        Compute { reqs: reqs.clone(), ..Compute::default() }
    }
    /// Stops the sandbox after this long.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
    /// Stops the sandbox once it has allocated this many bytes (resident memory beyond what it
    /// had when it started).
    pub fn mem_limit(mut self, bytes: u64) -> Self {
        self.mem_limit = Some(bytes);
        self
    }
    /// Runs in this process if its context satisfies the request (`WrongContextError` if not).
    pub fn use_existing(mut self, yes: bool) -> Self {
        self.use_existing = yes;
        self
    }
    /// Never starts a sandbox: `NoContextError` without a context, `WrongContextError` if it
    /// does not satisfy the request.
    pub fn dont_create(mut self, yes: bool) -> Self {
        self.dont_create = yes;
        self
    }
    /// Prints what the sandbox was given (context, environment, CPU pinning) to stderr.
    pub fn verbose(mut self, yes: bool) -> Self {
        self.verbose = yes;
        self
    }

    pub(crate) fn requests(&self) -> &Requests {
        &self.reqs
    }

    pub(crate) fn timeout_limit(&self) -> Option<Duration> {
        self.timeout
    }

    pub(crate) fn mem_limit_bytes(&self) -> Option<u64> {
        self.mem_limit
    }

    pub(super) fn place(&self) -> Result<Place, ComputeError> {
        let existing = context::current();
        if !(self.use_existing || self.dont_create) {
            return Ok(Place::Sandbox);
        }
        match existing {
            None if self.dont_create => Err(ContextError::NoContext.into()),
            None => Ok(Place::Sandbox),
            Some(ctx) => match ctx.unmet(&self.reqs) {
                None => Ok(Place::Here(ctx)),
                Some(why) => Err(ContextError::WrongContext {
                    requirements: self.reqs.to_string(),
                    context: ctx.to_string(),
                    why,
                }
                .into()),
            },
        }
    }

    /// Runs `f` and returns its value.
    pub fn run<T, F>(&self, f: F) -> Result<T, ComputeError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> T,
    {
        if let Place::Here(ctx) = self.place()? {
            return Ok(self.here(ctx, f));
        }
        let bytes = self.sandbox(|| encode(&f()))?;
        decode(&bytes, "the result")
    }

    /// Runs `f` on `obj` and, when it returns, gives `obj` the sandbox's final state
    /// (DRYML's `ctx_update_objs`). On any failure `obj` is left as it was.
    pub fn run_updating<U, T, F>(&self, obj: &mut U, f: F) -> Result<T, ComputeError>
    where
        U: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut U) -> T,
    {
        if let Place::Here(ctx) = self.place()? {
            return Ok(self.here(ctx, || f(obj)));
        }
        let bytes = self.sandbox(|| {
            // A bitwise copy: this is the sandbox's own memory, and it never returns to drop it.
            let mut mine = unsafe { std::ptr::read(obj as *const U) };
            let keep = ending::Keep::new();
            let value = f(&mut mine);
            let r = encode(&(value, &mine));
            std::mem::forget((keep, mine));
            r
        })?;
        let (value, new): (T, U) = decode(&bytes, "the result and the updated object")?;
        *obj = new;
        Ok(value)
    }

    /// Runs `f` on a DRYML object in a sandbox: the object is moved into compute there
    /// ([`crate::Build::load_compute`]), worked on, moved back ([`crate::Build::save_compute`])
    /// and returned through its file, so device memory is held only by the sandbox.
    pub fn run_object<O, T, F>(&self, obj: &mut O, f: F) -> Result<T, ComputeError>
    where
        O: crate::Object,
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut O) -> T,
    {
        let hook = |r: Result<(), crate::objects::ObjectError>, what: &str| {
            r.map_err(|e| ComputeError::Failed(format!("{what}: {e}")))
        };
        if let Place::Here(ctx) = self.place()? {
            hook(obj.load_compute(), "load_compute")?;
            let v = self.here(ctx, || f(obj));
            hook(obj.save_compute(), "save_compute")?;
            return Ok(v);
        }
        let bytes = self.sandbox(|| {
            // A bitwise copy: this is the sandbox's own memory, and it never returns to drop it.
            let mut mine = unsafe { std::ptr::read(obj as *const O) };
            let keep = ending::Keep::new();
            let r = (|| {
                mine.load_compute().map_err(|e| format!("load_compute: {e}"))?;
                let value = f(&mut mine);
                mine.save_compute().map_err(|e| format!("save_compute: {e}"))?;
                let file =
                    crate::objects::object::to_bytes(&mine).map_err(|e| format!("the object does not save: {e}"))?;
                encode(&(value, file))
            })();
            std::mem::forget((keep, mine));
            r
        })?;
        let (value, file): (T, Vec<u8>) = decode(&bytes, "the result and the object")?;
        let back = crate::objects::object::from_bytes(&file, None)
            .map_err(|e| ComputeError::Failed(format!("the object did not load: {e}")))?;
        *obj = *back.downcast::<O>().map_err(|_| ComputeError::Failed("the sandbox sent back another type".into()))?;
        Ok(value)
    }

    fn here<T>(&self, ctx: Context, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let v = f();
        let report = SandboxReport { pid: None, wall: t0.elapsed(), peak_rss: 0, peak_added: 0, context: ctx };
        *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        v
    }
}

#[cfg(test)]
mod tests;
