//! candle, pure Rust (no libtorch): the same network classifier and regressor as the tch
//! ones, from the same definition ([`NetDef`]), and [`CandleModel`] around a network of the
//! user's own ([`CandleNet`]), trained by the same [`Training`](super::training::Training), their
//! weights, optimiser state and [`TrainSpec`] in their own file. They run on the device the
//! context gives `candle`: a GPU through candle's CUDA backend (the `candle-cuda` feature);
//! without it, a context that gives `candle` a GPU is an error, not a silent CPU.

use super::net::{
    dropout_mask, seeded_init, Input, Layer, Loss, NetDef, Network, Optimizer as Opt, Shape, Target, Targets,
};
use super::optim::{self, Named, Saved, Settings};
use super::placement::{placement, Placement};
use super::precision::Precision;
use super::ModelError;
use crate::data::ndarray::Array1;
use crate::data::{Batch as _, CandleOnto, Element, TensorTree as _, ToCandle};
use candle_core::{DType, Device, Module, ModuleT, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use serde_json::Value;
use std::marker::PhantomData;

super::net::defined_model!(
    /// A classifier of rows of `f32` features: a sequential network in candle. Its arguments
    /// are the tch classifier's ([`NetDef`] and `training`).
    CandleClassifier,
    Net<Layers>,
    usize
);

super::net::defined_model!(
    /// A regression of rows of `f32` features to a value (`f32` targets), in candle: the
    /// classifier's network and arguments, its last layer `{"linear": 1}`, its loss MSE unless
    /// `loss` says otherwise.
    CandleRegressor,
    Net<Layers, f32>,
    f32
);

/// The network, its optimiser and its variables, around a body (the definition's layers or the
/// user's own network), learning targets `Y`.
struct Net<B, Y = usize> {
    def: NetDef,
    vars: VarMap,
    body: B,
    opt: Optim,
    inputs: usize,
    placement: Placement,
    device: Device,
    target: PhantomData<fn() -> Y>,
}

/// What a network of your own takes per element, in candle: any [`Input`] (rows, images, a
/// pair, a triple or a map of them), its batches made tensors.
pub trait CandleInput: Input<Batch: ToCandle<Tensors: CandleOnto>> {}
impl<X: Input<Batch: ToCandle<Tensors: CandleOnto>>> CandleInput for X {}

/// The tensors a batch of `X` becomes: a tensor, or a tuple or map of them.
pub type Tensors<X> = <<X as Element>::Batch as ToCandle>::Tensors;

/// What computes a [`Net`]'s scores.
trait Body: Sized {
    /// What it takes per element.
    type X: CandleInput;
    /// Its model's name, as a classifier.
    const NAME: &'static str;
    /// Its model's name, learning values.
    const VALUES_NAME: &'static str = Self::NAME;
    /// The definition in a model's arguments (`who`: the model, in errors).
    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError>;
    /// Its layers in `vars` on `device`, for `inputs` features, seeded from the definition's seed.
    fn make(
        vars: &mut VarMap,
        device: &Device,
        args: &Value,
        def: &NetDef,
        inputs: usize,
        who: &'static str,
    ) -> Result<Self, ModelError>;
    /// The scores of a batch; `train` while training; `step`: the steps done (dropout's masks).
    fn forward(&self, x: &Tensors<Self::X>, train: bool, def: &NetDef, step: u64) -> candle_core::Result<Tensor>;
}

/// A definition's layers.
struct Layers(Vec<(Layer, Built)>);

/// A layer's module, for the layers that hold weights.
enum Built {
    Linear(candle_nn::Linear),
    Conv(candle_nn::Conv2d),
    Norm(candle_nn::BatchNorm),
    Plain,
}

/// A tensor's name, shape and values.
fn named(who: &'static str, name: &str, t: &Tensor) -> Result<(String, Vec<usize>, Vec<f32>), ModelError> {
    let values = t.flatten_all().and_then(|f| f.to_vec1::<f32>()).map_err(candle_error(who, "reading a tensor"))?;
    Ok((name.to_string(), t.dims().to_vec(), values))
}

fn candle_error(who: &'static str, what: &'static str) -> impl Fn(candle_core::Error) -> ModelError {
    move |e| ModelError::Model(format!("{who}: {what}: {e}"))
}

impl Body for Layers {
    type X = Array1<f32>;
    const NAME: &'static str = "CandleClassifier";
    const VALUES_NAME: &'static str = "CandleRegressor";

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::from_args(args, who)
    }

    /// Its weights seeded (candle cannot seed its own).
    fn make(
        vars: &mut VarMap,
        device: &Device,
        _: &Value,
        def: &NetDef,
        inputs: usize,
        who: &'static str,
    ) -> Result<Layers, ModelError> {
        let vb = VarBuilder::from_varmap(vars, DType::F32, device);
        let mut rng = fastrand::Rng::with_seed(def.seed);
        let shapes = def.shapes(inputs, who)?;
        let mut layers = Vec::new();
        for (at, (l, s)) in def.layers.iter().zip(&shapes).enumerate() {
            let vb = vb.pp(format!("layer{at}"));
            // Weights of `dims`, seeded for `fan_in` inputs, with a bias per output.
            let mut seed = |dims: Vec<usize>, fan_in: usize| {
                let outputs = dims[0];
                let (w, b) = seeded_init(fan_in, dims.iter().product(), outputs, &mut rng);
                let set = |vars: &mut VarMap, name: String, t: candle_core::Result<Tensor>| {
                    t.and_then(|t| vars.set_one(name, t))
                };
                set(vars, format!("layer{at}.weight"), Tensor::from_vec(w, dims, device))?;
                set(vars, format!("layer{at}.bias"), Tensor::from_vec(b, outputs, device))
            };
            let built = match (*l, *s) {
                (Layer::Linear(n), _) => {
                    let lin = candle_nn::linear(s.len(), n, vb).map_err(candle_error(who, "building a layer"))?;
                    seed(vec![n, s.len()], s.len()).map_err(candle_error(who, "seeding a layer"))?;
                    Built::Linear(lin)
                }
                (Layer::Conv2d { channels, kernel, stride, padding }, Shape::Image([c, _, _])) => {
                    let config = candle_nn::Conv2dConfig { padding, stride, ..Default::default() };
                    let conv = candle_nn::conv2d(c, channels, kernel, config, vb)
                        .map_err(candle_error(who, "building a layer"))?;
                    seed(vec![channels, c, kernel, kernel], c * kernel * kernel)
                        .map_err(candle_error(who, "seeding a layer"))?;
                    Built::Conv(conv)
                }
                (Layer::BatchNorm, Shape::Image([c, _, _]) | Shape::Flat(c)) => Built::Norm(
                    candle_nn::batch_norm(c, candle_nn::BatchNormConfig::default(), vb)
                        .map_err(candle_error(who, "building a layer"))?,
                ),
                _ => Built::Plain,
            };
            layers.push((*l, built));
        }
        Ok(Layers(layers))
    }

    fn forward(&self, x: &Tensor, train: bool, def: &NetDef, step: u64) -> candle_core::Result<Tensor> {
        let mut t = x.clone();
        // candle's CPU has no bf16 matmul: there the layers compute FP32, as under TF32.
        let bf16 = def.precision == Precision::Bf16 && x.device().is_cuda();
        for (at, (l, built)) in self.0.iter().enumerate() {
            t = match (*l, built) {
                (Layer::Reshape([c, h, w]), _) => t.dim(0).and_then(|n| t.reshape((n, c, h, w))),
                (_, Built::Linear(m)) if bf16 => linear_bf16(m, &t),
                (_, Built::Conv(m)) if bf16 => conv_bf16(m, &t),
                (_, Built::Linear(m)) => m.forward(&t),
                (_, Built::Conv(m)) => m.forward(&t),
                (_, Built::Norm(m)) => m.forward_t(&t, train),
                (Layer::MaxPool(k), _) => t.max_pool2d(k),
                (Layer::AvgPool(k), _) => t.avg_pool2d(k),
                (Layer::Flatten, _) => t.flatten_from(1),
                (Layer::Dropout(p), _) if train && p > 0.0 => {
                    let mask = dropout_mask(def.seed, at, step, t.elem_count(), p);
                    Tensor::from_vec(mask, t.shape(), t.device()).and_then(|m| &t * m)
                }
                (Layer::Relu, _) => t.relu(),
                (Layer::Tanh, _) => t.tanh(),
                (Layer::Sigmoid, _) => candle_nn::ops::sigmoid(&t),
                (Layer::Dropout(_) | Layer::Linear(_) | Layer::Conv2d { .. } | Layer::BatchNorm, _) => Ok(t.clone()),
            }?;
        }
        Ok(t)
    }
}

