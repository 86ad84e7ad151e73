//! candle, pure Rust (no libtorch): the same network classifier as the tch one, from the
//! same definition ([`NetDef`]), trained by the same
//! [`Training`](super::training::Training), its weights and [`TrainSpec`] in its own file.

use super::net::{seeded_linear, Layer, Loss, NetDef, Network, Optimizer as Opt};
use super::training::Learner;
use super::ModelError;
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap, SGD};
use serde_json::Value;

super::net::classifier!(
    /// A classifier of rows of `f32` features: a sequential network in candle. Its arguments
    /// are the tch classifier's ([`NetDef`] and `training`), except that candle's SGD has no
    /// momentum.
    CandleClassifier,
    Net
);

enum Optim {
    AdamW(AdamW),
    Sgd(SGD),
}

struct Net {
    def: NetDef,
    vars: VarMap,
    layers: Vec<(Layer, Option<candle_nn::Linear>)>,
    opt: Optim,
    inputs: usize,
}

fn candle_error(what: &'static str) -> impl Fn(candle_core::Error) -> ModelError {
    move |e| ModelError::Model(format!("CandleClassifier: {what}: {e}"))
}

impl Network for Net {
    const NAME: &'static str = "CandleClassifier";

    /// The network for `inputs` features, its weights seeded (candle cannot seed its own).
    fn build(args: &Value, inputs: usize) -> Result<Net, ModelError> {
        let def = NetDef::from_args(args, Self::NAME)?;
        if def.optimizer == Opt::Sgd && def.momentum > 0.0 {
            return Err(ModelError::Model("CandleClassifier: candle's SGD has no momentum (use adam, or the tch classifier)".into()));
        }
        let mut vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let mut rng = fastrand::Rng::with_seed(def.seed);
        let mut width = inputs;
        let mut layers = Vec::new();
        for (at, l) in def.layers.iter().enumerate() {
            let lin = match *l {
                Layer::Linear(n) => {
                    let lin = candle_nn::linear(width, n, vb.pp(format!("layer{at}"))).map_err(candle_error("building a layer"))?;
                    let (w, b) = seeded_linear(width, n, &mut rng);
                    let set = |vars: &mut VarMap, name: String, t: candle_core::Result<Tensor>| t.and_then(|t| vars.set_one(name, t));
                    set(&mut vars, format!("layer{at}.weight"), Tensor::from_vec(w, (n, width), &Device::Cpu)).map_err(candle_error("seeding a layer"))?;
                    set(&mut vars, format!("layer{at}.bias"), Tensor::from_vec(b, n, &Device::Cpu)).map_err(candle_error("seeding a layer"))?;
                    width = n;
                    Some(lin)
                }
                _ => None,
            };
            layers.push((*l, lin));
        }
        let opt = match def.optimizer {
            Opt::Sgd => Optim::Sgd(SGD::new(vars.all_vars(), def.lr).map_err(candle_error("building the optimizer"))?),
            _ => {
                let p = ParamsAdamW { lr: def.lr, weight_decay: def.weight_decay, ..ParamsAdamW::default() };
                Optim::AdamW(AdamW::new(vars.all_vars(), p).map_err(candle_error("building the optimizer"))?)
            }
        };
        Ok(Net { def, vars, layers, opt, inputs })
    }

    fn inputs(&self) -> usize {
        self.inputs
    }

    fn scores(&self, x: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError> {
        let scores = self.forward(x)?.to_vec2::<f32>().map_err(candle_error("reading the scores"))?;
        Ok(scores.into_iter().map(Array1::from_vec).collect())
    }
}

impl Net {
    fn forward(&self, x: &Array2<f32>) -> Result<Tensor, ModelError> {
        if x.ncols() != self.inputs {
            return Err(ModelError::Model(format!("CandleClassifier: elements have {} features; the network takes {}", x.ncols(), self.inputs)));
        }
        let x = x.as_standard_layout();
        let mut t = Tensor::from_slice(x.as_slice().expect("standard layout"), (x.nrows(), x.ncols()), &Device::Cpu).map_err(candle_error("reading the features"))?;
        for (l, lin) in &self.layers {
            t = match (l, lin) {
                (Layer::Linear(_), Some(lin)) => lin.forward(&t),
                (Layer::Relu, _) => t.relu(),
                (Layer::Tanh, _) => t.tanh(),
                (Layer::Sigmoid, _) => candle_nn::ops::sigmoid(&t),
                (Layer::Linear(_), None) => unreachable!("every linear layer is built"),
            }
            .map_err(candle_error("the forward pass"))?;
        }
        Ok(t)
    }

