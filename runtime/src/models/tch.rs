//! tch, PyTorch's part: a sequential network built from its definition's components (layers,
//! optimiser, loss: a [`NetDef`](super::net::NetDef); a training procedure), as a classifier
//! ([`TchClassifier`]) or a regressor ([`TchRegressor`]), and [`TchModel`], the same model
//! around a network of the user's own ([`TchNet`]). All are trained by the shared
//! [`Training`](super::training::Training) on the device its context gives `torch`, their
//! weights, optimiser state and [`TrainSpec`] in their own file.

use super::net::Optimizer as Opt;
use super::optim::{self, Named, Saved, Settings};
use super::seam::{fail, Making, Optimiser, OwnNet};
use super::ModelError;
use crate::data::ndarray::Array1;
use crate::data::{Onto, ToTch};
use ::tch::nn;
use ::tch::{Device, Kind, Tensor};
use serde_json::Value;

super::net::framework_models!(Tch, "tch", TchInput, ToTch::to_tch, Onto, TchClassifier, TchRegressor, TchModel, TchNet);

fn dims(t: &Tensor) -> Vec<usize> {
    t.size().iter().map(|&d| d as usize).collect()
}

/// A tensor's name, shape and values, read on the CPU.
fn named(who: &str, name: &str, t: &Tensor) -> Result<(String, Vec<usize>, Vec<f32>), ModelError> {
    let values = Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1))
        .map_err(fail(who, "reading a tensor"))?;
    Ok((name.to_string(), dims(t), values))
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

impl<X: TchInput, N: TchNet<X>> OwnNet<Tch, X> for N {
    const NAME: &'static str = <N as TchNet<X>>::NAME;

    fn make(m: Making<'_, Tch>) -> Result<N, ModelError> {
        N::build(&m.vars.root(), m.args).map_err(|e| ModelError::Model(format!("{}: {e}", <N as TchNet<X>>::NAME)))
    }

    fn forward(&self, x: &Tensors<X>, train: bool) -> Result<Tensor, ::tch::TchError> {
        Ok(self.forward_t(x, train))
    }
}

mod framework;
mod layers;
mod optimizer;
mod precision;

use optimizer::Optim;
#[cfg(all(test, feature = "linfa"))]
mod tests;
