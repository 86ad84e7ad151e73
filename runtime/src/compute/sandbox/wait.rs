//! What the parent waits on: the result's frame, read from the pipe as it comes, and the child's
//! end, with how it ended and its peak memory.

use crate::compute::outcome::ComputeError;

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
