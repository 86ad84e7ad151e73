//! Hyper-parameter search: grid and seeded random search over any nested parameter of a
//! definition, giving the [`ObjectDef`]s that `%%sweep` and `Compute::sweep` train, and
//! [`Repo::best`], the best trained definition of each group by one of its metrics.
//!
//! A parameter is a dotted path into the definition's arguments; numbers index arrays
//! (`optimizer.lr`, `layers.0.linear`). Every path must already be in the base definition, so a
//! misspelt one is an error that lists what is there, not a silent new key.
//!
//! ```
//! use dryml::objects::Search;
//! use dryml::ObjectDef;
//! use serde_json::json;
//!
//! let base = ObjectDef::new("Net", &json!({
//!     "layers": [{"linear": 16}, "relu", {"linear": 3}],
//!     "optimizer": {"type": "adam", "lr": 0.01},
//! })).unwrap();
//! // Every combination: 2 widths × 3 learning rates.
//! let grid = Search::over(&base)
//!     .values("layers.0.linear", [16, 64])
//!     .values("optimizer.lr", [0.1, 0.01, 0.001])
//!     .grid()
//!     .unwrap();
//! assert_eq!(grid.len(), 6);
//! assert_eq!(grid[5].args["layers"][0]["linear"], 64);
//! assert_eq!(grid[5].args["optimizer"]["lr"], 0.001);
//! // Five draws, the same for the same seed: the rate log-uniform, the width from a list.
//! let search = Search::over(&base).log_uniform("optimizer.lr", 1e-4, 1e-1).values("layers.0.linear", [16, 64]);
//! let drawn = search.random(5, 7).unwrap();
//! assert_eq!(drawn, search.random(5, 7).unwrap());
//! assert!(drawn.iter().all(|d| (1e-4..=1e-1).contains(&d.args["optimizer"]["lr"].as_f64().unwrap())));
//! // A path the definition does not have.
//! let e = Search::over(&base).values("optimiser.lr", [0.1]).grid().unwrap_err();
//! assert!(e.to_string().contains("`optimiser.lr`: the definition has no `optimiser` (it has: layers, optimizer)"), "{e}");
//! ```

use super::repo::{Entry, Repo, Selector};
use super::{ObjectDef, ObjectError};
use serde::Serialize;
use serde_json::Value;

/// How one parameter varies.
#[derive(Debug, Clone, PartialEq)]
enum Axis {
    /// These values, in this order (grid), or one of them (random).
    Values(Vec<Value>),
    /// Uniform in `[lo, hi]`.
    Uniform(f64, f64),
    /// Log-uniform in `[lo, hi]` (both above 0): as likely in 1e-4..1e-3 as in 1e-2..1e-1.
    LogUniform(f64, f64),
    /// An integer in `lo..=hi`.
    Ints(i64, i64),
}

/// A base definition and the parameters to vary in it (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    base: ObjectDef,
    axes: Vec<(String, Axis)>,
}

/// Whether a metric is better high (accuracy) or low (loss, MSE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Higher is better.
    Max,
    /// Lower is better.
    Min,
}

impl Search {
    /// A search around `base`: parameters not varied keep its values.
    pub fn over(base: &ObjectDef) -> Search {
        Search { base: base.clone(), axes: Vec::new() }
    }

    /// `path` takes each of `values` (grid), or one of them (random).
    pub fn values<V: Serialize>(mut self, path: &str, values: impl IntoIterator<Item = V>) -> Search {
        let values = values.into_iter().map(|v| serde_json::to_value(v).unwrap_or(Value::Null)).collect();
        self.axes.push((path.to_string(), Axis::Values(values)));
        self
    }

    /// `path` drawn uniformly from `[lo, hi]` (random search only).
    pub fn uniform(mut self, path: &str, lo: f64, hi: f64) -> Search {
        self.axes.push((path.to_string(), Axis::Uniform(lo, hi)));
        self
    }

    /// `path` drawn log-uniformly from `[lo, hi]`, both above 0 (random search only).
    pub fn log_uniform(mut self, path: &str, lo: f64, hi: f64) -> Search {
        self.axes.push((path.to_string(), Axis::LogUniform(lo, hi)));
        self
    }

    /// `path` an integer drawn from `lo..=hi` (random search only).
    pub fn int_range(mut self, path: &str, lo: i64, hi: i64) -> Search {
        self.axes.push((path.to_string(), Axis::Ints(lo, hi)));
        self
    }

    /// Every combination of the listed values, the last parameter varying fastest.
    pub fn grid(&self) -> Result<Vec<ObjectDef>, ObjectError> {
        self.check()?;
        let mut defs = vec![self.base.clone()];
        for (path, axis) in &self.axes {
            let Axis::Values(values) = axis else {
                return Err(
                    self.error(path, "a range has no grid: list its values with `values`, or draw with `random`")
                );
            };
            defs = defs.iter().flat_map(|d| values.iter().map(move |v| with(d, path, v.clone()))).collect();
        }
        Ok(defs)
    }

