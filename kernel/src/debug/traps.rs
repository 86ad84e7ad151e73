//! Mends what LLDB leaves in the process that runs cells. A debugger that dies leaves its
//! breakpoints, `int3` bytes written over code (its own, on the dynamic loader's rendezvous,
//! stays while attached), so the process's next `dlopen` (every cell loads a library) would die
//! of SIGTRAP with the notebook's variables: each executable mapping of a file is compared with
//! that file, and where memory holds an `int3` the file does not, the file's byte is written
//! back. [`alive`] tells whether the process has ended.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::{Duration, Instant};

const INT3: u8 = 0xCC;

/// Waits (at most `limit`) for `pid` to have no tracer, then writes back the code bytes that
/// breakpoints replaced; how many.
pub fn lift(pid: u32, limit: Duration) -> std::io::Result<usize> {
    let t0 = Instant::now();
    while tracer(pid)? != 0 {
        if t0.elapsed() > limit {
            return Err(std::io::Error::other(format!("process {pid} is still traced after {limit:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut mem = std::fs::OpenOptions::new().read(true).write(true).open(format!("/proc/{pid}/mem"))?;
    let mut lifted = 0;
    for m in maps.lines().filter_map(Mapping::parse).filter(|m| m.exec) {
        let Ok(file) = File::open(&m.path) else { continue };
        // The file mapped, not one written over it since.
        if file.metadata().map(|md| md.ino()).ok() != Some(m.inode) {
            continue;
        }
        let len = (m.end - m.start) as usize;
        let mut want = vec![0; len];
        let n = read_at_most(&file, &mut want, m.offset)?;
        let mut have = vec![0; n];
        mem.seek(SeekFrom::Start(m.start))?;
        if mem.read_exact(&mut have).is_err() {
            continue;
        }
        for i in (0..n).filter(|&i| have[i] == INT3 && want[i] != INT3) {
            mem.seek(SeekFrom::Start(m.start + i as u64))?;
            mem.write_all(&want[i..=i])?;
            lifted += 1;
        }
    }
    Ok(lifted)
}

/// Whether process `pid` still runs (a zombie has ended).
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    pid != 0 && stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()).is_some_and(|s| s != 'Z' && s != 'X')
}

/// The pid tracing `pid` (0: none).
fn tracer(pid: u32) -> std::io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(status.lines().find_map(|l| l.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0))
}

fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// A line of `/proc/<pid>/maps` that maps a file.
struct Mapping {
    start: u64,
    end: u64,
    exec: bool,
    offset: u64,
    inode: u64,
    path: String,
}

impl Mapping {
    fn parse(line: &str) -> Option<Mapping> {
        let mut f = line.split_whitespace();
        let (start, end) = f.next()?.split_once('-')?;
        let perms = f.next()?;
        let offset = u64::from_str_radix(f.next()?, 16).ok()?;
        let _dev = f.next()?;
        let inode = f.next()?.parse().ok()?;
        let path = f.collect::<Vec<_>>().join(" ");
        (inode != 0 && path.starts_with('/')).then_some(())?;
        Some(Mapping {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            exec: perms.contains('x'),
            offset,
            inode,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_line_is_read_and_anonymous_ones_are_not() {
        let m = Mapping::parse(
            "7f0a1c000000-7f0a1c022000 r-xp 00028000 fd:01 1311 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        )
        .unwrap();
        assert_eq!((m.start, m.end, m.exec, m.offset, m.inode), (0x7f0a1c000000, 0x7f0a1c022000, true, 0x28000, 1311));
        assert!(m.path.ends_with("ld-linux-x86-64.so.2"));
        assert!(Mapping::parse("7ffd5a1e2000-7ffd5a203000 rw-p 00000000 00:00 0 [stack]").is_none());
    }
}
