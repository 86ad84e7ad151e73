//! A training's elements held on a network's device, for the frameworks that can hold them
//! (tch, candle): gathered once, moved once, each batch then picked there.

use super::net::{Target, Targets};
use super::training::Held;
use super::ModelError;
use crate::data::{Dataset, Element, Xy};

/// Past this many bytes of elements, batches are made on the host: a dataset this big is more
/// than a GPU share should give to a copy of it.
const MAX_HELD_BYTES: usize = 2 << 30;

/// A training's elements on a network's device (`Learner::hold`): its inputs `x` and targets `y`
/// as its framework's tensors, and the targets as given, checked against the network's outputs
/// at the first step (as a first batch's are).
pub(crate) struct HeldRows<X, T> {
    pub x: X,
    pub y: T,
    pub targets: std::cell::RefCell<Option<Targets>>,
}

impl<X: 'static, T: 'static> HeldRows<X, T> {
    /// `elements` gathered into one batch and put on the device by `moved` (the batch and its
    /// targets as tensors), or `None` where there are none, they are more than
    /// [`MAX_HELD_BYTES`] of `inputs` features, or the device has no room for them (batches
    /// then come from the host after all).
    pub(crate) fn hold<E: Element, Y: Target>(
        elements: &Dataset<Xy<E, Y>>,
        inputs: usize,
        moved: impl FnOnce(&E::Batch, Targets) -> Result<(X, T), ModelError>,
    ) -> Result<Option<Held>, ModelError> {
        let n = elements.count()?;
        if n == 0 || n.saturating_mul(inputs).saturating_mul(4) > MAX_HELD_BYTES {
            return Ok(None);
        }
        let Some(all) = elements.gather_all()? else { return Ok(None) };
        let targets = Y::targets(&all.y);
        match moved(&all.x, targets.clone()) {
            Ok((x, y)) => Ok(Some(Box::new(HeldRows { x, y, targets: Some(targets).into() }))),
            Err(e) if crate::batch::OutOfMemory::is_out_of_memory(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
