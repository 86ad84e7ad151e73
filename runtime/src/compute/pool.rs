//! The resource pool: the machine's CPUs and GPUs, who holds which share of each, and the
//! allocation of requests, shared by the kernel and every sandbox through files in its state dir.
//!
//! Claims live in `<state dir>/claims`, changed only under an exclusive `flock` on
//! `claims.lock` and replaced by rename, so the notebook's process, its sandboxes and the kernel
//! see one pool. A claim names its pid and that process's start time: a claim whose process has
//! ended (crashed, killed, or just finished) is dropped by the next reader, so claims can never
//! outlive their holder. Outside the kernel (no state dir) the pool is this process's alone.

use crate::compute::context::{Context, ContextError, Request, Requests};
pub(crate) use crate::compute::devices::{short, Device, Kind, Machine};
use crate::compute::devices::{state_dir, MACHINE_FILE};
use crate::sys::fs::{write_atomic, Durability};
use crate::sys::procfs;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const CLAIMS_FILE: &str = "claims";
const LOCK_FILE: &str = "claims.lock";
const CLAIMS_VERSION: &str = "dryml-claims 1";
/// Shares are compared with this slack, so three claims of 1/3 fill a device.
const EPS: f64 = 1e-9;

/// One framework's share of one device, held by one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub pid: u32,
    /// The process's start time (clock ticks since boot), so a reused pid holds nothing.
    pub start: u64,
    /// `notebook`, `sandbox` or `process`: who the pid is, for the pool table.
    pub holder: String,
    pub framework: String,
    pub device: Device,
    pub share: f64,
}

/// The pool, locked for reading and changing until it is dropped.
pub struct Pool {
    pub machine: Machine,
    pub claims: Vec<Claim>,
    dir: Option<PathBuf>,
    /// Holds the `flock` while the pool is open.
    lock: Option<std::fs::File>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Unlock explicitly: a sandbox forked while the pool was open shares the lock's file.
        if let Some(f) = &self.lock {
            crate::sys::lock::unlock(f);
        }
    }
}

/// The pool of a program with no kernel around it: a directory made by the first process
/// that opens one; its sandboxes (forks) inherit the path with their memory.
static PRIVATE: OnceLock<PathBuf> = OnceLock::new();

fn private_dir() -> io::Result<&'static Path> {
    if let Some(p) = PRIVATE.get() {
        return Ok(p);
    }
    let me = std::process::id();
    let tmp = std::env::temp_dir();
    // The pools of programs that have ended go first: nothing else would remove them.
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("dryml-pool-")) else { continue };
            let Some((pid, start)) = rest.split_once('-') else { continue };
            let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { continue };
            if procfs::start_time(pid) != Some(start) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = tmp.join(format!("dryml-pool-{me}-{}", procfs::start_time(me).unwrap_or(0)));
    crate::sys::fs::private_dir(&dir)?;
    Ok(PRIVATE.get_or_init(|| dir))
}

impl Pool {
    /// Opens the kernel's pool, or outside a kernel this process tree's, and drops the claims
    /// of ended processes.
    pub fn open() -> io::Result<Pool> {
        match state_dir() {
            Some(dir) if dir.is_dir() => Pool::open_dir(&dir),
            _ => Pool::open_dir(private_dir()?),
        }
    }

    /// Opens the pool kept in `dir`, waiting for its lock.
    pub fn open_dir(dir: &Path) -> io::Result<Pool> {
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(LOCK_FILE))?;
        crate::sys::lock::exclusive(&lock)?;
        let machine = match std::fs::read_to_string(dir.join(MACHINE_FILE)) {
            Ok(t) => Machine::parse(&t).unwrap_or_else(Machine::load),
            Err(_) => Machine::load(),
        };
        let claims = match std::fs::read_to_string(dir.join(CLAIMS_FILE)) {
            Ok(t) => parse_claims(&t).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", dir.join(CLAIMS_FILE).display()))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut pool = Pool { machine, claims, dir: Some(dir.to_path_buf()), lock: Some(lock) };
        pool.drop_ended();
        Ok(pool)
    }

    fn drop_ended(&mut self) {
        self.claims.retain(|c| procfs::start_time(c.pid) == Some(c.start));
    }

    /// The share of `d` nobody holds.
    pub fn free(&self, d: Device) -> f64 {
        let held: f64 = self.claims.iter().filter(|c| c.device == d).map(|c| c.share).sum();
        (1.0 - held).max(0.0)
    }

