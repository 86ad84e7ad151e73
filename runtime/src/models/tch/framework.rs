//! tch's side of the seam ([`Framework`]): its device from the context, variables in a
//! `VarStore` seeded on the CPU, autocast and TF32 around the passes, libtorch's panics caught,
//! its loss functions, and its tensors read back on the CPU.

use super::{dims, precision, Optim, Tch};
use crate::models::net::{Loss, NetDef, Targets};
use crate::models::placement::Placement;
use crate::models::precision::Precision;
use crate::models::seam::{fail, gpu_refused, unwinding, Framework};
use crate::models::ModelError;
use ::tch::{nn, Device, Kind, TchError, Tensor};

impl Framework for Tch {
    type Tensor = Tensor;
    type Device = Device;
    type Error = TchError;
    type Vars = nn::VarStore;
    type Optim = Optim;
    const KEY: &'static str = "torch";

    /// The device, if this libtorch can use it.
    fn device_of(p: Placement, who: &str) -> Result<Device, ModelError> {
        match p {
            Placement::Cpu => Ok(Device::Cpu),
            Placement::Cuda { cuda, .. } if (cuda as i64) < ::tch::Cuda::device_count() => Ok(Device::Cuda(cuda)),
            Placement::Cuda { .. } => Err(gpu_refused(who, "torch", p, &format!(
                "libtorch sees {} CUDA devices here (a libtorch without CUDA, or CUDA started before the context was set)",
                ::tch::Cuda::device_count()
            ))),
        }
    }

    fn vars() -> nn::VarStore {
        nn::VarStore::new(Device::Cpu)
    }

    /// Seeded on the CPU, then moved: the same initial weights on every device.
    fn build<B>(
        device: &Device,
        def: &NetDef,
        make: impl FnOnce(&mut nn::VarStore, &Device) -> Result<B, ModelError>,
    ) -> Result<(nn::VarStore, B), ModelError> {
        // libtorch's generator is the process's, so one seeded build at a time: networks built on
        // several threads at once (tests, a user's own threads) each get their seed's weights.
        static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
        ::tch::manual_seed(def.seed as i64);
        let mut vs = Self::vars();
        let body = make(&mut vs, &Device::Cpu)?;
        drop(seeded);
        vs.set_device(*device);
        Ok((vs, body))
    }

    /// Under autocast for bf16; a panic (a shape libtorch's kernels cannot take) is an error.
    fn forward(
        precision: Precision,
        device: &Device,
        who: &str,
        forward: impl FnOnce() -> Result<Tensor, TchError>,
    ) -> Result<Tensor, ModelError> {
        let in_force = precision::InForce::on(precision, *device)?;
        let out = unwinding(who, "the forward pass panicked", || forward().map_err(fail(who, "the forward pass")))?;
        drop(in_force);
        // Autocast's scores are bf16: the loss and the reader take them in FP32, as PyTorch's
        // cross-entropy under autocast does.
        Ok(if out.kind() == Kind::BFloat16 { out.to_kind(Kind::Float) } else { out })
    }

    /// The backward pass's matmuls in TF32 too; autocast is for the forward pass only.
    fn learn(
        opt: &mut Optim,
        loss: &Tensor,
        precision: Precision,
        device: &Device,
        who: &str,
    ) -> Result<(), ModelError> {
        let tf32 = if precision == Precision::Tf32 { Precision::Tf32 } else { Precision::Fp32 };
        let _in_force = precision::InForce::on(tf32, *device)?;
        Self::caught(who, "the backward pass", || {
            opt.backward_step(loss);
            Ok(())
        })
    }

    fn no_grad() -> impl Sized {
        ::tch::no_grad_guard()
    }

    fn dims(t: &Tensor) -> Vec<usize> {
        dims(t)
    }

    /// Classes as `Int64`.
    fn targets(targets: Targets, device: &Device) -> Result<Tensor, TchError> {
        let t = match targets {
            Targets::Classes(c) => Tensor::from_slice(&c.iter().map(|&c| c as i64).collect::<Vec<_>>()),
            Targets::Values { values, width } => Tensor::from_slice(&values).f_view([-1, width as i64])?,
        };
        t.f_to_device(*device)
    }

    fn loss(out: &Tensor, y: &Tensor, loss: Loss) -> Result<Tensor, TchError> {
        match (y.kind(), loss) {
            (Kind::Int64, Loss::Mse) => {
                out.f_mse_loss(&y.f_one_hot(out.size()[1])?.f_to_kind(Kind::Float)?, ::tch::Reduction::Mean)
            }
            (Kind::Int64, Loss::CrossEntropy) => Ok(out.cross_entropy_for_logits(y)),
            _ => out.f_mse_loss(y, ::tch::Reduction::Mean),
        }
    }

    fn scalar(t: &Tensor) -> Result<f64, TchError> {
        t.f_double_value(&[])
    }

    fn rows(t: &Tensor) -> Result<Vec<Vec<f32>>, TchError> {
        let width = t.size()[1].max(1) as usize;
        let flat = Vec::<f32>::try_from(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_flatten(0, -1)?)?;
        Ok(flat.chunks(width).map(<[f32]>::to_vec).collect())
    }

    fn positions(order: &[usize], device: &Device) -> Result<Tensor, TchError> {
        Tensor::from_slice(&order.iter().map(|&p| p as i64).collect::<Vec<_>>()).f_to_device(*device)
    }

    fn narrow(t: &Tensor, start: usize, len: usize) -> Result<Tensor, TchError> {
        t.f_narrow(0, start as i64, len as i64)
    }

    fn add(total: Option<Tensor>, loss: &Tensor) -> Result<Tensor, TchError> {
        let l = loss.detach().f_to_kind(Kind::Double)?;
        match total {
            Some(t) => t.f_add(&l),
            None => Ok(l),
        }
    }

    fn on_cpu(device: &Device) -> bool {
        *device == Device::Cpu
    }

    fn snapshot(vs: &nn::VarStore, who: &str) -> Result<Vec<u8>, ModelError> {
        let mut buf = Vec::new();
        vs.save_to_stream(&mut buf).map_err(fail(who, "copying the weights"))?;
        Ok(buf)
    }

    fn restore(vs: &mut nn::VarStore, weights: &[u8], _: &Device, who: &str) -> Result<(), ModelError> {
        vs.load_from_stream(std::io::Cursor::new(weights)).map_err(fail(who, "restoring the weights"))
    }
}
