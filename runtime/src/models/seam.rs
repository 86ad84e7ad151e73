//! The seam every framework's network fills ([`Framework`]: its tensors, device, variables,
//! precision, loss and optimiser step; [`Body`]: its layers), and what is written once over it:
//! the network around a body ([`Net`]), its checks, scores and loss, and its side of the shared
//! training (`seam/learner.rs`).

use super::net::{Input, Loss, NetDef, Network, Target, Targets};
use super::optim::{Named, Settings};
use super::placement::{placement, Placement};
use super::precision::Precision;
use super::ModelError;
use crate::data::ndarray::Array1;
use crate::data::{Batch as _, DataError, DeviceTensor, Element, TensorTree};
use serde_json::Value;
use std::fmt::Display;
use std::marker::PhantomData;

/// What differs between frameworks, as the shared network uses it. Each method names what it
/// does in the framework's own terms; the errors are the framework's, and the shared code says
/// which model and which step they come from.
pub(crate) trait Framework: Sized + 'static {
    /// Its tensor (scores, losses, targets, positions).
    type Tensor: DeviceTensor<Device = Self::Device, Error = Self::Error> + 'static;
    /// Where a tensor can be.
    type Device: Clone;
    /// Its error.
    type Error: Display;
    /// A network's variables, by name.
    type Vars;
    /// The optimiser over those variables.
    type Optim: Optimiser<Self>;
    /// Its name among a context's placements (`"torch"`, `"candle"`, `"burn"`).
    const KEY: &'static str;

    /// The device of a placement, or why this build cannot use it (`who`: the model).
    fn device_of(p: Placement, who: &str) -> Result<Self::Device, ModelError>;
    /// No variables yet.
    fn vars() -> Self::Vars;
    /// The variables of the body `make` builds (given them and the device to build on), seeded
    /// from `def` the same on every device, then put on `device`. By default built on the device,
    /// the body seeding its own.
    fn build<B>(
        device: &Self::Device,
        _def: &NetDef,
        make: impl FnOnce(&mut Self::Vars, &Self::Device) -> Result<B, ModelError>,
    ) -> Result<(Self::Vars, B), ModelError> {
        let mut vars = Self::vars();
        let body = make(&mut vars, device)?;
        Ok((vars, body))
    }
    /// `forward`'s scores, computed in `precision` (by default FP32 whatever it says); a panic is
    /// an error.
    fn forward(
        _precision: Precision,
        _device: &Self::Device,
        who: &str,
        forward: impl FnOnce() -> Result<Self::Tensor, Self::Error>,
    ) -> Result<Self::Tensor, ModelError> {
        unwinding(who, "the forward pass panicked", || forward().map_err(fail(who, "the forward pass")))
    }
    /// The gradients of `loss`, then the optimiser's update, in `precision`.
    fn learn(
        opt: &mut Self::Optim,
        loss: &Self::Tensor,
        precision: Precision,
        device: &Self::Device,
        who: &str,
    ) -> Result<(), ModelError>;
    /// `f`'s value, or an error naming `what` where the framework panics instead of returning
    /// one (tch and burn do; the batching loops read an out of memory in its text).
    fn caught<T>(who: &str, what: &str, f: impl FnOnce() -> Result<T, ModelError>) -> Result<T, ModelError> {
        unwinding(who, &format!("{what} failed"), f)
    }
    /// What keeps gradients from being recorded while it lives (scores, a validation loss).
    fn no_grad() -> impl Sized {}
    /// A tensor's shape.
    fn dims(t: &Self::Tensor) -> Vec<usize>;
    /// Targets as a tensor on `device`: classes, or values `[n, width]`.
    fn targets(t: Targets, device: &Self::Device) -> Result<Self::Tensor, Self::Error>;
    /// The loss of scores `out` against targets from [`Framework::targets`].
    fn loss(out: &Self::Tensor, y: &Self::Tensor, loss: Loss) -> Result<Self::Tensor, Self::Error>;
    /// A tensor of one value, read.
    fn scalar(t: &Self::Tensor) -> Result<f64, Self::Error>;
    /// Scores `[n, outputs]`, read row by row.
    fn rows(t: &Self::Tensor) -> Result<Vec<Vec<f32>>, Self::Error>;
    /// Positions (an epoch's order) as a tensor of indices on `device`.
    fn positions(order: &[usize], device: &Self::Device) -> Result<Self::Tensor, Self::Error>;
    /// `len` elements of a rank-1 tensor from `start`.
    fn narrow(t: &Self::Tensor, start: usize, len: usize) -> Result<Self::Tensor, Self::Error>;
    /// A loss added to the sum so far, kept on the device (in 64 bits).
    fn add(total: Option<Self::Tensor>, loss: &Self::Tensor) -> Result<Self::Tensor, Self::Error>;
    /// Whether the device is the host's (where a read costs less than a sum on the device).
    fn on_cpu(device: &Self::Device) -> bool;
    /// Every variable by name, with its shape and values, as bytes.
    fn snapshot(vars: &Self::Vars, who: &str) -> Result<Vec<u8>, ModelError>;
    /// Puts [`Framework::snapshot`]'s bytes back.
    fn restore(vars: &mut Self::Vars, bytes: &[u8], device: &Self::Device, who: &str) -> Result<(), ModelError>;
}