    /// Who holds `d`, for error messages: "the notebook (pid 12, tf 0.5)".
    fn holders(&self, d: Device) -> String {
        let mut by: Vec<String> = Vec::new();
        for c in self.claims.iter().filter(|c| c.device == d) {
            by.push(format!("the {} (pid {}, {} {})", c.holder, c.pid, c.framework, short(c.share)));
        }
        if by.is_empty() {
            "nobody".into()
        } else {
            by.join(", ")
        }
    }

    /// Picks devices for `reqs`: specific `cpu/<i>`/`gpu/<i>` shares first, then whole free
    /// devices. A framework that names no CPU gets one whole CPU unless it sets `num_cpus`;
    /// GPUs are only given when asked for. Nothing is claimed here.
    pub fn allocate(&self, reqs: &Requests) -> Result<Context, String> {
        let mut free: BTreeMap<Device, f64> = self.machine.devices().map(|d| (d, self.free(d))).collect();
        let mut ctx = Context::default();
        for (fw, r) in &reqs.frameworks {
            let mut got: Vec<(Device, f64)> = Vec::new();
            for kind in [Kind::Cpu, Kind::Gpu] {
                self.allocate_kind(fw, r, kind, &mut free, &mut got)?;
            }
            ctx.frameworks.push((fw.clone(), got));
        }
        Ok(ctx)
    }

    fn allocate_kind(
        &self,
        fw: &str,
        r: &Request,
        kind: Kind,
        free: &mut BTreeMap<Device, f64>,
        got: &mut Vec<(Device, f64)>,
    ) -> Result<(), String> {
        let (specific, num, word) = match kind {
            Kind::Cpu => (&r.cpus, r.num_cpus.unwrap_or(if r.cpus.is_empty() { 1 } else { 0 }), "CPU"),
            Kind::Gpu => (&r.gpus, r.num_gpus.unwrap_or(0), "GPU"),
        };
        let key = if kind == Kind::Cpu { "num_cpus" } else { "num_gpus" };
        for (&i, &share) in specific {
            let d = Device { kind, index: i };
            let Some(avail) = free.get_mut(&d) else {
                let have = self.machine.devices().filter(|x| x.kind == kind).count();
                return Err(format!("{fw}: {d} does not exist (the pool has {have} {word}s)"));
            };
            if *avail + EPS < share {
                return Err(format!(
                    "{fw}: {d}={} cannot be met: {} of {d} is free; it is held by {}",
                    short(share),
                    short(*avail),
                    self.holders(d)
                ));
            }
            *avail -= share;
            got.push((d, share));
        }
        let whole: Vec<Device> = free
            .iter()
            .filter(|(d, f)| d.kind == kind && **f >= 1.0 - EPS && !got.iter().any(|(g, _)| g == *d))
            .map(|(d, _)| *d)
            .collect();
        let take = if num < 0 { whole.len() } else { num as usize };
        if whole.len() < take {
            let total = self.machine.devices().filter(|d| d.kind == kind).count();
            let busy: Vec<String> = self
                .machine
                .devices()
                .filter(|d| d.kind == kind && !whole.contains(d))
                .map(|d| format!("{d} is held by {}", self.holders(d)))
                .collect();
            let mut msg = format!(
                "{fw}: {key}={take} cannot be met: {} of the pool's {total} {word}s {} fully free",
                whole.len(),
                if whole.len() == 1 { "is" } else { "are" }
            );
            if !busy.is_empty() {
                msg.push_str(&format!(" ({})", busy.join("; ")));
            }
            return Err(msg);
        }
        for d in whole.into_iter().take(take) {
            free.insert(d, 0.0);
            got.push((d, 1.0));
        }
        Ok(())
    }

    /// Records `ctx` as held by `pid`.
    pub fn claim(&mut self, pid: u32, holder: &str, ctx: &Context) -> io::Result<()> {
        let start = procfs::start_time(pid)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("process {pid} is not running")))?;
        for (fw, devices) in &ctx.frameworks {
            for &(device, share) in devices {
                self.claims.push(Claim {
                    pid,
                    start,
                    holder: holder.to_string(),
                    framework: fw.clone(),
                    device,
                    share,
                });
            }
        }
        Ok(())
    }

    /// Drops every claim of `pid`.
    pub fn release(&mut self, pid: u32) {
        self.claims.retain(|c| c.pid != pid);
    }

    /// Saves the claims and unlocks.
    pub fn commit(self) -> io::Result<()> {
        match &self.dir {
            // No fsync: the pool lives only as long as its processes, and a claim that outlives
            // a crash is dropped by the next reader anyway.
            Some(dir) => {
                write_atomic(&dir.join(CLAIMS_FILE), claims_record(&self.claims).as_bytes(), Durability::NoFsync)
            }
            None => Ok(()),
        }
    }
}

