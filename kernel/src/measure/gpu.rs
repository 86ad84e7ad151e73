//! GPU memory through NVML: per-process usage on each GPU, named as CUDA numbers them.
//!
//! The library is `libnvidia-ml.so.1` unless `DRYML_NVML_LIB` names another (the tests load a
//! fake one through the same `nvml-wrapper` path). No library or no GPU is not an error: the
//! reports drop their GPU columns and say why in one line.
//!
//! NVML names processes by their pids in the machine's initial pid namespace. In a container
//! (Docker, Kubernetes, a JupyterHub spawner) the kernel's own pids differ, so no listed process
//! is ever ours: there, and where NVML cannot list processes, the figures are the device's
//! (IPyExperiments' view), and the reports say so in one line.

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

/// Overrides the NVML library path.
pub const NVML_LIB_ENV: &str = "DRYML_NVML_LIB";

/// `process` or `device`: overrides what the kernel works out about per-process figures (for
/// a driver that reports a container's own pids, say).
pub const GPU_MEMORY_ENV: &str = "DRYML_GPU_MEMORY";

/// The reports' line when the figures are the whole device's.
pub const DEVICE_WIDE_NOTE: &str = "per-process GPU memory is not visible in this container; figures are device-wide";

/// Whether NVML's pids can be the kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidView {
    /// The driver's pid namespace: pids match.
    Same,
    /// Another pid namespace (a container's, or a nested one, which `NSpid` shows): NVML's pids
    /// are never ours, and the figures are device-wide.
    Hidden,
}

impl PidView {
    /// Works it out for this process, unless `DRYML_GPU_MEMORY` says.
    pub fn detect() -> PidView {
        match std::env::var(GPU_MEMORY_ENV).as_deref() {
            Ok("process") => return PidView::Same,
            Ok("device") => return PidView::Hidden,
            _ => {}
        }
        let nested = dryml_sys::procfs::ns_pids(std::process::id()).len() > 1;
        if nested || dryml_sys::procfs::in_initial_pid_namespace() == Some(false) {
            PidView::Hidden
        } else {
            PidView::Same
        }
    }
}

/// A GPU as the child's CUDA sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    /// `gpu/N`: N is the CUDA index in the child (after `CUDA_VISIBLE_DEVICES`, in PCI bus order).
    pub label: String,
    pub name: String,
    pub bus_id: String,
    /// NVML's UUID, which `CUDA_VISIBLE_DEVICES` accepts whatever the device order.
    pub uuid: String,
    nvml_index: u32,
}

/// One GPU's memory at one moment, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuMem {
    /// Used by the measured processes only (other users' jobs are not counted); the device's
    /// used memory when per-process figures are not visible ([`Gpus::note`] says).
    pub used_by_us: u64,
    pub free: u64,
    pub total: u64,
}

/// NVML, opened once. `devices` is every GPU NVML sees, in PCI bus order.
pub struct Gpus {
    nvml: Option<Nvml>,
    all: Vec<(u32, String, String, String)>,
    /// Why there are no GPU figures.
    missing: Option<String>,
    /// Why the figures are device-wide, once found (it stays so for the kernel's life, so two
    /// readings of one experiment are always alike).
    device_wide: std::sync::Mutex<Option<String>>,
}

impl Gpus {
    pub fn open() -> Gpus {
        let path = std::env::var(NVML_LIB_ENV).unwrap_or_else(|_| "libnvidia-ml.so.1".into());
        let nvml = match Nvml::builder().lib_path(std::ffi::OsStr::new(&path)).init() {
            Ok(n) => n,
            Err(e) => {
                return Gpus {
                    nvml: None,
                    all: vec![],
                    device_wide: Default::default(),
                    missing: Some(match e {
                        nvml_wrapper::error::NvmlError::LibloadingError(_) => {
                            format!("no GPU figures: no NVML library ({path})")
                        }
                        e => format!("no GPU figures: NVML from {path} failed: {e}"),
                    }),
                }
            }
        };
        let mut all = Vec::new();
        let count = nvml.device_count().unwrap_or(0);
        for i in 0..count {
            let Ok(d) = nvml.device_by_index(i) else { continue };
            let bus = d.pci_info().map(|p| normalize_bus_id(&p.bus_id)).unwrap_or_default();
            let name = d.name().unwrap_or_else(|_| format!("GPU {i}"));
            let uuid = d.uuid().unwrap_or_default();
            all.push((i, bus, uuid, name));
        }
        all.sort_by(|a, b| a.1.cmp(&b.1));
        let missing = all.is_empty().then(|| "no GPU figures: NVML sees no GPU".to_string());
        let device_wide = (PidView::detect() == PidView::Hidden).then(|| DEVICE_WIDE_NOTE.to_string());
        Gpus { nvml: Some(nvml), all, missing, device_wide: std::sync::Mutex::new(device_wide) }
    }

    /// NVIDIA's driver version, empty without NVML.
    pub fn driver(&self) -> String {
        self.nvml.as_ref().and_then(|n| n.sys_driver_version().ok()).unwrap_or_default()
    }

    /// The reports' one line about the GPU figures: why there are none, or why they are the
    /// whole device's.
    pub fn note(&self) -> Option<String> {
        self.missing.clone().or_else(|| self.device_wide_reason())
    }

