//! Shell commands from Rust: run in this process's working directory and environment, their
//! output written as it comes (to the cell, in the kernel), in a process group of their own
//! that the kernel's interrupt stops. `!cmd` lines and `%%bash` cells call these.
//!
//! ```
//! let status = dryml::shell::run("echo hello from bash").unwrap();
//! assert!(status.success());
//! assert_eq!(dryml::shell::run("exit 3").unwrap().code(), Some(3));
//! ```

use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    code: Option<i32>,
    signal: Option<i32>,
}

impl Status {
    /// Exit status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The exit status; None when a signal ended it.
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// The signal that ended it.
    pub fn signal(&self) -> Option<i32> {
        self.signal
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit status {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => write!(f, "ended"),
        }
    }
}

/// The shell `!` lines use: bash where there is one (brace expansion, `source`), else sh.
pub fn default_shell() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

/// Runs `command` with [`default_shell`], as `!command` does.
pub fn run(command: &str) -> std::io::Result<Status> {
    script(default_shell(), command)
}

/// Runs `text` as a script of `shell` (`bash`, `sh`, or a path) with `-c`; stdin is empty.
/// In the kernel, an interrupt stops its whole process group and unwinds the cell.
pub fn script(shell: &str, text: &str) -> std::io::Result<Status> {
    // What the cell printed so far comes before the command's output.
    let _ = std::io::stdout().flush();
    let mut cmd = Command::new(shell);
    cmd.arg("-c").arg(text).stdin(Stdio::null()).process_group(0);
    let child = cmd.spawn().map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {shell}: {e}")))?;
    wait(child)
}

/// Waits for the command, polling the kernel's interrupt (a few ms apart, so a short command
/// costs little more than its own time).
fn wait(mut child: Child) -> std::io::Result<Status> {
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Status { code: st.code(), signal: st.signal() });
        }
        if crate::interrupted() {
            stop(&mut child);
            crate::batch::unwind_interrupted(0);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// SIGINT to the command's group, as a terminal's Ctrl-C; what is left 300 ms later is killed.
fn stop(child: &mut Child) {
    let group = -(child.id() as i32);
    unsafe { libc::kill(group, libc::SIGINT) };
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Background jobs of the command are in its group too.
    unsafe { libc::kill(group, libc::SIGKILL) };
    let _ = child.wait();
}

/// A `!cmd` line: runs it; a failure is said on stderr and the cell goes on (IPython's rule).
#[doc(hidden)]
pub fn line(command: &str) {
    match run(command) {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("!{command}: {s}"),
        Err(e) => eprintln!("!{command}: {e}"),
    }
}

/// A `%%bash`/`%%sh` cell; `raise_error` makes a failure the cell's error.
#[doc(hidden)]
pub fn cell(shell: &str, text: &str, raise_error: bool) {
    let failed = match script(shell, text) {
        Ok(s) if s.success() => return,
        Ok(s) => format!("the {shell} script ended with {s}"),
        Err(e) => e.to_string(),
    };
    if raise_error {
        crate::display::wire::raise_error("CalledProcessError", &failed);
    } else {
        eprintln!("{failed}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_signals_are_told_apart() {
        assert!(run("true").unwrap().success());
        let st = run("exit 7").unwrap();
        assert_eq!((st.code(), st.to_string().as_str()), (Some(7), "exit status 7"));
        let st = run("kill -TERM $$").unwrap();
        assert_eq!((st.code(), st.signal()), (None, Some(libc::SIGTERM)));
        assert_eq!(st.to_string(), format!("killed by signal {}", libc::SIGTERM));
    }

    #[test]
    fn a_missing_shell_names_itself() {
        let e = script("/no/such/shell", "true").unwrap_err();
        assert!(e.to_string().starts_with("cannot start /no/such/shell"), "{e}");
    }

    #[test]
    fn stdin_is_empty_not_the_processes_own() {
        // evcxr's child reads its commands from stdin: a command must never take them.
        let st = run("read -r line; [ -z \"$line\" ]").unwrap();
        assert!(st.success());
    }
}
