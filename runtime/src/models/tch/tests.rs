use super::*;
use crate::data::ndarray::array;
use crate::data::{Dataset, Xy};
use crate::models::eval;
use crate::models::precision::Precision;
use crate::models::{Model, TrainSpec};
use serde_json::json;

mod own;

crate::models::testing::definition_tests!(TchClassifier, TchRegressor);

/// Iris as every network test here splits it.
fn iris_split() -> (Dataset<Xy<Array1<f32>, usize>>, Dataset<Xy<Array1<f32>, usize>>) {
    crate::models::testing::iris_split(1)
}

fn def(training: Value) -> Value {
    json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
}

#[test]
fn a_network_beats_its_floor_and_scores_the_same_reloaded() {
    let (_, back, spec) = crate::models::testing::floor_and_reload::<TchClassifier>(
        "TchClassifier",
        &def(json!({"epochs": 40, "batch_size": 16})),
        1,
        0.9,
    );
    // 100 elements in batches of 16: 7 steps an epoch.
    assert_eq!(spec, TrainSpec { epochs: 40, epoch: 40, step: 280 });
    assert_eq!(back.downcast_ref::<TchClassifier>().unwrap().train_spec(), spec, "the cursor travels with the weights");
}

#[test]
fn early_stopping_ends_the_training_with_the_best_weights() {
    let (train, _) = iris_split();
    let mut model =
        TchClassifier::new(def(json!({"epochs": 500, "batch_size": 8, "validation_split": 0.3, "patience": 3})));
    let mut spec = TrainSpec::epochs(0);
    model.train(&train, &mut spec).unwrap();
    assert!(spec.is_done() && spec.epoch < 500, "stopped early: {spec:?}");
    assert_eq!(spec.epochs, spec.epoch, "a stopped training is over");
    // Trained again, it stays over.
    model.train(&train, &mut spec).unwrap();
    assert_eq!(model.train_spec(), spec);
}

/// Elements held on the device, each batch picked there, train as batches made on the host do:
/// the same steps, losses and weights, bit for bit (here the device is the CPU), with dropout
/// and batch norm, and with a validation split and a last batch shorter than the others.
#[test]
fn elements_held_on_the_device_train_to_the_same_bits_as_batches_from_the_host() {
    let (train, _) = iris_split();
    for (args, epochs) in
        [(def(json!({"batch_size": 16, "validation_split": 0.2})), 6), (cnn(json!({"batch_size": 24})), 3)]
    {
        let mut runs = Vec::new();
        for on_device in [true, false] {
            let mut args = args.clone();
            args["training"]["on_device"] = json!(on_device);
            let mut m = TchClassifier::new(args);
            let mut history = crate::models::callbacks::History::default();
            let mut spec = TrainSpec::epochs(epochs);
            m.train_with(&train, &mut spec, &mut [&mut history]).unwrap();
            runs.push((spec, history.epochs, <TchClassifier as crate::models::testing::Resumable>::parameters(&m)));
        }
        assert_eq!(runs[0].0, runs[1].0, "the same steps");
        assert_eq!(runs[0].1, runs[1].1, "the same losses");
        assert!(runs[0].2 == runs[1].2, "the same weights");
    }
    let bad = TchClassifier::new(def(json!({"on_device": "yes"}))).train(&train, &mut TrainSpec::epochs(1));
    assert!(bad.unwrap_err().to_string().contains("`on_device` must be true or false"));
}