fn claims_record(claims: &[Claim]) -> String {
    let mut s = format!("{CLAIMS_VERSION}\n");
    for c in claims {
        s.push_str(&format!("{}\t{}\t{}\t{}\t{}\t{}\n", c.pid, c.start, c.holder, c.framework, c.device, c.share));
    }
    s
}

fn parse_claims(text: &str) -> Result<Vec<Claim>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, v)) if v == CLAIMS_VERSION => {}
        Some((_, v)) => return Err(format!("unknown format `{v}` (expected `{CLAIMS_VERSION}`)")),
        None => return Ok(Vec::new()),
    }
    let mut out = Vec::new();
    for (n, line) in lines {
        let bad = || format!("line {}: malformed claim `{line}`", n + 1);
        let f: Vec<&str> = line.split('\t').collect();
        let [pid, start, holder, fw, dev, share] = f.as_slice() else { return Err(bad()) };
        out.push(Claim {
            pid: pid.parse().map_err(|_| bad())?,
            start: start.parse().map_err(|_| bad())?,
            holder: holder.to_string(),
            framework: fw.to_string(),
            device: dev.parse()?,
            share: share.parse().map_err(|_| bad())?,
        });
    }
    Ok(out)
}

/// DRYML's `set_context` for a program (`dryml::set_context`): claims `reqs` from the pool for
/// this process and applies them to it. Once per process. (In a notebook, use `%context`,
/// which also restarts.)
pub fn set_context(reqs: &Requests) -> Result<Context, ContextError> {
    if let Some(ctx) = crate::compute::context::current() {
        return Err(ContextError::AlreadyActive { context: ctx.to_string() });
    }
    let unavailable = |e: std::io::Error| ContextError::ResourcesUnavailable(format!("the resource pool: {e}"));
    let mut pool = Pool::open().map_err(unavailable)?;
    let ctx = pool.allocate(reqs).map_err(ContextError::ResourcesUnavailable)?;
    pool.claim(std::process::id(), "process", &ctx).map_err(unavailable)?;
    let machine = pool.machine.clone();
    pool.commit().map_err(unavailable)?;
    crate::compute::apply::apply(&ctx, &machine);
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::devices::GpuInfo;

    fn pool(cpus: u32, gpus: u32, claims: &[(u32, &str, &str, f64)]) -> Pool {
        let me = std::process::id();
        let start = procfs::start_time(me).unwrap();
        Pool {
            machine: Machine {
                cpus,
                gpus: (0..gpus)
                    .map(|i| GpuInfo { index: i, cuda_id: i.to_string(), name: format!("G{i}"), total_bytes: 1 << 30 })
                    .collect(),
            },
            claims: claims
                .iter()
                .map(|(pid, fw, dev, share)| Claim {
                    pid: *pid,
                    start,
                    holder: "sandbox".into(),
                    framework: fw.to_string(),
                    device: dev.parse().unwrap(),
                    share: *share,
                })
                .collect(),
            dir: None,
            lock: None,
        }
    }

    #[test]
    fn allocations() {
        // (cpus, gpus, claims already held, request, the context given)
        let table: &[(u32, u32, &[(u32, &str, &str, f64)], &str, &str)] = &[
            (2, 0, &[], "default", "default: cpu/0"),
            (4, 2, &[], "tf gpu/1=0.5 torch num_gpus=1", "tf: cpu/0, gpu/1=0.5; torch: cpu/1, gpu/0"),
            (2, 1, &[(1, "tf", "gpu/0", 0.5)], "torch gpu/0=0.5 num_cpus=0", "torch: gpu/0=0.5"),
            (4, 0, &[(1, "tf", "cpu/0", 1.0)], "tf num_cpus=-1", "tf: cpu/1, cpu/2, cpu/3"),
            // Specific shares first: cpu/1 is taken before the whole CPUs are counted.
            (3, 0, &[], "tf cpu/1=0.5 num_cpus=2", "tf: cpu/1=0.5, cpu/0, cpu/2"),
            (2, 2, &[(1, "tf", "gpu/0", 0.25)], "x num_gpus=-1 num_cpus=0", "x: gpu/1"),
            (
                2,
                0,
                &[(1, "a", "cpu/0", 1.0 / 3.0), (1, "b", "cpu/0", 1.0 / 3.0)],
                "c cpu/0=0.3333333333333333 num_cpus=0",
                "c: cpu/0=0.333",
            ),
        ];
        for (cpus, gpus, claims, req, want) in table {
            let p = pool(*cpus, *gpus, claims);
            let ctx = p.allocate(&Requests::parse(req).unwrap()).unwrap_or_else(|e| panic!("{req}: {e}"));
            assert_eq!(ctx.to_string(), *want, "{req}");
        }
    }

    #[test]
    fn overcommits_are_refused() {
        let me = std::process::id();
        // (cpus, gpus, claims, request, words of the error)
        let table: &[(u32, u32, &[(u32, &str, &str, f64)], &str, &str)] = &[
            (
                2,
                1,
                &[(me, "tf", "gpu/0", 0.75)],
                "torch gpu/0=0.5",
                "torch: gpu/0=0.5 cannot be met: 0.25 of gpu/0 is free; it is held by the sandbox",
            ),
            (2, 0, &[], "tf num_cpus=3", "tf: num_cpus=3 cannot be met: 2 of the pool's 2 CPUs are fully free"),
            (
                2,
                0,
                &[(me, "tf", "cpu/0", 0.5)],
                "a num_cpus=2",
                "1 of the pool's 2 CPUs is fully free (cpu/0 is held by the sandbox",
            ),
            (2, 0, &[], "tf num_gpus=1", "tf: num_gpus=1 cannot be met: 0 of the pool's 0 GPUs are fully free"),
            (2, 1, &[], "tf gpu/2=0.5", "tf: gpu/2 does not exist (the pool has 1 GPUs)"),
            // Two frameworks of one request may not share more than the whole device.
            (2, 1, &[], "tf gpu/0=0.75 torch gpu/0=0.5", "torch: gpu/0=0.5 cannot be met: 0.25 of gpu/0 is free"),
            (1, 0, &[], "tf torch", "torch: num_cpus=1 cannot be met: 0 of the pool's 1 CPUs are fully free"),
        ];
        for (cpus, gpus, claims, req, words) in table {
            let p = pool(*cpus, *gpus, claims);
            let e = p.allocate(&Requests::parse(req).unwrap()).expect_err(req);
            assert!(e.contains(words), "{req}: {e}");
        }
    }

    #[test]
    fn claims_of_ended_processes_are_dropped_and_files_round_trip() {
        let dir = std::env::temp_dir().join(format!("dryml-pool-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = Machine {
            cpus: 3,
            gpus: vec![GpuInfo { index: 0, cuda_id: "2".into(), name: "Fake\tGPU".into(), total_bytes: 80 << 30 }],
        };
        m.save(&dir).unwrap();
        // A child that has exited (and been reaped) held cpu/1.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        let dead_start = procfs::start_time(dead);
        child.wait().unwrap();
        let mut p = Pool::open_dir(&dir).unwrap();
        assert_eq!(p.machine.gpus[0].name, "Fake GPU");
        assert_eq!(p.machine.gpus[0].cuda_id, "2");
        let ctx = p.allocate(&Requests::parse("tf gpu/0=0.5").unwrap()).unwrap();
        p.claim(std::process::id(), "notebook", &ctx).unwrap();
        p.claims.push(Claim {
            pid: dead,
            start: dead_start.unwrap_or(1),
            holder: "sandbox".into(),
            framework: "x".into(),
            device: Device::cpu(1),
            share: 1.0,
        });
        p.commit().unwrap();
        let p = Pool::open_dir(&dir).unwrap();
        assert_eq!(p.claims.len(), 2, "{:?}", p.claims);
        assert_eq!(p.free(Device::gpu(0)), 0.5);
        assert_eq!(p.free(Device::cpu(0)), 0.0);
        assert_eq!(p.free(Device::cpu(1)), 1.0, "the ended process's claim is gone");
        drop(p);
        std::fs::write(dir.join(CLAIMS_FILE), "dryml-claims 1\n1\t2\tx\n").unwrap();
        let e = Pool::open_dir(&dir).err().unwrap().to_string();
        assert!(e.contains("claims: line 2: malformed claim"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
