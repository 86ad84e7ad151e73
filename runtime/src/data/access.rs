//! Random access to a dataset held in memory (a vector, an array's rows) or read on demand (a
//! folder's files, [`super::images`]): a shuffle permutes
//! positions, `take` and `skip` narrow them, and a batch gathers its rows straight from the
//! source, as a hand-written loop does, instead of stacking elements made one by one.

use super::element::Elements;
use super::DataError;
use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

/// Stacks the elements at some positions into a batch, straight from the source.
pub(super) type Gather<B> = dyn Fn(&[usize]) -> Result<B, DataError> + Send + Sync;

/// The element at each position, the positions a pass visits, and (for array sources) how a
/// batch is gathered.
pub(super) struct Access<E> {
    /// Fallible for sources read on demand (a folder's files); in memory, always `Ok`.
    get: Arc<dyn Fn(usize) -> Result<E, DataError> + Send + Sync>,
    /// An `Arc<Gather<B>>` for the elements' batch type `B`, behind `Any` (the dataset's
    /// element type has no batch type until `batch` asks for one).
    gather: Option<Arc<dyn Any + Send + Sync>>,
    order: Arc<Vec<usize>>,
    range: Range<usize>,
    /// Whether `get` computes each element anew (a `map`'s function, which may differ from pass
    /// to pass) rather than reading it as stored.
    computed: bool,
}

impl<E> Clone for Access<E> {
    fn clone(&self) -> Self {
        Access {
            get: self.get.clone(),
            gather: self.gather.clone(),
            order: self.order.clone(),
            range: self.range.clone(),
            computed: self.computed,
        }
    }
}

impl<E: Send + 'static> Access<E> {
    /// Positions `0..len` of `get`, gathered in batches by `gather` if given.
    pub(super) fn new<B: 'static>(
        len: usize,
        get: impl Fn(usize) -> E + Send + Sync + 'static,
        gather: Option<Arc<Gather<B>>>,
    ) -> Access<E> {
        Access::fallible(len, move |i| Ok(get(i)), gather)
    }

    /// As [`Access::new`], for a source whose elements may fail to read (a file each).
    pub(super) fn fallible<B: 'static>(
        len: usize,
        get: impl Fn(usize) -> Result<E, DataError> + Send + Sync + 'static,
        gather: Option<Arc<Gather<B>>>,
    ) -> Access<E> {
        let gather = gather.map(|g| Arc::new(g) as Arc<dyn Any + Send + Sync>);
        Access { get: Arc::new(get), gather, order: Arc::new((0..len).collect()), range: 0..len, computed: false }
    }

    /// Whether each element is read as stored, not computed anew.
    pub(super) fn stored(&self) -> bool {
        !self.computed
    }

    pub(super) fn len(&self) -> usize {
        self.range.len()
    }

    /// The positions a pass visits, in order.
    pub(super) fn positions(&self) -> &[usize] {
        &self.order[self.range.clone()]
    }

    /// One pass.
    pub(super) fn elements(&self) -> Elements<E> {
        let this = self.clone();
        Box::new(this.range.clone().map(move |i| (this.get)(this.order[i])))
    }

    /// The same source, visited in `order` (positions of the source).
    pub(super) fn reordered(&self, order: Vec<usize>) -> Access<E> {
        let range = 0..order.len();
        Access { order: Arc::new(order), range, ..self.clone() }
    }

    /// The first `n` positions, or all but them.
    pub(super) fn narrowed(&self, n: usize, keep_first: bool) -> Access<E> {
        let cut = self.range.start + n.min(self.len());
        let range = if keep_first { self.range.start..cut } else { cut..self.range.end };
        Access { range, ..self.clone() }
    }

    /// Each element through `f`: still random access, but no longer gathered in batches.
    pub(super) fn mapped<T: Send + 'static>(&self, f: Arc<dyn Fn(E) -> T + Send + Sync>) -> Access<T> {
        let get = self.get.clone();
        Access {
            get: Arc::new(move |i| get(i).map(&*f)),
            gather: None,
            order: self.order.clone(),
            range: self.range.clone(),
            computed: true,
        }
    }

    /// Batches of `size` positions, each gathered from the source, if the source can.
    pub(super) fn batches<B: Send + 'static>(&self, size: usize, drop_remainder: bool) -> Option<Elements<B>> {
        let gather = self.gather.as_ref()?.downcast_ref::<Arc<Gather<B>>>()?.clone();
        let this = self.clone();
        let full = this.len() / size * size;
        let end = if drop_remainder { full } else { this.len() };
        Some(Box::new((0..end).step_by(size).map(move |at| gather(&this.positions()[at..(at + size).min(end)]))))
    }
}
