//! A network's precision, one argument for every framework: what it asks of the matmuls and
//! convolutions, parsed once here and applied by each framework's model on every pass.

use serde_json::Value;

/// The arithmetic of a network's matmuls and convolutions (`precision`): saved with the model as
/// every argument is, and applied on each pass, as PyTorch's switches and `torch.autocast` are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// Full FP32 (the default).
    #[default]
    Fp32,
    /// FP32 tensors, matmuls in TF32 on an NVIDIA GPU (`torch.backends.cuda.matmul.allow_tf32`;
    /// candle's reduced-precision GEMM); the CPU computes FP32 as before.
    Tf32,
    /// FP32 weights, matmuls and convolutions in bf16 (tch: `torch.autocast` on the model's
    /// device, CPU or CUDA; candle: the definition's linear and convolution layers cast).
    Bf16,
}

impl Precision {
    /// `precision` in a model's arguments: `"fp32"` (or none), `"tf32"` or `"bf16"`.
    pub fn from_arg(v: &Value) -> Result<Precision, String> {
        match v.as_str() {
            _ if v.is_null() => Ok(Precision::Fp32),
            Some("fp32") => Ok(Precision::Fp32),
            Some("tf32") => Ok(Precision::Tf32),
            Some("bf16") => Ok(Precision::Bf16),
            _ => Err(format!("`precision` must be \"fp32\", \"tf32\" or \"bf16\", not {v}")),
        }
    }
}
