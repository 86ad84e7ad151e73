//! The sandbox itself: the pool's claims taken, the fork, the child started once its claims
//! are recorded, its result read, and the claims released after it is reaped.

use super::child::child;
use super::wait::{complete_frame, reap, Exit};
use super::{Compute, FAIL, INTERRUPTED, OK, PANIC};
use crate::compute::context::ContextError;
use crate::compute::ending;
use crate::compute::outcome::{clear_report, ComputeError, SandboxReport, LAST};
use crate::compute::pool::Pool;
use std::io::Write;
use std::time::Instant;

impl Compute {
    /// Forks, runs `body` in the child with the context applied, and returns the bytes it
    /// produced. Claims are taken before the fork and released after the child is reaped.
    pub(in crate::compute) fn sandbox(
        &self,
        body: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<Vec<u8>, ComputeError> {
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
}
