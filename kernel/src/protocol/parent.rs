//! Ends the kernel when the process that started it is gone: the one Jupyter names in
//! `JPY_PARENT_PID`, as ipykernel reads it. A server that dies without a shutdown request
//! (SIGKILL, a crash) would otherwise leave the kernel, its child and its memory running.

use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often the parent is looked for: what a user waits, at most, for a leftover kernel to go.
const EVERY: Duration = Duration::from_secs(1);

/// The parent to watch, from the environment: none unset, unparsable, or init (which never
/// goes, only adopts).
pub fn from_env() -> Option<i32> {
    std::env::var("JPY_PARENT_PID").ok()?.trim().parse::<i32>().ok().filter(|&p| p > 1)
}

/// Whether `parent` is gone, for a kernel whose parent was `first` when it started. Where the
/// parent started the kernel itself, being adopted by another process says so (whatever pid
/// the dead one's is given next); where something stood between them (a wrapper script), the
/// pid no longer names a process.
pub fn gone(parent: i32, first: i32) -> bool {
    if first == parent {
        return unsafe { libc::getppid() } != parent;
    }
    let alive = unsafe { libc::kill(parent, 0) } == 0;
    !alive && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Sends a shutdown (not a restart) on `exit` once `parent` is gone.
pub async fn watch(parent: i32, exit: UnboundedSender<bool>) {
    let first = unsafe { libc::getppid() };
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        if gone(parent, first) {
            tracing::warn!("the kernel's parent (pid {parent}, JPY_PARENT_PID) is gone: shutting down");
            let _ = exit.send(false);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_parent_is_not_gone_and_a_reaped_one_is() {
        let me = std::process::id() as i32;
        let ppid = unsafe { libc::getppid() };
        // This process's own parent, watched as the one that started it, and as one a wrapper
        // stood before.
        assert!(!gone(ppid, ppid));
        assert!(!gone(ppid, me));
        // A process that exited and was reaped: its pid names nothing.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(gone(pid, me));
        // Adopted: the parent the kernel started with is no longer its parent.
        assert!(gone(me, me));
    }
}
