//! burn's tensors as the data layer moves them (the `burn` feature): [`BurnTensor`], a tensor of
//! the ranks and kinds dryml's networks pass around, moved to a device or picked at rows, and
//! a batch of rows or images as its tensor.

use super::convert::DeviceTensor;
use burn::tensor::{Device, Int, Tensor, TensorData};
use ndarray::{Array, Array2, Array4, Dimension};

/// A burn tensor of a rank and kind dryml's networks use (burn's tensors carry both in their
/// type): values of rank 1, 2 or 4, or indices.
#[derive(Clone, Debug)]
pub enum BurnTensor {
    /// A loss, or a vector of values.
    F1(Tensor<1>),
    /// Rows: features, scores, targets' values.
    F2(Tensor<2>),
    /// Images: `[n, channels, height, width]`.
    F4(Tensor<4>),
    /// Indices: classes, positions.
    I1(Tensor<1, Int>),
}

/// What a burn call said when it failed (burn panics; dryml catches and says so), or a tensor
/// of another rank or kind than the step takes.
#[derive(Debug, Clone, PartialEq)]
pub struct BurnError(pub String);

impl std::fmt::Display for BurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl BurnTensor {
    /// Its shape.
    pub fn dims(&self) -> Vec<usize> {
        match self {
            BurnTensor::F1(t) => t.dims().to_vec(),
            BurnTensor::F2(t) => t.dims().to_vec(),
            BurnTensor::F4(t) => t.dims().to_vec(),
            BurnTensor::I1(t) => t.dims().to_vec(),
        }
    }

    /// What it is, for errors.
    fn kind(&self) -> &'static str {
        match self {
            BurnTensor::F1(_) => "values of rank 1",
            BurnTensor::F2(_) => "values of rank 2",
            BurnTensor::F4(_) => "values of rank 4",
            BurnTensor::I1(_) => "indices",
        }
    }

    fn wrong(&self, want: &str) -> BurnError {
        BurnError(format!("a tensor of {} where {want} belong", self.kind()))
    }

    /// Its values of rank 1.
    pub fn f1(&self) -> Result<Tensor<1>, BurnError> {
        match self {
            BurnTensor::F1(t) => Ok(t.clone()),
            _ => Err(self.wrong("values of rank 1")),
        }
    }

    /// Its values of rank 2.
    pub fn f2(&self) -> Result<Tensor<2>, BurnError> {
        match self {
            BurnTensor::F2(t) => Ok(t.clone()),
            _ => Err(self.wrong("rows of values")),
        }
    }

    /// Its images.
    pub fn f4(&self) -> Result<Tensor<4>, BurnError> {
        match self {
            BurnTensor::F4(t) => Ok(t.clone()),
            _ => Err(self.wrong("images")),
        }
    }

    /// Its indices.
    pub fn i1(&self) -> Result<Tensor<1, Int>, BurnError> {
        match self {
            BurnTensor::I1(t) => Ok(t.clone()),
            _ => Err(self.wrong("indices")),
        }
    }
}

impl DeviceTensor for BurnTensor {
    type Device = Device;
    type Error = BurnError;

    fn moved(self, device: &Device) -> Result<BurnTensor, BurnError> {
        Ok(match self {
            BurnTensor::F1(t) => BurnTensor::F1(t.to_device(device)),
            BurnTensor::F2(t) => BurnTensor::F2(t.to_device(device)),
            BurnTensor::F4(t) => BurnTensor::F4(t.to_device(device)),
            BurnTensor::I1(t) => BurnTensor::I1(t.to_device(device)),
        })
    }

    fn picked(&self, at: &BurnTensor) -> Result<BurnTensor, BurnError> {
        let at = at.i1()?;
        Ok(match self {
            BurnTensor::F1(t) => BurnTensor::F1(t.clone().select(0, at)),
            BurnTensor::F2(t) => BurnTensor::F2(t.clone().select(0, at)),
            BurnTensor::F4(t) => BurnTensor::F4(t.clone().select(0, at)),
            BurnTensor::I1(t) => BurnTensor::I1(t.clone().select(0, at)),
        })
    }
}

/// A batch of `f32` arrays as one tensor of its rank on burn's CPU.
fn host<const D: usize, I: Dimension>(batch: &Array<f32, I>) -> Tensor<D> {
    let a = batch.as_standard_layout();
    let shape: [usize; D] = a.shape().try_into().expect("the batch's rank is the tensor's");
    Tensor::from_data(TensorData::new(a.as_slice().expect("standard layout").to_vec(), shape), &Device::flex())
}

/// Rows of `f32` features (a batch of `Array1<f32>`) as one `[n, features]` tensor on burn's
/// CPU.
pub fn rows(batch: &Array2<f32>) -> BurnTensor {
    BurnTensor::F2(host(batch))
}

/// Images (a batch of `Array3<f32>`, each `[channels, height, width]`) as one
/// `[n, channels, height, width]` tensor on burn's CPU.
pub fn images(batch: &Array4<f32>) -> BurnTensor {
    BurnTensor::F4(host(batch))
}
