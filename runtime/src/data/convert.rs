//! What the tensor conversions of every framework share (`torch.rs`, `candle.rs`): the impls
//! for single scalars (a rank-0 tensor) and for the structures `Xy`, `Indexed`, pairs, triples
//! and maps by name (a network's several inputs), written once for any pair of to/from traits.

/// Implements a framework's `To`/`From` traits (each with `type Tensors` and one method) for the
/// scalars `$t` (made by `$make` from `$v`, read back as a rank-0 array) and for `Xy`,
/// `Indexed`, tuples of two and three and `BTreeMap<String, _>` of convertible parts. `Tensor`
/// and the trait names resolve where it is called.
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
pub(crate) use tensor_conversions;
