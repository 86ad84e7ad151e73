//! Tests of burn's networks: the definitions' shared tests, and a CNN on iris as images.

use super::{BurnClassifier, BurnRegressor};
use serde_json::json;

crate::models::testing::definition_tests!(BurnClassifier, BurnRegressor);

#[test]
fn a_burn_network_beats_its_floor_on_iris_and_scores_the_same_reloaded() {
    let args = json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "adam", "lr": 0.02},
                      "training": {"epochs": 40, "batch_size": 16}});
    crate::models::testing::floor_and_reload::<BurnClassifier>("BurnClassifier", &args, 1, 0.85);
}

#[test]
fn a_burn_cnn_definition_trains_and_resumes_to_the_same_bits() {
    let cnn = |training| {
        json!({"layers": [{"reshape": [1, 2, 2]}, {"conv2d": {"channels": 8, "kernel": 2, "padding": 1}}, "relu",
                          {"max_pool": 1}, {"avg_pool": 1}, "flatten", {"dropout": 0.1}, {"linear": 16}, "tanh", {"linear": 3}],
               "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
    };
    crate::models::testing::floor_and_reload::<BurnClassifier>(
        "BurnClassifier",
        &cnn(json!({"epochs": 40, "batch_size": 16})),
        1,
        0.8,
    );
    crate::models::testing::killed_and_resumed::<BurnClassifier>(
        "models::burn::tests::a_burn_cnn_definition_trains_and_resumes_to_the_same_bits",
        cnn(json!({"epochs": 30, "batch_size": 16})),
    );
}

/// The weights come from the definition's seed (burn cannot seed its own): the same seed gives
/// the same parameters, another seed others; each is named by its layer, as tch's and candle's.
#[test]
fn a_burn_definitions_weights_are_drawn_from_its_seed_and_named_by_layer() {
    use crate::models::{Model, TrainSpec};
    let (train, _) = crate::models::testing::iris_split(1);
    let first = |seed: u64| {
        let mut m = BurnClassifier::new(json!({"layers": [{"linear": 4}, "relu", {"linear": 3}], "seed": seed,
                                               "training": {"epochs": 1}}));
        m.train(&train.take(1), &mut TrainSpec::epochs(0)).unwrap();
        m.parameters().unwrap()
    };
    let names: Vec<String> = first(3).into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["layer0.bias", "layer0.weight", "layer2.bias", "layer2.weight"]);
    assert_eq!(first(3), first(3));
    assert_ne!(first(3), first(4));
}

/// What burn cannot do here is an error that says so, naming the layer or the device.
#[test]
fn burn_errors_name_what_and_where() {
    use crate::models::placement::Placement;
    use crate::models::seam::Framework as _;
    use crate::models::{Model, TrainSpec};
    let (train, _) = crate::models::testing::iris_split(1);
    let mut m = BurnClassifier::new(json!({"layers": [{"linear": 8}, "batch_norm", {"linear": 3}]}));
    let e = m.train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string();
    assert!(e.starts_with("BurnClassifier: building a layer: \"batch_norm\" is not in dryml's burn yet"), "{e}");
    let e = BurnClassifier::new(json!({"layers": [{"linear": 8}, "relu"]})).train(&train, &mut TrainSpec::epochs(0));
    assert!(e.unwrap_err().to_string().contains("the last layer must be {\"linear\": N}"));
    let e = super::Burn::device_of(Placement::Cuda { gpu: 1, cuda: 0 }, "BurnClassifier").unwrap_err().to_string();
    assert!(e.contains("the context gives burn cuda:0 (gpu/1), but dryml's burn is built for the CPU only"), "{e}");
}
