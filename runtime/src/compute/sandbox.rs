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
mod wait;

use crate::compute::context::{self, Context, ContextError, Requests};
use crate::compute::ending::{self, Early};
use crate::compute::outcome::{clear_report, ComputeError, SandboxReport, LAST};
use crate::compute::pool::{Machine, Pool};
use crate::sys::procfs;
use child::child;
pub(super) use child::{decode, encode, send_frame};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant};
use wait::{complete_frame, drain, exited, reap, Exit, Watched};

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

    /// Forks, runs `body` in the child with the context applied, and returns the bytes it
    /// produced. Claims are taken before the fork and released after the child is reaped.
    pub(super) fn sandbox(&self, body: impl FnOnce() -> Result<Vec<u8>, String>) -> Result<Vec<u8>, ComputeError> {
        clear_report();
        let failed = |what: &str, e: std::io::Error| ComputeError::Failed(format!("{what}: {e}"));
        let mut pool = Pool::open().map_err(|e| failed("opening the resource pool", e))?;
        let ctx =
            pool.allocate(&self.reqs).map_err(|e| ComputeError::Context(ContextError::ResourcesUnavailable(e)))?;
        let machine = pool.machine.clone();
        let mut fds = [0; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(failed("creating the result pipe", std::io::Error::last_os_error()));
        }
        let (read_fd, write_fd) = (fds[0], fds[1]);
        // The child waits on this until its claims are recorded: a quick closure could otherwise
        // end before the parent could name its pid in the pool.
        let mut go = [0; 2];
        if unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            let e = std::io::Error::last_os_error();
            unsafe {
                libc::close(read_fd);
                libc::close(write_fd);
            }
            return Err(failed("creating the start pipe", e));
        }
        let parent = std::process::id();
        // Held across the fork, so the child gets them unlocked (their owner, this thread, is
        // the one thread it has): a fork while another thread (the kernel's flusher, say) held
        // one would leave it locked forever in the child, and its first print would hang.
        ending::hook_panics();
        let mut stdout = std::io::stdout().lock();
        let mut stderr = std::io::stderr().lock();
        let _ = stdout.flush();
        let _ = stderr.flush();
        let t0 = Instant::now();
        let pid = unsafe { libc::fork() };
        drop((stdout, stderr));
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            unsafe {
                for fd in [read_fd, write_fd, go[0], go[1]] {
                    libc::close(fd);
                }
            }
            return Err(failed("fork", e));
        }
        if pid == 0 {
            unsafe {
                libc::close(read_fd);
                libc::close(go[1]);
                // A sandbox dies with the process that started it, so it cannot hold devices
                // for a notebook that has gone.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() as u32 != parent {
                    libc::_exit(9);
                }
                // stdin is evcxr's command pipe in a notebook: never the sandbox's to read.
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::close(null);
                }
                let mut b = [0u8; 1];
                if libc::read(go[0], b.as_mut_ptr().cast(), 1) != 1 {
                    libc::_exit(9);
                }
                libc::close(go[0]);
            }
            child(write_fd, &ctx, &machine, self.verbose, body);
        }
        let pid = pid as u32;
        unsafe {
            libc::close(write_fd);
            libc::close(go[0]);
        }
        let claimed = pool.claim(pid, "sandbox", &ctx).and_then(|_| pool.commit());
        if let Err(e) = claimed {
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::close(go[1]);
            }
            let _ = reap(pid);
            unsafe { libc::close(read_fd) };
            return Err(failed("recording the sandbox's claims", e));
        }
        unsafe {
            libc::write(go[1], [1u8].as_ptr().cast(), 1);
            libc::close(go[1]);
        }
        let watched = self.watch(pid, read_fd, t0);
        unsafe { libc::close(read_fd) };
        // The claims went with the process; drop them now rather than at the next reader.
        if let Ok(mut pool) = Pool::open() {
            pool.release(pid);
            let _ = pool.commit();
        }
        let report = SandboxReport {
            pid: Some(pid),
            wall: t0.elapsed(),
            peak_rss: watched.peak_rss,
            peak_added: watched.peak_added,
            context: ctx,
        };
        *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        if let Some(e) = watched.stopped {
            return Err(e);
        }
        // A frame cut short (the sandbox was killed while writing it) is no result: how the
        // sandbox ended says what happened.
        match complete_frame(&watched.frame) {
            Some((OK, rest)) => Ok(rest.to_vec()),
            Some((PANIC, rest)) => Err(ComputeError::Panicked(String::from_utf8_lossy(rest).into_owned())),
            Some((FAIL, rest)) => Err(ComputeError::Failed(String::from_utf8_lossy(rest).into_owned())),
            Some((INTERRUPTED, _)) => Err(ComputeError::Interrupted),
            _ => Err(match watched.status {
                Exit::Signal(s) => ComputeError::Killed { signal: s },
                Exit::Code(c) => ComputeError::Exited { code: c },
            }),
        }
    }

    /// Reads the child's result while enforcing the timeout, the memory limit and interrupts.
    /// The child first sends its resident memory at its start (8 bytes), then one frame.
    fn watch(&self, pid: u32, fd: i32, t0: Instant) -> Watched {
        let mut frame = Vec::new();
        let mut base = None;
        let mut stopped = None;
        let mut peak_added = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            let ready = unsafe { libc::poll(&mut p, 1, POLL_MS) };
            if ready > 0 {
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                if n == 0 {
                    break;
                }
                if n > 0 {
                    frame.extend_from_slice(&buf[..n as usize]);
                }
            }
            if base.is_none() && frame.len() >= 8 {
                let head: Vec<u8> = frame.drain(..8).collect();
                base = Some(u64::from_le_bytes(head.try_into().expect("8 bytes")));
            }
            // The whole frame is here, or the sandbox has ended: a process it started may hold
            // the pipe open for as long as it likes, so end of file is not waited for.
            if complete_frame(&frame).is_some() {
                break;
            }
            if ready == 0 && exited(pid) {
                drain(fd, &mut frame, &mut buf);
                break;
            }
            if let (Some(rss), Some(base)) = (procfs::statm(pid).map(|m| m.resident), base) {
                let added = rss.saturating_sub(base);
                peak_added = peak_added.max(added);
                if let Some(limit) = self.mem_limit.filter(|l| added > *l) {
                    stopped = Some(ComputeError::OutOfMemory { limit, used: added });
                }
            }
            if stopped.is_none() {
                if let Some(t) = self.timeout.filter(|t| t0.elapsed() > *t) {
                    stopped = Some(ComputeError::TimedOut { after: t });
                }
            }
            if stopped.is_none() && crate::interrupted() {
                stopped = Some(ComputeError::Interrupted);
            }
            if stopped.is_some() {
                // No need to read on: a process the sandbox started could hold the pipe open.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                break;
            }
        }
        if base.is_none() {
            // The word arrived with the frame in one read, or (short) the child died first.
            if frame.len() >= 8 {
                let head: Vec<u8> = frame.drain(..8).collect();
                base = Some(u64::from_le_bytes(head.try_into().expect("8 bytes")));
            } else {
                frame.clear();
            }
        }
        let (status, peak_rss) = reap(pid);
        // The polls see the peak only if one lands on it; the kernel's high-water mark is exact.
        if let Some(base) = base {
            peak_added = peak_added.max(peak_rss.saturating_sub(base));
        }
        Watched { frame, stopped, status, peak_rss, peak_added }
    }
}

#[cfg(test)]
mod tests;
