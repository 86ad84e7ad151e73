//! A dataset's elements mapped part by part: its inputs, its targets, both; and its views
//! without the targets or the indices.

use super::*;

impl<E: Layout + Send + 'static> Dataset<E> {
    /// `f` applied to the features of every element, the target and index kept (DRYML's
    /// `apply_X`).
    pub fn apply_x<X2>(&self, f: impl Fn(E::X) -> X2 + Send + Sync + 'static) -> Dataset<E::WithX<X2>>
    where
        E::WithX<X2>: Send + 'static,
    {
        self.map(move |e| e.map_x(&f))
    }

    /// Whether elements carry a target.
    pub fn is_supervised(&self) -> bool {
        E::SUPERVISED
    }

    /// Whether elements carry their index.
    pub fn is_indexed(&self) -> bool {
        E::INDEXED
    }
}

impl<E: Supervised + Send + 'static> Dataset<E> {
    /// `f` applied to the target of every element (DRYML's `apply_Y`).
    pub fn apply_y<Y2>(&self, f: impl Fn(E::Y) -> Y2 + Send + Sync + 'static) -> Dataset<E::WithXy<E::X, Y2>>
    where
        E::WithXy<E::X, Y2>: Send + 'static,
    {
        self.map(move |e| e.map_xy(|x, y| (x, f(y))))
    }

    /// `f(x, y)` applied to every element's features and target (DRYML's `apply`).
    pub fn apply<X2, Y2>(
        &self,
        f: impl Fn(E::X, E::Y) -> (X2, Y2) + Send + Sync + 'static,
    ) -> Dataset<E::WithXy<X2, Y2>>
    where
        E::WithXy<X2, Y2>: Send + 'static,
    {
        self.map(move |e| e.map_xy(&f))
    }

    /// The features alone (and index, if indexed).
    pub fn as_not_supervised(&self) -> Dataset<E::Unsupervised>
    where
        E::Unsupervised: Send + 'static,
    {
        self.map(Supervised::drop_y)
    }
}

impl<I: Send + 'static, E: Send + 'static> Dataset<Indexed<I, E>> {
    /// The elements without their index.
    pub fn as_not_indexed(&self) -> Dataset<E> {
        self.map(|e| e.e)
    }
}
