//! What a dataset's elements can be: leaves (scalars and `ndarray` arrays) and the structures
//! around them (tuples, maps, [`Xy`], [`Indexed`]), and how each stacks into a batch, in which
//! every leaf gains a leading axis, and splits back.

use super::DataError;
use crate::display::table::cell_text;
use ndarray::{Array, ArrayD, Axis, Dimension, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn};
use std::any::Any;
use std::collections::BTreeMap;

/// What one pass over a dataset yields: elements, or the error that ends the pass.
pub type Elements<E> = Box<dyn Iterator<Item = Result<E, DataError>> + Send>;

/// A supervised element: features `x` and target `y` (DRYML's `(X, Y)`).
#[derive(Debug, Clone, PartialEq)]
pub struct Xy<X, Y> {
    /// The features.
    pub x: X,
    /// The target.
    pub y: Y,
}

/// An indexed element: its index `i` (its position in the source; a batch's are an array) and
/// the element `e` (DRYML's `(I, X)` or `(I, (X, Y))`).
#[derive(Debug, Clone, PartialEq)]
pub struct Indexed<I, E> {
    /// The index.
    pub i: I,
    /// The element.
    pub e: E,
}

/// A dataset element: it stacks into a batch ([`Element::Batch`]).
pub trait Element: Clone + Send + Sync + 'static {
    /// Its batch: every leaf with a leading axis.
    type Batch: Batch<Item = Self>;
    /// Stacks `items` (at least one) into a batch; leaves that differ in shape are an error.
    fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError>;
    /// Applies `f` (a [`ScalarFn`]) to every scalar of its type in every leaf.
    fn map_scalars(&mut self, f: &dyn Any);
}

/// A batch of elements, which splits back into them.
pub trait Batch: Clone + Send + Sync + 'static {
    /// One element of it.
    type Item: Element;
    /// How many elements it holds (the leading axis).
    fn batch_len(&self) -> usize;
    /// Splits it along the leading axis; leaves with different leading lengths are an error.
    fn unstack(self) -> Result<Vec<Self::Item>, DataError>;
}

/// A function on one scalar type, for [`Element::map_scalars`] (what `Dataset::map_el` sends
/// down to every leaf; leaves of another scalar type are left alone).
pub struct ScalarFn<S>(pub Box<dyn Fn(S) -> S + Send + Sync>);

/// The number types a leaf can hold.
pub trait Scalar: Element<Batch = Array<Self, Ix1>> + Copy + std::fmt::Debug + PartialEq {}

fn map_one<S: Copy + 'static>(v: &mut S, f: &dyn Any) {
    if let Some(ScalarFn(g)) = f.downcast_ref::<ScalarFn<S>>() {
        *v = g(*v);
    }
}

macro_rules! scalars {
    ($($t:ty),*) => {$(
        impl Element for $t {
            type Batch = Array<$t, Ix1>;
            fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
                Ok(Array::from_vec(items))
            }
            fn map_scalars(&mut self, f: &dyn Any) {
                map_one(self, f);
            }
        }
        impl Scalar for $t {}
    )*};
}
scalars!(f32, f64, i32, i64, u8, u32, u64, usize, bool);

/// Stacks arrays of one shape along a new leading axis.
fn stack_arrays<S: Clone, D: Dimension>(items: Vec<Array<S, D>>) -> Result<Array<S, D::Larger>, DataError> {
    let first = items.first().ok_or(DataError::EmptyBatch)?.shape().to_vec();
    if let Some((at, other)) = items.iter().enumerate().find(|(_, a)| a.shape() != first.as_slice()) {
        return Err(DataError::Shapes(format!(
            "element {at} of a batch has shape {:?}, element 0 has {first:?}",
            other.shape()
        )));
    }
    let views: Vec<_> = items.iter().map(|a| a.view()).collect();
    ndarray::stack(Axis(0), &views).map_err(|e| DataError::Shapes(e.to_string()))
}

/// Splits an array along its leading axis.
fn unstack_array<S: Clone, D: ndarray::RemoveAxis>(a: Array<S, D>) -> Result<Vec<Array<S, D::Smaller>>, DataError> {
    if a.ndim() == 0 {
        return Err(DataError::Shapes("a batch leaf has no leading axis".into()));
    }
    Ok(a.outer_iter().map(|v| v.to_owned()).collect())
}

