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

/// What tells that the parent is gone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Watch {
    /// The kernel's own parent is no longer this pid: it was adopted, its parent gone
    /// (whatever process gets the dead one's pid next).
    Adopted(i32),
    /// This pid names no process (a wrapper stood between the parent and the kernel).
    Exits(i32),
}

impl Watch {
    /// What to watch for `parent`, for a kernel whose parent was `first` when it started; none
    /// where nothing can tell (the first process of a pid namespace, as in a container).
    pub fn of(parent: i32, first: i32) -> Option<Watch> {
        if first == parent {
            Some(Watch::Adopted(parent))
        } else if exists(parent) {
            Some(Watch::Exits(parent))
        } else if first > 1 {
            // The parent's pid means nothing here (another pid namespace): the wrapper that
            // started the kernel going is the best sign left.
            Some(Watch::Adopted(first))
        } else {
            None
        }
    }

    /// Whether the parent is gone.
    pub fn gone(self) -> bool {
        match self {
            Watch::Adopted(p) => (unsafe { libc::getppid() }) != p,
            Watch::Exits(p) => !exists(p),
        }
    }
}

fn exists(pid: i32) -> bool {
    (unsafe { libc::kill(pid, 0) }) == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Sends a shutdown (not a restart) on `exit` once `parent` is gone.
pub async fn watch(parent: i32, exit: UnboundedSender<bool>) {
    let Some(what) = Watch::of(parent, unsafe { libc::getppid() }) else {
        tracing::info!("the kernel's parent (pid {parent}, JPY_PARENT_PID) cannot be watched from this pid namespace");
        return;
    };
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        if what.gone() {
            // Sent first: nothing after it (a log line) may keep the kernel alive.
            let _ = exit.send(false);
            tracing::warn!("the kernel's parent (pid {parent}, JPY_PARENT_PID) is gone: shutting down");
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
        // This process's own parent, as the one that started it, and as one a wrapper stood
        // before: alive.
        assert_eq!(Watch::of(ppid, ppid), Some(Watch::Adopted(ppid)));
        assert_eq!(Watch::of(ppid, me), Some(Watch::Exits(ppid)));
        assert!(!Watch::Adopted(ppid).gone() && !Watch::Exits(ppid).gone());
        // A process that exited and was reaped: its pid names nothing.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(Watch::Exits(pid).gone());
        // A parent this process cannot see: its own parent is watched instead, or nothing.
        assert_eq!(Watch::of(pid, ppid), Some(Watch::Adopted(ppid)));
        assert_eq!(Watch::of(pid, 0), None);
        // Adopted: the parent the kernel started with is no longer its parent.
        assert!(Watch::Adopted(me).gone());
    }
}
