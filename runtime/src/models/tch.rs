//! tch, PyTorch's part: a sequential network classifier built from its definition's
//! components (layers, optimiser, loss: a [`NetDef`]; a training procedure), trained by the
//! shared [`Training`](super::training::Training), its weights and [`TrainSpec`] in its own
//! file.

use super::net::{Layer, Loss, NetDef, Network, Optimizer as Opt, Trained};
use super::training::Learner;
use super::{Model, ModelError, TrainSpec};
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use crate::objects::{Build, Meta, ObjectError, State};
use serde_json::Value;
use std::path::PathBuf;
use ::tch::nn::{self, Module, OptimizerConfig};
use ::tch::{Device, Kind, Tensor};

/// A classifier of rows of `f32` features: a sequential network. Its arguments are a
/// [`NetDef`] (`layers`, `optimizer`, `loss`, `seed`; the inputs are the data's) and
/// `training`, [`Training`](super::training::Training)'s settings. Each is reachable by selectors and sweeps:
/// `optimizer.lr=0.01`, `layers=[...]`.
#[derive(crate::Object)]
pub struct TchClassifier {
    args: Value,
    meta: Meta,
    trained: Trained<Net>,
}

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

impl TchClassifier {
    /// A classifier of these arguments (as `ObjectDef::new("TchClassifier", &args)?.build()`).
    pub fn new(args: Value) -> TchClassifier {
        TchClassifier::build(args, Meta::new())
    }

    /// Where its training stands.
    pub fn train_spec(&self) -> TrainSpec {
        self.trained.spec
    }

    /// Saves it to `path` after every epoch of its training (a killed training, loaded from
    /// there, resumes at the next epoch).
    pub fn checkpoint_to(&mut self, path: impl Into<PathBuf>) {
        self.trained.checkpoint = Some(path.into());
    }
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

    fn scores(&self, x: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError> {
        self.check(x)?;
        let _guard = ::tch::no_grad_guard();
        let scores = self.seq.forward(&rows(x));
        let flat: Vec<f32> = Vec::<f32>::try_from(scores.flatten(0, -1)).map_err(model_error("reading the scores"))?;
        Ok(flat.chunks(self.outputs as usize).map(|c| Array1::from_vec(c.to_vec())).collect())
    }
}

impl Build for TchClassifier {
    type Args = Value;
    fn build(args: Value, meta: Meta) -> Self {
        TchClassifier { args, meta, trained: Trained::default() }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        self.trained.spec.save(s, "train_spec")?;
        if let Some(n) = &self.trained.net {
            s.put("inputs", &n.inputs)?;
            s.put_var_store("weights", &n.vs)?;
        }
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        self.trained.spec = TrainSpec::load(s, "train_spec")?;
        if s.names().any(|n| n == "weights") {
            let inputs: i64 = s.get("inputs")?;
            let mut net = Net::build(&self.args, inputs as usize).map_err(|e| ObjectError::State("weights".into(), e.to_string()))?;
            s.load_var_store("weights", &mut net.vs)?;
            self.trained.net = Some(net);
        }
        Ok(())
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

impl Model for TchClassifier {
    type X = Array1<f32>;
    type Y = usize;
    type P = Array1<f32>;

    /// Trains by its `training` procedure from where its [`TrainSpec`] stands, saving itself
    /// to its checkpoint (if set) after every epoch.
    fn train(&mut self, data: &Dataset<Xy<Array1<f32>, usize>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
        super::net::train(self, |c| (&c.args, &mut c.trained), data, spec)
    }

    fn predict(&self, x: &Array1<f32>) -> Result<Array1<f32>, ModelError> {
        Ok(self.predict_all(vec![x.clone()])?.remove(0))
    }

    fn predict_all(&self, xs: Vec<Array1<f32>>) -> Result<Vec<Array1<f32>>, ModelError> {
        super::net::predict(&self.trained, xs)
    }
}

#[cfg(all(test, feature = "linfa"))]
mod tests;
