//! burn, pure Rust (its flex backend on the CPU): the network classifier and regressor of the
//! same definitions as tch's and candle's ([`NetDef`](super::net::NetDef)), trained by the same
//! [`Training`](super::training::Training), their weights, optimiser state and
//! [`TrainSpec`](super::TrainSpec) in their own file, so a killed training resumes to the bit.
//! burn's modules hold the weights; dryml's optimiser ([`super::optim`]) steps them, as it does
//! tch's and candle's.

use super::seam::layers::Layers;
use super::seam::Feeds;
use crate::data::ndarray::{Array1, Array2};
use crate::data::{BurnTensor, DataError};

/// burn, as the shared network ([`super::seam`]) uses it.
pub(crate) struct Burn;

/// A network in burn.
type Net<B, Y = usize> = super::seam::Net<Burn, B, Y>;

impl Feeds<Burn> for Array1<f32> {
    type Tensors = BurnTensor;
    fn feed(batch: &Array2<f32>) -> Result<BurnTensor, DataError> {
        Ok(crate::data::burn_rows(batch))
    }
}

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

/// burn's CPU without autodiff: where values are read and an optimiser's moments live.
fn cpu() -> burn::tensor::Device {
    burn::tensor::Device::flex()
}

mod framework;
mod layers;
mod vars;

#[cfg(all(test, feature = "linfa"))]
mod tests;
