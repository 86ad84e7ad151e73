//! candle's side of the shared training (`Learner`): a batch's step, or an epoch on the
//! elements held on the device; the loss without learning; the weights copied and put back.

use super::{candle_error, Body, Net, Tensors};
use crate::data::{Batch as _, Dataset, Element, TensorTree as _, Xy};
use crate::models::held::HeldRows;
use crate::models::net::{Network, Target};
use crate::models::training::{Held, Learner};
use crate::models::ModelError;
use candle_core::{DType, Tensor};

impl<B: Body, Y: Target> Learner for Net<B, Y>
where
    Tensors<B::X>: 'static,
{
    type X = B::X;
    type Y = Y;

    fn hold(&mut self, elements: &Dataset<Xy<B::X, Y>>) -> Result<Option<Held>, ModelError> {
        HeldRows::hold(elements, self.inputs, |x, targets| {
            self.check(x)?;
            Ok((self.tensors(x)?, self.targets_on_device(targets)?))
        })
    }

    fn epoch_held(&mut self, held: &Held, order: &[usize], batch: usize) -> Result<(f64, u64), ModelError> {
        let held = held
            .downcast_ref::<HeldRows<Tensors<B::X>, Tensor>>()
            .ok_or_else(|| ModelError::Model(format!("{}: the held elements are another model's", Self::NAME)))?;
        let err = |what| candle_error(Self::NAME, what);
        // The epoch's order copied over once; on a GPU the steps' losses are summed there and
        // read once, so nothing waits for the device between steps.
        let order = order.iter().map(|&p| p as u32).collect::<Vec<_>>();
        let n = order.len();
        let order = Tensor::from_vec(order, n, &self.device).map_err(err("moving the epoch's order"))?;
        let on_gpu = !self.device.is_cpu();
        let (mut sum, mut total, mut steps) = (0.0, None::<Tensor>, 0u64);
        for start in (0..n).step_by(batch) {
            let len = batch.min(n - start);
            let at = order.narrow(0, start, len).map_err(err("picking a batch"))?;
            let x = held.x.rows(&at).map_err(err("picking a batch"))?;
            let y = held.y.index_select(&at, 0).map_err(err("picking a batch"))?;
            let out = self.forward_tensors(&x, len, true)?;
            if let Some(targets) = held.targets.take() {
                targets.check(out.dims()[1], self.def.loss, Self::NAME)?;
            }
            let loss = self.loss_from(&out, &y)?;
            self.learn(&loss)?;
            if on_gpu {
                let l = loss.detach().to_dtype(DType::F64).map_err(err("summing the losses"))?;
                total = Some(match total {
                    Some(t) => (t + l).map_err(err("summing the losses"))?,
                    None => l,
                });
            } else {
                sum += f64::from(loss.to_scalar::<f32>().map_err(err("reading the loss"))?);
            }
            steps += 1;
        }
        if let Some(t) = total {
            sum = t.to_scalar::<f64>().map_err(err("reading the losses"))?;
        }
        Ok((sum, steps))
    }

    fn step(&mut self, b: Xy<<B::X as Element>::Batch, <Y as Element>::Batch>) -> Result<f64, ModelError> {
        let loss = self.loss_of(&b.x, &b.y, true)?;
        self.learn(&loss)?;
        loss.to_scalar::<f32>().map(f64::from).map_err(candle_error(Self::NAME, "reading the loss"))
    }

    fn loss(
        &mut self,
        batches: &Dataset<Xy<<B::X as Element>::Batch, <Y as Element>::Batch>>,
    ) -> Result<f64, ModelError> {
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            let l = self
                .loss_of(&b.x, &b.y, false)?
                .to_scalar::<f32>()
                .map_err(candle_error(Self::NAME, "reading the loss"))?;
            sum += f64::from(l) * b.y.batch_len() as f64;
            n += b.y.batch_len();
        }
        Ok(sum / n.max(1) as f64)
    }

    /// Every variable by name, with its shape and values.
    fn snapshot(&self) -> Result<Vec<u8>, ModelError> {
        let data = self.vars.data().lock().expect("candle's variables");
        let mut names: Vec<&String> = data.keys().collect();
        names.sort();
        let mut out: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
        for name in names {
            let t = data[name].as_tensor();
            let values = t
                .flatten_all()
                .and_then(|f| f.to_vec1::<f32>())
                .map_err(candle_error(Self::NAME, "copying the weights"))?;
            out.push((name.clone(), t.dims().to_vec(), values));
        }
        rmp_serde::to_vec(&out).map_err(|e| ModelError::Model(format!("{}: copying the weights: {e}", Self::NAME)))
    }

    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError> {
        let saved: Vec<(String, Vec<usize>, Vec<f32>)> = rmp_serde::from_slice(weights)
            .map_err(|e| ModelError::Model(format!("{}: reading the weights: {e}", Self::NAME)))?;
        for (name, dims, values) in saved {
            let t = Tensor::from_vec(values, dims, &self.device)
                .map_err(candle_error(Self::NAME, "reading the weights"))?;
            self.vars.set_one(&name, t).map_err(candle_error(Self::NAME, "restoring the weights"))?;
        }
        Ok(())
    }
}