/// The candle device of a placement: a GPU through candle's CUDA backend, where it is built.
fn device_of(p: Placement, who: &str) -> Result<Device, ModelError> {
    match p {
        Placement::Cpu => Ok(Device::Cpu),
        Placement::Cuda { cuda, .. } if cfg!(feature = "candle-cuda") => Device::new_cuda(cuda).map_err(|e| {
            ModelError::Model(format!("{who}: the context gives candle {p}, but CUDA did not open it here: {e}"))
        }),
        Placement::Cuda { .. } => Err(ModelError::Model(format!(
            "{who}: the context gives candle {p}, but dryml's candle is built without CUDA (the `candle-cuda` feature, which the set-up adds where an NVIDIA driver is): give candle no GPU (its models then run on the CPU), or train the network with tch"
        ))),
    }
}

/// A network of your own, in candle: its layers, made from its model's arguments with a
/// `VarBuilder` (so dryml saves and optimises them), and its forward pass. [`CandleModel`]
/// gives it everything [`CandleClassifier`] has. candle cannot seed its own initialisation,
/// so dryml draws every variable again from the definition's seed once the network is made
/// (PyTorch's ±1/√fan_in; a bias takes its weight's fan_in; constants, as batch norm's, stay).
///
/// A network takes rows of `f32` features unless it says otherwise: `CandleNet<X>` takes any
/// [`CandleInput`] `X` (an image, a pair, a triple or a map of inputs), its batch as the tensors
/// `X`'s batch becomes, as [`TchNet`](super::tch::TchNet) does.
pub trait CandleNet<X: CandleInput = Array1<f32>>: 'static {
    /// The name its models are saved under (a repo's type name), one per network.
    const NAME: &'static str;
    /// The layers, their variables made through `vb`, from the model's arguments (all of
    /// them: its own keys beside `optimizer`, `loss`, `seed` and `training`).
    fn build(vb: VarBuilder<'_>, args: &Value) -> Result<Self, String>
    where
        Self: Sized;
    /// The scores of a batch (rows `[n, features]` by default; each leaf of `X` with the
    /// batch's leading axis); `train` while training.
    fn forward_t(&self, xs: &Tensors<X>, train: bool) -> candle_core::Result<Tensor>;
}

