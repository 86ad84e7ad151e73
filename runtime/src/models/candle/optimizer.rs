//! The optimiser over candle tensors: the variables sorted by name, each one's moments where
//! its kind keeps them, its state saved and restored to the bit.

use super::*;

/// The optimiser ([`optim`]'s update over candle tensors): the variables sorted by name, and
/// each one's moments where its kind keeps them.
pub(crate) struct Optim {
    pub(super) who: &'static str,
    pub(super) settings: Settings,
    pub(super) step: u64,
    pub(super) params: Vec<(String, Var)>,
    pub(super) first: Vec<Tensor>,
    pub(super) second: Vec<Tensor>,
}

impl Optimiser<Candle> for Optim {
    fn new(vars: &VarMap, settings: Settings, who: &'static str) -> Result<Optim, ModelError> {
        let mut params: Vec<(String, Var)> =
            vars.data().lock().expect("candle's variables").iter().map(|(n, v)| (n.clone(), v.clone())).collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = |on: bool| -> candle_core::Result<Vec<Tensor>> {
            if on {
                params.iter().map(|(_, p)| p.as_tensor().zeros_like()).collect()
            } else {
                Ok(Vec::new())
            }
        };
        let (first, second) = (zeros(settings.first_moment()), zeros(settings.second_moment()));
        let err = fail(who, "building the optimizer");
        Ok(Optim { who, settings, step: 0, params, first: first.map_err(&err)?, second: second.map_err(&err)? })
    }

    fn steps(&self) -> u64 {
        self.step
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.params.iter().map(|(name, p)| named(self.who, name, p.as_tensor())).collect()
    }

    fn save(&self) -> Result<Vec<u8>, ModelError> {
        let named = |moments: &[Tensor]| -> Result<Named, ModelError> {
            self.params.iter().zip(moments).map(|((name, _), t)| named(self.who, name, t)).collect()
        };
        Saved { step: self.step, first: named(&self.first)?, second: named(&self.second)? }.to_bytes(self.who)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let shapes: Vec<(String, Vec<usize>)> =
            self.params.iter().map(|(n, p)| (n.clone(), p.dims().to_vec())).collect();
        let saved = Saved::from_bytes(bytes, self.who, &shapes)?;
        let who = self.who;
        for (moments, from) in [(&mut self.first, &saved.first), (&mut self.second, &saved.second)] {
            for ((name, p), t) in self.params.iter().zip(moments.iter_mut()) {
                let values = optim::find(from, name).ok_or_else(|| {
                    ModelError::Model(format!("{who}: the checkpoint's optimizer state lacks `{name}`"))
                })?;
                *t = Tensor::from_slice(values, p.dims(), p.device())
                    .map_err(fail(who, "restoring the optimizer's state"))?;
            }
        }
        self.step = saved.step;
        Ok(())
    }
}

impl Optim {
    /// One step: the gradients of `loss`, then the update of every variable.
    pub(super) fn backward_step(&mut self, loss: &Tensor) -> candle_core::Result<()> {
        let grads = loss.backward()?;
        self.step += 1;
        let s = self.settings;
        let (c1, c2) = s.bias_corrections(self.step);
        for (i, (_, p)) in self.params.iter().enumerate() {
            let Some(g) = grads.get(p.as_tensor()) else { continue };
            // Detached: the moments must not carry the graph from step to step.
            let mut w = p.as_tensor().detach();
            let mut g = g.detach();
            if s.weight_decay > 0.0 && s.kind != Opt::AdamW {
                g = (g + w.affine(s.weight_decay, 0.0)?)?;
            }
            let update = match s.kind {
                Opt::Sgd if s.momentum > 0.0 => {
                    self.first[i] = (self.first[i].affine(s.momentum, 0.0)? + g)?;
                    self.first[i].affine(s.lr, 0.0)?
                }
                Opt::Sgd => g.affine(s.lr, 0.0)?,
                Opt::Adam | Opt::AdamW => {
                    if s.kind == Opt::AdamW {
                        w = w.affine(1.0 - s.lr * s.weight_decay, 0.0)?;
                    }
                    self.first[i] = (self.first[i].affine(s.beta1, 0.0)? + g.affine(1.0 - s.beta1, 0.0)?)?;
                    self.second[i] = (self.second[i].affine(s.beta2, 0.0)? + g.sqr()?.affine(1.0 - s.beta2, 0.0)?)?;
                    let denom = self.second[i].sqrt()?.affine(1.0 / c2.sqrt(), s.eps)?;
                    (&self.first[i] / denom)?.affine(s.lr / c1, 0.0)?
                }
            };
            p.set(&(w - update)?)?;
        }
        Ok(())
    }
}
