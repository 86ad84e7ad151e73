//! A sequential network's definition as its object's arguments give it, the same for every
//! framework (its layers, loss, optimiser and seed), what it learns to give ([`Target`]: a
//! class, or values), what a network takes ([`Input`]: rows, images, several inputs), and what
//! the network models share: their training by the shared procedure, with a checkpoint after
//! every epoch, and their predictions. Each framework builds its own [`Network`] from the
//! definition.

use super::callbacks::{tell, Callback, Control};
use super::placement::Placement;
pub use super::precision::Precision;
use super::training::{BestSoFar, Learner, Training};
use super::{ModelError, TrainSpec};
use crate::data::ndarray::Array1;
use crate::data::{Batch as _, Dataset, Element, Xy};
use crate::objects::{ObjectError, State};
use crate::Object;
use serde_json::Value;
use std::path::PathBuf;

mod io;
mod layers;
pub use io::{own_name, Input, Target, Targets};
use layers::layer;
pub use layers::{dropout_mask, seeded_init, Shape};

/// One layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layer {
    /// Each element's flat features as an image: `[channels, height, width]`.
    Reshape([usize; 3]),
    /// A fully connected layer with this many outputs.
    Linear(usize),
    /// A 2-D convolution: output channels, a square kernel, its stride and zero padding.
    Conv2d {
        /// Output channels.
        channels: usize,
        /// The kernel's side.
        kernel: usize,
        /// The step between windows.
        stride: usize,
        /// Zeros added on each side.
        padding: usize,
    },
    /// Max pooling over square windows of this side (and stride).
    MaxPool(usize),
    /// Average pooling over square windows of this side (and stride).
    AvgPool(usize),
    /// Each element's features as one flat vector.
    Flatten,
    /// Zeroes each value with this probability while training (scaling the rest), seeded by the
    /// definition's seed and the step, so a resumed training draws the same masks.
    Dropout(f64),
    /// Batch normalisation (of the channels of images, or of flat features).
    BatchNorm,
    /// ReLU.
    Relu,
    /// tanh.
    Tanh,
    /// The logistic function.
    Sigmoid,
}

/// As the definition's JSON writes it (`{"linear":10}`, `"relu"`), for errors.
impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = match *self {
            Layer::Reshape(to) => serde_json::json!({ "reshape": to }),
            Layer::Linear(n) => serde_json::json!({ "linear": n }),
            Layer::Conv2d { channels, kernel, stride, padding } => {
                serde_json::json!({"conv2d": {"channels": channels, "kernel": kernel, "stride": stride, "padding": padding}})
            }
            Layer::MaxPool(k) => serde_json::json!({ "max_pool": k }),
            Layer::AvgPool(k) => serde_json::json!({ "avg_pool": k }),
            Layer::Dropout(p) => serde_json::json!({ "dropout": p }),
            Layer::Flatten => "flatten".into(),
            Layer::BatchNorm => "batch_norm".into(),
            Layer::Relu => "relu".into(),
            Layer::Tanh => "tanh".into(),
            Layer::Sigmoid => "sigmoid".into(),
        };
        write!(f, "{v}")
    }
}

/// What training minimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Cross-entropy of the outputs as logits against the class.
    CrossEntropy,
    /// Mean squared error of the outputs against the values (or the one-hot class).
    Mse,
}

/// Tensors by name as plain values (shape, then `f32`s in row-major order): one layout for
/// every framework's parameters and optimiser state, exact to the bit.
pub type Named = Vec<(String, Vec<usize>, Vec<f32>)>;

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
    /// The arithmetic of its matmuls and convolutions.
    pub precision: Precision,
}

impl NetDef {
    /// The definition in a network model's arguments (`who` names it in errors): `layers`
    /// (`[{"linear": 64}, "relu", {"linear": 3}]`, also `tanh`, `sigmoid`; for images
    /// `{"reshape": [1, 8, 8]}`, `{"conv2d": {"channels": 16, "kernel": 3, "stride": 1,
    /// "padding": 1}}`, `{"max_pool": 2}`, `{"avg_pool": 2}`, `"flatten"`; and
    /// `{"dropout": 0.5}`, `"batch_norm"`), `optimizer`
    /// (`{"type": "adam" | "adamw" | "sgd", "lr": 0.001, "momentum": 0.0, "weight_decay": 0.0}`),
    /// `loss` (`"cross_entropy"` or `"mse"`; by default the first for classes, the second for
    /// values, [`NetDef::for_target`]), `seed` (0) and `precision` ([`Precision`]).
    pub fn from_args(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        let err = |m: String| ModelError::Model(format!("{who}: {m}"));
        let list = args["layers"].as_array().ok_or_else(|| {
            err(format!(
                "`layers` must be a list, as [{{\"linear\": 64}}, \"relu\", {{\"linear\": 3}}], not {}",
                args["layers"]
            ))
        })?;
        let layers =
            list.iter().enumerate().map(|(at, l)| layer(at, l).map_err(&err)).collect::<Result<Vec<_>, _>>()?;
        if !matches!(layers.last(), Some(Layer::Linear(_))) {
            return Err(err("the last layer must be {\"linear\": N}, N the number of classes (or of values)".into()));
        }
        Ok(NetDef { layers, ..NetDef::training_parts(args, who)? })
    }

