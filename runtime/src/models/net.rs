//! A sequential network classifier's definition as its object's arguments give it, the same
//! for every framework (its layers, loss, optimiser and seed), and what the classifiers share:
//! their training by the shared procedure, with a checkpoint after every epoch, and their
//! predictions. Each framework builds its own [`Network`] from the definition.

use super::callbacks::{tell, Callback, Control};
use super::optim::Named;
use super::placement::Placement;
use super::training::{BestSoFar, Learner, Training};
use super::{ModelError, TrainSpec};
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Xy};
use crate::objects::{ObjectError, State};
use crate::Object;
use serde_json::Value;
use std::path::PathBuf;

/// One layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layer {
    /// A fully connected layer with this many outputs.
    Linear(usize),
    /// ReLU.
    Relu,
    /// tanh.
    Tanh,
    /// The logistic function.
    Sigmoid,
}

/// What training minimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Cross-entropy of the outputs as logits against the class.
    CrossEntropy,
    /// Mean squared error of the outputs against the one-hot class.
    Mse,
}

/// The optimiser's kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Optimizer {
    /// Adam.
    Adam,
    /// AdamW (decoupled weight decay, 0.01 unless given).
    AdamW,
    /// Stochastic gradient descent.
    Sgd,
}

/// A network's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct NetDef {
    /// The layers, the last a linear one with an output per class.
    pub layers: Vec<Layer>,
    /// The loss.
    pub loss: Loss,
    /// The optimiser.
    pub optimizer: Optimizer,
    /// Its learning rate.
    pub lr: f64,
    /// SGD's momentum.
    pub momentum: f64,
    /// Weight decay.
    pub weight_decay: f64,
    /// Seeds the initial weights.
    pub seed: u64,
}

