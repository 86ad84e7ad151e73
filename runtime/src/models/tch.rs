//! tch, PyTorch's part: a sequential network built from its definition's components (layers,
//! optimiser, loss: a [`NetDef`]; a training procedure), as a classifier ([`TchClassifier`]) or
//! a regressor ([`TchRegressor`]), and [`TchModel`], the same model around a network of the
//! user's own ([`TchNet`]). All are trained by the shared [`Training`](super::training::Training)
//! on the device its context gives `torch`, their weights, optimiser state and [`TrainSpec`] in
//! their own file.

use super::net::{dropout_mask, Input, Layer, Loss, NetDef, Network, Optimizer as Opt, Shape, Target, Targets};
use super::optim::{self, Named, Saved, Settings};
use super::placement::{placement, Placement};
use super::precision::Precision;
use super::ModelError;
use crate::data::ndarray::Array1;
use crate::data::{Batch as _, Element, Onto, TensorTree as _, ToTch};
use ::tch::nn::{self, Module, ModuleT};
use ::tch::{Device, Kind, Tensor};
use serde_json::Value;
use std::marker::PhantomData;

super::net::defined_model!(
    /// A classifier of rows of `f32` features: a sequential network. Its arguments are a
    /// [`NetDef`] (`layers`, `optimizer`, `loss`, `seed`; the inputs are the data's) and
    /// `training`, [`Training`](super::training::Training)'s settings. Each is reachable by
    /// selectors and sweeps: `optimizer.lr=0.01`, `layers=[...]`.
    TchClassifier,
    Net<Layers>,
    usize
);

super::net::defined_model!(
    /// A regression of rows of `f32` features to a value (`f32` targets): the classifier's
    /// network and arguments, its last layer `{"linear": 1}`, its loss MSE unless `loss` says
    /// otherwise. It predicts the network's outputs (one value each).
    TchRegressor,
    Net<Layers, f32>,
    f32
);

/// The network, its optimiser and where it runs, around a body (the definition's layers or the
/// user's own network), learning targets `Y`.
struct Net<B, Y = usize> {
    vs: nn::VarStore,
    body: B,
    opt: Optim,
    placement: Placement,
    inputs: i64,
    loss: Loss,
    precision: Precision,
    target: PhantomData<fn() -> Y>,
}

/// What a network of your own takes per element, in tch: any [`Input`] (rows, images, a pair,
/// a triple or a map of them), its batches made tensors on the network's device.
pub trait TchInput: Input<Batch: ToTch<Tensors: Onto>> {}
impl<X: Input<Batch: ToTch<Tensors: Onto>>> TchInput for X {}

/// The tensors a batch of `X` becomes: a tensor, or a tuple or map of them.
pub type Tensors<X> = <<X as Element>::Batch as ToTch>::Tensors;

/// What computes a [`Net`]'s scores.
trait Body: Sized {
    /// What it takes per element.
    type X: TchInput;
    /// Its model's name, as a classifier.
    const NAME: &'static str;
    /// Its model's name, learning values.
    const VALUES_NAME: &'static str = Self::NAME;
    /// The definition in a model's arguments (`who`: the model, in errors).
    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError>;
    /// Its layers under `p`, for `inputs` features.
    fn make(p: &nn::Path<'_>, args: &Value, def: &NetDef, inputs: usize, who: &str) -> Result<Self, ModelError>;
    /// The scores of a batch; `train` while training; `step`: the steps done (dropout's masks).
    fn forward(&self, x: &Tensors<Self::X>, train: bool, step: u64) -> Tensor;
}

/// A definition's layers.
struct Layers {
    layers: Vec<(Layer, Built)>,
    seed: u64,
}

/// A layer's module, for the layers that hold weights.
enum Built {
    Linear(nn::Linear),
    Conv(nn::Conv2D),
    Norm(nn::BatchNorm),
    Plain,
}

/// What a panic said (tch panics on a shape its kernels cannot take).
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    crate::sys::panic_message(p).unwrap_or_else(|| "(no message)".into())
}

fn dims(t: &Tensor) -> Vec<usize> {
    t.size().iter().map(|&d| d as usize).collect()
}

/// A tensor's name, shape and values, read on the CPU.
fn named(who: &str, name: &str, t: &Tensor) -> Result<(String, Vec<usize>, Vec<f32>), ModelError> {
    let values = Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1))
        .map_err(model_error(who, "reading a tensor"))?;
    Ok((name.to_string(), dims(t), values))
}