    /// `n` definitions, each parameter drawn on its own; the same `seed` draws the same ones.
    pub fn random(&self, n: usize, seed: u64) -> Result<Vec<ObjectDef>, ObjectError> {
        self.check()?;
        let mut rng = fastrand::Rng::with_seed(seed);
        Ok((0..n)
            .map(|_| {
                self.axes.iter().fold(self.base.clone(), |d, (path, axis)| {
                    let v = match axis {
                        Axis::Values(values) => values[rng.usize(..values.len())].clone(),
                        Axis::Uniform(lo, hi) => Value::from(lo + (hi - lo) * rng.f64()),
                        Axis::LogUniform(lo, hi) => Value::from((lo.ln() + (hi.ln() - lo.ln()) * rng.f64()).exp()),
                        Axis::Ints(lo, hi) => Value::from(rng.i64(*lo..=*hi)),
                    };
                    with(&d, path, v)
                })
            })
            .collect())
    }

    /// Every path is in the base definition and every axis can be drawn from.
    fn check(&self) -> Result<(), ObjectError> {
        for (path, axis) in &self.axes {
            resolve(&self.base.args, path).map_err(|why| self.error(path, &why))?;
            let bad = match axis {
                Axis::Values(v) if v.is_empty() => Some("no values to take"),
                Axis::Uniform(lo, hi) if !lo.is_finite() || !hi.is_finite() || lo > hi => {
                    Some("the range needs finite lo <= hi")
                }
                Axis::LogUniform(lo, hi) if !lo.is_finite() || !hi.is_finite() || *lo <= 0.0 || lo > hi => {
                    Some("a log-uniform range needs 0 < lo <= hi")
                }
                Axis::Ints(lo, hi) if lo > hi => Some("the range needs lo <= hi"),
                _ => None,
            };
            if let Some(why) = bad {
                return Err(self.error(path, why));
            }
        }
        Ok(())
    }

    fn error(&self, path: &str, why: &str) -> ObjectError {
        ObjectError::Args(self.base.type_name.clone(), format!("`{path}`: {why}"))
    }
}

/// The JSON pointer of a dotted path.
fn pointer(path: &str) -> String {
    path.split('.').map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1"))).collect()
}

/// The value at `path`, or why there is none (what the definition has there instead).
fn resolve<'a>(args: &'a Value, path: &str) -> Result<&'a Value, String> {
    let mut at = args;
    let mut walked = Vec::new();
    for key in path.split('.') {
        let next = match at {
            Value::Object(m) => m.get(key).ok_or_else(|| {
                let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                format!("the definition has no `{}` (it has: {})", join(&walked, key), keys.join(", "))
            })?,
            Value::Array(a) => match key.parse::<usize>() {
                Ok(i) if i < a.len() => &a[i],
                _ => return Err(format!("`{}` is a list of {} (index it 0..{})", walked.join("."), a.len(), a.len())),
            },
            other => return Err(format!("`{}` is {other}, which has no `{key}`", walked.join("."))),
        };
        walked.push(key);
        at = next;
    }
    Ok(at)
}

fn join(walked: &[&str], key: &str) -> String {
    walked.iter().copied().chain([key]).collect::<Vec<_>>().join(".")
}

/// `def` with `path` set to `v` (the path was checked).
fn with(def: &ObjectDef, path: &str, v: Value) -> ObjectDef {
    let mut d = def.clone();
    if let Some(slot) = d.args.pointer_mut(&pointer(path)) {
        *slot = v;
    }
    d
}

