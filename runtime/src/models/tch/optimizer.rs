//! The optimiser over tch tensors: every parameter's moments in one flat tensor each, a step a
//! few kernels over all of them, its state saved and restored to the bit.

use super::*;

/// The optimiser ([`optim`]'s update over tch tensors). The moments of all the parameters it
/// moves lie in one flat tensor each, so a step is a few kernels over all of them rather than a
/// dozen per parameter (elementwise, so the values are the same as parameter by parameter).
pub(crate) struct Optim {
    pub(super) who: &'static str,
    pub(super) settings: Settings,
    pub(super) step: u64,
    /// Every variable, sorted by name (batch norm's running statistics too).
    pub(super) params: Vec<(String, Tensor)>,
    /// Those it moves (the ones that require a gradient), each with its place in the moments.
    pub(super) moved: Vec<(usize, i64, i64)>,
    pub(super) first: Tensor,
    pub(super) second: Tensor,
}

impl Optimiser<Tch> for Optim {
    fn new(vs: &nn::VarStore, settings: Settings, who: &'static str) -> Result<Optim, ModelError> {
        let mut params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let mut moved = Vec::new();
        let mut at = 0;
        for (i, (_, p)) in params.iter().enumerate() {
            if p.requires_grad() {
                let n = p.numel() as i64;
                moved.push((i, at, n));
                at += n;
            }
        }
        let zeros = |on: bool| Tensor::zeros([if on { at } else { 0 }], (Kind::Float, vs.device()));
        let (first, second) = (zeros(settings.first_moment()), zeros(settings.second_moment()));
        Ok(Optim { who, settings, step: 0, params, moved, first, second })
    }

    fn steps(&self) -> u64 {
        self.step
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.params.iter().map(|(name, p)| named(self.who, name, p)).collect()
    }

    fn save(&self) -> Result<Vec<u8>, ModelError> {
        Saved { step: self.step, first: self.named_moments(&self.first)?, second: self.named_moments(&self.second)? }
            .to_bytes(self.who)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let shapes: Vec<(String, Vec<usize>)> = self.params.iter().map(|(n, p)| (n.clone(), dims(p))).collect();
        let saved = Saved::from_bytes(bytes, self.who, &shapes)?;
        let who = self.who;
        let _guard = ::tch::no_grad_guard();
        for (moments, from) in [(&mut self.first, &saved.first), (&mut self.second, &saved.second)] {
            if moments.numel() == 0 {
                continue;
            }
            for &(i, at, n) in &self.moved {
                let name = &self.params[i].0;
                let values = optim::find(from, name).ok_or_else(|| {
                    ModelError::Model(format!("{who}: the checkpoint's optimizer state lacks `{name}`"))
                })?;
                moments.narrow(0, at, n).copy_(&Tensor::from_slice(values).to_device(moments.device()));
            }
        }
        self.step = saved.step;
        Ok(())
    }
}

impl Optim {
    /// One step: the gradients of `loss`, then the update of every parameter it moves. A
    /// parameter the loss did not reach (no gradient) is left as it is, as PyTorch leaves it.
    pub(super) fn backward_step(&mut self, loss: &Tensor) {
        for &(i, _, _) in &self.moved {
            self.params[i].1.zero_grad();
        }
        loss.backward();
        self.step += 1;
        let _guard = ::tch::no_grad_guard();
        let grads: Vec<Tensor> = self.moved.iter().map(|&(i, _, _)| self.params[i].1.grad()).collect();
        let flat = |ts: &[&Tensor]| Tensor::cat(&ts.iter().map(|t| t.flatten(0, -1)).collect::<Vec<_>>(), 0);
        let needs_weights = self.settings.weight_decay > 0.0 && self.settings.kind != Opt::AdamW;
        if grads.iter().all(Tensor::defined) {
            let total: i64 = self.moved.iter().map(|m| m.2).sum();
            let weights =
                needs_weights.then(|| flat(&self.moved.iter().map(|&(i, _, _)| &self.params[i].1).collect::<Vec<_>>()));
            let update = self.update(&flat(&grads.iter().collect::<Vec<_>>()), weights.as_ref(), 0, total);
            for k in 0..self.moved.len() {
                let (i, at, n) = self.moved[k];
                self.apply(i, &update.narrow(0, at, n));
            }
        } else {
            for (k, grad) in grads.iter().enumerate() {
                let (i, at, n) = self.moved[k];
                if grad.defined() {
                    let weights = needs_weights.then(|| self.params[i].1.flatten(0, -1));
                    let update = self.update(&grad.flatten(0, -1), weights.as_ref(), at, n);
                    self.apply(i, &update);
                }
            }
        }
    }

    /// The step's update of the values at `at..at + n` of the moments, whose gradients are `g`
    /// (and weights `weights`, for Adam's and SGD's L2 decay).
    pub(super) fn update(&mut self, g: &Tensor, weights: Option<&Tensor>, at: i64, n: i64) -> Tensor {
        let s = self.settings;
        let g = match weights {
            Some(w) => g + w * s.weight_decay,
            None => g.shallow_clone(),
        };
        match s.kind {
            Opt::Sgd if s.momentum > 0.0 => {
                let mut m = self.first.narrow(0, at, n);
                let _ = m.g_mul_scalar_(s.momentum).g_add_(&g);
                m * s.lr
            }
            Opt::Sgd => g * s.lr,
            Opt::Adam | Opt::AdamW => {
                let (c1, c2) = s.bias_corrections(self.step);
                let (mut m, mut v) = (self.first.narrow(0, at, n), self.second.narrow(0, at, n));
                // PyTorch's forms, in place where they can be: each call is a kernel.
                let _ = m.lerp_(&g, 1.0 - s.beta1);
                let _ = v.g_mul_scalar_(s.beta2).addcmul_(&(&g * (1.0 - s.beta2)), &g);
                let mut denom = v.sqrt();
                let _ = denom.g_div_scalar_(c2.sqrt()).g_add_scalar_(s.eps);
                let mut update = &m / &denom;
                let _ = update.g_mul_scalar_(s.lr / c1);
                update
            }
        }
    }

    /// Moves parameter `i` by a flat update (AdamW decays it first, as PyTorch does).
    pub(super) fn apply(&mut self, i: usize, update: &Tensor) {
        let s = self.settings;
        let p = &mut self.params[i].1;
        if s.kind == Opt::AdamW && s.weight_decay > 0.0 {
            let _ = p.g_mul_scalar_(1.0 - s.lr * s.weight_decay);
        }
        let _ = p.g_sub_(&update.view(p.size().as_slice()));
    }

    /// Each moved parameter's slice of `moments`, by the parameter's name (none when the kind
    /// keeps no such moment).
    pub(super) fn named_moments(&self, moments: &Tensor) -> Result<Named, ModelError> {
        if moments.numel() == 0 {
            return Ok(Vec::new());
        }
        self.moved
            .iter()
            .map(|&(i, at, n)| {
                named(self.who, &self.params[i].0, &moments.narrow(0, at, n).view(self.params[i].1.size().as_slice()))
            })
            .collect()
    }
}