fn map_array<S: Copy + 'static, D: Dimension>(a: &mut Array<S, D>, f: &dyn Any) {
    if let Some(ScalarFn(g)) = f.downcast_ref::<ScalarFn<S>>() {
        a.mapv_inplace(g);
    }
}

// A scalar's batch is a vector, which splits back into scalars.
impl<S: Scalar> Batch for Array<S, Ix1> {
    type Item = S;
    fn batch_len(&self) -> usize {
        self.len()
    }
    fn unstack(self) -> Result<Vec<S>, DataError> {
        Ok(self.to_vec())
    }
}

macro_rules! arrays {
    ($(($d:ty, $larger:ty)),*) => {$(
        impl<S: Scalar> Element for Array<S, $d> {
            type Batch = Array<S, $larger>;
            fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
                stack_arrays(items)
            }
            fn map_scalars(&mut self, f: &dyn Any) {
                map_array(self, f);
            }
        }
        impl<S: Scalar> Batch for Array<S, $larger> {
            type Item = Array<S, $d>;
            fn batch_len(&self) -> usize {
                self.len_of(Axis(0))
            }
            fn unstack(self) -> Result<Vec<Self::Item>, DataError> {
                unstack_array(self)
            }
        }
    )*};
}
arrays!((Ix1, Ix2), (Ix2, Ix3), (Ix3, Ix4), (Ix4, Ix5), (Ix5, Ix6));

// Arrays of any rank: a batch is one rank more, of the same type.
impl<S: Scalar> Element for ArrayD<S> {
    type Batch = ArrayD<S>;
    fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
        stack_arrays::<S, IxDyn>(items)
    }
    fn map_scalars(&mut self, f: &dyn Any) {
        map_array(self, f);
    }
}

impl<S: Scalar> Batch for ArrayD<S> {
    type Item = ArrayD<S>;
    fn batch_len(&self) -> usize {
        self.shape().first().copied().unwrap_or(0)
    }
    fn unstack(self) -> Result<Vec<Self>, DataError> {
        unstack_array::<S, IxDyn>(self)
    }
}

/// Zips the parts of a batch back into elements, checking they hold as many.
fn zip_parts<A, B>(a: Vec<A>, b: Vec<B>, what: &str) -> Result<impl Iterator<Item = (A, B)>, DataError> {
    if a.len() != b.len() {
        return Err(DataError::Shapes(format!("a batch's {what} hold {} and {} elements", a.len(), b.len())));
    }
    Ok(a.into_iter().zip(b))
}

/// Splits a list of pairs into two lists.
fn unzip<A, B>(items: Vec<(A, B)>) -> (Vec<A>, Vec<B>) {
    items.into_iter().unzip()
}

/// Structures of two parts: each part stacks and splits on its own.
macro_rules! pairs {
    ($name:ident, $a:ident, $b:ident, $what:literal) => {
        impl<A: Element, B: Element> Element for $name<A, B> {
            type Batch = $name<A::Batch, B::Batch>;
            fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
                let (a, b) = unzip(items.into_iter().map(|p| (p.$a, p.$b)).collect());
                Ok($name { $a: A::stack(a)?, $b: B::stack(b)? })
            }
            fn map_scalars(&mut self, f: &dyn Any) {
                self.$a.map_scalars(f);
                self.$b.map_scalars(f);
            }
        }
        impl<A: Batch, B: Batch> Batch for $name<A, B> {
            type Item = $name<A::Item, B::Item>;
            fn batch_len(&self) -> usize {
                self.$a.batch_len()
            }
            fn unstack(self) -> Result<Vec<Self::Item>, DataError> {
                let parts = zip_parts(self.$a.unstack()?, self.$b.unstack()?, $what)?;
                Ok(parts.map(|($a, $b)| $name { $a, $b }).collect())
            }
        }
    };
}
pairs!(Xy, x, y, "x and y");
pairs!(Indexed, i, e, "indices and elements");

impl<A: Element, B: Element> Element for (A, B) {
    type Batch = (A::Batch, B::Batch);
    fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
        let (a, b) = unzip(items);
        Ok((A::stack(a)?, B::stack(b)?))
    }
    fn map_scalars(&mut self, f: &dyn Any) {
        self.0.map_scalars(f);
        self.1.map_scalars(f);
    }
}

