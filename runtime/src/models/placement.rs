//! Where a framework's model runs: on the GPU its context gives it, else on the CPU. DRYML's
//! contexts exist so that a model uses the devices it was given (`%context torch gpu/0`,
//! `%%compute torch num_gpus=1`, a sweep's or a Slurm job's requests); the framework's model
//! asks here once, when its network is built.

use crate::compute::context::{self, Context, Kind, DEFAULT_FRAMEWORK};
use std::fmt;

/// A model's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The CPU.
    Cpu,
    /// The context's `gpu/<gpu>`, which is CUDA device `cuda` inside this process (the context
    /// shows the process only its own GPUs, in order).
    Cuda {
        /// The machine's number of the GPU (`gpu/<i>`).
        gpu: u32,
        /// Its CUDA number inside this process.
        cuda: usize,
    },
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Cpu => f.write_str("cpu"),
            Placement::Cuda { gpu, cuda } => write!(f, "cuda:{cuda} (gpu/{gpu})"),
        }
    }
}

/// Where a model of `framework` (`torch`, `candle`) runs in this process: the first GPU its
/// context gives that framework (or, when it names no such framework, `default`), else the CPU.
pub fn placement(framework: &str) -> Placement {
    placement_in(context::current().as_ref(), framework)
}

/// [`placement`] for a given context.
pub fn placement_in(ctx: Option<&Context>, framework: &str) -> Placement {
    let Some(ctx) = ctx else { return Placement::Cpu };
    let held = ctx.get(framework).or_else(|| ctx.get(DEFAULT_FRAMEWORK)).unwrap_or(&[]);
    held.iter()
        .filter(|(d, _)| d.kind == Kind::Gpu)
        .find_map(|(d, _)| ctx.cuda_device(d.index).map(|cuda| Placement::Cuda { gpu: d.index, cuda }))
        .unwrap_or(Placement::Cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::context::Device;

    fn ctx(text: &str) -> Context {
        Context::decode(text).unwrap()
    }

    #[test]
    fn a_model_runs_on_its_frameworks_gpu_else_the_defaults_else_the_cpu() {
        assert_eq!(placement_in(None, "torch"), Placement::Cpu);
        assert_eq!(placement_in(Some(&ctx("torch=cpu/0:1")), "torch"), Placement::Cpu);
        // CUDA numbers the process's GPUs in order: gpu/3 is the second of gpu/1 and gpu/3.
        let two = ctx("tf=gpu/1:0.5;torch=gpu/3:0.5,cpu/0:1");
        assert_eq!(placement_in(Some(&two), "torch"), Placement::Cuda { gpu: 3, cuda: 1 });
        assert_eq!(placement_in(Some(&two), "tf"), Placement::Cuda { gpu: 1, cuda: 0 });
        // A framework the context does not name takes `default`'s devices, or the CPU.
        assert_eq!(placement_in(Some(&two), "candle"), Placement::Cpu);
        let default = ctx("default=gpu/0:1");
        assert_eq!(placement_in(Some(&default), "candle"), Placement::Cuda { gpu: 0, cuda: 0 });
        assert_eq!(
            placement_in(Some(&ctx("default=gpu/0:1;torch=cpu/1:1")), "torch"),
            Placement::Cpu,
            "torch's own entry wins"
        );
        assert_eq!(Placement::Cuda { gpu: 3, cuda: 1 }.to_string(), "cuda:1 (gpu/3)");
        assert_eq!(Device::gpu(3).to_string(), "gpu/3");
    }
}
