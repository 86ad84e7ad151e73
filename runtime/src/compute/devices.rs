//! The machine's devices as contexts and the pool name them (`cpu/<i>`, `gpu/<i>`), and the
//! machine record the kernel writes for cells and sandboxes: the vocabulary below both.

use crate::sys::fs::{write_atomic, Durability};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub(crate) const MACHINE_FILE: &str = "machine";
const MACHINE_VERSION: &str = "dryml-machine 1";

/// The kernel's state directory, when this process runs under a kernel.
pub(crate) fn state_dir() -> Option<PathBuf> {
    std::env::var_os(crate::sys::protocol::STATE_DIR_ENV).map(PathBuf::from)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
/// A device's kind.
pub enum Kind {
    /// A CPU core.
    Cpu,
    /// A GPU.
    Gpu,
}

/// `cpu/<i>` or `gpu/<i>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Device {
    /// CPU or GPU.
    pub kind: Kind,
    /// Its number among the machine's devices of its kind.
    pub index: u32,
}

impl Device {
    /// `cpu/<index>`.
    pub fn cpu(index: u32) -> Device {
        Device { kind: Kind::Cpu, index }
    }
    /// `gpu/<index>`.
    pub fn gpu(index: u32) -> Device {
        Device { kind: Kind::Gpu, index }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            Kind::Cpu => "cpu",
            Kind::Gpu => "gpu",
        };
        write!(f, "{k}/{}", self.index)
    }
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Device, String> {
        let bad = || format!("`{s}` is not a device (cpu/<i> or gpu/<i>)");
        let (k, i) = s.split_once('/').ok_or_else(bad)?;
        let index = i.parse().map_err(|_| bad())?;
        match k {
            "cpu" => Ok(Device::cpu(index)),
            "gpu" => Ok(Device::gpu(index)),
            _ => Err(bad()),
        }
    }
}

/// One GPU of the pool. `gpu/<index>` counts GPUs in PCI bus order among those the kernel may
/// use; `cuda_id` is what `CUDA_VISIBLE_DEVICES` needs to name it (with PCI_BUS_ID ordering).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// Its number among the machine's devices of its kind.
    pub index: u32,
    /// The id CUDA knows it by (`CUDA_VISIBLE_DEVICES`).
    pub cuda_id: String,
    /// Its model name.
    pub name: String,
    /// Its memory.
    pub total_bytes: u64,
}

/// The devices a pool hands out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Machine {
    /// Logical CPU ids `0..cpus` (what `sched_setaffinity` takes).
    pub cpus: u32,
    /// The GPUs, by index.
    pub gpus: Vec<GpuInfo>,
}

impl Machine {
    /// The kernel's description of the machine, or else this process's CPUs and no GPUs.
    pub fn load() -> Machine {
        if let Some(dir) = state_dir() {
            if let Ok(text) = std::fs::read_to_string(dir.join(MACHINE_FILE)) {
                if let Some(m) = Machine::parse(&text) {
                    return m;
                }
            }
        }
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        Machine { cpus, gpus: Vec::new() }
    }

    /// Every device, CPUs first.
    pub fn devices(&self) -> impl Iterator<Item = Device> + '_ {
        (0..self.cpus).map(Device::cpu).chain(self.gpus.iter().map(|g| Device::gpu(g.index)))
    }

    /// Whether the machine has this device.
    pub fn has(&self, d: Device) -> bool {
        match d.kind {
            Kind::Cpu => d.index < self.cpus,
            Kind::Gpu => self.gpus.iter().any(|g| g.index == d.index),
        }
    }

    /// The GPU with this index.
    pub fn gpu(&self, index: u32) -> Option<&GpuInfo> {
        self.gpus.iter().find(|g| g.index == index)
    }

    /// The record the kernel writes for cells and sandboxes to read.
    pub fn to_record(&self) -> String {
        let mut s = format!("{MACHINE_VERSION}\ncpus\t{}\n", self.cpus);
        for g in &self.gpus {
            let name = g.name.replace(['\t', '\n'], " ");
            s.push_str(&format!("gpu\t{}\t{}\t{}\t{}\n", g.index, g.cuda_id, g.total_bytes, name));
        }
        s
    }

    /// Reads [`Machine::to_record`]'s text back; None if malformed.
    pub fn parse(text: &str) -> Option<Machine> {
        let mut lines = text.lines();
        if lines.next()? != MACHINE_VERSION {
            return None;
        }
        let mut m = Machine::default();
        for line in lines {
            let f: Vec<&str> = line.split('\t').collect();
            match f.as_slice() {
                ["cpus", n] => m.cpus = n.parse().ok()?,
                ["gpu", i, id, total, name] => m.gpus.push(GpuInfo {
                    index: i.parse().ok()?,
                    cuda_id: id.to_string(),
                    total_bytes: total.parse().ok()?,
                    name: name.to_string(),
                }),
                _ => return None,
            }
        }
        Some(m)
    }

    /// Writes the record into `dir` (write, then rename).
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        write_atomic(&dir.join(MACHINE_FILE), self.to_record().as_bytes(), Durability::NoFsync)
    }
}

/// A share as DRYML prints it: `1`, `0.5`.
pub fn short(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}
