//! A network of the user's own in burn ([`BurnNet`], a `burn::module::Module`): what it takes
//! ([`BurnInput`]), and how the seam holds it, shared with dryml's optimiser, its parameters
//! drawn again from the definition's seed.

use super::vars::{lock, BurnVars, Shared};
use super::Burn;
use crate::data::ndarray::{Array1, Array3, Array4};
use crate::data::{BurnError, BurnTensor, DataError, Element};
use crate::models::net::{seeded_init, Input};
use crate::models::seam::{fail, Feeds, Making, OwnNet};
use crate::models::ModelError;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a network of your own takes per element in burn: rows of `f32` features
/// (`Array1<f32>`, a batch `Tensor<2>` of `[n, features]`) or images (`Array3<f32>`, a batch
/// `Tensor<4>` of `[n, channels, height, width]`).
pub trait BurnInput: Input {
    /// The tensor a batch becomes, as the network's forward pass takes it.
    type Xs;
    /// A batch as a tensor on burn's CPU.
    fn batch(batch: &Self::Batch) -> BurnTensor;
    /// That tensor, of its rank.
    fn xs(t: &BurnTensor) -> Result<Self::Xs, BurnError>;
}

impl BurnInput for Array1<f32> {
    type Xs = Tensor<2>;
    fn batch(batch: &<Array1<f32> as Element>::Batch) -> BurnTensor {
        crate::data::burn_rows(batch)
    }
    fn xs(t: &BurnTensor) -> Result<Tensor<2>, BurnError> {
        t.f2()
    }
}

impl BurnInput for Array3<f32> {
    type Xs = Tensor<4>;
    fn batch(batch: &Array4<f32>) -> BurnTensor {
        crate::data::burn_images(batch)
    }
    fn xs(t: &BurnTensor) -> Result<Tensor<4>, BurnError> {
        t.f4()
    }
}

impl<X: BurnInput> Feeds<Burn> for X {
    type Tensors = BurnTensor;
    fn feed(batch: &X::Batch) -> Result<BurnTensor, DataError> {
        Ok(X::batch(batch))
    }
}

/// A network of your own, in burn: a `burn::module::Module` made from its model's arguments on
/// the device dryml gives, and its forward pass. [`BurnModel`](super::BurnModel) gives it
/// everything [`BurnClassifier`](super::BurnClassifier) has. dryml's optimiser steps its
/// parameters, and draws each again from the definition's seed once it is made (PyTorch's
/// ±1/√fan_in, a linear's fan_in its first axis as burn lays it out; a bias takes its weight's;
/// constants, as a norm's scale, stay).
///
/// ```no_run
/// use burn::module::Module;
/// use burn::nn::{Linear, LinearConfig};
/// use burn::tensor::{activation::relu, Device, Tensor};
/// use dryml::models::burn::{BurnModel, BurnNet};
///
/// #[derive(Module, Debug)]
/// struct Mlp { hidden: Linear, out: Linear }
///
/// impl BurnNet for Mlp {
///     const NAME: &'static str = "Mlp";
///     fn build(device: &Device, args: &dryml::serde_json::Value) -> Result<Mlp, String> {
///         let width = args["width"].as_u64().ok_or("`width` must be a number")? as usize;
///         Ok(Mlp { hidden: LinearConfig::new(4, width).init(device), out: LinearConfig::new(width, 3).init(device) })
///     }
///     fn forward_t(&self, xs: Tensor<2>, _train: bool) -> Tensor<2> {
///         self.out.forward(relu(self.hidden.forward(xs)))
///     }
/// }
///
/// let model = BurnModel::<Mlp>::new(dryml::serde_json::json!({"width": 16, "training": {"epochs": 5}}));
/// ```
pub trait BurnNet<X: BurnInput = Array1<f32>>: Module + 'static {
    /// The name its models are saved under (a repo's type name), one per network.
    const NAME: &'static str;
    /// The network on `device`, from the model's arguments (all of them: its own keys beside
    /// `optimizer`, `loss`, `seed` and `training`).
    fn build(device: &Device, args: &Value) -> Result<Self, String>;
    /// The scores `[n, outputs]` of a batch; `train` while training. burn panics where it
    /// cannot compute; dryml catches that and says where.
    fn forward_t(&self, xs: X::Xs, train: bool) -> Tensor<2>;
}

/// A network of the user's own as the seam holds it: shared with the variables, so dryml's
/// optimiser steps what the forward pass runs.
pub(crate) struct Owned<N>(pub(crate) Shared<N>);

impl<X: BurnInput, N: BurnNet<X>> OwnNet<Burn, X> for Owned<N> {
    const NAME: &'static str = <N as BurnNet<X>>::NAME;

    fn make(Making { vars, device, args, def, who, .. }: Making<'_, Burn>) -> Result<Self, ModelError> {
        let net = N::build(device, args).map_err(|e| ModelError::Model(format!("{who}: {e}")))?;
        let shared = Arc::new(Mutex::new(net));
        vars.add(String::new(), shared.clone(), HashMap::new());
        reseed(vars, def.seed).map_err(fail(who, "seeding the network"))?;
        Ok(Owned(shared))
    }

    fn forward(&self, x: &BurnTensor, train: bool) -> Result<BurnTensor, BurnError> {
        Ok(BurnTensor::F2(lock(&self.0).forward_t(X::xs(x)?, train)))
    }
}

/// Draws every parameter that is not a constant again from `seed`, by name order: weights
/// (rank 2 and up) uniform in ±1/√fan_in, a rank-1 parameter beside a `weight` with that
/// weight's fan_in (a bias). burn lays a linear's weight out `[inputs, outputs]` and a
/// convolution's `[outputs, inputs, kernel...]`.
fn reseed(vars: &BurnVars, seed: u64) -> Result<(), BurnError> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let all = vars.named()?;
    let fan_in = |dims: &[usize]| match dims {
        [inputs, _] => (*inputs).max(1),
        d => d[1..].iter().product::<usize>().max(1),
    };
    let mut drawn = HashMap::new();
    for (name, dims, values) in &all {
        let constant = values.len() > 1 && values.windows(2).all(|w| w[0] == w[1]);
        let fan = match dims.len() {
            0 | 1 => name
                .strip_suffix("bias")
                .and_then(|p| all.iter().find(|q| q.0 == format!("{p}weight")))
                .map(|q| fan_in(&q.1)),
            _ => Some(fan_in(dims)),
        };
        if let (false, Some(fan)) = (constant, fan) {
            drawn.insert(name.clone(), seeded_init(fan, values.len(), 0, &mut rng).0);
        }
    }
    vars.set(drawn);
    Ok(())
}