    fn loss_of(&self, x: &Array2<f32>, y: &Array1<usize>) -> Result<Tensor, ModelError> {
        let outputs = self.def.outputs();
        if let Some(&c) = y.iter().find(|&&c| c >= outputs) {
            return Err(ModelError::Model(format!("CandleClassifier: class {c} is not below the network's {outputs} outputs")));
        }
        let logits = self.forward(x)?;
        let targets = Tensor::from_vec(y.iter().map(|&c| c as u32).collect::<Vec<_>>(), y.len(), &Device::Cpu).map_err(candle_error("reading the targets"))?;
        match self.def.loss {
            Loss::CrossEntropy => candle_nn::loss::cross_entropy(&logits, &targets),
            Loss::Mse => candle_nn::encoding::one_hot(targets, outputs, 1.0f32, 0.0f32).and_then(|t| candle_nn::loss::mse(&logits, &t)),
        }
        .map_err(candle_error("the loss"))
    }
}

impl Learner for Net {
    type X = Array1<f32>;
    type Y = usize;

    fn step(&mut self, b: Xy<Array2<f32>, Array1<usize>>) -> Result<f64, ModelError> {
        let loss = self.loss_of(&b.x, &b.y)?;
        match &mut self.opt {
            Optim::AdamW(o) => o.backward_step(&loss),
            Optim::Sgd(o) => o.backward_step(&loss),
        }
        .map_err(candle_error("the optimizer's step"))?;
        loss.to_scalar::<f32>().map(f64::from).map_err(candle_error("reading the loss"))
    }

    fn loss(&mut self, batches: &Dataset<Xy<Array2<f32>, Array1<usize>>>) -> Result<f64, ModelError> {
        let (mut sum, mut n) = (0.0, 0usize);
        for b in batches.iter() {
            let b = b?;
            let l = self.loss_of(&b.x, &b.y)?.to_scalar::<f32>().map_err(candle_error("reading the loss"))?;
            sum += f64::from(l) * b.y.len() as f64;
            n += b.y.len();
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
            let values = t.flatten_all().and_then(|f| f.to_vec1::<f32>()).map_err(candle_error("copying the weights"))?;
            out.push((name.clone(), t.dims().to_vec(), values));
        }
        rmp_serde::to_vec(&out).map_err(|e| ModelError::Model(format!("CandleClassifier: copying the weights: {e}")))
    }

    fn restore(&mut self, weights: &[u8]) -> Result<(), ModelError> {
        let saved: Vec<(String, Vec<usize>, Vec<f32>)> = rmp_serde::from_slice(weights).map_err(|e| ModelError::Model(format!("CandleClassifier: reading the weights: {e}")))?;
        for (name, dims, values) in saved {
            let t = Tensor::from_vec(values, dims, &Device::Cpu).map_err(candle_error("reading the weights"))?;
            self.vars.set_one(&name, t).map_err(candle_error("restoring the weights"))?;
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "linfa"))]
mod tests {
    use super::*;
    use crate::models::{Model, TrainSpec};
    use crate::models::eval;
    use serde_json::json;

    fn def(training: Value) -> Value {
        json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
    }

    #[test]
    fn a_candle_network_beats_its_floor_on_iris_and_scores_the_same_reloaded() {
        let args = def(json!({"epochs": 40, "batch_size": 16}));
        let (obj, _, spec) = crate::models::testing::floor_and_reload::<CandleClassifier>("CandleClassifier", &args, 1, 0.9);
        assert_eq!(spec, TrainSpec { epochs: 40, epoch: 40, step: 280 });
        // One definition, one network: a second build trains to the same scores.
        let (train, test) = crate::models::testing::iris_split(1);
        let mut twin = CandleClassifier::new(args);
        twin.train(&train, &mut TrainSpec::epochs(0)).unwrap();
        let before = eval(obj.downcast_ref::<CandleClassifier>().unwrap(), &test).unwrap().collect().unwrap();
        assert_eq!(eval(&twin, &test).unwrap().collect().unwrap(), before, "seeded weights");
    }

    #[test]
    fn candle_errors_name_what_and_where() {
        let train = crate::models::linfa::iris().take(20);
        let e = CandleClassifier::new(json!({"layers": [{"linear": 3}], "optimizer": {"type": "sgd", "momentum": 0.9}})).train(&train, &mut TrainSpec::epochs(0)).unwrap_err();
        assert!(e.to_string().contains("candle's SGD has no momentum"), "{e}");
        let mut m = CandleClassifier::new(json!({"layers": [{"linear": 3}], "training": {"epochs": 1}}));
        m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
        assert_eq!(m.predict(&Array1::zeros(2)).unwrap_err().to_string(), "CandleClassifier: elements have 2 features; the network takes 4");
    }
}