    /// The parts of a definition besides its layers (`optimizer`, `loss`, `seed`, `precision`),
    /// for a network whose layers its own code builds; `layers` is left empty.
    pub fn training_parts(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        let err = |m: String| ModelError::Model(format!("{who}: {m}"));
        let loss = match &args["loss"] {
            Value::Null => Loss::CrossEntropy,
            v if v == "cross_entropy" => Loss::CrossEntropy,
            v if v == "mse" => Loss::Mse,
            v => return Err(err(format!("`loss` must be \"cross_entropy\" or \"mse\", not {v}"))),
        };
        let o = &args["optimizer"];
        let number = |key: &str, default: f64| match &o[key] {
            Value::Null => Ok(default),
            v => v
                .as_f64()
                .filter(|x| *x >= 0.0)
                .ok_or_else(|| err(format!("optimizer `{key}` must be a non-negative number, not {v}"))),
        };
        let optimizer = match o["type"].as_str().unwrap_or("adam") {
            "adam" => Optimizer::Adam,
            "adamw" => Optimizer::AdamW,
            "sgd" => Optimizer::Sgd,
            other => return Err(err(format!("optimizer `{other}` is not adam, adamw or sgd"))),
        };
        let weight_decay = number("weight_decay", if optimizer == Optimizer::AdamW { 0.01 } else { 0.0 })?;
        Ok(NetDef {
            layers: Vec::new(),
            loss,
            optimizer,
            lr: number("lr", 1e-3)?,
            momentum: number("momentum", 0.0)?,
            weight_decay,
            seed: args["seed"].as_u64().unwrap_or(0),
            precision: Precision::from_arg(&args["precision"]).map_err(err)?,
        })
    }

    /// With the loss its targets call for where `args` names none: MSE for values.
    pub fn for_target<Y: Target>(mut self, args: &Value) -> NetDef {
        if args["loss"].is_null() && !Y::CLASS {
            self.loss = Loss::Mse;
        }
        self
    }

    /// The number of outputs (classes) of a definition with layers ([`NetDef::from_args`]'s).
    pub fn outputs(&self) -> usize {
        match self.layers.last() {
            Some(Layer::Linear(n)) => *n,
            _ => panic!("a definition without layers (NetDef::training_parts) says nothing of its outputs"),
        }
    }

    /// What each layer takes, for elements of `inputs` features, then what the last gives:
    /// one more shape than layers. An error names the first layer that cannot take what the
    /// one before gives.
    pub fn shapes(&self, inputs: usize, who: &str) -> Result<Vec<Shape>, ModelError> {
        let mut out = vec![Shape::Flat(inputs)];
        for (at, l) in self.layers.iter().enumerate() {
            let s = *out.last().expect("one at least");
            let bad = |m: String| ModelError::Model(format!("{who}: layer {at} ({l}) {m}"));
            let flat = || bad(format!("takes flat features, and gets {s}: add \"flatten\" before it"));
            let image =
                || bad(format!("takes images, and gets {s}: add {{\"reshape\": [channels, height, width]}} before it"));
            let next = match (*l, s) {
                (Layer::Reshape([c, h, w]), Shape::Flat(n)) if c * h * w == n => Shape::Image([c, h, w]),
                (Layer::Reshape(to), _) => {
                    return Err(bad(format!(
                        "makes images of {to:?} ({} values) from {s}",
                        to.iter().product::<usize>()
                    )))
                }
                (Layer::Linear(n), Shape::Flat(_)) => Shape::Flat(n),
                (Layer::Linear(_), _) => return Err(flat()),
                (Layer::Conv2d { channels, kernel, stride, padding }, Shape::Image([_, h, w])) => {
                    if kernel > h + 2 * padding || kernel > w + 2 * padding {
                        return Err(bad(format!("has a kernel of {kernel} for {s} padded by {padding}")));
                    }
                    Shape::Image([
                        channels,
                        (h + 2 * padding - kernel) / stride + 1,
                        (w + 2 * padding - kernel) / stride + 1,
                    ])
                }
                (Layer::MaxPool(k) | Layer::AvgPool(k), Shape::Image([c, h, w])) if k <= h && k <= w => {
                    Shape::Image([c, h / k, w / k])
                }
                (Layer::MaxPool(k) | Layer::AvgPool(k), Shape::Image(_)) => {
                    return Err(bad(format!("pools windows of {k} over {s}")))
                }
                (Layer::Conv2d { .. } | Layer::MaxPool(_) | Layer::AvgPool(_), Shape::Flat(_)) => return Err(image()),
                (Layer::Flatten, s) => Shape::Flat(s.len()),
                (Layer::Dropout(_) | Layer::BatchNorm | Layer::Relu | Layer::Tanh | Layer::Sigmoid, s) => s,
            };
            out.push(next);
        }
        Ok(out)
    }
}

