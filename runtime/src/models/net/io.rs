//! What a network learns to give ([`Target`]: a class, one value or several) and what it takes
//! ([`Input`]: rows, images, several inputs at once), as every framework's network reads them.

use super::Loss;
use crate::data::ndarray::{Array, Array1, Array2, ArrayD, Axis, Ix1, Ix2, Ix3, Ix4, Ix5};
use crate::data::{Batch as _, Element};
use crate::models::ModelError;
use std::collections::BTreeMap;

/// What a network learns to give for each element: a class (`usize`: a classifier), one value
/// (`f32`) or several (`Array1<f32>`: a regression, one output per value).
pub trait Target: Element {
    /// Whether it is a class (the loss then defaults to cross-entropy, else to MSE).
    const CLASS: bool;
    /// Its Rust type, in the name a model of a user's network learning it is saved under.
    const TYPE: &'static str;
    /// A batch of them, as the loss takes them.
    fn targets(batch: &Self::Batch) -> Targets;
}

/// A batch's targets.
#[derive(Debug, Clone, PartialEq)]
pub enum Targets {
    /// One class each.
    Classes(Vec<usize>),
    /// `width` values each, element after element.
    Values {
        /// The values.
        values: Vec<f32>,
        /// How many each element has.
        width: usize,
    },
}

impl Target for usize {
    const CLASS: bool = true;
    const TYPE: &'static str = "usize";
    fn targets(batch: &Array1<usize>) -> Targets {
        Targets::Classes(batch.to_vec())
    }
}

impl Target for f32 {
    const CLASS: bool = false;
    const TYPE: &'static str = "f32";
    fn targets(batch: &Array1<f32>) -> Targets {
        Targets::Values { values: batch.to_vec(), width: 1 }
    }
}

impl Target for Array1<f32> {
    const CLASS: bool = false;
    const TYPE: &'static str = "Array1<f32>";
    fn targets(batch: &Array2<f32>) -> Targets {
        Targets::Values { values: batch.iter().copied().collect(), width: batch.ncols() }
    }
}

/// What a network takes per element: a row of `f32` features (`Array1<f32>`, a definition's
/// input), an image or any array of `f32`s (`Array3<f32>`, `ArrayD<f32>`), or several inputs: a
/// pair, a triple, or a map by name of them. Its batches become the framework's tensors (a
/// tensor, a tuple or a map of tensors), each leaf with the batch's leading axis.
pub trait Input: Element {
    /// Its values, all leaves together (what a network's `inputs` counts).
    fn features(&self) -> usize;
    /// The values of each element of a batch.
    fn batch_features(batch: &Self::Batch) -> usize;
}

macro_rules! array_inputs {
    ($($d:ty),*) => {$(
        impl Input for Array<f32, $d> {
            fn features(&self) -> usize {
                self.len()
            }
            fn batch_features(batch: &Self::Batch) -> usize {
                batch.len() / batch.len_of(Axis(0)).max(1)
            }
        }
    )*};
}
array_inputs!(Ix1, Ix2, Ix3, Ix4, Ix5);

impl Input for ArrayD<f32> {
    fn features(&self) -> usize {
        self.len()
    }
    fn batch_features(batch: &ArrayD<f32>) -> usize {
        batch.len() / batch.batch_len().max(1)
    }
}

impl<A: Input, B: Input> Input for (A, B) {
    fn features(&self) -> usize {
        self.0.features() + self.1.features()
    }
    fn batch_features(b: &Self::Batch) -> usize {
        A::batch_features(&b.0) + B::batch_features(&b.1)
    }
}

impl<A: Input, B: Input, C: Input> Input for (A, B, C) {
    fn features(&self) -> usize {
        self.0.features() + self.1.features() + self.2.features()
    }
    fn batch_features(b: &Self::Batch) -> usize {
        A::batch_features(&b.0) + B::batch_features(&b.1) + C::batch_features(&b.2)
    }
}

impl<A: Input> Input for BTreeMap<String, A> {
    fn features(&self) -> usize {
        self.values().map(Input::features).sum()
    }
    fn batch_features(b: &Self::Batch) -> usize {
        b.values().map(A::batch_features).sum()
    }
}

/// The name a model of the user's network `name` learning `Y` is saved and registered under:
/// `name` for classes, `name<f32>` or `name<Array1<f32>>` for values (as the model's type
/// reads), so one network used both ways loads as what it was saved as.
pub fn own_name<Y: Target>(name: &'static str) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    if Y::CLASS {
        return name;
    }
    // Made once per network and target type, so leaked once.
    static NAMES: OnceLock<Mutex<HashMap<(&'static str, &'static str), &'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    names.entry((name, Y::TYPE)).or_insert_with(|| Box::leak(format!("{name}<{}>", Y::TYPE).into_boxed_str()))
}

impl Targets {
    /// Whether a network of `outputs` outputs, trained by `loss`, can learn them (`who` names
    /// it in the error).
    pub fn check(&self, outputs: usize, loss: Loss, who: &str) -> Result<(), ModelError> {
        match self {
            Targets::Classes(c) => match c.iter().find(|&&c| c >= outputs) {
                Some(c) => Err(ModelError::Model(format!("{who}: class {c} is not below the network's {outputs} outputs"))),
                None => Ok(()),
            },
            Targets::Values { .. } if loss == Loss::CrossEntropy => Err(ModelError::Model(format!(
                "{who}: the targets are values, and cross-entropy scores classes: give the model \"loss\": \"mse\" (the default for values)"
            ))),
            Targets::Values { width, .. } if *width != outputs => Err(ModelError::Model(format!(
                "{who}: each target has {width} value(s) and the network gives {outputs} outputs: make its last layer {{\"linear\": {width}}}"
            ))),
            Targets::Values { .. } => Ok(()),
        }
    }
}
