//! Datasets as tch tensors and back (the `torch` feature): every leaf becomes a tensor of its
//! shape and kind (a batch's leading axis included), structures stay as they are, and the way
//! back gives the same values bit for bit.

use super::convert::{array_of, read_as, DeviceTensor, TensorTree};
use super::element::{Indexed, Xy};
use super::{DataError, Dataset};
use ::tch::Tensor;
use ndarray::{Array, Dimension};

/// A leaf, or a structure of leaves, that becomes tensors.
pub trait ToTch {
    /// The same structure, of tensors.
    type Tensors;
    /// The tensors (on the CPU).
    fn to_tch(&self) -> Result<Self::Tensors, DataError>;
}

/// Tensors that become a leaf, or a structure of leaves, again.
pub trait FromTch: Sized {
    /// The structure of tensors it comes from.
    type Tensors;
    /// The values, checked against the tensor's kind and rank.
    fn from_tch(t: &Self::Tensors) -> Result<Self, DataError>;
}

impl DeviceTensor for Tensor {
    type Device = ::tch::Device;
    type Error = ::tch::TchError;

    fn moved(self, device: &::tch::Device) -> Result<Tensor, ::tch::TchError> {
        if self.device() == *device {
            Ok(self)
        } else {
            self.f_to_device(*device)
        }
    }

    fn picked(&self, at: &Tensor) -> Result<Tensor, ::tch::TchError> {
        self.f_index_select(0, at)
    }
}

/// A tensor, or a structure of them, moved to a device as a whole or picked at rows (`onto`,
/// `rows`: [`TensorTree`]).
pub trait Onto: TensorTree<Tensor> {}
impl<S: TensorTree<Tensor>> Onto for S {}

/// The scalar types tensors hold, with their tch kind.
pub trait TchScalar: ::tch::kind::Element + Copy + 'static {}
impl TchScalar for f32 {}
impl TchScalar for f64 {}
impl TchScalar for i32 {}
impl TchScalar for i64 {}
impl TchScalar for u8 {}

impl<S: TchScalar, D: Dimension> ToTch for Array<S, D> {
    type Tensors = Tensor;
    fn to_tch(&self) -> Result<Tensor, DataError> {
        let a = self.as_standard_layout();
        let shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
        let t = Tensor::f_from_slice(a.as_slice().expect("standard layout"))
            .map_err(|e| DataError::Argument(e.to_string()))?;
        // A slice is already one axis; a reshape is an op of its own (a few µs per batch).
        if shape.len() == 1 {
            return Ok(t);
        }
        t.f_view(shape.as_slice()).map_err(|e| DataError::Argument(e.to_string()))
    }
}

impl<S: TchScalar, D: Dimension> FromTch for Array<S, D> {
    type Tensors = Tensor;
    fn from_tch(t: &Tensor) -> Result<Self, DataError> {
        if t.kind() != S::KIND {
            return Err(read_as::<S>(format_args!("kind {:?}", t.kind())));
        }
        let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
        let mut flat = vec![S::ZERO; shape.iter().product()];
        let numel = flat.len();
        t.to_device(::tch::Device::Cpu)
            .contiguous()
            .f_copy_data(&mut flat, numel)
            .map_err(|e| DataError::Argument(e.to_string()))?;
        array_of(&shape, flat)
    }
}

super::convert::tensor_conversions!(
    ToTch::to_tch,
    FromTch::from_tch,
    |v| Ok(Tensor::from_slice(&[v]).reshape(Vec::<i64>::new())),
    [f32, f64, i32, i64, u8]
);

#[cfg(test)]
mod tests {
    use super::*;
    use ::tch::Kind;
    use ndarray::{array, Array1, Array2};

    #[test]
    fn tensors_round_trip_bit_for_bit_and_keep_the_batch() {
        let odd = [0.1f32, -0.0, f32::NAN, f32::INFINITY, f32::MIN_POSITIVE / 2.0, -3.5];
        let rows: Vec<Xy<Array1<f32>, i64>> =
            (0..7).map(|i| Xy { x: Array1::from_iter(odd.iter().map(|v| v * (i as f32 + 1.0))), y: i }).collect();
        let data = Dataset::from_vec(rows.clone());
        let batched = data.batch(3, false).unwrap();
        let tensors = batched.to_tch();
        assert_eq!((tensors.len(), tensors.batch_size()), (batched.len(), Some(3)), "batched as it was");
        let shapes: Vec<(Vec<i64>, Vec<i64>, Kind)> =
            tensors.collect().unwrap().iter().map(|t| (t.x.size(), t.y.size(), t.x.kind())).collect();
        assert_eq!(
            shapes,
            [
                (vec![3, 6], vec![3], Kind::Float),
                (vec![3, 6], vec![3], Kind::Float),
                (vec![1, 6], vec![1], Kind::Float)
            ]
        );
        let back: Vec<Xy<Array1<f32>, i64>> =
            tensors.from_tch::<Xy<Array2<f32>, Array1<i64>>>().unbatch().unwrap().collect().unwrap();
        let bits = |v: &[Xy<Array1<f32>, i64>]| {
            v.iter().map(|e| (e.x.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), e.y)).collect::<Vec<_>>()
        };
        assert_eq!(bits(&back), bits(&rows));
        // Every kind a leaf can be, unbatched too.
        let mixed = Dataset::from_vec(vec![(array![1.5f64, -2.0], array![[1u8, 255]], 7i32)])
            .map(|(a, b, c)| Xy { x: Indexed { i: c, e: a }, y: b });
        let again = mixed.to_tch().from_tch::<Xy<Indexed<i32, Array1<f64>>, Array2<u8>>>().collect().unwrap();
        assert_eq!(again, mixed.collect().unwrap());
    }

    #[test]
    fn a_tensor_of_another_kind_or_rank_is_an_error() {
        let t = Dataset::from_vec(vec![array![1.0f32, 2.0]]).to_tch();
        let e = t.from_tch::<Array1<f64>>().collect().unwrap_err();
        assert_eq!(e.to_string(), "shapes do not fit: a tensor of kind Float read as f64");
        let e = t.from_tch::<ndarray::Array2<f32>>().collect().unwrap_err();
        assert!(e.to_string().contains("a tensor of shape [2] read as an array of rank 2"), "{e}");
    }
}
