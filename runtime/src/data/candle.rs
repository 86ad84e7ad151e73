//! Datasets as candle tensors and back (the `candle` feature), as [`super::torch`] does for tch:
//! every leaf becomes a CPU tensor of its shape and dtype (a batch's leading axis included),
//! structures stay as they are, and the way back gives the same values bit for bit.

use super::convert::{array_of, read_as, DeviceTensor, TensorTree};
use super::element::{Indexed, Xy};
use super::{DataError, Dataset};
use candle_core::{Device, Tensor, WithDType};
use ndarray::{Array, Dimension};

/// A leaf, or a structure of leaves, that becomes candle tensors.
pub trait ToCandle {
    /// The same structure, of tensors.
    type Tensors;
    /// The tensors (on the CPU).
    fn to_candle(&self) -> Result<Self::Tensors, DataError>;
}

/// Candle tensors that become a leaf, or a structure of leaves, again.
pub trait FromCandle: Sized {
    /// The structure of tensors it comes from.
    type Tensors;
    /// The values, checked against the tensor's dtype and rank.
    fn from_candle(t: &Self::Tensors) -> Result<Self, DataError>;
}

impl DeviceTensor for Tensor {
    type Device = Device;
    type Error = candle_core::Error;

    fn moved(self, device: &Device) -> candle_core::Result<Tensor> {
        if self.device().same_device(device) {
            Ok(self)
        } else {
            self.to_device(device)
        }
    }

    fn picked(&self, at: &Tensor) -> candle_core::Result<Tensor> {
        self.index_select(at, 0)
    }
}

/// A candle tensor, or a structure of them, moved to a device as a whole or picked at rows
/// (`onto`, `rows`: [`TensorTree`]), as [`super::Onto`] does for tch.
pub trait CandleOnto: TensorTree<Tensor> {}
impl<S: TensorTree<Tensor>> CandleOnto for S {}

/// The scalar types both `ndarray` leaves and candle tensors hold.
pub trait CandleScalar: WithDType + Copy + 'static {}
impl CandleScalar for f32 {}
impl CandleScalar for f64 {}
impl CandleScalar for i32 {}
impl CandleScalar for i64 {}
impl CandleScalar for u8 {}
impl CandleScalar for u32 {}

fn candle_err(e: candle_core::Error) -> DataError {
    DataError::Argument(format!("candle: {e}"))
}

impl<S: CandleScalar, D: Dimension> ToCandle for Array<S, D> {
    type Tensors = Tensor;
    fn to_candle(&self) -> Result<Tensor, DataError> {
        let a = self.as_standard_layout();
        Tensor::from_slice(a.as_slice().expect("standard layout"), a.shape(), &Device::Cpu).map_err(candle_err)
    }
}

impl<S: CandleScalar, D: Dimension> FromCandle for Array<S, D> {
    type Tensors = Tensor;
    fn from_candle(t: &Tensor) -> Result<Self, DataError> {
        if t.dtype() != S::DTYPE {
            return Err(read_as::<S>(format_args!("dtype {:?}", t.dtype())));
        }
        let flat = t.flatten_all().and_then(|f| f.to_vec1::<S>()).map_err(candle_err)?;
        array_of(t.dims(), flat)
    }
}

super::convert::tensor_conversions!(
    ToCandle::to_candle,
    FromCandle::from_candle,
    |v| Tensor::new(v, &Device::Cpu).map_err(candle_err),
    [f32, f64, i32, i64, u8, u32]
);

#[cfg(test)]
mod tests;
