//! tch's layers for a definition's network ([`LayerOps`]): `tch::nn`'s modules, seeded by
//! libtorch's generator (the definition's seed, set before they are made); bf16 by autocast.

use super::Tch;
use crate::models::net::{Layer, NetDef, Shape};
use crate::models::precision::Precision;
use crate::models::seam::layers::{LayerOps, Site};
use ::tch::nn::{self, Module, ModuleT};
use ::tch::{TchError, Tensor};

/// The variables of layer `at`.
fn path<'a>(at: &'a Site<'_, Tch>) -> nn::Path<'a> {
    at.vars.root() / format!("layer{}", at.at)
}

impl LayerOps for Tch {
    type Linear = nn::Linear;
    type Conv = nn::Conv2D;
    type Norm = nn::BatchNorm;
    type Seeds = ();
    const MODELS: [&'static str; 2] = ["TchClassifier", "TchRegressor"];

    fn seeds(_: &NetDef) {}

    fn linear(at: Site<'_, Tch>, inputs: usize, outputs: usize) -> Result<nn::Linear, TchError> {
        Ok(nn::linear(path(&at), inputs as i64, outputs as i64, Default::default()))
    }

    fn conv(
        at: Site<'_, Tch>,
        inputs: usize,
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Result<nn::Conv2D, TchError> {
        let config = nn::ConvConfig { stride: stride as i64, padding: padding as i64, ..Default::default() };
        Ok(nn::conv2d(path(&at), inputs as i64, channels as i64, kernel as i64, config))
    }

    fn norm(at: Site<'_, Tch>, shape: Shape) -> Result<nn::BatchNorm, TchError> {
        Ok(match shape {
            Shape::Image([c, _, _]) => nn::batch_norm2d(path(&at), c as i64, Default::default()),
            Shape::Flat(n) => nn::batch_norm1d(path(&at), n as i64, Default::default()),
        })
    }

    fn share(t: &Tensor) -> Tensor {
        t.shallow_clone()
    }

    /// Autocast (the forward pass's) decides each layer's arithmetic.
    fn apply_linear(m: &nn::Linear, t: &Tensor, _: Precision) -> Result<Tensor, TchError> {
        Ok(m.forward(t))
    }

    fn apply_conv(m: &nn::Conv2D, t: &Tensor, _: Precision) -> Result<Tensor, TchError> {
        Ok(m.forward(t))
    }

    fn apply_norm(m: &nn::BatchNorm, t: &Tensor, train: bool) -> Result<Tensor, TchError> {
        Ok(m.forward_t(t, train))
    }

    fn reshape(t: &Tensor, to: [usize; 4]) -> Result<Tensor, TchError> {
        t.f_view(to.map(|d| d as i64))
    }

    fn pool(t: &Tensor, k: usize, max: bool) -> Result<Tensor, TchError> {
        let k = k as i64;
        if max {
            t.f_max_pool2d([k, k], [k, k], [0, 0], [1, 1], false)
        } else {
            t.f_avg_pool2d([k, k], [k, k], [0, 0], false, true, None::<i64>)
        }
    }

    fn flatten(t: &Tensor) -> Result<Tensor, TchError> {
        t.f_flatten(1, -1)
    }

    fn times(t: &Tensor, mask: Vec<f32>) -> Result<Tensor, TchError> {
        t.f_mul(&Tensor::from_slice(&mask).f_view(t.size().as_slice())?.f_to_device(t.device())?)
    }

    fn activate(t: &Tensor, layer: Layer) -> Result<Tensor, TchError> {
        match layer {
            Layer::Tanh => t.f_tanh(),
            Layer::Sigmoid => t.f_sigmoid(),
            _ => t.f_relu(),
        }
    }
}