/// A framework's optimiser ([`super::optim`]'s arithmetic over its tensors).
pub(crate) trait Optimiser<F: Framework>: Sized {
    /// Over every variable of `vars`.
    fn new(vars: &F::Vars, settings: Settings, who: &'static str) -> Result<Self, ModelError>;
    /// Steps taken.
    fn steps(&self) -> u64;
    /// Every parameter by name, sorted, with its shape and values.
    fn parameters(&self) -> Result<Named, ModelError>;
    /// Its state as a checkpoint holds it.
    fn save(&self) -> Result<Vec<u8>, ModelError>;
    /// Puts [`Optimiser::save`]'s bytes back.
    fn restore(&mut self, state: &[u8]) -> Result<(), ModelError>;
}

/// An input a framework's networks take: its batches as that framework's tensors.
pub(crate) trait Feeds<F: Framework>: Input {
    /// The tensors a batch becomes: a tensor, or a tuple or map of them.
    type Tensors: TensorTree<F::Tensor> + 'static;
    /// A batch as tensors on the host.
    fn feed(batch: &Self::Batch) -> Result<Self::Tensors, DataError>;
}

/// What a [`Net`]'s body is made from: the network's variables and device, its model's arguments
/// and definition, the features it takes, and the model's name (`who`, in errors).
pub(crate) struct Making<'a, F: Framework> {
    pub(crate) vars: &'a mut F::Vars,
    pub(crate) device: &'a F::Device,
    pub(crate) args: &'a Value,
    pub(crate) def: &'a NetDef,
    pub(crate) inputs: usize,
    pub(crate) who: &'static str,
}

/// What computes a [`Net`]'s scores in framework `F`: a definition's layers, or a user's own
/// network.
pub(crate) trait Body<F: Framework>: Sized {
    /// What it takes per element.
    type X: Feeds<F>;
    /// Its model's name, as a classifier.
    const NAME: &'static str;
    /// Its model's name, learning values.
    const VALUES_NAME: &'static str = Self::NAME;
    /// The definition in a model's arguments (`who`: the model, in errors).
    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError>;
    /// Its layers in the network's variables, on its device.
    fn make(m: Making<'_, F>) -> Result<Self, ModelError>;
    /// The scores of a batch; `train` while training; `step`: the steps done (dropout's masks).
    fn forward(&self, x: &TensorsOf<F, Self>, train: bool, def: &NetDef, step: u64) -> Result<F::Tensor, F::Error>;
}

/// A user's own network in framework `F`, taking `X`: made in a network's variables from its
/// model's arguments (`CandleNet`, `TchNet`, `BurnNet`), with its forward pass.
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub(crate) trait OwnNet<F: Framework, X: Feeds<F>>: Sized + 'static {
    /// The name its models are saved under.
    const NAME: &'static str;
    /// The network in the network's variables on its device, from all its model's arguments.
    fn make(m: Making<'_, F>) -> Result<Self, ModelError>;
    /// The scores of a batch; `train` while training.
    fn forward(&self, x: &X::Tensors, train: bool) -> Result<F::Tensor, F::Error>;
}

/// A user's own network as a [`Net`]'s body.
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub(crate) struct Own<N, X>(pub(crate) N, PhantomData<fn() -> X>);

#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
impl<F: Framework, X: Feeds<F>, N: OwnNet<F, X>> Body<F> for Own<N, X> {
    type X = X;
    const NAME: &'static str = N::NAME;

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::training_parts(args, who)
    }

    fn make(m: Making<'_, F>) -> Result<Own<N, X>, ModelError> {
        N::make(m).map(|n| Own(n, PhantomData))
    }

    fn forward(&self, x: &X::Tensors, train: bool, _: &NetDef, _: u64) -> Result<F::Tensor, F::Error> {
        self.0.forward(x, train)
    }
}

/// The tensors a body's batch becomes.
pub(crate) type TensorsOf<F, B> = <<B as Body<F>>::X as Feeds<F>>::Tensors;

/// `f`'s value, or the error `who: what: ` and the panic's message where `f` panics (tch and burn
/// panic where they cannot compute: a shape their kernels cannot take, out of memory).
pub(crate) fn unwinding<T>(who: &str, what: &str, f: impl FnOnce() -> Result<T, ModelError>) -> Result<T, ModelError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let text = crate::sys::panic_message(&*p).unwrap_or_else(|| "(no message)".into());
        ModelError::Model(format!("{who}: {what}: {text}"))
    })?
}

/// The error of a context that gives framework `key` a GPU this build cannot use: `why`, and
/// what to do instead.
pub(crate) fn gpu_refused(who: &str, key: &str, p: Placement, why: &str) -> ModelError {
    ModelError::Model(format!("{who}: the context gives {key} {p}, but {why}"))
}

/// `who: what: e`, the error of a framework's call.
pub(crate) fn fail<'a, E: Display>(who: &'a str, what: &'a str) -> impl Fn(E) -> ModelError + 'a {
    move |e| ModelError::Model(format!("{who}: {what}: {e}"))
}

