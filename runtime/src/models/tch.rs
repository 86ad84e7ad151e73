//! tch, PyTorch's part: a sequential network classifier built from its definition's
//! components (layers, optimiser, loss: a [`NetDef`]; a training procedure), trained by the
//! shared [`Training`](super::training::Training) on the device its context gives `torch`,
//! its weights, optimiser state and [`TrainSpec`] in its own file.

use super::net::{dropout_mask, Layer, Loss, NetDef, Network, Optimizer as Opt, Shape};
use super::optim::{self, Named, Saved, Settings};
use super::placement::{placement, Placement};
use super::training::Learner;
use super::ModelError;
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use serde_json::Value;
use ::tch::nn::{self, Module, ModuleT};
use ::tch::{Device, Kind, Tensor};

super::net::classifier!(
    /// A classifier of rows of `f32` features: a sequential network. Its arguments are a
    /// [`NetDef`] (`layers`, `optimizer`, `loss`, `seed`; the inputs are the data's) and
    /// `training`, [`Training`](super::training::Training)'s settings. Each is reachable by
    /// selectors and sweeps: `optimizer.lr=0.01`, `layers=[...]`.
    TchClassifier,
    Net
);

struct Net {
    vs: nn::VarStore,
    layers: Vec<(Layer, Built)>,
    seed: u64,
    opt: Optim,
    placement: Placement,
    inputs: i64,
    outputs: i64,
    mse: bool,
}

/// A layer's module, for the layers that hold weights.
enum Built {
    Linear(nn::Linear),
    Conv(nn::Conv2D),
    Norm(nn::BatchNorm),
    Plain,
}

/// The optimiser ([`optim`]'s update over tch tensors): the parameters sorted by name, and
/// each one's moments where its kind keeps them.
struct Optim {
    settings: Settings,
    step: u64,
    params: Vec<(String, Tensor)>,
    first: Vec<Tensor>,
    second: Vec<Tensor>,
}

impl Optim {
    fn new(vs: &nn::VarStore, settings: Settings) -> Optim {
        let mut params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = |on: bool| if on { params.iter().map(|(_, p)| p.zeros_like()).collect() } else { Vec::new() };
        let (first, second) = (zeros(settings.first_moment()), zeros(settings.second_moment()));
        Optim { settings, step: 0, params, first, second }
    }

    /// One step: the gradients of `loss`, then the update of every parameter.
    fn backward_step(&mut self, loss: &Tensor) {
        for (_, p) in &mut self.params {
            p.zero_grad();
        }
        loss.backward();
        self.step += 1;
        let s = self.settings;
        let (c1, c2) = s.bias_corrections(self.step);
        let _guard = ::tch::no_grad_guard();
        for (i, (_, p)) in self.params.iter_mut().enumerate() {
            let mut g = p.grad();
            if !g.defined() {
                continue;
            }
            if s.weight_decay > 0.0 && s.kind != Opt::AdamW {
                g = g + &*p * s.weight_decay;
            }
            let update = match s.kind {
                Opt::Sgd if s.momentum > 0.0 => {
                    let _ = self.first[i].g_mul_scalar_(s.momentum).g_add_(&g);
                    &self.first[i] * s.lr
                }
                Opt::Sgd => g * s.lr,
                Opt::Adam | Opt::AdamW => {
                    if s.kind == Opt::AdamW {
                        let _ = p.g_mul_scalar_(1.0 - s.lr * s.weight_decay);
                    }
                    let _ = self.first[i].g_mul_scalar_(s.beta1).g_add_(&(&g * (1.0 - s.beta1)));
                    let _ = self.second[i].g_mul_scalar_(s.beta2).g_add_(&(&g * &g * (1.0 - s.beta2)));
                    let denom = self.second[i].sqrt() / c2.sqrt() + s.eps;
                    &self.first[i] / denom * (s.lr / c1)
                }
            };
            let _ = p.g_sub_(&update);
        }
    }