/// The tch device of a placement, if this libtorch can use it.
fn device_of(p: Placement, who: &str) -> Result<Device, ModelError> {
    match p {
        Placement::Cpu => Ok(Device::Cpu),
        Placement::Cuda { cuda, .. } if (cuda as i64) < ::tch::Cuda::device_count() => Ok(Device::Cuda(cuda)),
        Placement::Cuda { .. } => Err(ModelError::Model(format!(
            "{who}: the context gives torch {p}, but libtorch sees {} CUDA devices here (a libtorch without CUDA, or CUDA started before the context was set)",
            ::tch::Cuda::device_count()
        ))),
    }
}

fn model_error<'a>(who: &'a str, what: &'a str) -> impl Fn(::tch::TchError) -> ModelError + 'a {
    move |e| ModelError::Model(format!("{who}: {what}: {e}"))
}

impl Body for Layers {
    type X = Array1<f32>;
    const NAME: &'static str = "TchClassifier";
    const VALUES_NAME: &'static str = "TchRegressor";

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::from_args(args, who)
    }

    fn make(root: &nn::Path<'_>, _: &Value, def: &NetDef, inputs: usize, who: &str) -> Result<Layers, ModelError> {
        let shapes = def.shapes(inputs, who)?;
        let mut layers = Vec::new();
        for (at, (l, s)) in def.layers.iter().zip(&shapes).enumerate() {
            let path = root / format!("layer{at}");
            let built = match (*l, *s) {
                (Layer::Linear(n), _) => Built::Linear(nn::linear(path, s.len() as i64, n as i64, Default::default())),
                (Layer::Conv2d { channels, kernel, stride, padding }, Shape::Image([c, _, _])) => {
                    let config =
                        nn::ConvConfig { stride: stride as i64, padding: padding as i64, ..Default::default() };
                    Built::Conv(nn::conv2d(path, c as i64, channels as i64, kernel as i64, config))
                }
                (Layer::BatchNorm, Shape::Image([c, _, _])) => {
                    Built::Norm(nn::batch_norm2d(path, c as i64, Default::default()))
                }
                (Layer::BatchNorm, Shape::Flat(n)) => Built::Norm(nn::batch_norm1d(path, n as i64, Default::default())),
                _ => Built::Plain,
            };
            layers.push((*l, built));
        }
        Ok(Layers { layers, seed: def.seed })
    }

    fn forward(&self, x: &Tensor, train: bool, step: u64) -> Tensor {
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
                    let mask = dropout_mask(self.seed, at, step, t.numel(), p);
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
}

/// A network of your own, in tch: its layers, built from its model's arguments, and its
/// forward pass. [`TchModel`] gives it everything [`TchClassifier`] has.
///
/// ```no_run
/// use dryml::models::tch::{TchModel, TchNet};
/// use tch::{nn, nn::Module, Tensor};
///
/// struct Cnn { conv: nn::Conv2D, out: nn::Linear }
///
/// impl TchNet for Cnn {
///     const NAME: &'static str = "Cnn";
///     fn build(p: &nn::Path<'_>, args: &dryml::serde_json::Value) -> Result<Cnn, String> {
///         let ch = args["channels"].as_i64().ok_or("`channels` must be a number")?;
///         let conv = nn::conv2d(p / "conv", 1, ch, 3, nn::ConvConfig { padding: 1, ..Default::default() });
///         Ok(Cnn { conv, out: nn::linear(p / "out", ch * 16, 10, Default::default()) })
///     }
///     fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
///         xs.view([-1, 1, 8, 8]).apply(&self.conv).relu().max_pool2d_default(2).flatten(1, -1).apply(&self.out)
///     }
/// }
///
/// let model = TchModel::<Cnn>::new(dryml::serde_json::json!({"channels": 8, "training": {"epochs": 5}}));
/// ```
///
/// A network takes rows of `f32` features unless it says otherwise: `TchNet<X>` takes any
/// [`TchInput`] `X`, its batch as the tensors `X`'s batch becomes. Two inputs, an image and a
/// row, as a pair (a map by name works alike, as a `BTreeMap<String, Tensor>`):
///
/// ```no_run
/// use dryml::data::ndarray::{Array1, Array3};
/// use dryml::models::tch::{TchModel, TchNet};
/// use tch::{nn, nn::Module, Tensor};
///
/// struct Both { conv: nn::Conv2D, out: nn::Linear }
///
/// impl TchNet<(Array3<f32>, Array1<f32>)> for Both {
///     const NAME: &'static str = "Both";
///     fn build(p: &nn::Path<'_>, _: &dryml::serde_json::Value) -> Result<Both, String> {
///         let conv = nn::conv2d(p / "conv", 1, 4, 3, nn::ConvConfig { padding: 1, ..Default::default() });
///         Ok(Both { conv, out: nn::linear(p / "out", 4 * 16 + 3, 10, Default::default()) })
///     }
///     fn forward_t(&self, (image, row): &(Tensor, Tensor), _train: bool) -> Tensor {
///         let seen = image.apply(&self.conv).relu().max_pool2d_default(2).flatten(1, -1);
///         Tensor::cat(&[seen, row.shallow_clone()], 1).apply(&self.out)
///     }
/// }
///
/// let model = TchModel::<Both, usize, (Array3<f32>, Array1<f32>)>::new(dryml::serde_json::json!({}));
/// ```
pub trait TchNet<X: TchInput = Array1<f32>>: 'static {
    /// The name its models are saved under (a repo's type name), one per network.
    const NAME: &'static str;
    /// The layers, their weights made under `p` (so dryml saves, moves and optimises them),
    /// from the model's arguments (all of them: its own keys beside `optimizer`, `loss`,
    /// `seed` and `training`).
    fn build(p: &nn::Path<'_>, args: &Value) -> Result<Self, String>
    where
        Self: Sized;
    /// The scores (logits, or values for `"loss": "mse"`) of a batch (rows `[n, features]`
    /// by default; each leaf of `X` with the batch's leading axis); `train` while training
    /// (dropout, batch norm).
    fn forward_t(&self, xs: &Tensors<X>, train: bool) -> Tensor;
}

