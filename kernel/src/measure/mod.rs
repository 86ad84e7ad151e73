//! Measuring the processes that run user code: memory from `/proc` with the kernel's own
//! high-water mark ([`meter`]), and GPU memory per process through NVML ([`gpu`]).

pub mod gpu;
pub mod meter;