#[test]
fn bad_components_and_data_are_clear_errors() {
    let (train, _) = iris_split();
    let mut spec = TrainSpec::epochs(0);
    let cases = [
        (json!({"layers": [{"linear": 16}, "swish", {"linear": 3}]}), "layer 1 (\"swish\") is not one of"),
        (json!({"layers": [{"linear": 16}, "relu"]}), "the last layer must be {\"linear\": N}"),
        (
            json!({"layers": [{"linear": 3}], "optimizer": {"type": "lbfgs"}}),
            "optimizer `lbfgs` is not adam, adamw or sgd",
        ),
        (json!({"layers": [{"linear": 3}], "loss": "hinge"}), "`loss` must be \"cross_entropy\" or \"mse\""),
        (
            json!({"layers": [{"linear": 3}], "training": {"epochs": 0}}),
            "training: `epochs` must be a positive integer, not 0",
        ),
        (
            json!({"layers": [{"linear": 3}], "training": {"patience": 2}}),
            "`patience` (early stopping) needs a `validation_split`",
        ),
        (json!({"layers": [{"linear": 2}]}), "class 2 is not below the network's 2 outputs"),
    ];
    for (args, want) in cases {
        let e = TchClassifier::new(args.clone()).train(&train, &mut spec).unwrap_err().to_string();
        assert!(e.contains(want), "{args}: {e}");
    }
    let mut model = TchClassifier::new(def(json!({"epochs": 1})));
    assert_eq!(model.predict(&array![1.0f32, 2.0, 3.0, 4.0]).unwrap_err(), ModelError::NotTrained("TchClassifier"));
    model.train(&train, &mut TrainSpec::epochs(0)).unwrap();
    let e = model.predict(&array![1.0f32, 2.0, 3.0]).unwrap_err().to_string();
    assert_eq!(e, "TchClassifier: elements have 3 features; the network takes 4");
}

