//! The optimisers of network models, as settings and state every framework shares: each
//! framework does the arithmetic over its own tensors (`tch.rs`, `candle.rs`), and the state
//! (the step count and each parameter's moments) goes into the checkpoint, so a resumed
//! training takes the very steps an uninterrupted one takes. The frameworks' own optimisers keep
//! their state out of reach (tch's lives in C++, candle's in private fields).
//!
//! The update is PyTorch's: Adam with L2 weight decay added to the gradient, AdamW with decay
//! applied to the weights, SGD with momentum (no dampening, no Nesterov).

use super::net::{NetDef, Optimizer};
use super::ModelError;

pub use super::net::Named;

/// An optimiser's kind and numbers, from a [`NetDef`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Adam, AdamW or SGD.
    pub kind: Optimizer,
    /// The learning rate.
    pub lr: f64,
    /// SGD's momentum (0: none).
    pub momentum: f64,
    /// Weight decay.
    pub weight_decay: f64,
    /// Adam's decay of the first moment.
    pub beta1: f64,
    /// Adam's decay of the second moment.
    pub beta2: f64,
    /// Adam's term that keeps the division finite.
    pub eps: f64,
}

impl Settings {
    /// The optimiser a definition names, with PyTorch's defaults for what it leaves out.
    pub fn of(def: &NetDef) -> Settings {
        Settings {
            kind: def.optimizer,
            lr: def.lr,
            momentum: def.momentum,
            weight_decay: def.weight_decay,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }

    /// Whether each parameter keeps a first moment (Adam's, or SGD's momentum buffer).
    pub fn first_moment(&self) -> bool {
        self.kind != Optimizer::Sgd || self.momentum > 0.0
    }

    /// Whether each parameter keeps a second moment (Adam's).
    pub fn second_moment(&self) -> bool {
        self.kind != Optimizer::Sgd
    }

    /// Adam's bias corrections after `step` steps (from 1): `1 - β₁ᵗ` and `1 - β₂ᵗ`.
    pub fn bias_corrections(&self, step: u64) -> (f64, f64) {
        let t = step.min(i32::MAX as u64) as i32;
        (1.0 - self.beta1.powi(t), 1.0 - self.beta2.powi(t))
    }
}

/// An optimiser's state as a checkpoint holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// Steps taken.
    pub step: u64,
    /// Each parameter's first moment, by the parameter's name.
    pub first: Named,
    /// Each parameter's second moment, by the parameter's name.
    pub second: Named,
}

impl Saved {
    /// The bytes a checkpoint holds.
    pub fn to_bytes(&self, who: &str) -> Result<Vec<u8>, ModelError> {
        rmp_serde::to_vec(&(self.step, &self.first, &self.second))
            .map_err(|e| ModelError::Model(format!("{who}: saving the optimizer's state: {e}")))
    }

    /// Reads [`Saved::to_bytes`]'s bytes, checking each moment against the parameter of its
    /// name (`shapes`: every parameter's name and shape).
    pub fn from_bytes(bytes: &[u8], who: &str, shapes: &[(String, Vec<usize>)]) -> Result<Saved, ModelError> {
        let bad = |m: String| ModelError::Model(format!("{who}: the checkpoint's optimizer state {m}"));
        let (step, first, second): (u64, Named, Named) =
            rmp_serde::from_slice(bytes).map_err(|e| bad(format!("cannot be read: {e}")))?;
        let saved = Saved { step, first, second };
        for (name, dims, values) in saved.first.iter().chain(&saved.second) {
            match shapes.iter().find(|(n, _)| n == name) {
                None => return Err(bad(format!("names `{name}`, which the network has not"))),
                Some((_, want)) if want != dims => {
                    return Err(bad(format!("has `{name}` of shape {dims:?}; the network's is {want:?}")))
                }
                _ if values.len() != dims.iter().product::<usize>() => {
                    return Err(bad(format!("has {} values for `{name}` of shape {dims:?}", values.len())))
                }
                _ => {}
            }
        }
        Ok(saved)
    }
}

/// The values of `name` in `moments`, if it has them.
pub fn find<'a>(moments: &'a Named, name: &str) -> Option<&'a [f32]> {
    moments.iter().find(|(n, _, _)| n == name).map(|(_, _, v)| v.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_saved_state_reads_back_and_a_wrong_one_says_what_is_wrong() {
        let s = Saved { step: 3, first: vec![("w".into(), vec![2], vec![0.5, f32::MIN_POSITIVE])], second: vec![] };
        let shapes = vec![("w".to_string(), vec![2])];
        assert_eq!(Saved::from_bytes(&s.to_bytes("M").unwrap(), "M", &shapes).unwrap(), s);
        let e = Saved::from_bytes(&s.to_bytes("M").unwrap(), "M", &[("w".to_string(), vec![3])]).unwrap_err();
        assert_eq!(e.to_string(), "M: the checkpoint's optimizer state has `w` of shape [2]; the network's is [3]");
        let e = Saved::from_bytes(&s.to_bytes("M").unwrap(), "M", &[]).unwrap_err();
        assert_eq!(e.to_string(), "M: the checkpoint's optimizer state names `w`, which the network has not");
        assert!(Saved::from_bytes(b"\xc1", "M", &shapes)
            .unwrap_err()
            .to_string()
            .starts_with("M: the checkpoint's optimizer state cannot be read"));
    }

    #[test]
    fn settings_keep_the_moments_their_kind_needs() {
        let def = |o| NetDef::from_args(&json!({"layers": [{"linear": 2}], "optimizer": o}), "M").unwrap();
        let sgd = Settings::of(&def(json!({"type": "sgd"})));
        assert!(!sgd.first_moment() && !sgd.second_moment());
        let momentum = Settings::of(&def(json!({"type": "sgd", "momentum": 0.9})));
        assert!(momentum.first_moment() && !momentum.second_moment());
        let adam = Settings::of(&def(json!({"type": "adamw", "lr": 0.01})));
        assert!(adam.first_moment() && adam.second_moment() && adam.weight_decay == 0.01);
        let (c1, c2) = adam.bias_corrections(1);
        assert!((c1 - 0.1).abs() < 1e-12 && (c2 - 0.001).abs() < 1e-12);
    }
}
