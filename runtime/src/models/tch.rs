//! tch, PyTorch's part: a sequential network classifier built from its definition's
//! components (layers, optimiser, loss, training procedure), trained by the shared
//! [`Training`], its weights and [`TrainSpec`] in its own file.

use super::training::{Learner, Training};
use super::{Model, ModelError, TrainSpec};
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use crate::objects::{Build, Meta, ObjectError, State};
use serde_json::Value;
use std::path::PathBuf;
use ::tch::nn::{self, Module, OptimizerConfig};
use ::tch::{Device, Kind, Tensor};

/// A classifier of rows of `f32` features: a sequential network. Its arguments:
/// - `layers`: `[{"linear": 64}, "relu", {"linear": 3}]` (`linear` with its outputs, `relu`,
///   `tanh`, `sigmoid`); the inputs are the data's;
/// - `optimizer`: `{"type": "adam" | "adamw" | "sgd", "lr": 0.001, "momentum": 0.9 (sgd),
///   "weight_decay": 0.0}`;
/// - `loss`: `"cross_entropy"` (the default) or `"mse"` (onto one-hot targets);
/// - `training`: [`Training`]'s settings;
/// - `seed`: the weights' initialisation (default 0).
///
/// Each is reachable by selectors and sweeps: `optimizer.lr=0.01`, `layers=[...]`.
#[derive(crate::Object)]
pub struct TchClassifier {
    args: Value,
    meta: Meta,
    net: Option<Net>,
    spec: TrainSpec,
    /// Saved there after every epoch, when set.
    checkpoint: Option<PathBuf>,
}

struct Net {
    vs: nn::VarStore,
    seq: nn::Sequential,
    opt: nn::Optimizer,
    inputs: i64,
    outputs: i64,
    mse: bool,
}

