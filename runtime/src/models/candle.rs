//! candle, pure Rust (no libtorch): the same network classifier and regressor as the tch
//! ones, from the same definition ([`NetDef`](super::net::NetDef)), and [`CandleModel`] around
//! a network of the user's own ([`CandleNet`]), trained by the same
//! [`Training`](super::training::Training), their weights, optimiser state and [`TrainSpec`] in
//! their own file. They run on the device the context gives `candle`: a GPU through candle's
//! CUDA backend (the `candle-cuda` feature); without it, a context that gives `candle` a GPU is
//! an error, not a silent CPU.

use super::net::{seeded_init, Optimizer as Opt};
use super::optim::{self, Named, Saved, Settings};
use super::precision::Precision;
use super::seam::{fail, Making, Optimiser, OwnNet};
use super::ModelError;
use crate::data::ndarray::Array1;
use crate::data::{CandleOnto, ToCandle};
use candle_core::{DType, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use serde_json::Value;

super::net::framework_models!(
    Candle,
    "candle",
    CandleInput,
    ToCandle::to_candle,
    CandleOnto,
    CandleClassifier,
    CandleRegressor,
    CandleModel,
    CandleNet
);

/// A tensor's name, shape and values.
fn named(who: &'static str, name: &str, t: &Tensor) -> Result<(String, Vec<usize>, Vec<f32>), ModelError> {
    let values = t.flatten_all().and_then(|f| f.to_vec1::<f32>()).map_err(fail(who, "reading a tensor"))?;
    Ok((name.to_string(), t.dims().to_vec(), values))
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

impl<X: CandleInput, N: CandleNet<X>> OwnNet<Candle, X> for N {
    const NAME: &'static str = <N as CandleNet<X>>::NAME;

    /// Its variables drawn again from the definition's seed.
    fn make(Making { vars, device, args, def, who, .. }: Making<'_, Candle>) -> Result<N, ModelError> {
        if def.precision == Precision::Bf16 {
            return Err(ModelError::Model(format!(
                "{who}: `precision` \"bf16\" casts a definition's layers; candle has no autocast, so a network of your own computes in the dtypes its forward pass gives (cast there, as `xs.to_dtype(DType::BF16)`), or use \"tf32\""
            )));
        }
        let net = N::build(VarBuilder::from_varmap(vars, DType::F32, device), args)
            .map_err(|e| ModelError::Model(format!("{}: {e}", <N as CandleNet<X>>::NAME)))?;
        reseed(vars, def.seed).map_err(fail(who, "seeding the network"))?;
        Ok(net)
    }

    fn forward(&self, x: &Tensors<X>, train: bool) -> candle_core::Result<Tensor> {
        self.forward_t(x, train)
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

mod framework;
mod layers;
mod optimizer;
mod precision;

use optimizer::Optim;
use precision::{conv_bf16, linear_bf16, Tf32};
#[cfg(all(test, feature = "linfa"))]
mod tests;