/// What a network model of any framework keeps besides its definition: its network (once
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
            s.put_bytes(
                "optimizer",
                n.optimizer_state().map_err(|e| ObjectError::State("optimizer".into(), e.to_string()))?,
            );
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

/// What each framework's network gives its model.
pub trait Network: Learner<X: Input, Y: Target> + Sized {
    /// The model's name, for errors.
    const NAME: &'static str;
    /// The network its arguments define, for elements of `inputs` features, on the device its
    /// context gives it ([`super::placement::placement`]).
    fn build(args: &Value, inputs: usize) -> Result<Self, ModelError>;
    /// The features (values, all inputs together) each element has.
    fn inputs(&self) -> usize;
    /// The outputs for a batch (class scores, or values).
    fn scores(&self, x: &<Self::X as Element>::Batch) -> Result<Vec<Array1<f32>>, ModelError>;
    /// Where it runs.
    fn placement(&self) -> Placement;
    /// Every parameter by name, sorted, with its shape and values.
    fn parameters(&self) -> Result<Named, ModelError>;
    /// The optimiser's state ([`super::optim::Saved`]'s bytes).
    fn optimizer_state(&self) -> Result<Vec<u8>, ModelError>;
    /// Puts [`Network::optimizer_state`]'s bytes back.
    fn restore_optimizer(&mut self, state: &[u8]) -> Result<(), ModelError>;
}

/// Trains the network model `obj` (`parts` gives its arguments and its [`Trained`]) by its
/// `training` argument from where `spec` stands, saving it to its checkpoint and telling
/// `callbacks` after every epoch (one that says stop ends the training there), and the run an
/// experiment asked for ([`super::tensorboard::ambient`]).
pub fn train<O: Object, N: Network>(
    obj: &mut O,
    parts: fn(&mut O) -> (&Value, &mut Trained<N>),
    data: &Dataset<Xy<N::X, N::Y>>,
    spec: &mut TrainSpec,
    callbacks: &mut [&mut dyn Callback],
) -> Result<(), ModelError> {
    // Trained again: how it was made is this run's, recorded when it is next stored.
    obj.meta_mut().provenance = None;
    let (args, t) = parts(obj);
    let training = Training::from_args(&args["training"])?;
    if t.net.is_none() {
        let first = data.peek()?.ok_or_else(|| ModelError::Model(format!("{}: no elements to train on", N::NAME)))?;
        t.net = Some(N::build(args, first.x.features())?);
    }
    let mut run = training.start(data)?;
    run.resume_best(t.best.take());
    let mut ambient = super::tensorboard::ambient_run(&*obj);
    let mut tracked = super::tracking::Tracking::start(&*obj);
    // Each shortened to this call's lifetime, which the ambient runs share.
    let mut callbacks: Vec<&mut dyn Callback> = callbacks.iter_mut().map(|c| &mut **c as &mut dyn Callback).collect();
    callbacks.extend(ambient.as_mut().map(|tb| tb as &mut dyn Callback));
    callbacks.extend(tracked.as_mut().map(|t| t as &mut dyn Callback));
    loop {
        let t = parts(obj).1;
        let Some(epoch) = run.epoch(t.net.as_mut().expect("built above"), spec)? else { break };
        let net = t.net.as_ref().expect("built above");
        tell_weights(&mut callbacks, epoch.epoch, || net.parameters());
        if tell(&mut callbacks, &epoch) == Control::Stop {
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
    drop(callbacks);
    if let Some(t) = tracked {
        t.finish(&*obj, spec.epoch);
    }
    Ok(())
}

/// Hands the network's weights after `epoch` to the callbacks that want them; read (by
/// `weights`) only when one does. A failed read skips them: the training goes on.
fn tell_weights(callbacks: &mut [&mut dyn Callback], epoch: u64, weights: impl FnOnce() -> Result<Named, ModelError>) {
    if !callbacks.iter().any(|c| c.wants_weights()) {
        return;
    }
    if let Ok(w) = weights() {
        for c in callbacks.iter_mut().filter(|c| c.wants_weights()) {
            c.on_weights(epoch, &w);
        }
    }
}

/// The outputs (class scores, or values) for the elements of the batch `xs`, by a trained
/// network.
pub fn predict<N: Network>(t: &Trained<N>, xs: &<N::X as Element>::Batch) -> Result<Vec<Array1<f32>>, ModelError> {
    let net = t.net.as_ref().ok_or(ModelError::NotTrained(N::NAME))?;
    if xs.batch_len() == 0 {
        return Ok(Vec::new());
    }
    net.scores(xs)
}

#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
mod shells;
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) use shells::framework_models;
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub(crate) use shells::{defined_model, own_model};

#[cfg(test)]
mod tests;
