//! burn, pure Rust (its flex backend on the CPU): the network classifier and regressor of the
//! same definitions as tch's and candle's ([`NetDef`](super::net::NetDef)), and [`BurnModel`]
//! around a `burn::module::Module` of the user's own ([`BurnNet`]), trained by the same
//! [`Training`](super::training::Training), their weights, optimiser state and
//! [`TrainSpec`](super::TrainSpec) in their own file, so a killed training resumes to the bit.
//! burn's modules hold the weights; dryml's optimiser ([`super::optim`]) steps them, as it does
//! tch's and candle's.

use super::seam::layers::Layers;
pub use own::{BurnInput, BurnNet};

/// burn, as the shared network ([`super::seam`]) uses it.
pub(crate) struct Burn;

/// A network in burn.
type Net<B, Y = usize> = super::seam::Net<Burn, B, Y>;

super::net::defined_model!(
    /// A classifier of rows of `f32` features: a sequential network in burn. Its arguments are a
    /// [`NetDef`](super::net::NetDef) (`layers`, `optimizer`, `loss`, `seed`, `precision`) and
    /// `training`, as tch's and candle's classifiers take them.
    BurnClassifier,
    Net<Layers<Burn>>,
    usize
);

super::net::defined_model!(
    /// A regression of rows of `f32` features to a value (`f32` targets) in burn: the
    /// classifier's network and arguments, its last layer `{"linear": 1}`, its loss MSE unless
    /// `loss` says otherwise.
    BurnRegressor,
    Net<Layers<Burn>, f32>,
    f32
);

super::net::own_model!(
    /// A model around a network of your own ([`BurnNet`], a `burn::module::Module`): a
    /// classifier, or a regression with `Y` values (`f32`, `Array1<f32>`). It has everything a
    /// definition's classifier has: the shared training by its `training` argument, the
    /// optimiser, loss and seed of its `optimizer`, `loss` and `seed`, checkpoints and a resume
    /// to the bit, [`eval`](super::eval), the repo, sweeps, `%%compute` and Slurm. The network's
    /// own arguments sit beside those, so selectors and sweeps reach them. Saved under its
    /// network's `NAME`; a process that has made none registers the type with `register` before
    /// loading one by name.
    BurnModel,
    BurnNet,
    BurnInput,
    Net<super::seam::Own<own::Owned<N>, X>, Y>
);

impl<N: BurnNet<X>, Y: super::net::Target, X: BurnInput> BurnModel<N, Y, X> {
    /// The network, once built (a copy: burn's modules share their tensors).
    pub fn net(&self) -> Option<N> {
        self.trained.net.as_ref().map(|n| vars::lock(&n.body.0 .0).clone())
    }
}

/// burn's CPU without autodiff: where values are read and an optimiser's moments live.
fn cpu() -> burn::tensor::Device {
    burn::tensor::Device::flex()
}

mod framework;
mod layers;
mod own;
mod vars;

#[cfg(all(test, feature = "linfa"))]
mod tests;
