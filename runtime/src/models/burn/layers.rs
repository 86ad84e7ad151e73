//! burn's layers for a definition's network ([`LayerOps`]): `burn::nn`'s modules, shared with the
//! optimiser through the network's variables, their weights drawn from the definition's seed
//! (PyTorch's ±1/√fan_in, as candle's); dropout's masks are dryml's, as everywhere.

use super::vars::{lock, Shared};
use super::Burn;
use crate::data::{BurnError, BurnTensor};
use crate::models::net::{seeded_init, Layer, NetDef, Shape};
use crate::models::precision::Precision;
use crate::models::seam::layers::{LayerOps, Site};
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AvgPool2dConfig, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::{relu, sigmoid, tanh};
use burn::tensor::{Tensor, TensorData};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// Layer `at`'s module, shared with the variables under `layer{at}`, its weight (of `count`
/// values, `fan_in` inputs) and bias (`outputs` values) drawn from the seeds.
fn seeded<M: Module + 'static>(
    at: Site<'_, Burn>,
    module: M,
    fan_in: usize,
    count: usize,
    outputs: usize,
) -> Shared<M> {
    let shared = Arc::new(Mutex::new(module));
    let name = format!("layer{}", at.at);
    let (w, b) = seeded_init(fan_in, count, outputs, at.seeds);
    let values = HashMap::from([(format!("{name}.weight"), w), (format!("{name}.bias"), b)]);
    at.vars.add(name, shared.clone(), values);
    shared
}

/// `f` of images, or of rows.
fn either(
    t: &BurnTensor,
    rows: impl FnOnce(Tensor<2>) -> Tensor<2>,
    images: impl FnOnce(Tensor<4>) -> Tensor<4>,
) -> Result<BurnTensor, BurnError> {
    match t {
        BurnTensor::F4(t) => Ok(BurnTensor::F4(images(t.clone()))),
        t => Ok(BurnTensor::F2(rows(t.f2()?))),
    }
}

impl LayerOps for Burn {
    type Linear = Shared<Linear>;
    type Conv = Shared<Conv2d>;
    type Norm = Infallible;
    type Seeds = fastrand::Rng;
    const MODELS: [&'static str; 2] = ["BurnClassifier", "BurnRegressor"];

    fn seeds(def: &NetDef) -> fastrand::Rng {
        fastrand::Rng::with_seed(def.seed)
    }

    fn linear(at: Site<'_, Burn>, inputs: usize, outputs: usize) -> Result<Shared<Linear>, BurnError> {
        let module = LinearConfig::new(inputs, outputs).init(at.device);
        Ok(seeded(at, module, inputs, inputs * outputs, outputs))
    }

    fn conv(
        at: Site<'_, Burn>,
        inputs: usize,
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Result<Shared<Conv2d>, BurnError> {
        let module = Conv2dConfig::new([inputs, channels], [kernel, kernel])
            .with_stride([stride, stride])
            .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
            .init(at.device);
        let fan_in = inputs * kernel * kernel;
        Ok(seeded(at, module, fan_in, fan_in * channels, channels))
    }

    fn norm(_: Site<'_, Burn>, _: Shape) -> Result<Infallible, BurnError> {
        Err(BurnError(
            "\"batch_norm\" is not in dryml's burn yet: leave it out, or train the definition with tch or candle"
                .into(),
        ))
    }

    fn share(t: &BurnTensor) -> BurnTensor {
        t.clone()
    }

    fn apply_linear(m: &Shared<Linear>, t: &BurnTensor, _: Precision) -> Result<BurnTensor, BurnError> {
        Ok(BurnTensor::F2(lock(m).forward(t.f2()?)))
    }

    fn apply_conv(m: &Shared<Conv2d>, t: &BurnTensor, _: Precision) -> Result<BurnTensor, BurnError> {
        Ok(BurnTensor::F4(lock(m).forward(t.f4()?)))
    }

    fn apply_norm(m: &Infallible, _: &BurnTensor, _: bool) -> Result<BurnTensor, BurnError> {
        match *m {}
    }

    fn reshape(t: &BurnTensor, to: [usize; 4]) -> Result<BurnTensor, BurnError> {
        Ok(BurnTensor::F4(t.f2()?.reshape(to)))
    }

    fn pool(t: &BurnTensor, k: usize, max: bool) -> Result<BurnTensor, BurnError> {
        let t = t.f4()?;
        Ok(BurnTensor::F4(if max {
            MaxPool2dConfig::new([k, k]).with_strides([k, k]).init().forward(t)
        } else {
            AvgPool2dConfig::new([k, k]).with_strides([k, k]).init().forward(t)
        }))
    }

    fn flatten(t: &BurnTensor) -> Result<BurnTensor, BurnError> {
        match t {
            BurnTensor::F4(t) => Ok(BurnTensor::F2(t.clone().flatten::<2>(1, 3))),
            t => Ok(BurnTensor::F2(t.f2()?)),
        }
    }

    fn times(t: &BurnTensor, mask: Vec<f32>) -> Result<BurnTensor, BurnError> {
        match t {
            BurnTensor::F4(t) => {
                let mask = Tensor::from_data(TensorData::new(mask, t.shape()), &t.device());
                Ok(BurnTensor::F4(t.clone() * mask))
            }
            t => {
                let t = t.f2()?;
                let mask = Tensor::from_data(TensorData::new(mask, t.shape()), &t.device());
                Ok(BurnTensor::F2(t * mask))
            }
        }
    }

    fn activate(t: &BurnTensor, layer: Layer) -> Result<BurnTensor, BurnError> {
        match layer {
            Layer::Tanh => either(t, tanh, tanh),
            Layer::Sigmoid => either(t, sigmoid, sigmoid),
            _ => either(t, relu, relu),
        }
    }
}
