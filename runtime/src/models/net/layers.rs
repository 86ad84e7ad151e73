//! A definition's layers as its arguments spell them, and the seeded randomness (initial weights,
//! dropout masks) that makes a network's training the same in every framework and on resume.

use super::Layer;
use serde_json::Value;

/// What one element is at some layer: flat features, or an image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// `n` features.
    Flat(usize),
    /// `[channels, height, width]`.
    Image([usize; 3]),
}

impl Shape {
    /// The number of values.
    pub fn len(&self) -> usize {
        match *self {
            Shape::Flat(n) => n,
            Shape::Image([c, h, w]) => c * h * w,
        }
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Flat(n) => write!(f, "{n} features"),
            Shape::Image([c, h, w]) => write!(f, "images of {c}×{h}×{w}"),
        }
    }
}

/// One layer of a definition's `layers`, the `at`-th.
pub(super) fn layer(at: usize, l: &Value) -> Result<Layer, String> {
    let unknown = || {
        format!(
            "layer {at} ({l}) is not one of {{\"linear\": N}}, \"relu\", \"tanh\", \"sigmoid\", {{\"reshape\": [C, H, W]}}, \
             {{\"conv2d\": {{\"channels\": N, \"kernel\": K}}}}, {{\"max_pool\": K}}, {{\"avg_pool\": K}}, \"flatten\", {{\"dropout\": P}}, \"batch_norm\""
        )
    };
    if let Some(name) = l.as_str() {
        return match name {
            "relu" => Ok(Layer::Relu),
            "tanh" => Ok(Layer::Tanh),
            "sigmoid" => Ok(Layer::Sigmoid),
            "flatten" => Ok(Layer::Flatten),
            "batch_norm" => Ok(Layer::BatchNorm),
            _ => Err(unknown()),
        };
    }
    let Some((kind, v)) = l.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
        return Err(unknown());
    };
    let positive = |v: &Value, what: &str| {
        v.as_u64()
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| format!("layer {at} ({l}): {what} must be a positive integer, not {v}"))
    };
    match kind.as_str() {
        "linear" => Ok(Layer::Linear(positive(v, "its outputs")?)),
        "max_pool" => Ok(Layer::MaxPool(positive(v, "its window")?)),
        "avg_pool" => Ok(Layer::AvgPool(positive(v, "its window")?)),
        "dropout" => v.as_f64().filter(|p| (0.0..1.0).contains(p)).map(Layer::Dropout).ok_or_else(|| {
            format!("layer {at} ({l}): the dropout probability must be a number from 0 up to 1, not {v}")
        }),
        "reshape" => {
            match v.as_array().map(|a| a.iter().map(|d| positive(d, "each side")).collect::<Result<Vec<_>, _>>()) {
                Some(Ok(d)) if d.len() == 3 => Ok(Layer::Reshape([d[0], d[1], d[2]])),
                Some(Err(e)) => Err(e),
                _ => Err(format!("layer {at} ({l}): reshape takes [channels, height, width]")),
            }
        }
        "conv2d" => {
            let o = v.as_object().ok_or_else(|| {
                format!(
                    "layer {at} ({l}): conv2d takes {{\"channels\": N, \"kernel\": K, \"stride\": 1, \"padding\": 0}}"
                )
            })?;
            if let Some(k) = o.keys().find(|k| !["channels", "kernel", "stride", "padding"].contains(&k.as_str())) {
                return Err(format!(
                    "layer {at} ({l}): conv2d has no `{k}` (it takes channels, kernel, stride, padding)"
                ));
            }
            let need = |k: &str| {
                o.get(k).ok_or_else(|| format!("layer {at} ({l}): conv2d needs `{k}`")).and_then(|v| positive(v, k))
            };
            let padding = match o.get("padding") {
                None => 0,
                Some(v) => v
                    .as_u64()
                    .ok_or_else(|| format!("layer {at} ({l}): padding must be a non-negative integer, not {v}"))?
                    as usize,
            };
            let stride = o.get("stride").map_or(Ok(1), |v| positive(v, "stride"))?;
            Ok(Layer::Conv2d { channels: need("channels")?, kernel: need("kernel")?, stride, padding })
        }
        _ => Err(unknown()),
    }
}

/// A dropout mask for `n` values, seeded by the definition's seed, the layer and the step:
/// 0 with probability `p`, else `1 / (1 - p)`. Drawn by dryml rather than the framework, so
/// the masks of a resumed training are the uninterrupted one's.
pub fn dropout_mask(seed: u64, layer: usize, step: u64, n: usize, p: f64) -> Vec<f32> {
    let mut rng = fastrand::Rng::with_seed(
        seed ^ (layer as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ step.wrapping_mul(0xc2b2_ae3d_27d4_eb4f),
    );
    let keep = (1.0 / (1.0 - p)) as f32;
    (0..n).map(|_| if rng.f64() < p { 0.0 } else { keep }).collect()
}

/// PyTorch's default initialisation of a linear or convolution layer, seeded: `weights` values
/// and `outputs` biases uniform in ±1/√fan_in (the inputs feeding one output). Frameworks whose
/// own initialisation cannot be seeded use it.
pub fn seeded_init(fan_in: usize, weights: usize, outputs: usize, rng: &mut fastrand::Rng) -> (Vec<f32>, Vec<f32>) {
    let bound = 1.0 / (fan_in as f32).sqrt();
    let mut draw = |n: usize| (0..n).map(|_| (rng.f32() * 2.0 - 1.0) * bound).collect::<Vec<f32>>();
    (draw(weights), draw(outputs))
}