#[derive(Debug, Clone, Copy)]
enum Layer {
    Linear(i64),
    Relu,
    Tanh,
    Sigmoid,
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
        self.spec
    }

    /// Saves it to `path` after every epoch of its training (a killed training, loaded from
    /// there, resumes at the next epoch).
    pub fn checkpoint_to(&mut self, path: impl Into<PathBuf>) {
        self.checkpoint = Some(path.into());
    }

    fn layers(&self) -> Result<Vec<Layer>, ModelError> {
        let list = self.args["layers"].as_array().ok_or_else(|| ModelError::Model(format!("TchClassifier: `layers` must be a list, as [{{\"linear\": 64}}, \"relu\", {{\"linear\": 3}}], not {}", self.args["layers"])))?;
        let layers = list
            .iter()
            .enumerate()
            .map(|(at, l)| match (l.as_str(), l.get("linear").and_then(Value::as_u64)) {
                (Some("relu"), _) => Ok(Layer::Relu),
                (Some("tanh"), _) => Ok(Layer::Tanh),
                (Some("sigmoid"), _) => Ok(Layer::Sigmoid),
                (_, Some(n)) if n > 0 && l.as_object().is_some_and(|o| o.len() == 1) => Ok(Layer::Linear(n as i64)),
                _ => Err(ModelError::Model(format!("TchClassifier: layer {at} ({l}) is not one of {{\"linear\": N}}, \"relu\", \"tanh\", \"sigmoid\""))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !matches!(layers.last(), Some(Layer::Linear(_))) {
            return Err(ModelError::Model("TchClassifier: the last layer must be {\"linear\": N}, N the number of classes".into()));
        }
        Ok(layers)
    }

    /// The network for `inputs` features, its weights seeded.
    fn make_net(&self, inputs: i64) -> Result<Net, ModelError> {
        let layers = self.layers()?;
        let mse = match self.args["loss"].as_str() {
            None if self.args["loss"].is_null() => false,
            Some("cross_entropy") => false,
            Some("mse") => true,
            _ => return Err(ModelError::Model(format!("TchClassifier: `loss` must be \"cross_entropy\" or \"mse\", not {}", self.args["loss"]))),
        };
        ::tch::manual_seed(self.args["seed"].as_i64().unwrap_or(0));
        let vs = nn::VarStore::new(Device::Cpu);
        let mut seq = nn::seq();
        let mut width = inputs;
        for (at, l) in layers.iter().enumerate() {
            seq = match *l {
                Layer::Linear(n) => {
                    let lin = nn::linear(vs.root() / format!("layer{at}"), width, n, Default::default());
                    width = n;
                    seq.add(lin)
                }
                Layer::Relu => seq.add_fn(Tensor::relu),
                Layer::Tanh => seq.add_fn(Tensor::tanh),
                Layer::Sigmoid => seq.add_fn(Tensor::sigmoid),
            };
        }
        let o = &self.args["optimizer"];
        let lr = o["lr"].as_f64().unwrap_or(1e-3);
        let wd = o["weight_decay"].as_f64().unwrap_or(0.0);
        let opt = match o["type"].as_str().unwrap_or("adam") {
            "adam" => nn::adam(0.9, 0.999, wd).build(&vs, lr),
            "adamw" => nn::adamw(0.9, 0.999, if o["weight_decay"].is_null() { 0.01 } else { wd }).build(&vs, lr),
            "sgd" => nn::sgd(o["momentum"].as_f64().unwrap_or(0.0), 0.0, wd, false).build(&vs, lr),
            other => return Err(ModelError::Model(format!("TchClassifier: optimizer `{other}` is not adam, adamw or sgd"))),
        }
        .map_err(model_error("building the optimizer"))?;
        Ok(Net { vs, seq, opt, inputs, outputs: width, mse })
    }
}

impl Build for TchClassifier {
    type Args = Value;
    fn build(args: Value, meta: Meta) -> Self {
        TchClassifier { args, meta, net: None, spec: TrainSpec::epochs(0), checkpoint: None }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        self.spec.save(s, "train_spec")?;
        if let Some(n) = &self.net {
            s.put("inputs", &n.inputs)?;
            s.put_var_store("weights", &n.vs)?;
        }
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        self.spec = TrainSpec::load(s, "train_spec")?;
        if s.names().any(|n| n == "weights") {
            let mut net = self.make_net(s.get("inputs")?).map_err(|e| ObjectError::State("weights".into(), e.to_string()))?;
            s.load_var_store("weights", &mut net.vs)?;
            self.net = Some(net);
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
        let training = Training::from_args(&self.args["training"])?;
        if self.net.is_none() {
            let first = data.peek()?.ok_or_else(|| ModelError::Model("TchClassifier: no elements to train on".into()))?;
            self.net = Some(self.make_net(first.x.len() as i64)?);
        }
        let mut run = training.start(data)?;
        loop {
            let net = self.net.as_mut().expect("made above");
            let Some(_) = run.epoch(net, spec)? else { break };
            self.spec = *spec;
            if let Some(path) = &self.checkpoint {
                crate::save_object(self, path)?;
            }
        }
        self.spec = *spec;
        Ok(())
    }

    fn predict(&self, x: &Array1<f32>) -> Result<Array1<f32>, ModelError> {
        Ok(self.predict_all(vec![x.clone()])?.remove(0))
    }

    fn predict_all(&self, xs: Vec<Array1<f32>>) -> Result<Vec<Array1<f32>>, ModelError> {
        let net = self.net.as_ref().ok_or(ModelError::NotTrained("TchClassifier"))?;
        if xs.is_empty() {
            return Ok(Vec::new());
        }
        let x = <Array1<f32> as crate::data::Element>::stack(xs)?;
        net.check(&x)?;
        let _guard = ::tch::no_grad_guard();
        let scores = net.seq.forward(&rows(&x));
        let flat: Vec<f32> = Vec::<f32>::try_from(scores.flatten(0, -1)).map_err(model_error("reading the scores"))?;
        Ok(flat.chunks(net.outputs as usize).map(|c| Array1::from_vec(c.to_vec())).collect())
    }
}

// On the real iris, which the linfa feature brings (`tests/run.sh` tests both features at once).
#[cfg(all(test, feature = "linfa"))]
mod tests;
