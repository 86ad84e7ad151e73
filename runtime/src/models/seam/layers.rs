//! A definition's layers ([`NetDef`]) in any framework, built and run once over [`LayerOps`]:
//! each framework says how it makes a linear, convolution and batch-norm layer in a network's
//! variables, and how it applies each kind of layer to its tensors.

use super::{Body, Framework, Making};
use crate::data::ndarray::Array1;
use crate::models::net::{dropout_mask, Layer, NetDef, Shape};
use crate::models::precision::Precision;
use crate::models::ModelError;
use serde_json::Value;

/// A framework's layers, as a definition's network uses them.
pub(crate) trait LayerOps: Framework {
    /// A fully connected layer.
    type Linear;
    /// A 2-D convolution.
    type Conv;
    /// Batch normalisation.
    type Norm;
    /// What the layers draw their initial weights from, layer after layer (the definition's seed).
    type Seeds;
    /// Its definitions' model names: a classifier's, and a regressor's.
    const MODELS: [&'static str; 2];

    /// The seeds of a definition's layers.
    fn seeds(def: &NetDef) -> Self::Seeds;
    /// A linear layer of `inputs` to `outputs`.
    fn linear(at: Site<'_, Self>, inputs: usize, outputs: usize) -> Result<Self::Linear, Self::Error>;
    /// A convolution of `inputs` channels to `channels`, a square `kernel`.
    fn conv(
        at: Site<'_, Self>,
        inputs: usize,
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    ) -> Result<Self::Conv, Self::Error>;
    /// Batch normalisation of what has `shape` (the channels of images, or flat features).
    fn norm(at: Site<'_, Self>, shape: Shape) -> Result<Self::Norm, Self::Error>;

    /// The same tensor, shared (no copy of its values).
    fn share(t: &Self::Tensor) -> Self::Tensor;
    /// A linear layer applied, in `precision`.
    fn apply_linear(m: &Self::Linear, t: &Self::Tensor, precision: Precision) -> Result<Self::Tensor, Self::Error>;
    /// A convolution applied, in `precision`.
    fn apply_conv(m: &Self::Conv, t: &Self::Tensor, precision: Precision) -> Result<Self::Tensor, Self::Error>;
    /// Batch normalisation applied; `train`: it learns its statistics.
    fn apply_norm(m: &Self::Norm, t: &Self::Tensor, train: bool) -> Result<Self::Tensor, Self::Error>;
    /// Flat features as images of `[n, channels, height, width]`.
    fn reshape(t: &Self::Tensor, to: [usize; 4]) -> Result<Self::Tensor, Self::Error>;
    /// Pooling over square windows of `k` (and stride): their largest value, or their mean.
    fn pool(t: &Self::Tensor, k: usize, max: bool) -> Result<Self::Tensor, Self::Error>;
    /// Each element's features as one flat vector.
    fn flatten(t: &Self::Tensor) -> Result<Self::Tensor, Self::Error>;
    /// Each value times its factor in `mask` (of the tensor's shape, row-major).
    fn times(t: &Self::Tensor, mask: Vec<f32>) -> Result<Self::Tensor, Self::Error>;
    /// An elementwise activation: ReLU, tanh or the logistic function.
    fn activate(t: &Self::Tensor, layer: Layer) -> Result<Self::Tensor, Self::Error>;
}

/// Where a layer is made: the network's variables, its device, the seeds, the layer's place.
// tch makes its layers on its store's device, seeded by libtorch's generator.
#[cfg_attr(not(feature = "candle"), allow(dead_code))]
pub(crate) struct Site<'a, F: LayerOps> {
    pub(crate) vars: &'a mut F::Vars,
    pub(crate) device: &'a F::Device,
    pub(crate) seeds: &'a mut F::Seeds,
    pub(crate) at: usize,
}

/// A definition's layers in framework `F`.
pub(crate) struct Layers<F: LayerOps>(Vec<(Layer, Built<F>)>);

/// A layer's module, for the layers that hold weights.
enum Built<F: LayerOps> {
    Linear(F::Linear),
    Conv(F::Conv),
    Norm(F::Norm),
    Plain,
}

impl<F: LayerOps> Body<F> for Layers<F>
where
    Array1<f32>: super::Feeds<F, Tensors = F::Tensor>,
{
    type X = Array1<f32>;
    const NAME: &'static str = F::MODELS[0];
    const VALUES_NAME: &'static str = F::MODELS[1];

    fn definition(args: &Value, who: &str) -> Result<NetDef, ModelError> {
        NetDef::from_args(args, who)
    }

    fn make(Making { vars, device, def, inputs, who, .. }: Making<'_, F>) -> Result<Layers<F>, ModelError> {
        let shapes = def.shapes(inputs, who)?;
        let mut seeds = F::seeds(def);
        let mut layers = Vec::new();
        for (at, (l, s)) in def.layers.iter().zip(&shapes).enumerate() {
            let site = Site { vars: &mut *vars, device, seeds: &mut seeds, at };
            let built = match (*l, *s) {
                (Layer::Linear(n), _) => F::linear(site, s.len(), n).map(Built::Linear),
                (Layer::Conv2d { channels, kernel, stride, padding }, Shape::Image([c, _, _])) => {
                    F::conv(site, c, channels, kernel, stride, padding).map(Built::Conv)
                }
                (Layer::BatchNorm, s) => F::norm(site, s).map(Built::Norm),
                _ => Ok(Built::Plain),
            }
            .map_err(super::fail(who, "building a layer"))?;
            layers.push((*l, built));
        }
        Ok(Layers(layers))
    }

    fn forward(&self, x: &F::Tensor, train: bool, def: &NetDef, step: u64) -> Result<F::Tensor, F::Error> {
        let mut t = F::share(x);
        for (at, (l, built)) in self.0.iter().enumerate() {
            t = match (*l, built) {
                (Layer::Reshape([c, h, w]), _) => F::reshape(&t, [F::dims(&t)[0], c, h, w]),
                (_, Built::Linear(m)) => F::apply_linear(m, &t, def.precision),
                (_, Built::Conv(m)) => F::apply_conv(m, &t, def.precision),
                (_, Built::Norm(m)) => F::apply_norm(m, &t, train),
                (Layer::MaxPool(k), _) => F::pool(&t, k, true),
                (Layer::AvgPool(k), _) => F::pool(&t, k, false),
                (Layer::Flatten, _) => F::flatten(&t),
                (Layer::Dropout(p), _) if train && p > 0.0 => {
                    let n = F::dims(&t).iter().product();
                    F::times(&t, dropout_mask(def.seed, at, step, n, p))
                }
                (Layer::Relu | Layer::Tanh | Layer::Sigmoid, _) => F::activate(&t, *l),
                (Layer::Dropout(_) | Layer::Linear(_) | Layer::Conv2d { .. } | Layer::BatchNorm, _) => Ok(t),
            }?;
        }
        Ok(t)
    }
}