impl NetDef {
    /// The definition in a classifier's arguments (`who` names it in errors): `layers`
    /// (`[{"linear": 64}, "relu", {"linear": 3}]`, also `tanh`, `sigmoid`), `optimizer`
    /// (`{"type": "adam" | "adamw" | "sgd", "lr": 0.001, "momentum": 0.0, "weight_decay": 0.0}`),
    /// `loss` (`"cross_entropy"`, the default, or `"mse"`) and `seed` (0).
    pub fn from_args(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        let err = |m: String| ModelError::Model(format!("{who}: {m}"));
        let list = args["layers"].as_array().ok_or_else(|| err(format!("`layers` must be a list, as [{{\"linear\": 64}}, \"relu\", {{\"linear\": 3}}], not {}", args["layers"])))?;
        let layers = list
            .iter()
            .enumerate()
            .map(|(at, l)| match (l.as_str(), l.get("linear").and_then(Value::as_u64)) {
                (Some("relu"), _) => Ok(Layer::Relu),
                (Some("tanh"), _) => Ok(Layer::Tanh),
                (Some("sigmoid"), _) => Ok(Layer::Sigmoid),
                (_, Some(n)) if n > 0 && l.as_object().is_some_and(|o| o.len() == 1) => Ok(Layer::Linear(n as usize)),
                _ => Err(err(format!("layer {at} ({l}) is not one of {{\"linear\": N}}, \"relu\", \"tanh\", \"sigmoid\""))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !matches!(layers.last(), Some(Layer::Linear(_))) {
            return Err(err("the last layer must be {\"linear\": N}, N the number of classes".into()));
        }
        let loss = match &args["loss"] {
            Value::Null => Loss::CrossEntropy,
            v if v == "cross_entropy" => Loss::CrossEntropy,
            v if v == "mse" => Loss::Mse,
            v => return Err(err(format!("`loss` must be \"cross_entropy\" or \"mse\", not {v}"))),
        };
        let o = &args["optimizer"];
        let number = |key: &str, default: f64| match &o[key] {
            Value::Null => Ok(default),
            v => v.as_f64().filter(|x| *x >= 0.0).ok_or_else(|| err(format!("optimizer `{key}` must be a non-negative number, not {v}"))),
        };
        let optimizer = match o["type"].as_str().unwrap_or("adam") {
            "adam" => Optimizer::Adam,
            "adamw" => Optimizer::AdamW,
            "sgd" => Optimizer::Sgd,
            other => return Err(err(format!("optimizer `{other}` is not adam, adamw or sgd"))),
        };
        let weight_decay = number("weight_decay", if optimizer == Optimizer::AdamW { 0.01 } else { 0.0 })?;
        Ok(NetDef { layers, loss, optimizer, lr: number("lr", 1e-3)?, momentum: number("momentum", 0.0)?, weight_decay, seed: args["seed"].as_u64().unwrap_or(0) })
    }

    /// The number of outputs (classes).
    pub fn outputs(&self) -> usize {
        match self.layers.last() {
            Some(Layer::Linear(n)) => *n,
            _ => unreachable!("checked by from_args"),
        }
    }
}

/// PyTorch's default initialisation of a linear layer, seeded: weights `[outputs, inputs]` and
/// biases uniform in ±1/√inputs. Frameworks whose own initialisation cannot be seeded use it.
pub fn seeded_linear(inputs: usize, outputs: usize, rng: &mut fastrand::Rng) -> (Vec<f32>, Vec<f32>) {
    let bound = 1.0 / (inputs as f32).sqrt();
    let mut draw = |n: usize| (0..n).map(|_| (rng.f32() * 2.0 - 1.0) * bound).collect::<Vec<f32>>();
    (draw(inputs * outputs), draw(outputs))
}

/// What a network classifier of any framework keeps besides its definition: its network (once
/// trained or loaded), its training cursor and where it saves itself after every epoch.
pub struct Trained<N> {
    /// The network, built on the first training (its inputs are the data's) or loaded.
    pub net: Option<N>,
    /// Where its training stands.
    pub spec: TrainSpec,
    /// Where it is saved after every epoch, when set.
    pub checkpoint: Option<PathBuf>,
    /// Early stopping's memory while a training is under way.
    pub best: Option<BestSoFar>,
}

impl<N> Default for Trained<N> {
    fn default() -> Self {
        Trained { net: None, spec: TrainSpec::epochs(0), checkpoint: None, best: None }
    }
}

impl<N: Network> Trained<N> {
    /// Saves the training cursor, the weights, the optimiser's state and early stopping's memory.
    pub fn save(&self, s: &mut State) -> Result<(), ObjectError> {
        self.spec.save(s, "train_spec")?;
        if let Some(n) = &self.net {
            s.put("inputs", &n.inputs())?;
            s.put_bytes("weights", n.snapshot().map_err(|e| ObjectError::State("weights".into(), e.to_string()))?);
            s.put_bytes("optimizer", n.optimizer_state().map_err(|e| ObjectError::State("optimizer".into(), e.to_string()))?);
        }
        if let Some(b) = &self.best {
            s.put("early_stopping", &(b.loss, b.since))?;
            s.put_bytes("best_weights", b.weights.clone());
        }
        Ok(())
    }

    /// Loads what [`Trained::save`] saved; the network is rebuilt from `args`.
    pub fn load(&mut self, args: &Value, s: &State) -> Result<(), ObjectError> {
        self.spec = TrainSpec::load(s, "train_spec")?;
        if s.names().any(|n| n == "weights") {
            let bad = |e: ModelError| ObjectError::State("weights".into(), e.to_string());
            let mut net = N::build(args, s.get("inputs")?).map_err(bad)?;
            net.restore(s.bytes("weights")?).map_err(bad)?;
            // Files saved before the optimiser's state was kept resume with a fresh optimiser.
            if s.names().any(|n| n == "optimizer") {
                let bad = |e: ModelError| ObjectError::State("optimizer".into(), e.to_string());
                net.restore_optimizer(s.bytes("optimizer")?).map_err(bad)?;
            }
            self.net = Some(net);
        }
        if s.names().any(|n| n == "best_weights") {
            let (loss, since) = s.get("early_stopping")?;
            self.best = Some(BestSoFar { loss, weights: s.bytes("best_weights")?.to_vec(), since });
        }
        Ok(())
    }
}

/// What each framework's network gives its classifier.
pub trait Network: Learner<X = Array1<f32>, Y = usize> + Sized {
    /// The classifier's name, for errors.
    const NAME: &'static str;
    /// The network its arguments define, for `inputs` features, on the device its context
    /// gives it ([`super::placement::placement`]).
    fn build(args: &Value, inputs: usize) -> Result<Self, ModelError>;
    /// The features it takes.
    fn inputs(&self) -> usize;
    /// Class scores for a batch of rows.
    fn scores(&self, x: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError>;
    /// Where it runs.
    fn placement(&self) -> Placement;
    /// Every parameter by name, sorted, with its shape and values.
    fn parameters(&self) -> Result<Named, ModelError>;
    /// The optimiser's state ([`super::optim::Saved`]'s bytes).
    fn optimizer_state(&self) -> Result<Vec<u8>, ModelError>;
    /// Puts [`Network::optimizer_state`]'s bytes back.
    fn restore_optimizer(&mut self, state: &[u8]) -> Result<(), ModelError>;
}

/// Trains the classifier `obj` (`parts` gives its arguments and its [`Trained`]) by its
/// `training` argument from where `spec` stands, saving it to its checkpoint and telling
/// `callbacks` after every epoch (one that says stop ends the training there).
pub fn train<O: Object, N: Network>(
    obj: &mut O,
    parts: fn(&mut O) -> (&Value, &mut Trained<N>),
    data: &Dataset<Xy<Array1<f32>, usize>>,
    spec: &mut TrainSpec,
    callbacks: &mut [&mut dyn Callback],
) -> Result<(), ModelError> {
    let (args, t) = parts(obj);
    let training = Training::from_args(&args["training"])?;
    if t.net.is_none() {
        let first = data.peek()?.ok_or_else(|| ModelError::Model(format!("{}: no elements to train on", N::NAME)))?;
        t.net = Some(N::build(args, first.x.len())?);
    }
    let mut run = training.start(data)?;
    run.resume_best(t.best.take());
    loop {
        let t = parts(obj).1;
        let Some(epoch) = run.epoch(t.net.as_mut().expect("built above"), spec)? else { break };
        if tell(callbacks, &epoch) == Control::Stop {
            // Over, as early stopping ends it: the next turn puts its best weights back.
            spec.epochs = spec.epoch;
        }
        t.spec = *spec;
        if let Some(path) = t.checkpoint.clone() {
            // Early stopping's memory (a copy of the best weights) matters only to a checkpoint.
            t.best = run.best_so_far();
            crate::save_object(&*obj, path)?;
        }
    }
    let t = parts(obj).1;
    t.spec = *spec;
    t.best = None;
    // Saved once more: early stopping may have put the best weights back.
    if let Some(path) = t.checkpoint.clone() {
        crate::save_object(&*obj, path)?;
    }
    Ok(())
}

/// Class scores for the rows of `xs`, by a trained network.
pub fn predict<N: Network>(t: &Trained<N>, xs: &Array2<f32>) -> Result<Vec<Array1<f32>>, ModelError> {
    let net = t.net.as_ref().ok_or(ModelError::NotTrained(N::NAME))?;
    if xs.nrows() == 0 {
        return Ok(Vec::new());
    }
    net.scores(xs)
}

/// Declares a framework's network classifier (`$name`, of the framework's [`Network`] `$net`):
/// the object (its arguments, a [`Trained`] network), `new`, `train_spec`, `checkpoint_to`,
/// its state and its [`Model`](super::Model) impl, the same for every framework.
#[cfg(any(feature = "torch", feature = "candle"))]
macro_rules! classifier {
    ($(#[$doc:meta])* $name:ident, $net:ty) => {
        $(#[$doc])*
        #[derive(crate::Object)]
        pub struct $name {
            args: serde_json::Value,
            meta: crate::objects::Meta,
            trained: crate::models::net::Trained<$net>,
        }

        impl $name {
            /// A classifier of these arguments (as `ObjectDef::new(..)?.build()` makes).
            pub fn new(args: serde_json::Value) -> $name {
                <$name as crate::objects::Build>::build(args, crate::objects::Meta::new())
            }

            /// Where its training stands.
            pub fn train_spec(&self) -> crate::models::TrainSpec {
                self.trained.spec
            }

            /// Where its network runs (`None` before it is built by a training or a load):
            /// the GPU its context gives its framework, else the CPU.
            pub fn placement(&self) -> Option<crate::models::placement::Placement> {
                self.trained.net.as_ref().map(crate::models::net::Network::placement)
            }

            /// Every parameter of its network by name, sorted, with its shape and values
            /// (empty before it is built): the weights, exact to the bit.
            pub fn parameters(&self) -> Result<crate::models::optim::Named, crate::models::ModelError> {
                self.trained.net.as_ref().map_or(Ok(Vec::new()), crate::models::net::Network::parameters)
            }

            /// Saves it to `path` after every epoch of its training (a killed training, loaded
            /// from there, resumes at the next epoch).
            pub fn checkpoint_to(&mut self, path: impl Into<std::path::PathBuf>) {
                self.trained.checkpoint = Some(path.into());
            }
        }

        impl crate::objects::Build for $name {
            type Args = serde_json::Value;
            fn build(args: serde_json::Value, meta: crate::objects::Meta) -> Self {
                $name { args, meta, trained: Default::default() }
            }
            fn save_state(&self, s: &mut crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.save(s)
            }
            fn load_state(&mut self, s: &crate::objects::State) -> Result<(), crate::objects::ObjectError> {
                self.trained.load(&self.args, s)
            }
        }

        impl crate::models::Model for $name {
            type X = crate::data::ndarray::Array1<f32>;
            type Y = usize;
            type P = crate::data::ndarray::Array1<f32>;

            /// Trains by its `training` procedure from where its [`TrainSpec`](crate::models::TrainSpec)
            /// stands, saving itself to its checkpoint (if set) after every epoch.
            fn train(&mut self, data: &crate::data::Dataset<crate::data::Xy<Self::X, usize>>, spec: &mut crate::models::TrainSpec) -> Result<(), crate::models::ModelError> {
                self.train_with(data, spec, &mut [])
            }

            /// Trains as `train` does, telling `callbacks` of every epoch (its losses).
            fn train_with(
                &mut self,
                data: &crate::data::Dataset<crate::data::Xy<Self::X, usize>>,
                spec: &mut crate::models::TrainSpec,
                callbacks: &mut [&mut dyn crate::models::callbacks::Callback],
            ) -> Result<(), crate::models::ModelError> {
                crate::models::net::train(self, |c| (&c.args, &mut c.trained), data, spec, callbacks)
            }

            fn predict(&self, x: &Self::X) -> Result<Self::P, crate::models::ModelError> {
                Ok(self.predict_all(vec![x.clone()])?.remove(0))
            }

            fn predict_all(&self, xs: Vec<Self::X>) -> Result<Vec<Self::P>, crate::models::ModelError> {
                if xs.is_empty() {
                    return Ok(Vec::new());
                }
                self.predict_batch(crate::data::Element::stack(xs)?)
            }

            fn predict_batch(&self, xs: crate::data::ndarray::Array2<f32>) -> Result<Vec<Self::P>, crate::models::ModelError> {
                crate::models::net::predict(&self.trained, &xs)
            }
        }
    };
}
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) use classifier;
