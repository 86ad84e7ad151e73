//! [`Dataset`]: a lazy, re-iterable, cheaply cloned sequence of elements, and its methods.

mod apply;
mod batches;
mod shuffle;

use super::access::Access;
use super::element::{Columns, Element, Elements, Indexed, Layout, ScalarFn, Supervised};
use super::DataError;
use crate::display::table::short_type;
use crate::display::{Table, Tabular};
use shuffle::{shuffled, shuffled_positions};
use std::fmt;
use std::sync::Arc;

type Source<E> = dyn Fn() -> Elements<E> + Send + Sync;

/// How many elements a dataset has, as far as is known without a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// Exactly this many.
    Known(usize),
    /// It never ends.
    Infinite,
    /// Not known without a pass ([`Dataset::count`]).
    Unknown,
}

impl Len {
    fn map(self, f: impl FnOnce(usize) -> usize) -> Len {
        match self {
            Len::Known(n) => Len::Known(f(n)),
            other => other,
        }
    }
}

/// One level of batching: its size, and how many elements the dataset had before it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Batching {
    size: usize,
    before: Len,
}

/// A lazy sequence of elements that can be passed over again and again (each pass starts the
/// source anew), cloned for the price of a pointer, and transformed without running anything
/// until a pass. Elements are plain (`X`), supervised ([`Xy`](super::Xy)), indexed
/// ([`Indexed`]) or both, optionally batched: every leaf of a batch has a leading axis.
pub struct Dataset<E> {
    source: Arc<Source<E>>,
    len: Len,
    /// Innermost first.
    batching: Arc<Vec<Batching>>,
    /// Random access, for data held in memory (see [`Access`]).
    access: Option<Access<E>>,
}

impl<E> Clone for Dataset<E> {
    fn clone(&self) -> Self {
        Dataset {
            source: self.source.clone(),
            len: self.len,
            batching: self.batching.clone(),
            access: self.access.clone(),
        }
    }
}

impl<E: Layout> fmt::Debug for Dataset<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary(std::any::type_name::<E>()))
    }
}

/// Elements a dataset's table shows; after the first, no more once this long has passed.
const TABLE_ELEMENTS: usize = 5;
const TABLE_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);