/// A small CNN on iris's four features as 2×2 images, with every kind of layer.
pub(crate) fn cnn(training: Value) -> Value {
    json!({"layers": [{"reshape": [1, 2, 2]}, {"conv2d": {"channels": 8, "kernel": 2, "padding": 1}}, "batch_norm", "relu",
                      {"max_pool": 1}, {"avg_pool": 1}, "flatten", {"dropout": 0.1}, {"linear": 16}, "tanh", {"linear": 3}],
           "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
}

#[test]
fn a_cnn_definition_trains_and_scores_the_same_reloaded() {
    crate::models::testing::floor_and_reload::<TchClassifier>(
        "TchClassifier",
        &cnn(json!({"epochs": 40, "batch_size": 16})),
        1,
        0.85,
    );
}

#[test]
fn a_killed_cnn_with_dropout_and_batch_norm_resumes_to_the_same_bits() {
    crate::models::testing::killed_and_resumed::<TchClassifier>(
        "models::tch::tests::a_killed_cnn_with_dropout_and_batch_norm_resumes_to_the_same_bits",
        cnn(json!({"epochs": 30, "batch_size": 16})),
    );
}

#[test]
fn early_stopping_keeps_its_memory_in_the_checkpoint() {
    let (train, test) = iris_split();
    let args = def(json!({"epochs": 500, "batch_size": 8, "validation_split": 0.3, "patience": 3}));
    let dir = std::env::temp_dir().join(format!("dryml-tch-early-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    // Uninterrupted: the file saved last holds the best weights, put back, and no memory.
    let whole_file = dir.join("whole.dryml");
    let mut whole = TchClassifier::new(args.clone());
    whole.checkpoint_to(&whole_file);
    let mut spec = TrainSpec::epochs(0);
    whole.train(&train, &mut spec).unwrap();
    assert!(spec.epoch > 4 && spec.epoch < 500, "stopped early, after a few epochs: {spec:?}");
    let saved = crate::load_object(&whole_file).unwrap();
    let saved = saved.downcast_ref::<TchClassifier>().unwrap();
    assert_eq!(
        eval(saved, &test).unwrap().collect().unwrap(),
        eval(&whole, &test).unwrap().collect().unwrap(),
        "the best weights"
    );
    assert!(saved.trained.best.is_none());
    // Interrupted in its fourth epoch (a pass that fails): the file holds the memory too.
    let cut_file = dir.join("cut.dryml");
    // Elements a training reads: before its first epoch and in each one, counted.
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let counting = |limit: usize| {
        let seen = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let data = train.try_map(move |e| {
            if counted.fetch_add(1, SeqCst) >= limit {
                return Err(crate::data::DataError::Argument("the node went away".into()));
            }
            Ok(e)
        });
        (data, seen)
    };
    let reads = |epochs: u64| {
        let (data, seen) = counting(usize::MAX);
        TchClassifier::new(def(json!({"epochs": epochs, "batch_size": 8, "validation_split": 0.3})))
            .train(&data, &mut TrainSpec::epochs(0))
            .unwrap();
        seen.load(SeqCst)
    };
    let (one, two) = (reads(1), reads(2));
    let failing = counting(one + (two - one) * 7 / 2).0;
    let mut cut = TchClassifier::new(args);
    cut.checkpoint_to(&cut_file);
    let e = cut.train(&failing, &mut TrainSpec::epochs(0)).unwrap_err();
    assert_eq!(e.to_string(), "the node went away");
    let mut back = crate::load_object(&cut_file).unwrap();
    let back = back.downcast_mut::<TchClassifier>().unwrap();
    let best = back.trained.best.clone().expect("early stopping's memory");
    assert!(best.since < 3 && best.loss.is_finite() && !best.weights.is_empty(), "{:?}", (best.since, best.loss));
    assert!(back.train_spec().epoch >= 3, "{:?}", back.train_spec());
    // Resumed, it takes its memory up and ends as a stopped training does.
    let mut spec = back.train_spec();
    back.train(&train, &mut spec).unwrap();
    assert!(spec.is_done() && spec.epoch == spec.epochs && spec.epoch < 500, "{spec:?}");
    assert!(back.trained.best.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// bf16 autocasts the forward pass on the model's device (here the CPU): the network still
/// learns, and reloaded (its `precision` saved with its arguments) it scores the same; its
/// weights are not FP32's. TF32 is libtorch's switch, on for a pass and put back after it; the
/// CPU computes FP32 under it, so a TF32 model trains to FP32's bits here.
#[test]
fn precision_autocasts_to_bf16_and_switches_tf32_for_a_pass() {
    let with = |precision: &str| {
        let mut args = def(json!({"epochs": 40, "batch_size": 16}));
        args["precision"] = json!(precision);
        args
    };
    let (bf16, _, _) =
        crate::models::testing::floor_and_reload::<TchClassifier>("TchClassifier", &with("bf16"), 1, 0.9);
    let (fp32, _, _) =
        crate::models::testing::floor_and_reload::<TchClassifier>("TchClassifier", &with("fp32"), 1, 0.9);
    let params = |m: &dyn crate::Object| {
        <TchClassifier as crate::models::testing::Resumable>::parameters(m.downcast_ref::<TchClassifier>().unwrap())
    };
    assert!(params(&*bf16) != params(&*fp32), "bf16's arithmetic is not FP32's");
    let x = Tensor::ones([2, 4], (Kind::Float, Device::Cpu));
    let w = Tensor::ones([3, 4], (Kind::Float, Device::Cpu));
    {
        let _on = precision::InForce::on(Precision::Bf16, Device::Cpu).unwrap();
        assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::BFloat16, "autocast on");
    }
    assert_eq!(x.linear::<Tensor>(&w, None).kind(), Kind::Float, "autocast put back");
    assert!(!precision::tf32_now());
    {
        let _on = precision::InForce::on(Precision::Tf32, Device::Cpu).unwrap();
        assert!(precision::tf32_now(), "TF32 on for the pass");
    }
    assert!(!precision::tf32_now(), "TF32 put back");
    let (tf32, _, _) =
        crate::models::testing::floor_and_reload::<TchClassifier>("TchClassifier", &with("tf32"), 1, 0.9);
    assert!(params(&*tf32) == params(&*fp32), "the CPU computes FP32 under TF32");
    let (train, _) = iris_split();
    let bad = TchClassifier::new(with("fp8")).train(&train, &mut TrainSpec::epochs(1));
    assert!(bad.unwrap_err().to_string().contains("`precision` must be \"fp32\", \"tf32\" or \"bf16\", not \"fp8\""));
}

/// Average pooling takes each window's mean, as PyTorch's `AvgPool2d` does (tch's own
/// `avg_pool2d_default` divides by 1: a sum), and max pooling its largest value.
#[test]
fn pooling_takes_each_windows_mean_or_largest_value() {
    use crate::models::seam::layers::LayerOps;
    let t = Tensor::from_slice(&[1f32, 2., 3., 4.]).view([1, 1, 2, 2]);
    assert_eq!(Tch::pool(&t, 2, false).unwrap().double_value(&[0, 0, 0, 0]), 2.5);
    assert_eq!(Tch::pool(&t, 2, true).unwrap().double_value(&[0, 0, 0, 0]), 4.0);
}