    fn save(&self) -> Result<Vec<u8>, ModelError> {
        let named = |moments: &[Tensor]| -> Result<Named, ModelError> {
            self.params.iter().zip(moments).map(|((name, _), t)| named(name, t)).collect()
        };
        Saved { step: self.step, first: named(&self.first)?, second: named(&self.second)? }.to_bytes(NAME)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let shapes: Vec<(String, Vec<usize>)> = self.params.iter().map(|(n, p)| (n.clone(), dims(p))).collect();
        let saved = Saved::from_bytes(bytes, NAME, &shapes)?;
        let _guard = ::tch::no_grad_guard();
        for (moments, from) in [(&mut self.first, &saved.first), (&mut self.second, &saved.second)] {
            for ((name, p), t) in self.params.iter().zip(moments.iter_mut()) {
                let values = optim::find(from, name).ok_or_else(|| ModelError::Model(format!("{NAME}: the checkpoint's optimizer state lacks `{name}`")))?;
                t.copy_(&Tensor::from_slice(values).view(p.size().as_slice()).to_device(p.device()));
            }
        }
        self.step = saved.step;
        Ok(())
    }
}

const NAME: &str = "TchClassifier";

fn dims(t: &Tensor) -> Vec<usize> {
    t.size().iter().map(|&d| d as usize).collect()
}

/// A tensor's name, shape and values, read on the CPU.
fn named(name: &str, t: &Tensor) -> Result<(String, Vec<usize>, Vec<f32>), ModelError> {
    let values = Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1)).map_err(model_error("reading a tensor"))?;
    Ok((name.to_string(), dims(t), values))
}

/// The tch device of a placement, if this libtorch can use it.
fn device_of(p: Placement) -> Result<Device, ModelError> {
    match p {
        Placement::Cpu => Ok(Device::Cpu),
        Placement::Cuda { cuda, .. } if (cuda as i64) < ::tch::Cuda::device_count() => Ok(Device::Cuda(cuda)),
        Placement::Cuda { .. } => Err(ModelError::Model(format!(
            "{NAME}: the context gives torch {p}, but libtorch sees {} CUDA devices here (a libtorch without CUDA, or CUDA started before the context was set)",
            ::tch::Cuda::device_count()
        ))),
    }
}

fn model_error(what: &str) -> impl Fn(::tch::TchError) -> ModelError + '_ {
    move |e| ModelError::Model(format!("TchClassifier: {what}: {e}"))
}

impl Network for Net {
    const NAME: &'static str = "TchClassifier";

    /// The network for `inputs` features, its weights seeded.
    fn build(args: &Value, inputs: usize) -> Result<Net, ModelError> {
        let def = NetDef::from_args(args, Self::NAME)?;
        let placement = placement("torch");
        let device = device_of(placement)?;
        // Seeded on the CPU, then moved: the same initial weights on every device.
        ::tch::manual_seed(def.seed as i64);
        let mut vs = nn::VarStore::new(Device::Cpu);
        let shapes = def.shapes(inputs, Self::NAME)?;
        let mut layers = Vec::new();
        for (at, (l, s)) in def.layers.iter().zip(&shapes).enumerate() {
            let path = vs.root() / format!("layer{at}");
            let built = match (*l, *s) {
                (Layer::Linear(n), _) => Built::Linear(nn::linear(path, s.len() as i64, n as i64, Default::default())),
                (Layer::Conv2d { channels, kernel, stride, padding }, Shape::Image([c, _, _])) => {
                    let config = nn::ConvConfig { stride: stride as i64, padding: padding as i64, ..Default::default() };
                    Built::Conv(nn::conv2d(path, c as i64, channels as i64, kernel as i64, config))
                }
                (Layer::BatchNorm, Shape::Image([c, _, _])) => Built::Norm(nn::batch_norm2d(path, c as i64, Default::default())),
                (Layer::BatchNorm, Shape::Flat(n)) => Built::Norm(nn::batch_norm1d(path, n as i64, Default::default())),
                _ => Built::Plain,
            };
            layers.push((*l, built));
        }
        vs.set_device(device);
        let opt = Optim::new(&vs, Settings::of(&def));
        let outputs = def.outputs() as i64;
        Ok(Net { vs, layers, seed: def.seed, opt, placement, inputs: inputs as i64, outputs, mse: def.loss == Loss::Mse })
    }

    fn inputs(&self) -> usize {
        self.inputs as usize
    }

