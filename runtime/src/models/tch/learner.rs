//! tch's side of the shared training (`Learner`): a batch's step, or an epoch on the elements
//! held on the device; the loss without learning; the weights copied and put back.

use super::{model_error, Body, Net, Tensors};
use crate::data::{Batch as _, Dataset, Element, TensorTree as _, Xy};
use crate::models::held::HeldRows;
use crate::models::net::{Network, Target};
use crate::models::training::{Held, Learner};
use crate::models::ModelError;
use ::tch::{Device, Kind, Tensor};

impl<B: Body, Y: Target> Learner for Net<B, Y>
where
    Tensors<B::X>: 'static,
{
    type X = B::X;
    type Y = Y;

    fn hold(&mut self, elements: &Dataset<Xy<B::X, Y>>) -> Result<Option<Held>, ModelError> {
        HeldRows::hold(elements, self.inputs as usize, |x, targets| {
            self.check(x)?;
            Self::caught("moving the elements", || {
                Ok::<_, ModelError>((self.tensors(x)?, self.targets_on_device(targets)))
            })?
        })
    }

    fn epoch_held(&mut self, held: &Held, order: &[usize], batch: usize) -> Result<(f64, u64), ModelError> {
        let held = held
            .downcast_ref::<HeldRows<Tensors<B::X>, Tensor>>()
            .ok_or_else(|| ModelError::Model(format!("{}: the held elements are another model's", Self::NAME)))?;
        let device = self.vs.device();
        // The epoch's order copied over once. On a GPU the steps' losses are summed there and read
        // once, so nothing waits for it between steps; on the CPU a read costs less than a sum.
        let order = Tensor::from_slice(&order.iter().map(|&p| p as i64).collect::<Vec<_>>()).to_device(device);
        let (n, batch) = (order.size()[0], batch as i64);
        let mut on_device = (device != Device::Cpu).then(|| Tensor::zeros([], (Kind::Double, device)));
        let (mut sum, mut steps) = (0.0, 0u64);
        let picking = model_error(Self::NAME, "picking a batch");
        for start in (0..n).step_by(batch as usize) {
            let at = order.narrow(0, start, batch.min(n - start));
            let (x, y) = (held.x.rows(&at).map_err(&picking)?, held.y.f_index_select(0, &at).map_err(&picking)?);
            let out = self.forward(&x, at.size()[0] as usize, true)?;
            if let Some(targets) = held.targets.take() {
                targets.check(out.size()[1] as usize, self.loss, Self::NAME)?;
            }
            let loss = self.loss_from(&out, &y)?;
            self.learn(&loss)?;
            match &mut on_device {
                Some(total) => *total += loss.detach().to_kind(Kind::Double),
                None => sum += loss.double_value(&[]),
            }
            steps += 1;
        }
        Ok((on_device.map_or(sum, |total| total.double_value(&[])), steps))
    }

    fn step(&mut self, b: Xy<<B::X as Element>::Batch, <Y as Element>::Batch>) -> Result<f64, ModelError> {
        let loss = self.loss_of(&b.x, &b.y, true)?;
        self.learn(&loss)?;
        Ok(loss.double_value(&[]))
    }

    fn loss(
        &mut self,
        batches: &Dataset<Xy<<B::X as Element>::Batch, <Y as Element>::Batch>>,
    ) -> Result<f64, ModelError> {
        let _guard = ::tch::no_grad_guard();
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            sum += self.loss_of(&b.x, &b.y, false)?.double_value(&[]) * b.y.batch_len() as f64;
            n += b.y.batch_len();
        }
        Ok(sum / n.max(1) as f64)
    }

    fn snapshot(&self) -> Result<Vec<u8>, ModelError> {
        let mut buf = Vec::new();
        self.vs.save_to_stream(&mut buf).map_err(model_error(Self::NAME, "copying the weights"))?;
        Ok(buf)
    }

    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError> {
        self.vs
            .load_from_stream(std::io::Cursor::new(weights))
            .map_err(model_error(Self::NAME, "restoring the weights"))
    }
}
