//! A dataset's batches: every element stacked into one, batches of a size, and back to elements.

use super::{Batching, Dataset, Len};
use crate::data::element::{Batch, Element, Elements};
use crate::data::DataError;
use std::sync::Arc;

impl<E: Send + 'static> Dataset<E> {
    /// Every element stacked into one batch (`None` when there are none), as a model that fits
    /// on all of its data at once takes it; a length already known saves a pass.
    pub fn gather_all(&self) -> Result<Option<E::Batch>, DataError>
    where
        E: Element,
    {
        let n = match self.len {
            Len::Known(n) => n,
            _ => self.count()?,
        };
        if n == 0 {
            return Ok(None);
        }
        self.batch(n, false)?.peek()
    }

    /// Elements stacked `size` at a time into batches (every leaf gains a leading axis); the
    /// last, shorter batch is dropped with `drop_remainder`.
    pub fn batch(&self, size: usize, drop_remainder: bool) -> Result<Dataset<E::Batch>, DataError>
    where
        E: Element,
    {
        if size == 0 {
            return Err(DataError::Argument("batch size 0".into()));
        }
        let this = self.clone();
        let len = self.len.map(|n| if drop_remainder { n / size } else { n.div_ceil(size) });
        let before = self.len.map(|n| if drop_remainder { n / size * size } else { n });
        let mut batching = (*self.batching).clone();
        batching.push(Batching { size, before });
        // Held in memory as arrays: each batch gathered from them, as a hand-written loop does.
        if let Some(a) = self.access.as_ref().filter(|a| a.batches::<E::Batch>(size, drop_remainder).is_some()) {
            let a = a.clone();
            let source = move || a.batches::<E::Batch>(size, drop_remainder).expect("checked");
            return Ok(Dataset { source: Arc::new(source), len, batching: Arc::new(batching), access: None });
        }
        let source = move || -> Elements<E::Batch> {
            let mut upstream = this.iter();
            let mut done = false;
            Box::new(std::iter::from_fn(move || {
                if done {
                    return None;
                }
                let mut items = Vec::with_capacity(size);
                while items.len() < size {
                    match upstream.next() {
                        Some(Ok(e)) => items.push(e),
                        Some(Err(e)) => {
                            done = true;
                            return Some(Err(e));
                        }
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                if items.is_empty() || (drop_remainder && items.len() < size) {
                    return None;
                }
                Some(E::stack(items))
            }))
        };
        Ok(Dataset { source: Arc::new(source), len, batching: Arc::new(batching), access: None })
    }

    /// Batches split back into their elements; an error if it is not batched.
    pub fn unbatch(&self) -> Result<Dataset<E::Item>, DataError>
    where
        E: Batch,
    {
        let mut batching = (*self.batching).clone();
        let level = batching.pop().ok_or(DataError::NotBatched)?;
        let this = self.clone();
        // Known when nothing since the batching changed the count (a map, a shuffle).
        let len = match (self.len, level.before) {
            (Len::Infinite, _) => Len::Infinite,
            (Len::Known(_), before) => before,
            _ => Len::Unknown,
        };
        let source = move || -> Elements<E::Item> {
            Box::new(this.iter().flat_map(|b| -> Box<dyn Iterator<Item = Result<E::Item, DataError>> + Send> {
                match b.and_then(Batch::unstack) {
                    Ok(items) => Box::new(items.into_iter().map(Ok)),
                    Err(e) => Box::new(std::iter::once(Err(e))),
                }
            }))
        };
        Ok(Dataset { source: Arc::new(source), len, batching: Arc::new(batching), access: None })
    }
}