/// A [`TchNet`] as a [`Net`]'s body.
struct Own<N, X>(N, PhantomData<fn() -> X>);

impl<X: TchInput, N: TchNet<X>> Body for Own<N, X> {
    type X = X;
    const NAME: &'static str = N::NAME;

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::training_parts(args, who)
    }

    fn make(p: &nn::Path<'_>, args: &Value, _: &NetDef, _: usize, _: &str) -> Result<Own<N, X>, ModelError> {
        N::build(p, args).map(|n| Own(n, PhantomData)).map_err(|e| ModelError::Model(format!("{}: {e}", N::NAME)))
    }

    fn forward(&self, x: &Tensors<X>, train: bool, _: u64) -> Tensor {
        self.0.forward_t(x, train)
    }
}

impl<B: Body, Y: Target> Network for Net<B, Y> {
    const NAME: &'static str = if Y::CLASS { B::NAME } else { B::VALUES_NAME };

    /// The network for `inputs` features, its weights seeded.
    fn build(args: &Value, inputs: usize) -> Result<Net<B, Y>, ModelError> {
        let def = B::definition(args, Self::NAME)?.for_target::<Y>(args);
        let placement = placement("torch");
        let device = device_of(placement, Self::NAME)?;
        // Seeded on the CPU, then moved: the same initial weights on every device. libtorch's
        // generator is the process's, so one seeded build at a time: networks built on several
        // threads at once (tests, a user's own threads) each get their seed's weights.
        static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
        ::tch::manual_seed(def.seed as i64);
        let mut vs = nn::VarStore::new(Device::Cpu);
        let body = B::make(&vs.root(), args, &def, inputs, Self::NAME)?;
        drop(seeded);
        vs.set_device(device);
        let opt = Optim::new(&vs, Settings::of(&def), Self::NAME);
        let (loss, precision) = (def.loss, def.precision);
        Ok(Net { vs, body, opt, placement, inputs: inputs as i64, loss, precision, target: PhantomData })
    }

    fn inputs(&self) -> usize {
        self.inputs as usize
    }

    fn scores(&self, x: &<B::X as Element>::Batch) -> Result<Vec<Array1<f32>>, ModelError> {
        self.check(x)?;
        let _guard = ::tch::no_grad_guard();
        let scores = self.forward(&self.tensors(x)?, x.batch_len(), false)?;
        let width = scores.size()[1].max(1) as usize;
        let flat: Vec<f32> = Vec::<f32>::try_from(scores.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1))
            .map_err(model_error(Self::NAME, "reading the scores"))?;
        Ok(flat.chunks(width).map(|c| Array1::from_vec(c.to_vec())).collect())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.opt.params.iter().map(|(name, p)| named(Self::NAME, name, p)).collect()
    }

    fn optimizer_state(&self) -> Result<Vec<u8>, ModelError> {
        self.opt.save()
    }

    fn restore_optimizer(&mut self, state: &[u8]) -> Result<(), ModelError> {
        self.opt.restore(state)
    }
}