/// The layout, the length and the first elements (one pass, stopped after five: the rest of
/// the pipeline does not run), one column per part of an element.
impl<E: Layout + Columns + Send + 'static> Tabular for Dataset<E> {
    fn table(&self) -> Table {
        let start = std::time::Instant::now();
        let mut rows = Vec::new();
        let mut pass = self.iter();
        let mut ended = false;
        while rows.len() < TABLE_ELEMENTS && (rows.is_empty() || start.elapsed() < TABLE_BUDGET) {
            match pass.next() {
                Some(Ok(e)) => rows.push((rows.len().to_string(), e.cells())),
                Some(Err(e)) => {
                    rows.push((rows.len().to_string(), vec![format!("error: {e}")]));
                    ended = true;
                    break;
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        // Past the rows shown: more, unless the pass ended or the length says none.
        let more = !ended && !matches!(self.len, Len::Known(n) if n <= rows.len());
        Table::from_rows(self.summary(&short_type::<E>()), "", &E::names(), rows, more)
    }
}

impl<E: Layout> Dataset<E> {
    /// "Dataset of N T (flags)", with the element type named as given.
    fn summary(&self, ty: &str) -> String {
        let len = match self.len {
            Len::Known(n) => n.to_string(),
            Len::Infinite => "infinitely many".into(),
            Len::Unknown => "an unknown number of".into(),
        };
        let mut flags = Vec::new();
        if E::SUPERVISED {
            flags.push("supervised".to_string());
        }
        if E::INDEXED {
            flags.push("indexed".to_string());
        }
        if let Some(b) = self.batching.last() {
            flags.push(format!("batches of {}", b.size));
        }
        let flags = if flags.is_empty() { String::new() } else { format!(" ({})", flags.join(", ")) };
        format!("Dataset of {len} {ty}{flags}")
    }
}

impl<E: Send + 'static> Dataset<E> {
    /// A dataset whose passes are `source()`'s iterators, of `len` elements each.
    pub fn from_source(len: Len, source: impl Fn() -> Elements<E> + Send + Sync + 'static) -> Dataset<E> {
        Dataset { source: Arc::new(source), len, batching: Arc::new(Vec::new()), access: None }
    }

    /// A dataset held in memory, visited through `access`.
    pub(super) fn from_access(access: Access<E>) -> Dataset<E> {
        let a = access.clone();
        let mut d = Dataset::from_source(Len::Known(access.len()), move || a.elements());
        d.access = Some(access);
        d
    }

    /// The same batching, through other access.
    fn accessed<T: Send + 'static>(&self, access: Access<T>) -> Dataset<T> {
        Dataset { batching: self.batching.clone(), ..Dataset::from_access(access) }
    }

    /// A dataset whose passes are `f()`'s iterators: a generator, as DRYML's factories.
    pub fn from_fn<I>(len: Len, f: impl Fn() -> I + Send + Sync + 'static) -> Dataset<E>
    where
        I: Iterator<Item = E> + Send + 'static,
    {
        Dataset::from_source(len, move || Box::new(f().map(Ok)))
    }

    /// The elements of a vector, shared by every pass and clone.
    pub fn from_vec(items: Vec<E>) -> Dataset<E>
    where
        E: Clone + Sync,
    {
        let items = Arc::new(items);
        Dataset::from_access(Access::new::<()>(items.len(), move |i| items[i].clone(), None))
    }

    fn derived<T>(&self, len: Len, source: impl Fn() -> Elements<T> + Send + Sync + 'static) -> Dataset<T> {
        Dataset { source: Arc::new(source), len, batching: self.batching.clone(), access: None }
    }

    /// After a change in how many batches there are: how many elements they hold is unknown.
    fn recounted(mut self) -> Dataset<E> {
        if let Some(last) = Arc::make_mut(&mut self.batching).last_mut() {
            last.before = Len::Unknown;
        }
        self
    }

    /// One pass: the elements, each an `Ok`, or an error that ends the pass.
    pub fn iter(&self) -> Elements<E> {
        (self.source)()
    }

    /// The first element, if there is one.
    pub fn peek(&self) -> Result<Option<E>, DataError> {
        self.iter().next().transpose()
    }

    /// How many elements it has, as known without a pass.
    pub fn len(&self) -> Len {
        self.len
    }

    /// Whether it is known to have no elements.
    pub fn is_empty(&self) -> bool {
        self.len == Len::Known(0)
    }

    /// The batch size, if it is batched.
    pub fn batch_size(&self) -> Option<usize> {
        self.batching.last().map(|b| b.size)
    }

    /// Counts the elements: by a pass, unless the dataset has random access (its positions are
    /// its elements: a pass over a folder of images would decode every one to count them).
    pub fn count(&self) -> Result<usize, DataError> {
        if self.len == Len::Infinite {
            return Err(DataError::Infinite("count"));
        }
        if let Some(a) = &self.access {
            return Ok(a.len());
        }
        self.iter().try_fold(0, |n, e| e.map(|_| n + 1))
    }

    /// Every element, by a pass.
    pub fn collect(&self) -> Result<Vec<E>, DataError> {
        if self.len == Len::Infinite {
            return Err(DataError::Infinite("collect"));
        }
        self.iter().collect()
    }

    /// `f` applied to every element (to every batch of a batched dataset).
    pub fn map<T: Send + 'static>(&self, f: impl Fn(E) -> T + Send + Sync + 'static) -> Dataset<T> {
        let (this, f) = (self.clone(), Arc::new(f));
        if let Some(a) = &self.access {
            return self.accessed(a.mapped(f));
        }
        self.derived(self.len, move || {
            let f = f.clone();
            Box::new(this.iter().map(move |e| e.map(|e| f(e))))
        })
    }

    /// `f` applied to every element; an error from it ends the pass there.
    pub fn try_map<T: Send + 'static>(
        &self,
        f: impl Fn(E) -> Result<T, DataError> + Send + Sync + 'static,
    ) -> Dataset<T> {
        let (this, f) = (self.clone(), Arc::new(f));
        self.derived(self.len, move || {
            let f = f.clone();
            let mut failed = false;
            Box::new(this.iter().map_while(move |e| {
                if failed {
                    return None;
                }
                let out = e.and_then(|e| f(e));
                failed = out.is_err();
                Some(out)
            }))
        })
    }

    /// The first `n` elements.
    pub fn take(&self, n: usize) -> Dataset<E> {
        if let Some(a) = &self.access {
            return self.accessed(a.narrowed(n, true)).recounted();
        }
        let this = self.clone();
        let len = match self.len {
            Len::Known(k) => Len::Known(k.min(n)),
            Len::Infinite => Len::Known(n),
            Len::Unknown => Len::Unknown,
        };
        self.derived(len, move || Box::new(this.iter().take(n))).recounted()
    }

    /// All but the first `n` elements.
    pub fn skip(&self, n: usize) -> Dataset<E> {
        if let Some(a) = &self.access {
            return self.accessed(a.narrowed(n, false)).recounted();
        }
        let this = self.clone();
        self.derived(self.len.map(|k| k.saturating_sub(n)), move || Box::new(this.iter().skip(n))).recounted()
    }

    /// The elements in an order shuffled through a buffer of `buffer` elements (as TensorFlow's
    /// `shuffle`: a buffer as long as the dataset gives a uniform permutation), the same order
    /// on every pass for one `seed`. Any buffer slot can be picked, the last too.
    pub fn shuffle(&self, buffer: usize, seed: u64) -> Dataset<E> {
        if let Some(a) = &self.access {
            // The same algorithm over positions: the same order as a stream of these elements.
            let order = shuffled_positions(a.positions(), buffer, seed);
            return self.accessed(a.reordered(order));
        }
        let this = self.clone();
        self.derived(self.len, move || shuffled(this.iter(), buffer, seed))
    }

    /// Whether every pass reads the same elements as stored (in memory, or a file each), none
    /// computed anew by a `map` (whose function may differ from pass to pass) or a generator: a
    /// model may then take them onto its device once for a whole training.
    pub fn is_stored(&self) -> bool {
        self.batching.is_empty() && self.access.as_ref().is_some_and(Access::stored)
    }

    /// Elements with their position: `Indexed { i, e }` (on a batched dataset, each batch's).
    pub fn as_indexed(&self) -> Dataset<Indexed<u64, E>> {
        let this = self.clone();
        self.derived(self.len, move || Box::new(this.iter().zip(0u64..).map(|(e, i)| e.map(|e| Indexed { i, e }))))
    }

    /// `f` applied to every scalar of type `S` in every leaf (DRYML's `map_el`); leaves of
    /// other types are left as they are.
    pub fn map_el<S: 'static>(&self, f: impl Fn(S) -> S + Send + Sync + 'static) -> Dataset<E>
    where
        E: Element,
    {
        let f = Arc::new(ScalarFn::<S>(Box::new(f)));
        self.map(move |mut e: E| {
            e.map_scalars(&*f);
            e
        })
    }
}
