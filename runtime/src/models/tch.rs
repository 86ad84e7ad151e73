//! tch, PyTorch's part: a sequential network classifier built from its definition's
//! components (layers, optimiser, loss: a [`NetDef`]; a training procedure), trained by the
//! shared [`Training`](super::training::Training), its weights and [`TrainSpec`] in its own
//! file.

use super::net::{Layer, Loss, NetDef, Network, Optimizer as Opt};
use super::training::Learner;
use super::ModelError;
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use serde_json::Value;
use ::tch::nn::{self, Module, OptimizerConfig};
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
    seq: nn::Sequential,
    opt: nn::Optimizer,
    inputs: i64,
    outputs: i64,
    mse: bool,
}

fn model_error(what: &str) -> impl Fn(::tch::TchError) -> ModelError + '_ {
    move |e| ModelError::Model(format!("TchClassifier: {what}: {e}"))
}

impl Network for Net {
    const NAME: &'static str = "TchClassifier";

    /// The network for `inputs` features, its weights seeded.
    fn build(args: &Value, inputs: usize) -> Result<Net, ModelError> {
        let def = NetDef::from_args(args, Self::NAME)?;
        ::tch::manual_seed(def.seed as i64);
        let vs = nn::VarStore::new(Device::Cpu);
        let mut seq = nn::seq();
        let mut width = inputs as i64;
        for (at, l) in def.layers.iter().enumerate() {
            seq = match *l {
                Layer::Linear(n) => {
                    let lin = nn::linear(vs.root() / format!("layer{at}"), width, n as i64, Default::default());
                    width = n as i64;
                    seq.add(lin)
                }
                Layer::Relu => seq.add_fn(Tensor::relu),
                Layer::Tanh => seq.add_fn(Tensor::tanh),
                Layer::Sigmoid => seq.add_fn(Tensor::sigmoid),
            };
        }
        let opt = match def.optimizer {
            Opt::Adam => nn::adam(0.9, 0.999, def.weight_decay).build(&vs, def.lr),
            Opt::AdamW => nn::adamw(0.9, 0.999, def.weight_decay).build(&vs, def.lr),
            Opt::Sgd => nn::sgd(def.momentum, 0.0, def.weight_decay, false).build(&vs, def.lr),
        }
        .map_err(model_error("building the optimizer"))?;
        Ok(Net { vs, seq, opt, inputs: inputs as i64, outputs: width, mse: def.loss == Loss::Mse })
    }

    fn inputs(&self) -> usize {
        self.inputs as usize
    }

    fn scores(&self, x: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError> {
        self.check(x)?;
        let _guard = ::tch::no_grad_guard();
        let scores = self.seq.forward(&rows(x));
        let flat: Vec<f32> = Vec::<f32>::try_from(scores.flatten(0, -1)).map_err(model_error("reading the scores"))?;
        Ok(flat.chunks(self.outputs as usize).map(|c| Array1::from_vec(c.to_vec())).collect())
    }
}

/// A batch of rows as one `[n, width]` tensor.
fn rows(x: &Array2<f32>) -> Tensor {
    let x = x.as_standard_layout();
    Tensor::from_slice(x.as_slice().expect("standard layout")).view([x.nrows() as i64, x.ncols() as i64])
}

impl Net {
    fn check(&self, x: &Array2<f32>) -> Result<(), ModelError> {
        if x.ncols() as i64 != self.inputs {
            return Err(ModelError::Model(format!("TchClassifier: elements have {} features; the network takes {}", x.ncols(), self.inputs)));
        }
        Ok(())
    }

    fn loss_of(&self, x: &Array2<f32>, y: &Array1<usize>) -> Result<Tensor, ModelError> {
        self.check(x)?;
        if let Some(&c) = y.iter().find(|&&c| c as i64 >= self.outputs) {
            return Err(ModelError::Model(format!("TchClassifier: class {c} is not below the network's {} outputs", self.outputs)));
        }
        let logits = self.seq.forward(&rows(x));
        let targets = Tensor::from_slice(&y.iter().map(|&c| c as i64).collect::<Vec<_>>());
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
        let loss = self.loss_of(&b.x, &b.y)?;
        self.opt.backward_step(&loss);
        Ok(loss.double_value(&[]))
    }

    fn loss(&mut self, batches: &Dataset<Xy<Array2<f32>, Array1<usize>>>) -> Result<f64, ModelError> {
        let _guard = ::tch::no_grad_guard();
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            sum += self.loss_of(&b.x, &b.y)?.double_value(&[]) * b.y.len() as f64;
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
