//! `flock` on an open file, the one way every part locks a file (cargo's lock, a cache's claim,
//! a pool, a repo's index, a spool): exclusive or shared, waited for or tried once. A lock goes
//! with the file's last descriptor, or at [`unlock`].

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Waits for an exclusive lock (a signal's interruption is waited through).
pub fn exclusive(f: &File) -> io::Result<()> {
    flock(f, libc::LOCK_EX)
}

/// Waits for a shared lock.
pub fn shared(f: &File) -> io::Result<()> {
    flock(f, libc::LOCK_SH)
}

/// Takes an exclusive lock if no one holds one: whether it was taken.
pub fn try_exclusive(f: &File) -> bool {
    flock(f, libc::LOCK_EX | libc::LOCK_NB).is_ok()
}

/// Lets go now: a forked child shares the descriptor, and with it the lock.
pub fn unlock(f: &File) {
    let _ = flock(f, libc::LOCK_UN);
}

fn flock(f: &File, how: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: a valid open descriptor, borrowed for the call.
        if unsafe { libc::flock(f.as_raw_fd(), how) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_one_holders_until_it_lets_go() {
        let path = std::env::temp_dir().join(format!("dryml-sys-lock-{}", std::process::id()));
        let open = || File::options().create(true).truncate(false).write(true).open(&path).unwrap();
        let (a, b) = (open(), open());
        exclusive(&a).unwrap();
        assert!(!try_exclusive(&b), "held by another open file");
        unlock(&a);
        assert!(try_exclusive(&b));
        drop(b);
        shared(&a).unwrap();
        shared(&open()).unwrap();
        assert!(!try_exclusive(&open()), "shared holders keep out an exclusive one");
        let _ = std::fs::remove_file(&path);
    }
}
