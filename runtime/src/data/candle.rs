//! Datasets as candle tensors and back (the `candle` feature), as [`super::torch`] does for tch:
//! every leaf becomes a CPU tensor of its shape and dtype (a batch's leading axis included),
//! structures stay as they are, and the way back gives the same values bit for bit.

use super::element::{Indexed, Xy};
use super::{DataError, Dataset};
use candle_core::{Device, Tensor, WithDType};
use ndarray::{Array, ArrayD, Dimension, IxDyn};

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

/// A candle tensor, or a structure of them, moved to a device as a whole (as [`super::Onto`]
/// does for tch).
pub trait CandleOnto: Sized {
    /// The same on `device` (the tensors a batch gives, moved once).
    fn onto(self, device: &Device) -> candle_core::Result<Self>;
    /// The elements at positions `at` (a `u32` tensor on the same device), of each tensor.
    fn rows(&self, at: &Tensor) -> candle_core::Result<Self>;
}

impl CandleOnto for Tensor {
    fn onto(self, device: &Device) -> candle_core::Result<Tensor> {
        if self.device().same_device(device) {
            Ok(self)
        } else {
            self.to_device(device)
        }
    }

    fn rows(&self, at: &Tensor) -> candle_core::Result<Tensor> {
        self.index_select(at, 0)
    }
}

impl<A: CandleOnto, B: CandleOnto> CandleOnto for (A, B) {
    fn onto(self, device: &Device) -> candle_core::Result<Self> {
        Ok((self.0.onto(device)?, self.1.onto(device)?))
    }

    fn rows(&self, at: &Tensor) -> candle_core::Result<Self> {
        Ok((self.0.rows(at)?, self.1.rows(at)?))
    }
}

impl<A: CandleOnto, B: CandleOnto, C: CandleOnto> CandleOnto for (A, B, C) {
    fn onto(self, device: &Device) -> candle_core::Result<Self> {
        Ok((self.0.onto(device)?, self.1.onto(device)?, self.2.onto(device)?))
    }

    fn rows(&self, at: &Tensor) -> candle_core::Result<Self> {
        Ok((self.0.rows(at)?, self.1.rows(at)?, self.2.rows(at)?))
    }
}

impl<A: CandleOnto> CandleOnto for std::collections::BTreeMap<String, A> {
    fn onto(self, device: &Device) -> candle_core::Result<Self> {
        self.into_iter().map(|(k, v)| Ok((k, v.onto(device)?))).collect()
    }

    fn rows(&self, at: &Tensor) -> candle_core::Result<Self> {
        self.iter().map(|(k, v)| Ok((k.clone(), v.rows(at)?))).collect()
    }
}

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
            return Err(DataError::Shapes(format!(
                "a tensor of dtype {:?} read as {}",
                t.dtype(),
                std::any::type_name::<S>()
            )));
        }
        let shape = t.dims().to_vec();
        let flat = t.flatten_all().and_then(|f| f.to_vec1::<S>()).map_err(candle_err)?;
        let dynamic = ArrayD::from_shape_vec(IxDyn(&shape), flat).map_err(|e| DataError::Shapes(e.to_string()))?;
        let rank = D::NDIM.map_or("any rank".to_string(), |n| format!("rank {n}"));
        dynamic
            .into_dimensionality::<D>()
            .map_err(|_| DataError::Shapes(format!("a tensor of shape {shape:?} read as an array of {rank}")))
    }
}

super::convert::tensor_conversions!(
    ToCandle::to_candle,
    FromCandle::from_candle,
    |v| Tensor::new(v, &Device::Cpu).map_err(candle_err),
    [f32, f64, i32, i64, u8, u32]
);

impl<E: ToCandle + Send + 'static> Dataset<E>
where
    E::Tensors: Send + 'static,
{
    /// Every element (or batch) as candle tensors of the same shapes and dtypes; a batched
    /// dataset stays batched.
    pub fn to_candle(&self) -> Dataset<E::Tensors> {
        self.try_map(|e| e.to_candle())
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// Candle tensors as `ndarray` elements `E` again, the same values bit for bit; a tensor of
    /// another dtype or rank ends the pass with an error.
    pub fn from_candle<E: FromCandle<Tensors = T> + Send + 'static>(&self) -> Dataset<E> {
        self.try_map(|t| E::from_candle(&t))
    }
}

#[cfg(test)]
mod tests;
