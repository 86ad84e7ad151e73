//! GPU memory through NVML: per-process usage on each GPU, named as CUDA numbers them.
//!
//! The library is `libnvidia-ml.so.1` unless `DRYML_NVML_LIB` names another (the tests load a
//! fake one through the same `nvml-wrapper` path). No library or no GPU is not an error: the
//! reports drop their GPU columns and say why in one line.

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

/// Overrides the NVML library path.
pub const NVML_LIB_ENV: &str = "DRYML_NVML_LIB";

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
    /// Used by the measured processes only (other users' jobs are not counted).
    pub used_by_us: u64,
    pub free: u64,
    pub total: u64,
}

/// NVML, opened once. `devices` is every GPU NVML sees, in PCI bus order.
pub struct Gpus {
    nvml: Option<Nvml>,
    all: Vec<(u32, String, String, String)>,
    /// Why there are no GPU figures.
    pub note: Option<String>,
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
                    note: Some(match e {
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
        let note = all.is_empty().then(|| "no GPU figures: NVML sees no GPU".to_string());
        Gpus {
            nvml: Some(nvml),
            all,
            note,
        }
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

    /// Memory of each GPU, counting only what `pids` use.
    pub fn sample(&self, gpus: &[Gpu], pids: &[u32]) -> Vec<GpuMem> {
        let Some(nvml) = &self.nvml else { return vec![] };
        gpus.iter()
            .map(|g| {
                let Ok(d) = nvml.device_by_index(g.nvml_index) else {
                    return GpuMem::default();
                };
                let (free, total) = d.memory_info().map(|m| (m.free, m.total)).unwrap_or((0, 0));
                let mut used_by_us = 0;
                for p in d.running_compute_processes().unwrap_or_default() {
                    if pids.contains(&p.pid) {
                        if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                            used_by_us += b;
                        }
                    }
                }
                GpuMem {
                    used_by_us,
                    free,
                    total,
                }
            })
            .collect()
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
        let ids = [("0000:1a:00.0", "GPU-aaaa1111"), ("0000:3b:00.0", "GPU-bbbb2222"), ("0000:5e:00.0", "GPU-cccc3333")];
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
    fn bus_ids_normalized() {
        assert_eq!(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(normalize_bus_id("0000:3b:00.0"), "0000:3b:00.0");
    }
}
