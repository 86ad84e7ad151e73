//! linfa, scikit-learn's part: a decision tree (`linfa-trees`) as a DRYML model and object, and
//! the real datasets `linfa-datasets` ships (iris, winequality, diabetes), on the footing every
//! framework shares: `f32` features, `usize` classes.

use super::training::Training;
use super::{Model, ModelError, TrainSpec};
use crate::data::ndarray::{Array1, Array2};
use crate::data::{Dataset, Element, Xy};
use crate::objects::{Build, Meta, ObjectError, State};
use linfa::prelude::{Fit, Predict};
use linfa_trees::SplitQuality;
use serde_json::Value;

/// Iris: 150 flowers, 4 measures each, 3 species.
pub fn iris() -> Dataset<Xy<Array1<f32>, usize>> {
    classes(linfa_datasets::iris())
}

/// Wine quality: 1599 red wines, 11 measures each, quality 3 to 8.
pub fn winequality() -> Dataset<Xy<Array1<f32>, usize>> {
    classes(linfa_datasets::winequality())
}

/// Diabetes: 441 patients, 10 measures each, the disease's progression a year on.
pub fn diabetes() -> Dataset<Xy<Array1<f32>, f32>> {
    let d = linfa_datasets::diabetes();
    let x = d.records.mapv(|v| v as f32);
    let y = d.targets.mapv(|v| v as f32);
    Dataset::from_xy(x, y).expect("linfa's own dataset fits")
}

fn classes(d: linfa::Dataset<f64, usize, crate::data::ndarray::Ix1>) -> Dataset<Xy<Array1<f32>, usize>> {
    let x = d.records.mapv(|v| v as f32);
    Dataset::from_xy(x, d.targets).expect("linfa's own dataset fits")
}

/// A decision tree classifier (`linfa-trees`). Arguments, all optional: `max_depth` (a
/// positive integer), `min_weight_split` (a number, default 2), `split_quality` (`"gini"`,
/// the default, or `"entropy"`), and `training`: the shared procedure's `subsample` and
/// `seed` (a tree fits in one pass, so no epochs or batches). Its fitted tree and
/// [`TrainSpec`] are saved with it: a loaded tree predicts exactly as it did, but two fits of
/// the same data can differ, for linfa-trees breaks ties between equally good splits in the
/// order of a hash map, which changes from one fit to the next.
#[derive(crate::Object)]
pub struct DecisionTree {
    args: Value,
    meta: Meta,
    fitted: Option<Fitted>,
    spec: TrainSpec,
}

struct Fitted {
    tree: linfa_trees::DecisionTree<f64, usize>,
    features: usize,
}

impl Build for DecisionTree {
    type Args = Value;
    fn build(args: Value, meta: Meta) -> Self {
        DecisionTree { args, meta, fitted: None, spec: TrainSpec::epochs(1) }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        self.spec.save(s, "train_spec")?;
        if let Some(f) = &self.fitted {
            s.put("tree", &f.tree)?;
            s.put("features", &f.features)?;
        }
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        self.spec = TrainSpec::load(s, "train_spec")?;
        if s.names().any(|n| n == "tree") {
            self.fitted = Some(Fitted { tree: s.get("tree")?, features: s.get("features")? });
        }
        Ok(())
    }
}

impl DecisionTree {
    /// A tree of these arguments (as `ObjectDef::new("DecisionTree", &args)?.build()` makes).
    pub fn new(args: Value) -> DecisionTree {
        DecisionTree::build(args, Meta::new())
    }

    /// Where its training stands.
    pub fn train_spec(&self) -> TrainSpec {
        self.spec
    }

    fn params(&self) -> Result<linfa_trees::DecisionTreeParams<f64, usize>, ModelError> {
        let bad = |key: &str, want: &str| {
            ModelError::Model(format!("DecisionTree: `{key}` must be {want}, not {}", self.args[key]))
        };
        let mut p = linfa_trees::DecisionTree::params();
        if let Some(args) = self.args.as_object() {
            if let Some(k) = args
                .keys()
                .find(|k| !["max_depth", "min_weight_split", "split_quality", "training"].contains(&k.as_str()))
            {
                return Err(ModelError::Model(format!("DecisionTree: unknown argument `{k}` (it takes max_depth, min_weight_split, split_quality, training)")));
            }
        } else if !self.args.is_null() {
            return Err(ModelError::Model(format!(
                "DecisionTree: its arguments are named (a JSON object), not {}",
                self.args
            )));
        }
        match &self.args["max_depth"] {
            Value::Null => {}
            v => {
                p = p.max_depth(Some(
                    v.as_u64().filter(|&d| d > 0).ok_or_else(|| bad("max_depth", "a positive integer"))? as usize,
                ))
            }
        }
        match &self.args["min_weight_split"] {
            Value::Null => {}
            v => {
                p = p.min_weight_split(
                    v.as_f64().filter(|&w| w > 0.0).ok_or_else(|| bad("min_weight_split", "a positive number"))? as f32,
                )
            }
        }
        match self.args["split_quality"].as_str() {
            None if self.args["split_quality"].is_null() => {}
            Some("gini") => p = p.split_quality(SplitQuality::Gini),
            Some("entropy") => p = p.split_quality(SplitQuality::Entropy),
            _ => return Err(bad("split_quality", "\"gini\" or \"entropy\"")),
        }
        Ok(p)
    }
}