impl<A: Batch, B: Batch> Batch for (A, B) {
    type Item = (A::Item, B::Item);
    fn batch_len(&self) -> usize {
        self.0.batch_len()
    }
    fn unstack(self) -> Result<Vec<Self::Item>, DataError> {
        Ok(zip_parts(self.0.unstack()?, self.1.unstack()?, "tuple's parts")?.collect())
    }
}

impl<A: Element, B: Element, C: Element> Element for (A, B, C) {
    type Batch = (A::Batch, B::Batch, C::Batch);
    fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
        let (ab, c) = unzip(items.into_iter().map(|(a, b, c)| ((a, b), c)).collect());
        let (a, b) = unzip(ab);
        Ok((A::stack(a)?, B::stack(b)?, C::stack(c)?))
    }
    fn map_scalars(&mut self, f: &dyn Any) {
        self.0.map_scalars(f);
        self.1.map_scalars(f);
        self.2.map_scalars(f);
    }
}

impl<A: Batch, B: Batch, C: Batch> Batch for (A, B, C) {
    type Item = (A::Item, B::Item, C::Item);
    fn batch_len(&self) -> usize {
        self.0.batch_len()
    }
    fn unstack(self) -> Result<Vec<Self::Item>, DataError> {
        let ab = zip_parts(self.0.unstack()?, self.1.unstack()?, "tuple's parts")?.collect();
        Ok(zip_parts(ab, self.2.unstack()?, "tuple's parts")?.map(|((a, b), c)| (a, b, c)).collect())
    }
}

// Named leaves (DRYML's dicts): every element must have the same keys.
impl<E: Element> Element for BTreeMap<String, E> {
    type Batch = BTreeMap<String, E::Batch>;
    fn stack(items: Vec<Self>) -> Result<Self::Batch, DataError> {
        let keys: Vec<String> = items.first().ok_or(DataError::EmptyBatch)?.keys().cloned().collect();
        let mut columns: BTreeMap<String, Vec<E>> =
            keys.iter().map(|k| (k.clone(), Vec::with_capacity(items.len()))).collect();
        for (at, item) in items.into_iter().enumerate() {
            if item.len() != keys.len() || !item.keys().eq(keys.iter()) {
                let got: Vec<&String> = item.keys().collect();
                return Err(DataError::Shapes(format!(
                    "element {at} of a batch has keys {got:?}, element 0 has {keys:?}"
                )));
            }
            for (k, v) in item {
                columns.get_mut(&k).expect("same keys").push(v);
            }
        }
        columns.into_iter().map(|(k, v)| Ok((k, E::stack(v)?))).collect()
    }
    fn map_scalars(&mut self, f: &dyn Any) {
        for v in self.values_mut() {
            v.map_scalars(f);
        }
    }
}

impl<B: Batch> Batch for BTreeMap<String, B> {
    type Item = BTreeMap<String, B::Item>;
    fn batch_len(&self) -> usize {
        self.values().next().map_or(0, Batch::batch_len)
    }
    fn unstack(self) -> Result<Vec<Self::Item>, DataError> {
        let n = self.batch_len();
        let mut out: Vec<Self::Item> = (0..n).map(|_| BTreeMap::new()).collect();
        for (k, v) in self {
            let parts = v.unstack()?;
            if parts.len() != n {
                return Err(DataError::Shapes(format!(
                    "a batch's `{k}` holds {} elements, its first key {n}",
                    parts.len()
                )));
            }
            for (o, p) in out.iter_mut().zip(parts) {
                o.insert(k.clone(), p);
            }
        }
        Ok(out)
    }
}

/// Where the features and the target are in an element: plain (`X`), supervised ([`Xy`]),
/// indexed ([`Indexed`]) or both. `Dataset::apply_x` and the flags read it.
pub trait Layout: Sized {
    /// The features.
    type X;
    /// The same layout with features of type `X2`.
    type WithX<X2>;
    /// Whether elements carry their index.
    const INDEXED: bool;
    /// Whether elements carry a target.
    const SUPERVISED: bool;
    /// Replaces the features.
    fn map_x<X2>(self, f: impl FnOnce(Self::X) -> X2) -> Self::WithX<X2>;
}

/// A layout with a target: `apply_y`, `apply` and `as_not_supervised` need one, so asking for
/// the target of an unsupervised dataset does not compile.
pub trait Supervised: Layout {
    /// The target.
    type Y;
    /// The same layout with features `X2` and target `Y2`.
    type WithXy<X2, Y2>;
    /// The same layout without the target.
    type Unsupervised;
    /// Replaces the features and the target.
    fn map_xy<X2, Y2>(self, f: impl FnOnce(Self::X, Self::Y) -> (X2, Y2)) -> Self::WithXy<X2, Y2>;
    /// Drops the target.
    fn drop_y(self) -> Self::Unsupervised;
}