/// A [`CandleNet`] as a [`Net`]'s body.
struct Own<N, X>(N, PhantomData<fn() -> X>);

impl<X: CandleInput, N: CandleNet<X>> Body for Own<N, X> {
    type X = X;
    const NAME: &'static str = N::NAME;

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::training_parts(args, who)
    }

    fn make(
        vars: &mut VarMap,
        device: &Device,
        args: &Value,
        def: &NetDef,
        _: usize,
        who: &'static str,
    ) -> Result<Own<N, X>, ModelError> {
        if def.precision == Precision::Bf16 {
            return Err(ModelError::Model(format!(
                "{who}: `precision` \"bf16\" casts a definition's layers; candle has no autocast, so a network of your own computes in the dtypes its forward pass gives (cast there, as `xs.to_dtype(DType::BF16)`), or use \"tf32\""
            )));
        }
        let net = N::build(VarBuilder::from_varmap(vars, DType::F32, device), args)
            .map_err(|e| ModelError::Model(format!("{}: {e}", N::NAME)))?;
        reseed(vars, def.seed).map_err(candle_error(who, "seeding the network"))?;
        Ok(Own(net, PhantomData))
    }

    fn forward(&self, x: &Tensors<X>, train: bool, _: &NetDef, _: u64) -> candle_core::Result<Tensor> {
        self.0.forward_t(x, train)
    }
}