impl Model for DecisionTree {
    type X = Array1<f32>;
    type Y = usize;
    type P = usize;

    /// Fits the tree on all of `data` in one epoch; a tree whose training is done is kept.
    fn train(&mut self, data: &Dataset<Xy<Array1<f32>, usize>>, spec: &mut TrainSpec) -> Result<(), ModelError> {
        // One epoch fits it; a training that ended stays ended, as for networks.
        spec.epochs = 1;
        if spec.is_done() {
            return Ok(());
        }
        // Fitted again: how it was made is this run's, recorded when it is next stored.
        self.meta.provenance = None;
        let params = self.params()?;
        let training = &self.args["training"];
        if let Some(k) =
            training.as_object().and_then(|t| t.keys().find(|k| !["subsample", "seed"].contains(&k.as_str())))
        {
            return Err(ModelError::Model(format!(
                "DecisionTree: training `{k}` does not apply: a tree fits in one pass (it takes subsample, seed)"
            )));
        }
        // All of it as one batch: data held in arrays is gathered at once.
        let all = Training::from_args(training)?
            .sample(data)?
            .gather_all()?
            .ok_or_else(|| ModelError::Model("DecisionTree: no elements to train on".into()))?;
        let n = all.y.len();
        let x = all.x.mapv(f64::from);
        let features = x.ncols();
        let fitted =
            params.fit(&linfa::Dataset::new(x, all.y)).map_err(|e| ModelError::Model(format!("DecisionTree: {e}")))?;
        self.fitted = Some(Fitted { tree: fitted, features });
        spec.finish_epoch(n as u64);
        self.spec = *spec;
        Ok(())
    }

    fn predict(&self, x: &Array1<f32>) -> Result<usize, ModelError> {
        Ok(self.predict_all(vec![x.clone()])?[0])
    }

    fn predict_all(&self, xs: Vec<Array1<f32>>) -> Result<Vec<usize>, ModelError> {
        if xs.is_empty() {
            return Ok(Vec::new());
        }
        self.predict_batch(Element::stack(xs)?)
    }

    fn predict_batch(&self, xs: Array2<f32>) -> Result<Vec<usize>, ModelError> {
        let f = self.fitted.as_ref().ok_or(ModelError::NotTrained("DecisionTree"))?;
        if xs.ncols() != f.features {
            return Err(ModelError::Model(format!(
                "DecisionTree: elements have {} features; the tree was trained on {}",
                xs.ncols(),
                f.features
            )));
        }
        Ok(f.tree.predict(&xs.mapv(f64::from)).to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tree_beats_its_floor_on_iris_and_scores_the_same_reloaded() {
        let (_, back, spec) =
            crate::models::testing::floor_and_reload::<DecisionTree>("DecisionTree", &json!({"max_depth": 4}), 3, 0.85);
        assert_eq!(spec, TrainSpec { epochs: 1, epoch: 1, step: 100 });
        assert_eq!(back.downcast_ref::<DecisionTree>().unwrap().train_spec(), spec, "the cursor travels with the tree");
    }

    #[test]
    fn bad_arguments_and_shapes_are_clear_errors() {
        let data = iris().take(20);
        let mut spec = TrainSpec::epochs(1);
        let e = DecisionTree::new(json!({"max_depth": 0})).train(&data, &mut spec).unwrap_err();
        assert_eq!(e.to_string(), "DecisionTree: `max_depth` must be a positive integer, not 0");
        let e = DecisionTree::new(json!({"depth": 3})).train(&data, &mut spec).unwrap_err();
        assert!(e.to_string().contains("unknown argument `depth`"), "{e}");
        assert_eq!(
            DecisionTree::new(Value::Null).predict(&Array1::zeros(4)).unwrap_err(),
            ModelError::NotTrained("DecisionTree")
        );
        let mut tree = DecisionTree::new(Value::Null);
        tree.train(&data, &mut spec).unwrap();
        let e = tree.predict(&Array1::zeros(3)).unwrap_err();
        assert_eq!(e.to_string(), "DecisionTree: elements have 3 features; the tree was trained on 4");
        let e =
            DecisionTree::new(json!({"training": {"epochs": 3}})).train(&data, &mut TrainSpec::epochs(1)).unwrap_err();
        assert!(e.to_string().contains("training `epochs` does not apply"), "{e}");
        assert_eq!((winequality().count().unwrap(), diabetes().count().unwrap()), (1599, 441));
    }

    #[test]
    fn copies_differ_by_their_seeded_sample() {
        let train = iris().shuffle(150, 3).take(100);
        let sample = |seed: u64| {
            Training::from_args(&json!({"subsample": 0.6, "seed": seed}))
                .unwrap()
                .sample(&train)
                .unwrap()
                .collect()
                .unwrap()
        };
        let (a, b) = (sample(1), sample(2));
        assert_eq!(a.len(), 60, "60% of 100 rows");
        assert_eq!(a, sample(1), "the same seed, the same sample");
        assert_ne!(a, b, "another seed, another sample");
        // The tree fits its sample only. (Not compared tree to tree: linfa-trees breaks ties
        // between equal splits in hash-map order, which differs from one fit to the next.)
        let mut t = DecisionTree::new(json!({"training": {"subsample": 0.6, "seed": 1}}));
        let mut spec = TrainSpec::epochs(1);
        t.train(&train, &mut spec).unwrap();
        assert_eq!(spec.step, 60);
    }
}
