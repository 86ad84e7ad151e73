//! candle's side of the seam ([`Framework`]): its device from the context, variables in a
//! `VarMap`, TF32's switch around the passes, its loss functions, and its tensors read back.

use super::{Candle, Optim};
use crate::models::net::{Loss, Targets};
use crate::models::placement::Placement;
use crate::models::precision::Precision;
use crate::models::seam::{fail, gpu_refused, Framework};
use crate::models::ModelError;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarMap;

impl Framework for Candle {
    type Tensor = Tensor;
    type Device = Device;
    type Error = candle_core::Error;
    type Vars = VarMap;
    type Optim = Optim;
    const KEY: &'static str = "candle";

    /// A GPU through candle's CUDA backend, where it is built.
    fn device_of(p: Placement, who: &str) -> Result<Device, ModelError> {
        match p {
            Placement::Cpu => Ok(Device::Cpu),
            Placement::Cuda { cuda, .. } if cfg!(feature = "candle-cuda") => Device::new_cuda(cuda).map_err(|e| {
                ModelError::Model(format!("{who}: the context gives candle {p}, but CUDA did not open it here: {e}"))
            }),
            Placement::Cuda { .. } => Err(gpu_refused(who, "candle", p, "dryml's candle is built without CUDA (the `candle-cuda` feature, which the set-up adds where an NVIDIA driver is): give candle no GPU (its models then run on the CPU), or train the network with tch")),
        }
    }

    /// The bodies seed their own variables (candle cannot seed its own).
    fn vars() -> VarMap {
        VarMap::new()
    }

    fn forward(
        precision: Precision,
        _: &Device,
        who: &str,
        forward: impl FnOnce() -> candle_core::Result<Tensor>,
    ) -> Result<Tensor, ModelError> {
        let _tf32 = super::Tf32::on(precision);
        forward().map_err(fail(who, "the forward pass"))
    }

    /// TF32's switch on for the backward pass too.
    fn learn(opt: &mut Optim, loss: &Tensor, precision: Precision, _: &Device, who: &str) -> Result<(), ModelError> {
        let _tf32 = super::Tf32::on(precision);
        opt.backward_step(loss).map_err(fail(who, "the optimizer's step"))
    }

    fn dims(t: &Tensor) -> Vec<usize> {
        t.dims().to_vec()
    }

    /// Classes as `u32`s.
    fn targets(targets: Targets, device: &Device) -> candle_core::Result<Tensor> {
        match targets {
            Targets::Classes(c) => {
                let n = c.len();
                Tensor::from_vec(c.into_iter().map(|c| c as u32).collect::<Vec<_>>(), n, device)
            }
            Targets::Values { values, width } => {
                let n = values.len() / width.max(1);
                Tensor::from_vec(values, (n, width), device)
            }
        }
    }

    fn loss(out: &Tensor, y: &Tensor, loss: Loss) -> candle_core::Result<Tensor> {
        match (y.dtype(), loss) {
            (DType::U32, Loss::CrossEntropy) => candle_nn::loss::cross_entropy(out, y),
            (DType::U32, Loss::Mse) => candle_nn::encoding::one_hot(y.clone(), out.dims()[1], 1.0f32, 0.0f32)
                .and_then(|t| candle_nn::loss::mse(out, &t)),
            _ => candle_nn::loss::mse(out, y),
        }
    }

    fn scalar(t: &Tensor) -> candle_core::Result<f64> {
        match t.dtype() {
            DType::F64 => t.to_scalar::<f64>(),
            _ => t.to_scalar::<f32>().map(f64::from),
        }
    }

    fn rows(t: &Tensor) -> candle_core::Result<Vec<Vec<f32>>> {
        t.to_vec2::<f32>()
    }

    fn positions(order: &[usize], device: &Device) -> candle_core::Result<Tensor> {
        Tensor::from_vec(order.iter().map(|&p| p as u32).collect::<Vec<_>>(), order.len(), device)
    }

    fn narrow(t: &Tensor, start: usize, len: usize) -> candle_core::Result<Tensor> {
        t.narrow(0, start, len)
    }

    fn add(total: Option<Tensor>, loss: &Tensor) -> candle_core::Result<Tensor> {
        let l = loss.detach().to_dtype(DType::F64)?;
        match total {
            Some(t) => t + l,
            None => Ok(l),
        }
    }

    fn on_cpu(device: &Device) -> bool {
        device.is_cpu()
    }

    /// Every variable by name, with its shape and values.
    fn snapshot(vars: &VarMap, who: &str) -> Result<Vec<u8>, ModelError> {
        let data = vars.data().lock().expect("candle's variables");
        let mut names: Vec<&String> = data.keys().collect();
        names.sort();
        let mut out: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
        for name in names {
            let t = data[name].as_tensor();
            let values = t.flatten_all().and_then(|f| f.to_vec1::<f32>()).map_err(fail(who, "copying the weights"))?;
            out.push((name.clone(), t.dims().to_vec(), values));
        }
        rmp_serde::to_vec(&out).map_err(fail(who, "copying the weights"))
    }

    fn restore(vars: &mut VarMap, weights: &[u8], device: &Device, who: &str) -> Result<(), ModelError> {
        let saved: Vec<(String, Vec<usize>, Vec<f32>)> =
            rmp_serde::from_slice(weights).map_err(fail(who, "reading the weights"))?;
        for (name, dims, values) in saved {
            let t = Tensor::from_vec(values, dims, device).map_err(fail(who, "reading the weights"))?;
            vars.set_one(&name, t).map_err(fail(who, "restoring the weights"))?;
        }
        Ok(())
    }
}
