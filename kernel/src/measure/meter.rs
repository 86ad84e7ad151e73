//! Memory of the processes that run user code, read from /proc and NVML at cell boundaries.
//!
//! Peaks come from the kernel's own high-water mark (`VmHWM`), reset through
//! `/proc/PID/clear_refs`, so a spike of any length is seen and nothing polls while a cell runs.
//! The `/proc` files are read through `dryml_sys::procfs`.

use crate::measure::gpu::{Gpu, GpuMem, Gpus};
use dryml_sys::procfs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often GPU memory is read while a cell runs. NVML keeps no per-process high-water mark, so
/// GPU peaks held for less than this can be missed; the thread sleeps between reads.
pub const GPU_POLL: Duration = Duration::from_millis(20);

/// A running GPU watch (see [`Meter::watch_gpus`]).
pub struct GpuWatch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<u64>>,
}

/// CPU memory at one moment, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuMem {
    /// Resident set of the measured processes.
    pub rss: u64,
    /// Their high-water mark since the last reset.
    pub hwm: u64,
    /// `MemAvailable` of the machine, capped by the kernel's memory cgroup (a container's limit).
    pub available: u64,
    pub total: u64,
}

#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    pub cpu: CpuMem,
    pub gpus: Vec<GpuMem>,
    /// Which processes were measured (the child is replaced after a crash).
    pub pids: Vec<u32>,
}

/// Takes samples; opens NVML on first use, since loading it costs a few milliseconds.
#[derive(Default)]
pub struct Meter {
    gpus: Option<Arc<Gpus>>,
    /// Time spent measuring, for the benchmark and the cell log.
    pub spent: Duration,
    /// Highest CPU and per-GPU usage over every sample since [`Meter::begin_cell`]: other samples
    /// (an experiment starting mid-cell) restart the high-water mark, so the cell's own is kept here.
    pub cell_peak_cpu: u64,
    pub cell_peak_gpu: Vec<u64>,
}

impl Meter {
    fn gpus(&mut self) -> &Arc<Gpus> {
        self.gpus.get_or_insert_with(|| Arc::new(Gpus::open()))
    }

    /// Reads the GPUs' per-process memory every [`GPU_POLL`] until [`Meter::end_watch`]; `None`
    /// when there is no GPU to watch.
    /// The processes counted are `root` and its descendants at each read, so sandboxes started
    /// during the cell are seen.
    pub fn watch_gpus(&mut self, gpus: &[Gpu], root: u32) -> Option<GpuWatch> {
        if gpus.is_empty() {
            return None;
        }
        let nvml = self.gpus().clone();
        let gpus = gpus.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("dryml-gpu-watch".into())
            .spawn(move || {
                let mut peaks = vec![0u64; gpus.len()];
                loop {
                    let pids = procfs::with_descendants(root);
                    for (p, m) in peaks.iter_mut().zip(nvml.sample(&gpus, &pids)) {
                        *p = (*p).max(m.used_by_us);
                    }
                    if flag.load(Ordering::SeqCst) {
                        return peaks;
                    }
                    std::thread::park_timeout(GPU_POLL);
                }
            })
            .ok()?;
        Some(GpuWatch { stop, handle })
    }

    /// Stops a watch and folds its peaks into the cell's; returns them.
    pub fn end_watch(&mut self, w: GpuWatch) -> Vec<u64> {
        w.stop.store(true, Ordering::SeqCst);
        w.handle.thread().unpark();
        let peaks = w.handle.join().unwrap_or_default();
        fold_max(&mut self.cell_peak_gpu, peaks.iter().copied());
        peaks
    }

    /// NVIDIA's driver version, empty without NVML.
    pub fn gpu_driver(&mut self) -> String {
        self.gpus().driver()
    }

    /// The GPUs the child sees under its `CUDA_VISIBLE_DEVICES`.
    pub fn visible_gpus(&mut self, cuda_visible: Option<&str>) -> Vec<Gpu> {
        self.gpus().visible(cuda_visible)
    }

    pub fn begin_cell(&mut self) {
        self.cell_peak_cpu = 0;
        self.cell_peak_gpu.clear();
    }

    /// Why there are no GPU figures, if there are none.
    pub fn gpu_note(&mut self) -> Option<String> {
        self.gpus().note()
    }

    /// Measures `pids`; with `reset_peak`, the high-water marks restart from the current usage
    /// after being read.
    pub fn sample(&mut self, pids: &[u32], gpus: &[Gpu], reset_peak: bool) -> Sample {
        let t0 = Instant::now();
        let (available, total) = procfs::memory();
        let mut cpu = CpuMem { available, total, ..CpuMem::default() };
        for &pid in pids {
            // Zero for a process that has gone.
            let [rss, hwm] = procfs::status(pid, ["VmRSS:", "VmHWM:"]);
            cpu.rss += rss;
            cpu.hwm += hwm.max(rss);
            if reset_peak {
                if let Err(e) = procfs::reset_hwm(pid) {
                    tracing::debug!("clear_refs for {pid}: {e}");
                }
            }
        }
        let gpu_mem = if gpus.is_empty() { Vec::new() } else { self.gpus().sample(gpus, pids) };
        self.cell_peak_cpu = self.cell_peak_cpu.max(cpu.hwm).max(cpu.rss);
        fold_max(&mut self.cell_peak_gpu, gpu_mem.iter().map(|g| g.used_by_us));
        self.spent += t0.elapsed();
        Sample { at: t0, cpu, gpus: gpu_mem, pids: pids.to_vec() }
    }
}

/// How far `VmHWM` may sit below the true peak. Linux keeps RSS in three per-CPU counters (file,
/// anon, shmem pages) and folds a CPU's share into each total only every `max(32, 2 * cpus)` pages;
/// `VmRSS` sums them (since 6.16) but the high-water mark is taken from the folded totals.
pub fn peak_tolerance() -> u64 {
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    3 * cpus * 32u64.max(2 * cpus) * page
}

/// Raises each entry of `peaks` to the matching value, growing it as needed.
pub fn fold_max(peaks: &mut Vec<u64>, values: impl IntoIterator<Item = u64>) {
    for (i, v) in values.into_iter().enumerate() {
        if i == peaks.len() {
            peaks.push(0);
        }
        peaks[i] = peaks[i].max(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_water_mark_catches_a_freed_spike() {
        // A real child process: touch 64 MiB, free it, then wait.
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import mmap,sys,time\nm=mmap.mmap(-1,64<<20)\nm.write(b'x'*(64<<20))\nm.close()\nprint('freed',flush=True)\nsys.stdin.readline()",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        let pid = child.id();
        let mut meter = Meter::default();
        let s = meter.sample(&[pid], &[], true);
        assert!(s.cpu.hwm >= s.cpu.rss + (64 << 20), "{:?}", s.cpu);
        let after = meter.sample(&[pid], &[], false);
        assert!(after.cpu.hwm < s.cpu.rss + (8 << 20), "reset did not take: {:?}", after.cpu);
        assert!(s.cpu.total > 0 && s.cpu.available > 0);
        let _ = child.kill();
        let _ = child.wait();
    }
}
