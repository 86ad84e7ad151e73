//! burn's side of the seam ([`Framework`]): its device from the context (flex on the CPU, with
//! autodiff), its modules as the variables, burn's panics caught, its loss functions, and its
//! tensors read back.

use super::vars::{values, BurnVars, Optim};
use super::{cpu, Burn};
use crate::data::{BurnError, BurnTensor};
use crate::models::net::{Loss, Targets};
use crate::models::placement::Placement;
use crate::models::precision::Precision;
use crate::models::seam::{fail, gpu_refused, Framework};
use crate::models::ModelError;
use burn::nn::loss::{CrossEntropyLossConfig, MseLoss, Reduction};
use burn::tensor::{Device, Int, Tensor, TensorData};

impl Framework for Burn {
    type Tensor = BurnTensor;
    type Device = Device;
    type Error = BurnError;
    type Vars = BurnVars;
    type Optim = Optim;
    const KEY: &'static str = "burn";

    /// burn's flex backend on the CPU; dryml's burn has no GPU backend yet.
    fn device_of(p: Placement, who: &str) -> Result<Device, ModelError> {
        match p {
            Placement::Cpu => Ok(cpu().autodiff()),
            Placement::Cuda { .. } => Err(gpu_refused(who, "burn", p, "dryml's burn is built for the CPU only (burn's flex backend): give burn no GPU, or train the network with tch or candle")),
        }
    }

    /// The layers seed their own weights from the definition's seed.
    fn vars() -> BurnVars {
        BurnVars::default()
    }

    fn learn(opt: &mut Optim, loss: &BurnTensor, _: Precision, _: &Device, who: &str) -> Result<(), ModelError> {
        let loss = loss.f1().map_err(fail(who, "the backward pass"))?;
        Self::caught(who, "the backward pass", || {
            opt.backward_step(&loss);
            Ok(())
        })
    }

    fn dims(t: &BurnTensor) -> Vec<usize> {
        t.dims()
    }

    /// Classes as indices.
    fn targets(targets: Targets, device: &Device) -> Result<BurnTensor, BurnError> {
        Ok(match targets {
            Targets::Classes(c) => {
                let n = c.len();
                let data = TensorData::new(c.into_iter().map(|c| c as i64).collect::<Vec<_>>(), [n]);
                BurnTensor::I1(Tensor::<1, Int>::from_data(data, device))
            }
            Targets::Values { values, width } => {
                let n = values.len() / width.max(1);
                BurnTensor::F2(Tensor::from_data(TensorData::new(values, [n, width]), device))
            }
        })
    }

    fn loss(out: &BurnTensor, y: &BurnTensor, loss: Loss) -> Result<BurnTensor, BurnError> {
        let out = out.f2()?;
        let l = match (y, loss) {
            (BurnTensor::I1(y), Loss::CrossEntropy) => {
                CrossEntropyLossConfig::new().init(&out.device()).forward(out, y.clone())
            }
            (BurnTensor::I1(y), Loss::Mse) => {
                let width = out.dims()[1];
                MseLoss::new().forward(out, y.clone().one_hot::<2>(width).float(), Reduction::Mean)
            }
            (y, _) => MseLoss::new().forward(out, y.f2()?, Reduction::Mean),
        };
        Ok(BurnTensor::F1(l))
    }

    fn scalar(t: &BurnTensor) -> Result<f64, BurnError> {
        let v = values(t.f1()?)?;
        v.first().map(|&x| f64::from(x)).ok_or_else(|| BurnError("an empty tensor read as one value".into()))
    }

    fn rows(t: &BurnTensor) -> Result<Vec<Vec<f32>>, BurnError> {
        let t = t.f2()?;
        let width = t.dims()[1].max(1);
        Ok(values(t)?.chunks(width).map(<[f32]>::to_vec).collect())
    }

    fn positions(order: &[usize], device: &Device) -> Result<BurnTensor, BurnError> {
        let data = TensorData::new(order.iter().map(|&p| p as i64).collect::<Vec<_>>(), [order.len()]);
        Ok(BurnTensor::I1(Tensor::<1, Int>::from_data(data, device)))
    }

    fn narrow(t: &BurnTensor, start: usize, len: usize) -> Result<BurnTensor, BurnError> {
        Ok(BurnTensor::I1(t.i1()?.narrow(0, start, len)))
    }

    /// In 32 bits; not called while burn runs on the CPU only ([`Framework::on_cpu`]).
    fn add(total: Option<BurnTensor>, loss: &BurnTensor) -> Result<BurnTensor, BurnError> {
        let l = loss.f1()?.detach();
        Ok(BurnTensor::F1(match total {
            Some(t) => t.f1()? + l,
            None => l,
        }))
    }

    /// burn runs on the CPU here.
    fn on_cpu(_: &Device) -> bool {
        true
    }

    /// Every parameter by name, with its shape and values.
    fn snapshot(vars: &BurnVars, who: &str) -> Result<Vec<u8>, ModelError> {
        let named = vars.named().map_err(fail(who, "reading the weights"))?;
        rmp_serde::to_vec(&named).map_err(fail(who, "copying the weights"))
    }

    fn restore(vars: &mut BurnVars, weights: &[u8], _: &Device, who: &str) -> Result<(), ModelError> {
        let saved: crate::models::optim::Named =
            rmp_serde::from_slice(weights).map_err(fail(who, "reading the weights"))?;
        vars.set(saved.into_iter().map(|(name, _, values)| (name, values)).collect());
        Ok(())
    }
}