impl<B: Body, Y: Target> Net<B, Y> {
    /// The body over a batch, its scores `[n, outputs]` (a user's network is checked); `train`:
    /// dropout drops and batch norm learns its statistics.
    fn forward(&self, x: &Tensors<B::X>, n: usize, train: bool) -> Result<Tensor, ModelError> {
        let n = n as i64;
        let in_force = precision::InForce::on(self.precision, self.vs.device())?;
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.body.forward(x, train, self.opt.step)))
            .map_err(|p| {
                ModelError::Model(format!("{}: the forward pass panicked: {}", Self::NAME, panic_text(&*p)))
            })?;
        drop(in_force);
        // Autocast's scores are bf16: the loss and the reader take them in FP32, as PyTorch's
        // cross-entropy under autocast does.
        let out = if out.kind() == Kind::BFloat16 { out.to_kind(Kind::Float) } else { out };
        match out.size().as_slice() {
            [rows, _] if *rows == n => Ok(out),
            dims => Err(ModelError::Model(format!(
                "{}: the forward pass gave a tensor of shape {dims:?} for {n} elements; it must give [{n}, outputs]",
                Self::NAME
            ))),
        }
    }

    /// A batch as tensors on the network's device (rows: one `[n, width]` tensor).
    fn tensors(&self, x: &<B::X as Element>::Batch) -> Result<Tensors<B::X>, ModelError> {
        x.to_tch()?.onto(&self.vs.device()).map_err(model_error(Self::NAME, "moving a batch to its device"))
    }

    fn check(&self, x: &<B::X as Element>::Batch) -> Result<(), ModelError> {
        let features = <B::X as Input>::batch_features(x);
        if features as i64 != self.inputs {
            return Err(ModelError::Model(format!(
                "{}: elements have {features} features; the network takes {}",
                Self::NAME,
                self.inputs
            )));
        }
        Ok(())
    }

    fn loss_of(&self, x: &<B::X as Element>::Batch, y: &Y::Batch, train: bool) -> Result<Tensor, ModelError> {
        self.check(x)?;
        let out = self.forward(&self.tensors(x)?, x.batch_len(), train)?;
        let targets = Y::targets(y);
        targets.check(out.size()[1] as usize, self.loss, Self::NAME)?;
        self.loss_from(&out, &self.targets_on_device(targets))
    }

    /// Targets as a tensor on the network's device: classes (`Int64`), or values `[n, width]`.
    fn targets_on_device(&self, targets: Targets) -> Tensor {
        let t = match targets {
            Targets::Classes(c) => Tensor::from_slice(&c.iter().map(|&c| c as i64).collect::<Vec<_>>()),
            Targets::Values { values, width } => Tensor::from_slice(&values).view([-1, width as i64]),
        };
        t.to_device(self.vs.device())
    }

    /// The loss of scores `out` against targets from [`Net::targets_on_device`].
    fn loss_from(&self, out: &Tensor, y: &Tensor) -> Result<Tensor, ModelError> {
        Self::caught("the loss", || match (y.kind(), self.loss) {
            (Kind::Int64, Loss::Mse) => {
                out.mse_loss(&y.one_hot(out.size()[1]).to_kind(Kind::Float), ::tch::Reduction::Mean)
            }
            (Kind::Int64, Loss::CrossEntropy) => out.cross_entropy_for_logits(y),
            _ => out.mse_loss(y, ::tch::Reduction::Mean),
        })
    }

    /// The gradients of `loss`, then the update.
    fn learn(&mut self, loss: &Tensor) -> Result<(), ModelError> {
        // The backward pass's matmuls in TF32 too; autocast is for the forward pass only.
        let tf32 = if self.precision == Precision::Tf32 { Precision::Tf32 } else { Precision::Fp32 };
        let _in_force = precision::InForce::on(tf32, self.vs.device())?;
        let opt = &mut self.opt;
        Self::caught("the backward pass", || opt.backward_step(loss))
    }

    /// `f`'s value; where tch panics (its calls unwrap libtorch's errors: out of memory, a loss
    /// with no gradient), an error naming `what`, which the batching loops can read.
    fn caught<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, ModelError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(|p| ModelError::Model(format!("{}: {what} failed: {}", Self::NAME, panic_text(&*p))))
    }
}

super::net::own_model!(
    /// A model around a network of your own ([`TchNet`]): a classifier, or a regression with
    /// `Y` values (`f32`, `Array1<f32>`). It has everything [`TchClassifier`] has: the shared training by its `training` argument, the optimiser,
    /// loss and seed of its `optimizer`, `loss` and `seed`, checkpoints and a resume to the
    /// bit, the context's device, [`eval`](super::eval), the repo, sweeps, `%%compute` and
    /// Slurm. The network's own arguments sit beside those, so selectors and sweeps reach them.
    /// Saved under [`TchNet::NAME`]; a process that has made none registers the type with
    /// [`TchModel::register`] before loading one by name.
    TchModel,
    TchNet,
    TchInput,
    Net<Own<N, X>, Y>
);

mod learner;
mod optimizer;

use optimizer::Optim;
mod precision;
#[cfg(all(test, feature = "linfa"))]
mod tests;