/// The network, its optimiser and where it runs, in framework `F`, around a body (the
/// definition's layers or the user's own network), learning targets `Y`.
pub(crate) struct Net<F: Framework, B, Y = usize> {
    pub(crate) def: NetDef,
    pub(crate) vars: F::Vars,
    pub(crate) body: B,
    pub(crate) opt: F::Optim,
    pub(crate) inputs: usize,
    pub(crate) placement: Placement,
    pub(crate) device: F::Device,
    target: PhantomData<fn() -> Y>,
}

impl<F: Framework, B: Body<F>, Y: Target> Network for Net<F, B, Y> {
    const NAME: &'static str = if Y::CLASS { B::NAME } else { B::VALUES_NAME };

    /// The network for `inputs` features, on the device the context gives `F`.
    fn build(args: &Value, inputs: usize) -> Result<Net<F, B, Y>, ModelError> {
        let def = B::definition(args, Self::NAME)?.for_target::<Y>(args);
        let placement = placement(F::KEY);
        let device = F::device_of(placement, Self::NAME)?;
        let (vars, body) = F::build(&device, &def, |vars, device| {
            B::make(Making { vars, device, args, def: &def, inputs, who: Self::NAME })
        })?;
        let opt = F::Optim::new(&vars, Settings::of(&def), Self::NAME)?;
        Ok(Net { def, vars, body, opt, inputs, placement, device, target: PhantomData })
    }

    fn inputs(&self) -> usize {
        self.inputs
    }

    fn scores(&self, x: &<B::X as Element>::Batch) -> Result<Vec<Array1<f32>>, ModelError> {
        let _no_grad = F::no_grad();
        let out = self.forward(x, false)?;
        let rows = F::rows(&out).map_err(fail(Self::NAME, "reading the scores"))?;
        Ok(rows.into_iter().map(Array1::from_vec).collect())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn parameters(&self) -> Result<Named, ModelError> {
        self.opt.parameters()
    }

    fn optimizer_state(&self) -> Result<Vec<u8>, ModelError> {
        self.opt.save()
    }

    fn restore_optimizer(&mut self, state: &[u8]) -> Result<(), ModelError> {
        self.opt.restore(state)
    }
}

impl<F: Framework, B: Body<F>, Y: Target> Net<F, B, Y> {
    /// The body over a batch, its scores `[n, outputs]` (a user's network is checked); `train`:
    /// dropout drops and batch norm learns its statistics.
    pub(crate) fn forward(&self, x: &<B::X as Element>::Batch, train: bool) -> Result<F::Tensor, ModelError> {
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
    fn tensors(&self, x: &<B::X as Element>::Batch) -> Result<TensorsOf<F, B>, ModelError> {
        <B::X as Feeds<F>>::feed(x)?.onto(&self.device).map_err(fail(Self::NAME, "moving a batch to its device"))
    }

    /// [`Net::forward`] of a batch's tensors, `n` elements.
    fn forward_tensors(&self, t: &TensorsOf<F, B>, n: usize, train: bool) -> Result<F::Tensor, ModelError> {
        let step = self.opt.steps();
        let out =
            F::forward(self.def.precision, &self.device, Self::NAME, || self.body.forward(t, train, &self.def, step))?;
        match F::dims(&out).as_slice() {
            [rows, _] if *rows == n => Ok(out),
            dims => Err(ModelError::Model(format!(
                "{}: the forward pass gave a tensor of shape {dims:?} for {n} elements; it must give [{n}, outputs]",
                Self::NAME
            ))),
        }
    }

    /// The loss of a batch against its targets.
    fn loss_of(&self, x: &<B::X as Element>::Batch, y: &Y::Batch, train: bool) -> Result<F::Tensor, ModelError> {
        let out = self.forward(x, train)?;
        let targets = Y::targets(y);
        targets.check(F::dims(&out)[1], self.def.loss, Self::NAME)?;
        self.loss_from(&out, &self.targets_on_device(targets)?)
    }

    /// Targets as a tensor on the network's device.
    fn targets_on_device(&self, targets: Targets) -> Result<F::Tensor, ModelError> {
        F::targets(targets, &self.device).map_err(fail(Self::NAME, "reading the targets"))
    }

    /// The loss of scores `out` against targets from [`Net::targets_on_device`].
    fn loss_from(&self, out: &F::Tensor, y: &F::Tensor) -> Result<F::Tensor, ModelError> {
        F::caught(Self::NAME, "the loss", || F::loss(out, y, self.def.loss).map_err(fail(Self::NAME, "the loss")))
    }

    /// The gradients of `loss`, then the update.
    fn learn(&mut self, loss: &F::Tensor) -> Result<(), ModelError> {
        F::learn(&mut self.opt, loss, self.def.precision, &self.device, Self::NAME)
    }

    /// A tensor of one value, read.
    fn scalar(&self, t: &F::Tensor, what: &str) -> Result<f64, ModelError> {
        F::scalar(t).map_err(fail(Self::NAME, what))
    }
}

pub(crate) mod layers;
mod learner;
