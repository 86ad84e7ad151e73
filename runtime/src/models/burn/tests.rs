//! Tests of burn's networks: the definitions' shared tests, a CNN on iris as images, and
//! networks of the user's own (rows and images).

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
    let names = crate::models::testing::drawn_from_seed::<BurnClassifier>(
        |seed| json!({"layers": [{"linear": 4}, "relu", {"linear": 3}], "seed": seed, "training": {"epochs": 1}}),
    );
    assert_eq!(names, ["layer0.bias", "layer0.weight", "layer2.bias", "layer2.weight"]);
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

/// A network of the user's own: two linear layers, its width from its arguments.
#[derive(burn::module::Module, Debug)]
struct Mlp {
    hidden: burn::nn::Linear,
    out: burn::nn::Linear,
}

impl super::BurnNet for Mlp {
    const NAME: &'static str = "tests.BurnMlp";
    fn build(device: &burn::tensor::Device, args: &serde_json::Value) -> Result<Mlp, String> {
        let width = args["width"].as_u64().ok_or("`width` must be a number")? as usize;
        let linear = |i, o| burn::nn::LinearConfig::new(i, o).init(device);
        Ok(Mlp { hidden: linear(4, width), out: linear(width, 3) })
    }
    fn forward_t(&self, xs: burn::tensor::Tensor<2>, _train: bool) -> burn::tensor::Tensor<2> {
        self.out.forward(burn::tensor::activation::relu(self.hidden.forward(xs)))
    }
}

crate::models::testing::resumable!(super::BurnModel<Mlp>);

// burn draws its own initialisation; dryml draws it again from the seed, named by field.
crate::models::testing::own_network_test!(
    a_users_own_burn_network_is_seeded_trains_reloads_and_resumes_to_the_same_bits,
    super::BurnModel<Mlp>,
    "tests.BurnMlp"
);

/// A network of the user's own whose arguments lack what it needs: its own error, named.
#[test]
fn a_users_own_burn_networks_error_is_named() {
    use crate::models::{Model, TrainSpec};
    let (train, _) = crate::models::testing::iris_split(1);
    let e = super::BurnModel::<Mlp>::new(json!({})).train(&train, &mut TrainSpec::epochs(0)).unwrap_err();
    assert_eq!(e.to_string(), "tests.BurnMlp: `width` must be a number");
}

/// A network of the user's own that takes images: iris's four measures as a 2×2 image.
#[derive(burn::module::Module, Debug)]
struct Cnn {
    conv: burn::nn::conv::Conv2d,
    out: burn::nn::Linear,
}

impl super::BurnNet<crate::data::ndarray::Array3<f32>> for Cnn {
    const NAME: &'static str = "tests.BurnCnn";
    fn build(device: &burn::tensor::Device, _: &serde_json::Value) -> Result<Cnn, String> {
        let conv = burn::nn::conv::Conv2dConfig::new([1, 8], [2, 2]).init(device);
        Ok(Cnn { conv, out: burn::nn::LinearConfig::new(8, 3).init(device) })
    }
    fn forward_t(&self, xs: burn::tensor::Tensor<4>, _train: bool) -> burn::tensor::Tensor<2> {
        self.out.forward(burn::tensor::activation::relu(self.conv.forward(xs)).flatten(1, 3))
    }
}

#[test]
fn a_users_own_burn_network_takes_images() {
    use crate::data::ndarray::Array3;
    type Images = super::BurnModel<Cnn, usize, Array3<f32>>;
    Images::register();
    let image = |x: crate::data::ndarray::Array1<f32>| x.into_shape_with_order((1, 2, 2)).unwrap();
    let args = json!({"optimizer": {"type": "adam", "lr": 0.02}, "training": {"epochs": 40, "batch_size": 16}});
    crate::models::testing::floor_and_reload_as::<Images>("tests.BurnCnn", &args, 1, 0.85, image);
}
