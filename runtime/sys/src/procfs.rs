//! Linux's `/proc`, read in one place: a process's `stat`, `status` and `statm`, its threads,
//! children and descendants, the system call it waits in, the machine's `meminfo`, and
//! `clear_refs`.
//!
//! A process that has gone reads as `None`, empty or zero, never as an error: the callers
//! (the pool, sandboxes, the kernel's meter) race with processes ending all the time.

use std::collections::HashMap;

/// The fields of `/proc/PID/stat` that DRYML uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    pub state: char,
    pub ppid: u32,
    /// CPU time in user and in kernel mode, in clock ticks (`sysconf(_SC_CLK_TCK)`).
    pub utime: u64,
    pub stime: u64,
    /// Clock ticks after boot when the process started: with the pid, it names one process
    /// even after the pid is reused.
    pub start_time: u64,
}

impl Stat {
    /// Still running: neither a zombie nor dead.
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }

    /// User and system CPU seconds.
    pub fn cpu_secs(&self) -> (f64, f64) {
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (self.utime as f64 / tick, self.stime as f64 / tick)
    }
}

/// `/proc/PID/stat`, or `None` when the process is gone.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    let mut f = text.get(text.rfind(')')? + 2..)?.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    // proc(5) numbers them from 1 with pid: utime is field 14, stime 15, starttime 22.
    let utime = f.nth(9)?.parse().ok()?;
    let stime = f.next()?.parse().ok()?;
    let start_time = f.nth(6)?.parse().ok()?;
    Some(Stat { state, ppid, utime, stime, start_time })
}

/// The start time of a live process, or `None` when it has ended (zombies included).
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).filter(Stat::is_live).map(|s| s.start_time)
}

/// User and system CPU seconds of a process.
pub fn cpu_times(pid: u32) -> Option<(f64, f64)> {
    stat(pid).map(|s| s.cpu_secs())
}

/// Whether `/proc/PID` exists (zombies included).
/// Whether the process's main thread is blocked reading its standard input (`read(0, ...)` in
/// `/proc/PID/syscall`): for evcxr's child, waiting for its next command, so running no cell.
pub fn reading_stdin(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/syscall")).is_ok_and(|s| {
        let mut f = s.split_whitespace();
        f.next() == Some("0") && f.next() == Some("0x0")
    })
}

pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Every process on the machine (the numeric entries of `/proc`).
pub fn pids() -> Vec<u32> {
    numeric_entries("/proc")
}

/// Every process's children, keyed by parent, from each process's `stat`: unlike
/// [`children`], one pass over `/proc` for the whole tree.
pub fn children_by_parent() -> HashMap<u32, Vec<u32>> {
    let mut map: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in pids() {
        if let Some(s) = stat(pid) {
            map.entry(s.ppid).or_default().push(pid);
        }
    }
    map
}

/// A process's command line, one string per argument; empty when it is gone.
pub fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

/// The thread ids of a process (`/proc/PID/task`); empty when it is gone.
pub fn tasks(pid: u32) -> Vec<u32> {
    numeric_entries(&format!("/proc/{pid}/task"))
}

fn numeric_entries(dir: &str) -> Vec<u32> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// A process's live children, from every thread's `/proc/PID/task/TID/children`.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for tid in tasks(pid) {
        let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).unwrap_or_default();
        out.extend(kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()));
    }
    out
}

/// `pid` and every live process below it.
pub fn with_descendants(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let kids = children(out[i]);
        out.extend(kids);
        i += 1;
    }
    out
}

/// The `kB` fields of `/proc/PID/status` named by `keys` (with their colon, as `"VmRSS:"`), in
/// bytes; zero for a field that is missing or a process that is gone.
pub fn status<const N: usize>(pid: u32, keys: [&str; N]) -> [u64; N] {
    kib_fields(&format!("/proc/{pid}/status"), keys)
}