/// How an element shows in a table ([`Dataset`](super::Dataset)'s): its parts as columns, each
/// part's `Debug` text.
pub trait Columns {
    /// The columns' names: `x`, then `y` for a supervised element, after `i` for an indexed one.
    fn names() -> Vec<&'static str>;
    /// Each column's text.
    fn cells(&self) -> Vec<String>;
}

/// Plain elements: the features are the whole element.
macro_rules! plain_layout {
    ($([$($g:ident),*] $t:ty),* $(,)?) => {$(
        impl<$($g),*> Layout for $t {
            type X = Self;
            type WithX<X2> = X2;
            const INDEXED: bool = false;
            const SUPERVISED: bool = false;
            fn map_x<X2>(self, f: impl FnOnce(Self) -> X2) -> X2 {
                f(self)
            }
        }
        impl<$($g),*> Columns for $t where $t: std::fmt::Debug {
            fn names() -> Vec<&'static str> {
                vec!["x"]
            }
            fn cells(&self) -> Vec<String> {
                vec![cell_text(format_args!("{self:?}"))]
            }
        }
    )*};
}
plain_layout!(
    [] f32, [] f64, [] i32, [] i64, [] u8, [] u32, [] u64, [] usize, [] bool,
    [S, D] Array<S, D>, [A, B] (A, B), [A, B, C] (A, B, C), [E] BTreeMap<String, E>,
);

impl<X, Y> Layout for Xy<X, Y> {
    type X = X;
    type WithX<X2> = Xy<X2, Y>;
    const INDEXED: bool = false;
    const SUPERVISED: bool = true;
    fn map_x<X2>(self, f: impl FnOnce(X) -> X2) -> Xy<X2, Y> {
        Xy { x: f(self.x), y: self.y }
    }
}

impl<X: std::fmt::Debug, Y: std::fmt::Debug> Columns for Xy<X, Y> {
    fn names() -> Vec<&'static str> {
        vec!["x", "y"]
    }
    fn cells(&self) -> Vec<String> {
        vec![cell_text(format_args!("{:?}", self.x)), cell_text(format_args!("{:?}", self.y))]
    }
}

impl<X, Y> Supervised for Xy<X, Y> {
    type Y = Y;
    type WithXy<X2, Y2> = Xy<X2, Y2>;
    type Unsupervised = X;
    fn map_xy<X2, Y2>(self, f: impl FnOnce(X, Y) -> (X2, Y2)) -> Xy<X2, Y2> {
        let (x, y) = f(self.x, self.y);
        Xy { x, y }
    }
    fn drop_y(self) -> X {
        self.x
    }
}

impl<I, E: Layout> Layout for Indexed<I, E> {
    type X = E::X;
    type WithX<X2> = Indexed<I, E::WithX<X2>>;
    const INDEXED: bool = true;
    const SUPERVISED: bool = E::SUPERVISED;
    fn map_x<X2>(self, f: impl FnOnce(E::X) -> X2) -> Self::WithX<X2> {
        Indexed { i: self.i, e: self.e.map_x(f) }
    }
}

impl<I: std::fmt::Debug, E: Columns> Columns for Indexed<I, E> {
    fn names() -> Vec<&'static str> {
        let mut n = vec!["i"];
        n.extend(E::names());
        n
    }
    fn cells(&self) -> Vec<String> {
        let mut c = vec![cell_text(format_args!("{:?}", self.i))];
        c.extend(self.e.cells());
        c
    }
}

impl<I, E: Supervised> Supervised for Indexed<I, E> {
    type Y = E::Y;
    type WithXy<X2, Y2> = Indexed<I, E::WithXy<X2, Y2>>;
    type Unsupervised = Indexed<I, E::Unsupervised>;
    fn map_xy<X2, Y2>(self, f: impl FnOnce(E::X, E::Y) -> (X2, Y2)) -> Self::WithXy<X2, Y2> {
        Indexed { i: self.i, e: self.e.map_xy(f) }
    }
    fn drop_y(self) -> Self::Unsupervised {
        Indexed { i: self.i, e: self.e.drop_y() }
    }
}