    fn device_wide_reason(&self) -> Option<String> {
        self.device_wide.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The GPUs visible to a process with this `CUDA_VISIBLE_DEVICES`, as it numbers them.
    pub fn visible(&self, cuda_visible: Option<&str>) -> Vec<Gpu> {
        let ids: Vec<(&str, &str)> = self.all.iter().map(|d| (d.1.as_str(), d.2.as_str())).collect();
        visible_order(&ids, cuda_visible)
            .into_iter()
            .enumerate()
            .map(|(cuda, k)| Gpu {
                label: format!("gpu/{cuda}"),
                name: self.all[k].3.clone(),
                bus_id: self.all[k].1.clone(),
                uuid: self.all[k].2.clone(),
                nvml_index: self.all[k].0,
            })
            .collect()
    }

    /// Memory of each GPU, counting only what `pids` use (or, where that is not visible, what
    /// the whole device uses).
    pub fn sample(&self, gpus: &[Gpu], pids: &[u32]) -> Vec<GpuMem> {
        let Some(nvml) = &self.nvml else { return vec![] };
        let wide = self.device_wide_reason().is_some();
        let mut out = Vec::with_capacity(gpus.len());
        for g in gpus {
            let Ok(d) = nvml.device_by_index(g.nvml_index) else {
                out.push(GpuMem::default());
                continue;
            };
            let (free, total) = d.memory_info().map(|m| (m.free, m.total)).unwrap_or((0, 0));
            let used_by_us = if wide {
                total.saturating_sub(free)
            } else {
                match d.running_compute_processes() {
                    Ok(list) => list
                        .iter()
                        .filter(|p| pids.contains(&p.pid))
                        .map(|p| match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => b,
                            UsedGpuMemory::Unavailable => 0,
                        })
                        .sum(),
                    Err(e) => {
                        // Every GPU of the reading (and every later one) becomes device-wide.
                        *self.device_wide.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                            "per-process GPU memory is not visible (NVML cannot list the processes on {}: {e}); figures are device-wide",
                            g.label
                        ));
                        return self.sample(gpus, pids);
                    }
                }
            };
            out.push(GpuMem { used_by_us, free, total });
        }
        out
    }
}

/// `0000:3B:00.0` whatever NVML's spelling (it pads the domain to 8 digits).
fn normalize_bus_id(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => id,
    }
}

/// Which devices (indices into `ids`, given as (bus id, uuid) in PCI bus order) a process sees,
/// in CUDA's order, under `CUDA_VISIBLE_DEVICES`. The kernel starts the child with
/// `CUDA_DEVICE_ORDER=PCI_BUS_ID` so CUDA's numbering is this one. As in CUDA, entries are indices
/// or (prefixes of) UUIDs, and the list ends at the first entry that names no device.
pub fn visible_order(ids: &[(&str, &str)], cuda_visible: Option<&str>) -> Vec<usize> {
    let Some(spec) = cuda_visible else {
        return (0..ids.len()).collect();
    };
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim) {
        let found = if let Ok(i) = entry.parse::<usize>() {
            (i < ids.len()).then_some(i)
        } else if entry.len() > 4 && entry.starts_with("GPU-") {
            let hits: Vec<usize> = (0..ids.len()).filter(|&k| ids[k].1.starts_with(entry)).collect();
            (hits.len() == 1).then(|| hits[0])
        } else {
            None
        };
        match found {
            Some(k) if !out.contains(&k) => out.push(k),
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_visible_devices_table() {
        let ids =
            [("0000:1a:00.0", "GPU-aaaa1111"), ("0000:3b:00.0", "GPU-bbbb2222"), ("0000:5e:00.0", "GPU-cccc3333")];
        let table: &[(Option<&str>, &[usize])] = &[
            (None, &[0, 1, 2]),
            (Some(""), &[]),
            (Some("2"), &[2]),
            (Some("2,0"), &[2, 0]),
            (Some("1, 2"), &[1, 2]),
            (Some("0,7,1"), &[0]),
            (Some("-1"), &[]),
            (Some("GPU-bbbb"), &[1]),
            (Some("GPU-cccc3333,0"), &[2, 0]),
            (Some("GPU-"), &[]),
            (Some("1,1"), &[1]),
            (Some("MIG-1234"), &[]),
        ];
        for (spec, want) in table {
            assert_eq!(visible_order(&ids, *spec), *want, "CUDA_VISIBLE_DEVICES={spec:?}");
        }
    }

    #[test]
    fn a_process_in_another_pid_namespace_sees_device_wide_figures() {
        assert_eq!(PidView::detect(), PidView::Same, "the tests run in the machine's pid namespace");
        if unsafe { libc::geteuid() } != 0 {
            return; // Only root may make a pid namespace; CI runs as root.
        }
        // A child makes a pid namespace; its own child, in it, is what a container's process is.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                if libc::unshare(libc::CLONE_NEWPID) != 0 {
                    libc::_exit(2);
                }
                let inner = libc::fork();
                if inner == 0 {
                    libc::_exit(if PidView::detect() == PidView::Hidden { 0 } else { 1 });
                }
                let mut status = 0;
                libc::waitpid(inner, &mut status, 0);
                libc::_exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 3 });
            }
        }
        let mut status = 0;
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0, "1: not seen as another namespace; 2: unshare failed");
    }

    #[test]
    fn bus_ids_normalized() {
        assert_eq!(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(normalize_bus_id("0000:3b:00.0"), "0000:3b:00.0");
    }
}