/// The fields of `/proc/meminfo` named by `keys` (as `"MemAvailable:"`), in bytes; zero when
/// missing.
pub fn meminfo<const N: usize>(keys: [&str; N]) -> [u64; N] {
    kib_fields("/proc/meminfo", keys)
}

fn kib_fields<const N: usize>(path: &str, keys: [&str; N]) -> [u64; N] {
    let mut out = [0; N];
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        if let Some(k) = keys.iter().position(|k| line.starts_with(k)) {
            let v = line[keys[k].len()..].trim().trim_end_matches("kB").trim();
            out[k] = v.parse::<u64>().unwrap_or(0) * 1024;
        }
    }
    out
}

/// Memory this process may still take, and all it may have, in bytes: the machine's
/// `MemAvailable` and `MemTotal`, capped by its memory cgroup's limit (cgroup v2's `memory.max`,
/// v1's `memory.limit_in_bytes`, on its own cgroup and each above it), as in a container, where
/// `/proc/meminfo` shows the host's memory.
pub fn memory() -> (u64, u64) {
    let [available, total] = meminfo(["MemAvailable:", "MemTotal:"]);
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limits = cgroup_limits(&cgroups, std::path::Path::new("/sys/fs/cgroup"));
    limits
        .into_iter()
        .fold((available, total), |(a, t), (limit, usage)| (a.min(limit.saturating_sub(usage)), t.min(limit)))
}

/// (limit, usage) of each memory cgroup that holds this process, from its own up, read under
/// `root` as `/proc/self/cgroup` (`text`) names them; unlimited ones are left out.
fn cgroup_limits(text: &str, root: &std::path::Path) -> Vec<(u64, u64)> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        let (base, limit_file, usage_file) = if controllers.is_empty() {
            (root.to_path_buf(), "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")
        } else {
            continue;
        };
        let mut dir = std::path::PathBuf::from(path);
        loop {
            let d = base.join(dir.strip_prefix("/").unwrap_or(&dir));
            // v2's "max" and v1's page-rounded i64::MAX do not parse or exceed any machine.
            if let (Some(limit), Some(usage)) = (read(d.join(limit_file)), read(d.join(usage_file))) {
                if limit < (1 << 60) {
                    out.push((limit, usage));
                }
            }
            if !dir.pop() {
                break;
            }
        }
    }
    out
}

/// A process's pid in each pid namespace it is in (`NSpid`), the namespace of whoever mounted
/// `/proc` first; empty for a process that is gone (or a kernel before 4.1).
pub fn ns_pids(pid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| v.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Linux's fixed inode number of the initial pid namespace (`PROC_PID_INIT_INO`).
const INIT_PID_NS_INO: u64 = 0xEFFF_FFFC;

/// Whether this process is in the machine's initial pid namespace: false in a container,
/// where pids differ from the ones the GPU driver reports. `None` if it cannot be told.
pub fn in_initial_pid_namespace() -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino() == INIT_PID_NS_INO)
}

/// A process's memory from `/proc/PID/statm`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statm {
    /// The address space (`VmSize`).
    pub size: u64,
    /// The resident set (`VmRSS`).
    pub resident: u64,
}

/// `/proc/PID/statm`, or `None` when the process is gone. Cheaper than [`status`] (one short
/// line), so sandboxes poll it.
pub fn statm(pid: u32) -> Option<Statm> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let mut f = s.split_whitespace();
    let size: u64 = f.next()?.parse().ok()?;
    let resident: u64 = f.next()?.parse().ok()?;
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    Some(Statm { size: size * page, resident: resident * page })
}