impl Repo {
    /// The best entry matching `sel` by `metric` (a dotted path into its metrics; `""` when the
    /// metrics are the number), for each value of the argument at `group_by` (`""`: one group),
    /// in the order of those values as JSON text. Entries without that metric or argument are
    /// left out. "The best learning rate for each depth": `best(&sel, "depth", "accuracy", Goal::Max)`,
    /// then each entry's `def.args["optimizer"]["lr"]`.
    pub fn best(&self, sel: &Selector, group_by: &str, metric: &str, goal: Goal) -> Vec<(Value, &Entry)> {
        let mut best: std::collections::BTreeMap<String, (Value, f64, &Entry)> = Default::default();
        for e in self.find(sel) {
            let Some(score) = e
                .meta
                .metrics
                .as_ref()
                .and_then(|m| if metric.is_empty() { Some(m) } else { resolve(m, metric).ok() })
                .and_then(Value::as_f64)
            else {
                continue;
            };
            let group = if group_by.is_empty() {
                Value::Null
            } else {
                match resolve(&e.def.args, group_by) {
                    Ok(v) => v.clone(),
                    Err(_) => continue,
                }
            };
            let better = |old: f64| match goal {
                Goal::Max => score > old,
                Goal::Min => score < old,
            };
            let slot = best.entry(group.to_string()).or_insert((group, score, e));
            if better(slot.1) {
                slot.1 = score;
                slot.2 = e;
            }
        }
        best.into_values().map(|(g, _, e)| (g, e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> ObjectDef {
        ObjectDef::new("Net", &json!({"layers": [{"conv2d": {"channels": 8}}, "relu"], "lr": 0.1, "depth": 2})).unwrap()
    }

    #[test]
    fn a_grid_is_every_combination_last_fastest_and_keeps_the_rest() {
        let grid = Search::over(&base())
            .values("depth", [1, 2])
            .values("layers.0.conv2d.channels", [4, 8, 16])
            .grid()
            .unwrap();
        let got: Vec<(i64, i64)> = grid
            .iter()
            .map(|d| (d.args["depth"].as_i64().unwrap(), d.args["layers"][0]["conv2d"]["channels"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16)]);
        assert!(grid.iter().all(|d| d.args["lr"] == 0.1 && d.args["layers"][1] == "relu" && d.type_name == "Net"));
        assert_eq!(Search::over(&base()).grid().unwrap(), vec![base()], "no parameter: the base alone");
    }

    #[test]
    fn random_draws_are_seeded_and_in_range() {
        let s =
            Search::over(&base()).uniform("lr", 0.5, 1.0).int_range("depth", 3, 5).values("layers.1", ["relu", "tanh"]);
        let a = s.random(50, 1).unwrap();
        assert_eq!(a, s.random(50, 1).unwrap());
        assert_ne!(a, s.random(50, 2).unwrap());
        assert!(a.iter().all(|d| (0.5..=1.0).contains(&d.args["lr"].as_f64().unwrap())));
        let depths: std::collections::BTreeSet<i64> = a.iter().map(|d| d.args["depth"].as_i64().unwrap()).collect();
        assert_eq!(depths, [3, 4, 5].into());
        let acts: std::collections::BTreeSet<&str> = a.iter().map(|d| d.args["layers"][1].as_str().unwrap()).collect();
        assert_eq!(acts, ["relu", "tanh"].into());
    }

    #[test]
    fn the_best_of_each_group_by_a_metric() {
        use crate::objects::object::tests::{Cfg, Named};
        use crate::objects::{Build, Meta, Object};
        let dir =
            std::env::temp_dir().join(format!("dryml-search-{}-{}", std::process::id(), crate::objects::uuid_v4()));
        let mut repo = Repo::create(&dir).unwrap();
        // (data, lr, accuracy): the best lr for "a" is 0.2, for "b" 0.1; one has no metrics.
        for (data, lr, acc) in [
            ("a", 0.1, Some(0.7)),
            ("a", 0.2, Some(0.9)),
            ("b", 0.1, Some(0.8)),
            ("b", 0.3, Some(0.6)),
            ("b", 0.4, None),
        ] {
            let mut n = Named::build(Cfg { lr, data: data.into() }, Meta::new());
            n.meta_mut().metrics = acc.map(|a| json!({"accuracy": a}));
            repo.add(&n).unwrap();
        }
        let lr = |e: &Entry| e.def.args["lr"].as_f64().unwrap();
        let best = repo.best(&Selector::any(), "data", "accuracy", Goal::Max);
        assert_eq!(
            best.iter().map(|(g, e)| (g.clone(), lr(e))).collect::<Vec<_>>(),
            [(json!("a"), 0.2), (json!("b"), 0.1)]
        );
        let worst = repo.best(&Selector::any(), "", "accuracy", Goal::Min);
        assert_eq!((worst.len(), lr(worst[0].1)), (1, 0.3));
        assert!(repo.best(&Selector::any(), "nope", "accuracy", Goal::Max).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_paths_and_ranges_say_what_and_where() {
        let err = |s: Search| s.grid().map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            err(Search::over(&base()).values("layers.2", [1])),
            "arguments of `Net`: `layers.2`: `layers` is a list of 2 (index it 0..2)"
        );
        assert_eq!(
            err(Search::over(&base()).values("lr.x", [1])),
            "arguments of `Net`: `lr.x`: `lr` is 0.1, which has no `x`"
        );
        assert_eq!(
            err(Search::over(&base()).values("layers.0.conv", [1])),
            "arguments of `Net`: `layers.0.conv`: the definition has no `layers.0.conv` (it has: conv2d)"
        );
        assert_eq!(
            err(Search::over(&base()).values("lr", Vec::<f64>::new())),
            "arguments of `Net`: `lr`: no values to take"
        );
        assert!(err(Search::over(&base()).uniform("lr", 0.0, 1.0)).contains("`lr`: a range has no grid"));
        let e = Search::over(&base()).log_uniform("lr", 0.0, 1.0).random(1, 0).unwrap_err().to_string();
        assert!(e.contains("a log-uniform range needs 0 < lo <= hi"), "{e}");
    }
}