/// Draws every variable that is not a constant again from `seed`, by name order: weights
/// (rank 2 and up) uniform in ±1/√fan_in, a rank-1 variable beside a `weight` with that
/// weight's fan_in (a bias).
fn reseed(vars: &mut VarMap, seed: u64) -> candle_core::Result<()> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut all: Vec<(String, Var)> =
        vars.data().lock().expect("candle's variables").iter().map(|(n, v)| (n.clone(), v.clone())).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let fan_in = |dims: &[usize]| dims[1..].iter().product::<usize>().max(1);
    for (name, var) in &all {
        let t = var.as_tensor();
        let constant = t.flatten_all()?.to_vec1::<f32>()?.windows(2).all(|w| w[0] == w[1]);
        let fan = match t.dims() {
            d if d.len() >= 2 => Some(fan_in(d)),
            _ => name
                .strip_suffix("bias")
                .and_then(|p| all.iter().find(|(n, _)| *n == format!("{p}weight")))
                .map(|(_, w)| fan_in(w.dims())),
        };
        if let (false, Some(fan)) = (constant, fan) {
            let (values, _) = seeded_init(fan, t.elem_count(), 0, &mut rng);
            var.set(&Tensor::from_vec(values, t.dims(), t.device())?)?;
        }
    }
    Ok(())
}

impl<B: Body, Y: Target> Network for Net<B, Y> {
    const NAME: &'static str = if Y::CLASS { B::NAME } else { B::VALUES_NAME };

    /// The network for `inputs` features, its weights seeded (candle cannot seed its own).
    fn build(args: &Value, inputs: usize) -> Result<Net<B, Y>, ModelError> {
        let def = B::definition(args, Self::NAME)?.for_target::<Y>(args);
        let placement = placement("candle");
        let device = device_of(placement, Self::NAME)?;
        let mut vars = VarMap::new();
        let body = B::make(&mut vars, &device, args, &def, inputs, Self::NAME)?;
        let opt = Optim::new(&vars, Settings::of(&def), Self::NAME)
            .map_err(candle_error(Self::NAME, "building the optimizer"))?;
        Ok(Net { def, vars, body, opt, inputs, placement, device, target: PhantomData })
    }

    fn inputs(&self) -> usize {
        self.inputs
    }

