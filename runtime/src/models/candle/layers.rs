//! candle's layers for a definition's network ([`LayerOps`]): `candle_nn`'s modules, their
//! weights drawn from the definition's seed (candle cannot seed its own), bf16 on CUDA by
//! autocast's rule.

use super::{conv_bf16, linear_bf16, Candle};
use crate::models::net::{seeded_init, Layer, NetDef, Shape};
use crate::models::precision::Precision;
use crate::models::seam::layers::{LayerOps, Site};
use candle_core::{DType, Module, ModuleT, Tensor};
use candle_nn::{VarBuilder, VarMap};

/// Weights of `dims` at layer `at`, drawn for `fan_in` inputs, with a bias per output.
fn seeded(at: &mut Site<'_, Candle>, dims: Vec<usize>, fan_in: usize) -> candle_core::Result<()> {
    let outputs = dims[0];
    let (w, b) = seeded_init(fan_in, dims.iter().product(), outputs, at.seeds);
    at.vars.set_one(format!("layer{}.weight", at.at), Tensor::from_vec(w, dims, at.device)?)?;
    at.vars.set_one(format!("layer{}.bias", at.at), Tensor::from_vec(b, outputs, at.device)?)
}

/// The variables of layer `at`.
fn path<'a>(at: &Site<'_, Candle>, vars: &'a VarMap) -> VarBuilder<'a> {
    VarBuilder::from_varmap(vars, DType::F32, at.device).pp(format!("layer{}", at.at))
}

impl LayerOps for Candle {
    type Linear = candle_nn::Linear;
    type Conv = candle_nn::Conv2d;
    type Norm = candle_nn::BatchNorm;
    type Seeds = fastrand::Rng;
    const MODELS: [&'static str; 2] = ["CandleClassifier", "CandleRegressor"];

    fn seeds(def: &NetDef) -> fastrand::Rng {
        fastrand::Rng::with_seed(def.seed)
    }

    fn linear(mut at: Site<'_, Candle>, inputs: usize, outputs: usize) -> candle_core::Result<candle_nn::Linear> {
        let lin = candle_nn::linear(inputs, outputs, path(&at, at.vars))?;
        seeded(&mut at, vec![outputs, inputs], inputs)?;
        Ok(lin)
    }

    fn conv(
        mut at: Site<'_, Candle>,
        inputs: usize,
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> candle_core::Result<candle_nn::Conv2d> {
        let config = candle_nn::Conv2dConfig { padding, stride, ..Default::default() };
        let conv = candle_nn::conv2d(inputs, channels, kernel, config, path(&at, at.vars))?;
        seeded(&mut at, vec![channels, inputs, kernel, kernel], inputs * kernel * kernel)?;
        Ok(conv)
    }

    fn norm(at: Site<'_, Candle>, shape: Shape) -> candle_core::Result<candle_nn::BatchNorm> {
        let c = match shape {
            Shape::Image([c, _, _]) | Shape::Flat(c) => c,
        };
        candle_nn::batch_norm(c, candle_nn::BatchNormConfig::default(), path(&at, at.vars))
    }

    fn share(t: &Tensor) -> Tensor {
        t.clone()
    }

    /// candle's CPU has no bf16 matmul: there the layers compute FP32, as under TF32.
    fn apply_linear(m: &candle_nn::Linear, t: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        match precision {
            Precision::Bf16 if t.device().is_cuda() => linear_bf16(m, t),
            _ => m.forward(t),
        }
    }

    fn apply_conv(m: &candle_nn::Conv2d, t: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        match precision {
            Precision::Bf16 if t.device().is_cuda() => conv_bf16(m, t),
            _ => m.forward(t),
        }
    }

    fn apply_norm(m: &candle_nn::BatchNorm, t: &Tensor, train: bool) -> candle_core::Result<Tensor> {
        m.forward_t(t, train)
    }

    fn reshape(t: &Tensor, to: [usize; 4]) -> candle_core::Result<Tensor> {
        t.reshape(to.as_slice())
    }

    fn pool(t: &Tensor, k: usize, max: bool) -> candle_core::Result<Tensor> {
        if max {
            t.max_pool2d(k)
        } else {
            t.avg_pool2d(k)
        }
    }

    fn flatten(t: &Tensor) -> candle_core::Result<Tensor> {
        t.flatten_from(1)
    }

    fn times(t: &Tensor, mask: Vec<f32>) -> candle_core::Result<Tensor> {
        t * Tensor::from_vec(mask, t.shape(), t.device())?
    }

    fn activate(t: &Tensor, layer: Layer) -> candle_core::Result<Tensor> {
        match layer {
            Layer::Tanh => t.tanh(),
            Layer::Sigmoid => candle_nn::ops::sigmoid(t),
            _ => t.relu(),
        }
    }
}
