//! Candle's reduced precision: bf16 layers by autocast's rule (inputs and weights cast, the
//! result back in FP32) and TF32 matmuls switched on for a training and back after.

use super::*;

/// A linear layer in bf16: its input, weight and bias cast, the product cast back to FP32
/// (autocast's rule for a matmul); the variables and their gradients stay FP32.
pub(super) fn linear_bf16(m: &candle_nn::Linear, x: &Tensor) -> candle_core::Result<Tensor> {
    let y = x.to_dtype(DType::BF16)?.broadcast_matmul(&m.weight().to_dtype(DType::BF16)?.t()?)?;
    let y = match m.bias() {
        Some(b) => y.broadcast_add(&b.to_dtype(DType::BF16)?)?,
        None => y,
    };
    y.to_dtype(DType::F32)
}

/// A convolution in bf16, as [`linear_bf16`].
pub(super) fn conv_bf16(m: &candle_nn::Conv2d, x: &Tensor) -> candle_core::Result<Tensor> {
    let c = m.config();
    let w = m.weight().to_dtype(DType::BF16)?;
    let y = x.to_dtype(DType::BF16)?.conv2d(&w, c.padding, c.stride, c.dilation, c.groups)?;
    let y = match m.bias() {
        Some(b) => y.broadcast_add(&b.to_dtype(DType::BF16)?.reshape((1, b.dim(0)?, 1, 1))?)?,
        None => y,
    };
    y.to_dtype(DType::F32)
}

/// TF32 for one pass on CUDA: candle's reduced-precision FP32 GEMM, a switch of the whole
/// process, put back when dropped (nothing on the CPU, which computes FP32 as before).
pub(super) struct Tf32(Option<bool>);

impl Tf32 {
    pub(super) fn on(precision: Precision) -> Tf32 {
        if precision != Precision::Tf32 {
            return Tf32(None);
        }
        let was = candle_core::cuda::gemm_reduced_precision_f32();
        candle_core::cuda::set_gemm_reduced_precision_f32(true);
        Tf32(Some(was))
    }
}

impl Drop for Tf32 {
    fn drop(&mut self) {
        if let Some(was) = self.0 {
            candle_core::cuda::set_gemm_reduced_precision_f32(was);
        }
    }
}