    fn scores(&self, x: &<B::X as Element>::Batch) -> Result<Vec<Array1<f32>>, ModelError> {
        let scores =
            self.forward(x, false)?.to_vec2::<f32>().map_err(candle_error(Self::NAME, "reading the scores"))?;
        Ok(scores.into_iter().map(Array1::from_vec).collect())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.opt.params.iter().map(|(name, p)| named(Self::NAME, name, p.as_tensor())).collect()
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
    fn forward(&self, x: &<B::X as Element>::Batch, train: bool) -> Result<Tensor, ModelError> {
        self.check(x)?;
        self.forward_tensors(&self.tensors(x)?, x.batch_len(), train)
    }

    /// That a batch has the network's features.
    fn check(&self, x: &<B::X as Element>::Batch) -> Result<(), ModelError> {
        let features = <B::X as Input>::batch_features(x);
        if features != self.inputs {
            return Err(ModelError::Model(format!(
                "{}: elements have {features} features; the network takes {}",
                Self::NAME,
                self.inputs
            )));
        }
        Ok(())
    }

    /// A batch as tensors on the network's device.
    fn tensors(&self, x: &<B::X as Element>::Batch) -> Result<Tensors<B::X>, ModelError> {
        x.to_candle()?.onto(&self.device).map_err(candle_error(Self::NAME, "moving a batch to its device"))
    }

    /// [`Net::forward`] of a batch's tensors, `n` elements.
    fn forward_tensors(&self, t: &Tensors<B::X>, n: usize, train: bool) -> Result<Tensor, ModelError> {
        let _tf32 = Tf32::on(self.def.precision);
        let out = self
            .body
            .forward(t, train, &self.def, self.opt.step)
            .map_err(|e| ModelError::Model(format!("{}: the forward pass: {e}", Self::NAME)))?;
        match out.dims() {
            [rows, _] if *rows == n => Ok(out),
            dims => Err(ModelError::Model(format!(
                "{}: the forward pass gave a tensor of shape {dims:?} for {n} elements; it must give [{n}, outputs]",
                Self::NAME
            ))),
        }
    }

    fn loss_of(&self, x: &<B::X as Element>::Batch, y: &Y::Batch, train: bool) -> Result<Tensor, ModelError> {
        let out = self.forward(x, train)?;
        let targets = Y::targets(y);
        targets.check(out.dims()[1], self.def.loss, Self::NAME)?;
        self.loss_from(&out, &self.targets_on_device(targets)?)
    }

    /// Targets as a tensor on the network's device: classes (`u32`), or values `[n, width]`.
    fn targets_on_device(&self, targets: Targets) -> Result<Tensor, ModelError> {
        match targets {
            Targets::Classes(c) => {
                let n = c.len();
                Tensor::from_vec(c.into_iter().map(|c| c as u32).collect::<Vec<_>>(), n, &self.device)
            }
            Targets::Values { values, width } => {
                let n = values.len() / width.max(1);
                Tensor::from_vec(values, (n, width), &self.device)
            }
        }
        .map_err(candle_error(Self::NAME, "reading the targets"))
    }

    /// The loss of scores `out` against targets from [`Net::targets_on_device`].
    fn loss_from(&self, out: &Tensor, y: &Tensor) -> Result<Tensor, ModelError> {
        match (y.dtype(), self.def.loss) {
            (DType::U32, Loss::CrossEntropy) => candle_nn::loss::cross_entropy(out, y),
            (DType::U32, Loss::Mse) => candle_nn::encoding::one_hot(y.clone(), out.dims()[1], 1.0f32, 0.0f32)
                .and_then(|t| candle_nn::loss::mse(out, &t)),
            _ => candle_nn::loss::mse(out, y),
        }
        .map_err(candle_error(Self::NAME, "the loss"))
    }

    /// The gradients of `loss`, then the update (TF32's switch on for the backward pass too).
    fn learn(&mut self, loss: &Tensor) -> Result<(), ModelError> {
        let _tf32 = Tf32::on(self.def.precision);
        self.opt.backward_step(loss).map_err(candle_error(Self::NAME, "the optimizer's step"))
    }
}

super::net::own_model!(
    /// A model around a network of your own ([`CandleNet`]): a classifier, or a regression
    /// with `Y` values (`f32`, `Array1<f32>`). It has everything [`CandleClassifier`] has: the shared training, the definition's optimiser, loss and
    /// seed, checkpoints and a resume to the bit, eval, the repo, sweeps, `%%compute` and
    /// Slurm; the network's own arguments beside those. Saved under [`CandleNet::NAME`]; a
    /// process that has made none registers the type with [`CandleModel::register`] before
    /// loading one by name.
    CandleModel,
    CandleNet,
    CandleInput,
    Net<Own<N, X>, Y>
);

mod learner;
mod optimizer;
mod precision;

use optimizer::Optim;
use precision::{conv_bf16, linear_bf16, Tf32};
#[cfg(all(test, feature = "linfa"))]
mod tests;
