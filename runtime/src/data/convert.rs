//! What the tensor conversions of every framework share (`torch.rs`, `candle.rs`): the impls
//! for single scalars (a rank-0 tensor) and for the structures `Xy`, `Indexed`, pairs, triples
//! and maps by name (a network's several inputs), written once for any pair of to/from traits;
//! a structure of tensors moved to a device or picked at rows ([`TensorTree`]), written once for
//! any framework's tensor ([`DeviceTensor`]); and a tensor's values read back as an array.

#[cfg(any(feature = "torch", feature = "candle"))]
use super::DataError;
#[cfg(any(feature = "torch", feature = "candle"))]
use ndarray::{Array, ArrayD, Dimension, IxDyn};
use std::collections::BTreeMap;

/// A framework's tensor as the data layer moves it: the seam each framework fills once.
pub trait DeviceTensor: Sized {
    /// Where a tensor can be.
    type Device;
    /// The framework's error.
    type Error;
    /// The same on `device` (itself where it is there already).
    fn moved(self, device: &Self::Device) -> Result<Self, Self::Error>;
    /// Its elements along the leading axis at positions `at`, a tensor on the same device.
    fn picked(&self, at: &Self) -> Result<Self, Self::Error>;
}

/// A tensor `T`, or a pair, triple or map by name of them, moved to a device as a whole (the
/// tensors a batch gives, moved once), or the elements at the same positions of each.
pub trait TensorTree<T: DeviceTensor>: Sized {
    /// The same on `device`.
    fn onto(self, device: &T::Device) -> Result<Self, T::Error>;
    /// The elements at positions `at` (a tensor of indices on the same device), of each tensor.
    fn rows(&self, at: &T) -> Result<Self, T::Error>;
}

impl<T: DeviceTensor> TensorTree<T> for T {
    fn onto(self, device: &T::Device) -> Result<T, T::Error> {
        self.moved(device)
    }

    fn rows(&self, at: &T) -> Result<T, T::Error> {
        self.picked(at)
    }
}

impl<T: DeviceTensor, A: TensorTree<T>, B: TensorTree<T>> TensorTree<T> for (A, B) {
    fn onto(self, device: &T::Device) -> Result<Self, T::Error> {
        Ok((self.0.onto(device)?, self.1.onto(device)?))
    }

    fn rows(&self, at: &T) -> Result<Self, T::Error> {
        Ok((self.0.rows(at)?, self.1.rows(at)?))
    }
}

impl<T: DeviceTensor, A: TensorTree<T>, B: TensorTree<T>, C: TensorTree<T>> TensorTree<T> for (A, B, C) {
    fn onto(self, device: &T::Device) -> Result<Self, T::Error> {
        Ok((self.0.onto(device)?, self.1.onto(device)?, self.2.onto(device)?))
    }

    fn rows(&self, at: &T) -> Result<Self, T::Error> {
        Ok((self.0.rows(at)?, self.1.rows(at)?, self.2.rows(at)?))
    }
}

impl<T: DeviceTensor, A: TensorTree<T>> TensorTree<T> for BTreeMap<String, A> {
    fn onto(self, device: &T::Device) -> Result<Self, T::Error> {
        self.into_iter().map(|(k, v)| Ok((k, v.onto(device)?))).collect()
    }

    fn rows(&self, at: &T) -> Result<Self, T::Error> {
        self.iter().map(|(k, v)| Ok((k.clone(), v.rows(at)?))).collect()
    }
}

/// A tensor's values, `flat` in its `shape`, as an array of `D`'s rank; the error names both.
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) fn array_of<S, D: Dimension>(shape: &[usize], flat: Vec<S>) -> Result<Array<S, D>, DataError> {
    let dynamic = ArrayD::from_shape_vec(IxDyn(shape), flat).map_err(|e| DataError::Shapes(e.to_string()))?;
    let rank = D::NDIM.map_or("any rank".to_string(), |n| format!("rank {n}"));
    dynamic
        .into_dimensionality::<D>()
        .map_err(|_| DataError::Shapes(format!("a tensor of shape {shape:?} read as an array of {rank}")))
}

/// A tensor of another element type (`what`: the framework's word for it, and the tensor's)
/// read as `S`.
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) fn read_as<S>(what: std::fmt::Arguments<'_>) -> DataError {
    DataError::Shapes(format!("a tensor of {what} read as {}", std::any::type_name::<S>()))
}