    fn scores(&self, x: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError> {
        self.check(x)?;
        let _guard = ::tch::no_grad_guard();
        let scores = self.forward(&self.rows(x), false);
        let flat: Vec<f32> = Vec::<f32>::try_from(scores.to_device(Device::Cpu).flatten(0, -1)).map_err(model_error("reading the scores"))?;
        Ok(flat.chunks(self.outputs as usize).map(|c| Array1::from_vec(c.to_vec())).collect())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.opt.params.iter().map(|(name, p)| named(name, p)).collect()
    }

    fn optimizer_state(&self) -> Result<Vec<u8>, ModelError> {
        self.opt.save()
    }

    fn restore_optimizer(&mut self, state: &[u8]) -> Result<(), ModelError> {
        self.opt.restore(state)
    }
}

impl Net {
    /// The layers over a batch; `train`: dropout drops and batch norm learns its statistics.
    fn forward(&self, x: &Tensor, train: bool) -> Tensor {
        let mut t = x.shallow_clone();
        for (at, (l, built)) in self.layers.iter().enumerate() {
            t = match (*l, built) {
                (Layer::Reshape([c, h, w]), _) => t.view([-1, c as i64, h as i64, w as i64]),
                (_, Built::Linear(m)) => m.forward(&t),
                (_, Built::Conv(m)) => m.forward(&t),
                (_, Built::Norm(m)) => m.forward_t(&t, train),
                (Layer::MaxPool(k), _) => t.max_pool2d_default(k as i64),
                (Layer::AvgPool(k), _) => t.avg_pool2d_default(k as i64),
                (Layer::Flatten, _) => t.flatten(1, -1),
                (Layer::Dropout(p), _) if train && p > 0.0 => {
                    let mask = dropout_mask(self.seed, at, self.opt.step, t.numel(), p);
                    &t * Tensor::from_slice(&mask).view(t.size().as_slice()).to_device(t.device())
                }
                (Layer::Relu, _) => t.relu(),
                (Layer::Tanh, _) => t.tanh(),
                (Layer::Sigmoid, _) => t.sigmoid(),
                (Layer::Dropout(_) | Layer::Linear(_) | Layer::Conv2d { .. } | Layer::BatchNorm, _) => t,
            };
        }
        t
    }

    /// A batch of rows as one `[n, width]` tensor on the network's device.
    fn rows(&self, x: &Array2<f32>) -> Tensor {
        let x = x.as_standard_layout();
        Tensor::from_slice(x.as_slice().expect("standard layout")).view([x.nrows() as i64, x.ncols() as i64]).to_device(self.vs.device())
    }

    fn check(&self, x: &Array2<f32>) -> Result<(), ModelError> {
        if x.ncols() as i64 != self.inputs {
            return Err(ModelError::Model(format!("TchClassifier: elements have {} features; the network takes {}", x.ncols(), self.inputs)));
        }
        Ok(())
    }

    fn loss_of(&self, x: &Array2<f32>, y: &Array1<usize>, train: bool) -> Result<Tensor, ModelError> {
        self.check(x)?;
        if let Some(&c) = y.iter().find(|&&c| c as i64 >= self.outputs) {
            return Err(ModelError::Model(format!("TchClassifier: class {c} is not below the network's {} outputs", self.outputs)));
        }
        let logits = self.forward(&self.rows(x), train);
        let targets = Tensor::from_slice(&y.iter().map(|&c| c as i64).collect::<Vec<_>>()).to_device(self.vs.device());
        Ok(if self.mse {
            logits.mse_loss(&targets.one_hot(self.outputs).to_kind(Kind::Float), ::tch::Reduction::Mean)
        } else {
            logits.cross_entropy_for_logits(&targets)
        })
    }
}

impl Learner for Net {
    type X = Array1<f32>;
    type Y = usize;

    fn step(&mut self, b: Xy<Array2<f32>, Array1<usize>>) -> Result<f64, ModelError> {
        let loss = self.loss_of(&b.x, &b.y, true)?;
        self.opt.backward_step(&loss);
        Ok(loss.double_value(&[]))
    }

    fn loss(&mut self, batches: &Dataset<Xy<Array2<f32>, Array1<usize>>>) -> Result<f64, ModelError> {
        let _guard = ::tch::no_grad_guard();
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            sum += self.loss_of(&b.x, &b.y, false)?.double_value(&[]) * b.y.len() as f64;
            n += b.y.len();
        }
        Ok(sum / n.max(1) as f64)
    }

    fn snapshot(&self) -> Result<Vec<u8>, ModelError> {
        let mut buf = Vec::new();
        self.vs.save_to_stream(&mut buf).map_err(model_error("copying the weights"))?;
        Ok(buf)
    }

    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError> {
        self.vs.load_from_stream(std::io::Cursor::new(weights)).map_err(model_error("restoring the weights"))
    }
}

#[cfg(all(test, feature = "linfa"))]
mod tests;