/// Restarts a process's `VmHWM` from its current RSS (`clear_refs` value 5).
pub fn reset_hwm(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_counts_fields_from_the_last_parenthesis() {
        let line = "42 (a) b (c) S 7 42 42 0 -1 4194560 100 0 0 0 250 13 0 0 20 0 1 0 98765 1000 200 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s, Stat { state: 'S', ppid: 7, utime: 250, stime: 13, start_time: 98765 });
        assert!(s.is_live());
        assert!(!parse_stat(&line.replace(" S ", " Z ")).unwrap().is_live());
        assert_eq!(parse_stat("42 (truncated"), None);
    }

    #[test]
    fn a_childs_command_line_argument_by_argument() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30; true", "two words"]).spawn().unwrap();
        // A spawn may return before the child's exec is through: until then the child shows
        // this process's arguments, or none.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut args = cmdline(child.id());
        while args.first().is_none_or(|a| a != "sh") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
            args = cmdline(child.id());
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(args, ["sh", "-c", "sleep 30; true", "two words"]);
        assert!(cmdline(child.id()).is_empty(), "a reaped child has none");
    }

    #[test]
    fn this_process_and_its_child() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert_eq!(s.ppid, unsafe { libc::getppid() } as u32);
        assert_eq!(start_time(me), Some(s.start_time));
        assert!(tasks(me).contains(&me) && exists(me));
        let [rss, hwm] = status(me, ["VmRSS:", "VmHWM:"]);
        assert!(rss > 0 && hwm >= rss, "{rss} {hwm}");
        let m = statm(me).unwrap();
        assert!(m.resident > 0 && m.size >= m.resident);
        let [avail, total] = meminfo(["MemAvailable:", "MemTotal:"]);
        assert!(avail > 0 && total >= avail);
        // MemAvailable moves between two reads, so only the stable total bounds the second one.
        let (a, t) = memory();
        assert!(a > 0 && t <= total && t >= a, "{a} {t}");

        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(children(me).contains(&pid));
        assert!(with_descendants(me).contains(&pid));
        assert!(children_by_parent()[&me].contains(&pid));
        child.kill().unwrap();
        // Killed but not reaped: a zombie, which has no start time.
        while stat(pid).is_some_and(|s| s.is_live()) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(start_time(pid), None);
        child.wait().unwrap();
        assert_eq!(stat(pid), None);
        assert_eq!(status(pid, ["VmRSS:"]), [0]);
        assert!(cpu_times(pid).is_none() && statm(pid).is_none() && tasks(pid).is_empty());
    }

    #[test]
    fn a_memory_cgroup_caps_what_is_available() {
        // A real cgroup (v1's memory controller, or v2), made here as root, as a container's.
        let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let base = if v2 { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/memory" };
        let dir = std::path::PathBuf::from(format!("{base}/dryml-test-{}", std::process::id()));
        if unsafe { libc::geteuid() } != 0 || std::fs::create_dir(&dir).is_err() {
            return; // Only root makes cgroups; CI runs as root.
        }
        let limit_file = if v2 { "memory.max" } else { "memory.limit_in_bytes" };
        std::fs::write(dir.join(limit_file), (256u64 << 20).to_string()).unwrap();
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).is_ok() && {
                let (a, t) = memory();
                t == 256 << 20 && a <= 256 << 20
            };
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(child, &mut status, 0) };
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(libc::WEXITSTATUS(status), 0, "memory() inside a 256 MiB cgroup");
        // The files as /proc/self/cgroup names them, from its own cgroup up.
        let tmp = std::env::temp_dir().join(format!("dryml-cg-{}", std::process::id()));
        for (d, limit, usage) in
            [("memory/a", "1048576", "4096"), ("memory/a/b", "9223372036854771712", "0"), ("x/a", "max", "1")]
        {
            let p = tmp.join(d);
            std::fs::create_dir_all(&p).unwrap();
            let v1 = d.starts_with("memory");
            std::fs::write(p.join(if v1 { "memory.limit_in_bytes" } else { "memory.max" }), limit).unwrap();
            std::fs::write(p.join(if v1 { "memory.usage_in_bytes" } else { "memory.current" }), usage).unwrap();
        }
        assert_eq!(cgroup_limits("5:cpu,memory:/a/b\n1:cpu:/a\n", &tmp), [(1048576, 4096)]);
        assert_eq!(cgroup_limits("0::/a\n", &tmp.join("x")), []);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
