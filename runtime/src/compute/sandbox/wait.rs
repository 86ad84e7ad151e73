//! What the parent waits on: the result's frame, read from the pipe as it comes, and the child's
//! end, with how it ended and its peak memory; the timeout, the memory limit and interrupts
//! enforced meanwhile.

use super::{Compute, POLL_MS};
use crate::compute::outcome::ComputeError;
use crate::sys::procfs;
use std::time::Instant;

/// A result frame (tag, then the length of what follows, then that many bytes) once all of it
/// has arrived: its tag and bytes.
pub(super) fn complete_frame(frame: &[u8]) -> Option<(u8, &[u8])> {
    let (&tag, rest) = frame.split_first()?;
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let body = &rest[8..];
    (body.len() as u64 == len).then_some((tag, body))
}

/// Whether the sandbox has ended (it is left to reap, for its exit status and peak memory).
pub(super) fn exited(pid: u32) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Reads what is already in the pipe without waiting for more.
pub(super) fn drain(fd: i32, frame: &mut Vec<u8>, buf: &mut [u8]) {
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        if unsafe { libc::poll(&mut p, 1, 0) } <= 0 {
            return;
        }
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        frame.extend_from_slice(&buf[..n as usize]);
    }
}

pub(super) struct Watched {
    pub frame: Vec<u8>,
    pub stopped: Option<ComputeError>,
    pub status: Exit,
    pub peak_rss: u64,
    pub peak_added: u64,
}

pub(super) enum Exit {
    Code(i32),
    Signal(i32),
}

/// Waits for the child; returns how it ended and its peak resident memory.
pub(super) fn reap(pid: u32) -> (Exit, u64) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    (exit, usage.ru_maxrss.max(0) as u64 * 1024)
}

impl Compute {
    /// Reads the child's result while enforcing the timeout, the memory limit and interrupts.
    /// The child first sends its resident memory at its start (8 bytes), then one frame.
    pub(super) fn watch(&self, pid: u32, fd: i32, t0: Instant) -> Watched {
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