/// Implements a framework's `To`/`From` traits (each with `type Tensors` and one method) for the
/// scalars `$t` (made by `$make` from `$v`, read back as a rank-0 array) and for `Xy`,
/// `Indexed`, tuples of two and three and `BTreeMap<String, _>` of convertible parts, and
/// `Dataset`'s methods of the same names. `Tensor`, `Dataset` and the trait names resolve where
/// it is called.
#[cfg(any(feature = "torch", feature = "candle"))]
macro_rules! tensor_conversions {
    ($to:ident :: $to_fn:ident, $from:ident :: $from_fn:ident, |$v:ident| $make:expr, [$($t:ty),*]) => {
        $(
            impl $to for $t {
                type Tensors = Tensor;
                fn $to_fn(&self) -> Result<Tensor, DataError> {
                    let $v = *self;
                    $make
                }
            }
            impl $from for $t {
                type Tensors = Tensor;
                fn $from_fn(t: &Tensor) -> Result<Self, DataError> {
                    let a = $crate::data::ndarray::ArrayD::<$t>::$from_fn(t)?;
                    if a.ndim() != 0 {
                        return Err(DataError::Shapes(format!("a tensor of shape {:?} read as one {}", a.shape(), stringify!($t))));
                    }
                    Ok(a.into_iter().next().expect("one value"))
                }
            }
        )*
        $crate::data::convert::tensor_conversions!(@pair $to::$to_fn, $from::$from_fn, Xy, x, y);
        $crate::data::convert::tensor_conversions!(@pair $to::$to_fn, $from::$from_fn, Indexed, i, e);
        $crate::data::convert::tensor_conversions!(@tuple $to::$to_fn, $from::$from_fn, A 0, B 1);
        $crate::data::convert::tensor_conversions!(@tuple $to::$to_fn, $from::$from_fn, A 0, B 1, C 2);
        impl<A: $to> $to for std::collections::BTreeMap<String, A> {
            type Tensors = std::collections::BTreeMap<String, A::Tensors>;
            fn $to_fn(&self) -> Result<Self::Tensors, DataError> {
                self.iter().map(|(k, v)| Ok((k.clone(), v.$to_fn()?))).collect()
            }
        }
        impl<A: $from> $from for std::collections::BTreeMap<String, A> {
            type Tensors = std::collections::BTreeMap<String, A::Tensors>;
            fn $from_fn(t: &Self::Tensors) -> Result<Self, DataError> {
                t.iter().map(|(k, v)| Ok((k.clone(), A::$from_fn(v)?))).collect()
            }
        }
        impl<E: $to + Send + 'static> Dataset<E>
        where
            E::Tensors: Send + 'static,
        {
            #[doc = concat!("Every element (or batch) as tensors ([`", stringify!($to), "`]) of the same")]
            /// shapes and element types; a batched dataset stays batched.
            pub fn $to_fn(&self) -> Dataset<E::Tensors> {
                self.try_map(|e| e.$to_fn())
            }
        }
        impl<T: Send + 'static> Dataset<T> {
            #[doc = concat!("Tensors as `ndarray` elements `E` again ([`", stringify!($from), "`]), the same")]
            /// values bit for bit; a tensor of another element type or rank ends the pass with an
            /// error.
            pub fn $from_fn<E: $from<Tensors = T> + Send + 'static>(&self) -> Dataset<E> {
                self.try_map(|t| E::$from_fn(&t))
            }
        }
    };
    (@tuple $to:ident :: $to_fn:ident, $from:ident :: $from_fn:ident, $($t:ident $i:tt),*) => {
        impl<$($t: $to),*> $to for ($($t,)*) {
            type Tensors = ($($t::Tensors,)*);
            fn $to_fn(&self) -> Result<Self::Tensors, DataError> {
                Ok(($(self.$i.$to_fn()?,)*))
            }
        }
        impl<$($t: $from),*> $from for ($($t,)*) {
            type Tensors = ($($t::Tensors,)*);
            fn $from_fn(t: &Self::Tensors) -> Result<Self, DataError> {
                Ok(($($t::$from_fn(&t.$i)?,)*))
            }
        }
    };
    (@pair $to:ident :: $to_fn:ident, $from:ident :: $from_fn:ident, $name:ident, $a:ident, $b:ident) => {
        impl<A: $to, B: $to> $to for $name<A, B> {
            type Tensors = $name<A::Tensors, B::Tensors>;
            fn $to_fn(&self) -> Result<Self::Tensors, DataError> {
                Ok($name { $a: self.$a.$to_fn()?, $b: self.$b.$to_fn()? })
            }
        }
        impl<A: $from, B: $from> $from for $name<A, B> {
            type Tensors = $name<A::Tensors, B::Tensors>;
            fn $from_fn(t: &Self::Tensors) -> Result<Self, DataError> {
                Ok($name { $a: A::$from_fn(&t.$a)?, $b: B::$from_fn(&t.$b)? })
            }
        }
    };
}
#[cfg(any(feature = "torch", feature = "candle"))]
pub(crate) use tensor_conversions;
