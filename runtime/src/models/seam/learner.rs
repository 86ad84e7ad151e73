//! Every framework's network's side of the shared training (`Learner`), written once: a batch's
//! step, or an epoch on the elements held on the device; the loss without learning; the weights
//! copied and put back.

use super::{fail, Body, Framework, Net, TensorsOf};
use crate::data::{Batch as _, Dataset, DeviceTensor as _, Element, TensorTree as _, Xy};
use crate::models::held::HeldRows;
use crate::models::net::{Network, Target};
use crate::models::training::{Held, Learner};
use crate::models::ModelError;

impl<F: Framework, B: Body<F>, Y: Target> Learner for Net<F, B, Y> {
    type X = B::X;
    type Y = Y;

    fn hold(&mut self, elements: &Dataset<Xy<B::X, Y>>) -> Result<Option<Held>, ModelError> {
        HeldRows::hold(elements, self.inputs, |x, targets| {
            self.check(x)?;
            F::caught(Self::NAME, "moving the elements", || Ok((self.tensors(x)?, self.targets_on_device(targets)?)))
        })
    }

    fn epoch_held(&mut self, held: &Held, order: &[usize], batch: usize) -> Result<(f64, u64), ModelError> {
        let held = held
            .downcast_ref::<HeldRows<TensorsOf<F, B>, F::Tensor>>()
            .ok_or_else(|| ModelError::Model(format!("{}: the held elements are another model's", Self::NAME)))?;
        // The epoch's order copied over once. On a GPU the steps' losses are summed there and read
        // once, so nothing waits for it between steps; on the CPU a read costs less than a sum.
        let n = order.len();
        let order = F::positions(order, &self.device).map_err(fail(Self::NAME, "moving the epoch's order"))?;
        let on_device = !F::on_cpu(&self.device);
        let picking = fail(Self::NAME, "picking a batch");
        let (mut sum, mut total, mut steps) = (0.0, None, 0u64);
        for start in (0..n).step_by(batch) {
            let len = batch.min(n - start);
            let at = F::narrow(&order, start, len).map_err(&picking)?;
            let (x, y) = (held.x.rows(&at).map_err(&picking)?, held.y.picked(&at).map_err(&picking)?);
            let out = self.forward_tensors(&x, len, true)?;
            if let Some(targets) = held.targets.take() {
                targets.check(F::dims(&out)[1], self.def.loss, Self::NAME)?;
            }
            let loss = self.loss_from(&out, &y)?;
            self.learn(&loss)?;
            if on_device {
                total = Some(F::add(total, &loss).map_err(fail(Self::NAME, "summing the losses"))?);
            } else {
                sum += self.scalar(&loss, "reading the loss")?;
            }
            steps += 1;
        }
        if let Some(t) = total {
            sum = self.scalar(&t, "reading the losses")?;
        }
        Ok((sum, steps))
    }

    fn step(&mut self, b: Xy<<B::X as Element>::Batch, <Y as Element>::Batch>) -> Result<f64, ModelError> {
        let loss = self.loss_of(&b.x, &b.y, true)?;
        self.learn(&loss)?;
        self.scalar(&loss, "reading the loss")
    }

    fn loss(
        &mut self,
        batches: &Dataset<Xy<<B::X as Element>::Batch, <Y as Element>::Batch>>,
    ) -> Result<f64, ModelError> {
        let _no_grad = F::no_grad();
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            sum += self.scalar(&self.loss_of(&b.x, &b.y, false)?, "reading the loss")? * b.y.batch_len() as f64;
            n += b.y.batch_len();
        }
        Ok(sum / n.max(1) as f64)
    }

    fn snapshot(&self) -> Result<Vec<u8>, ModelError> {
        F::snapshot(&self.vars, Self::NAME)
    }

    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError> {
        F::restore(&mut self.vars, weights, &self.device, Self::NAME)
    }
}
