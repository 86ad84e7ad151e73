use super::*;
use crate::data::ndarray::{array, Array3};
use crate::data::{Dataset, Xy};
use crate::models::eval;
use crate::models::placement::Placement;
use crate::models::{Model, TrainSpec};
use serde_json::json;

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

/// Killed after a few epochs and resumed from its checkpoint: the weights of an uninterrupted
/// training, bit for bit, with Adam (and early stopping's validation split) and with SGD's
/// momentum.
#[test]
fn a_killed_adam_training_resumes_to_the_same_bits() {
    let args = def(json!({"epochs": 30, "batch_size": 16, "validation_split": 0.2}));
    crate::models::testing::killed_and_resumed::<TchClassifier>(
        "models::tch::tests::a_killed_adam_training_resumes_to_the_same_bits",
        args,
    );
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
fn a_killed_sgd_momentum_training_resumes_to_the_same_bits() {
    let args = json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.001},
                      "training": {"epochs": 30, "batch_size": 16}});
    crate::models::testing::killed_and_resumed::<TchClassifier>(
        "models::tch::tests::a_killed_sgd_momentum_training_resumes_to_the_same_bits",
        args,
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

/// A network of the user's own: two linear layers, its width from its arguments.
struct Mlp {
    hidden: nn::Linear,
    out: nn::Linear,
}

impl TchNet for Mlp {
    const NAME: &'static str = "tests.Mlp";
    fn build(p: &nn::Path<'_>, args: &Value) -> Result<Mlp, String> {
        let width = args["width"].as_i64().ok_or_else(|| format!("`width` must be a number, not {}", args["width"]))?;
        Ok(Mlp {
            hidden: nn::linear(p / "hidden", 4, width, Default::default()),
            out: nn::linear(p / "out", width, 3, Default::default()),
        })
    }
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.apply(&self.hidden).relu().apply(&self.out)
    }
}

crate::models::testing::resumable!(TchModel<Mlp>);

fn own(training: Value) -> Value {
    json!({"width": 16, "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
}

#[test]
fn a_users_own_network_trains_reloads_and_resumes_to_the_same_bits() {
    TchModel::<Mlp>::register();
    if std::env::var_os("DRYML_KILL_TEST_CHECKPOINT").is_none() {
        let (obj, back, _) = crate::models::testing::floor_and_reload::<TchModel<Mlp>>(
            "tests.Mlp",
            &own(json!({"epochs": 40, "batch_size": 16})),
            1,
            0.9,
        );
        assert_eq!(obj.definition().args["width"], 16, "its own arguments are its definition's");
        let back = back.downcast_ref::<TchModel<Mlp>>().unwrap();
        assert_eq!(back.placement(), Some(Placement::Cpu));
        assert_eq!(back.net().unwrap().out.ws.size(), vec![3, 16]);
    }
    crate::models::testing::killed_and_resumed::<TchModel<Mlp>>(
        "models::tch::tests::a_users_own_network_trains_reloads_and_resumes_to_the_same_bits",
        own(json!({"epochs": 30, "batch_size": 16})),
    );
}

/// Gives one score per element whatever it is asked, or panics in tch.
struct Broken(nn::Linear, bool);

impl TchNet for Broken {
    const NAME: &'static str = "tests.Broken";
    fn build(p: &nn::Path<'_>, args: &Value) -> Result<Broken, String> {
        Ok(Broken(nn::linear(p / "l", 4, 1, Default::default()), args["panic"] == true))
    }
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        if self.1 {
            xs.view([-1, 3]).apply(&self.0)
        } else {
            xs.apply(&self.0).flatten(0, -1)
        }
    }
}

#[test]
fn a_users_network_that_errs_is_named_and_nothing_panics_through() {
    let (train, _) = iris_split();
    let e = TchModel::<Mlp>::new(json!({})).train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string();
    assert_eq!(e, "tests.Mlp: `width` must be a number, not null");
    let e = TchModel::<Broken>::new(json!({})).train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string();
    assert_eq!(
        e,
        "tests.Broken: the forward pass gave a tensor of shape [32] for 32 elements; it must give [32, outputs]"
    );
    let e = TchModel::<Broken>::new(json!({"panic": true}))
        .train(&train, &mut TrainSpec::epochs(0))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("tests.Broken: the forward pass panicked: "), "{e}");
    let e = TchModel::<Mlp>::new(json!({"width": 4, "optimizer": {"type": "lbfgs"}}))
        .train(&train, &mut TrainSpec::epochs(0))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "tests.Mlp: optimizer `lbfgs` is not adam, adamw or sgd");
}

/// Scores that do not depend on its weights: libtorch refuses the backward pass.
struct Detached(nn::Linear);

impl TchNet for Detached {
    const NAME: &'static str = "tests.Detached";
    fn build(p: &nn::Path<'_>, _: &Value) -> Result<Detached, String> {
        Ok(Detached(nn::linear(p / "l", 4, 3, Default::default())))
    }
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.apply(&self.0).detach()
    }
}

#[test]
fn a_backward_pass_libtorch_refuses_is_an_error_on_either_path_not_a_panic() {
    let (train, _) = iris_split();
    for on_device in [true, false] {
        let mut m = TchModel::<Detached>::new(json!({"training": {"on_device": on_device}}));
        let e = m.train(&train, &mut TrainSpec::epochs(1)).unwrap_err().to_string();
        assert!(e.starts_with("tests.Detached: the backward pass failed: "), "{e}");
        assert!(e.contains("does not require grad"), "{e}");
        assert!(!crate::batch::OutOfMemory::is_out_of_memory(&ModelError::Model(e)), "not a retry");
    }
}

/// TOMA's job on a training: under a memory limit a batch too big fails with libtorch's real
/// out-of-memory error, an error of the model's, and `dryml::batch` halves it until one fits.
#[test]
fn a_training_out_of_memory_is_retried_with_smaller_batches_until_it_fits() {
    if std::env::var_os("DRYML_TEST_CHILD").is_some() {
        let rows = Dataset::from_vec(
            (0..8192).map(|i| Xy { x: Array1::from_elem(8, (i % 7) as f32), y: i % 3 }).collect::<Vec<_>>(),
        );
        let args = |batch: usize| {
            let training = json!({"epochs": 1, "batch_size": batch});
            json!({"layers": [{"linear": 8192}, "relu", {"linear": 3}], "optimizer": {"type": "sgd", "lr": 0.01}, "training": training})
        };
        // libtorch's own start-up first, then 192 MiB more for the training.
        TchClassifier::new(args(16)).train(&rows.take(16), &mut TrainSpec::epochs(1)).unwrap();
        let vm = crate::sys::procfs::statm(std::process::id()).unwrap().size;
        crate::batch::set_cpu_memory_limit((vm + (192 << 20)) as f64 / (1u64 << 30) as f64).unwrap();
        let tried = std::cell::RefCell::new(Vec::new());
        let got = crate::batch::Batcher::new(8192).cache(crate::batch::Cache::None).batch(|b| {
            tried.borrow_mut().push(b);
            TchClassifier::new(args(b)).train(&rows, &mut TrainSpec::epochs(1)).map(|_| b)
        });
        eprintln!("tried {:?}: {got:?}", tried.borrow());
        std::process::exit(if got.is_ok() && tried.borrow().len() > 1 { 0 } else { 1 });
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "models::tch::tests::a_training_out_of_memory_is_retried_with_smaller_batches_until_it_fits"])
        .args(["--test-threads=1", "--nocapture"])
        .env("DRYML_TEST_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // 8,192 rows at once need 256 MiB for the hidden layer alone; a smaller batch fits.
    assert!(stderr.contains("tried [8192, 4096"), "{stderr}");
}

#[test]
fn a_regressor_learns_diabetes_below_its_ceiling_and_scores_the_same_reloaded() {
    let args = json!({"layers": [{"linear": 16}, "relu", {"linear": 1}], "optimizer": {"type": "adam", "lr": 0.01},
                      "training": {"epochs": 30, "batch_size": 32}});
    let mse = crate::models::testing::ceiling_and_reload::<TchRegressor>("TchRegressor", &args, 1, 0.7);
    eprintln!("TchRegressor on diabetes: held-out MSE {mse:.3} (in spreads)");
}

/// A regression network of the user's own: one hidden layer, as many outputs as values.
struct Reg(nn::Linear, nn::Linear);

impl TchNet for Reg {
    const NAME: &'static str = "tests.Reg";
    fn build(p: &nn::Path<'_>, args: &Value) -> Result<Reg, String> {
        let outputs = args["outputs"].as_i64().unwrap_or(1);
        Ok(Reg(
            nn::linear(p / "hidden", 10, 16, Default::default()),
            nn::linear(p / "out", 16, outputs, Default::default()),
        ))
    }
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.apply(&self.0).relu().apply(&self.1)
    }
}

#[test]
fn a_users_own_regression_network_learns_values_and_mismatches_are_named() {
    let (train, test) = crate::models::testing::diabetes_split(1);
    let mut m = TchModel::<Reg, f32>::new(json!({"optimizer": {"lr": 0.01}, "training": {"epochs": 30}}));
    m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
    let mse = crate::metrics::mean_squared_error(&eval(&m, &test).unwrap()).unwrap();
    assert!(mse <= 0.7, "held-out MSE {mse}");
    // Two values each (the target and its double) from a network of two outputs.
    let two = train.apply_y(|y| array![y, 2.0 * y]);
    let mut m2 = TchModel::<Reg, Array1<f32>>::new(json!({"outputs": 2, "training": {"epochs": 2}}));
    m2.train(&two, &mut TrainSpec::epochs(0)).unwrap();
    let e = TchModel::<Reg, Array1<f32>>::new(json!({"training": {"epochs": 1}}))
        .train(&two, &mut TrainSpec::epochs(0))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "tests.Reg: each target has 2 value(s) and the network gives 1 outputs: make its last layer {\"linear\": 2}"
    );
    let e = TchModel::<Reg, f32>::new(json!({"loss": "cross_entropy"}))
        .train(&train, &mut TrainSpec::epochs(0))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("tests.Reg: the targets are values, and cross-entropy scores classes"), "{e}");
    let e = TchRegressor::new(json!({"layers": [{"linear": 1}], "loss": "cross_entropy"}))
        .train(&train, &mut TrainSpec::epochs(0))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("TchRegressor: the targets are values"), "{e}");
}

#[test]
fn one_network_as_a_classifier_and_as_a_regression_loads_as_each() {
    use crate::objects::object::{from_bytes, to_bytes};
    use crate::Object;
    let classes = TchModel::<Reg>::new(json!({"outputs": 3}));
    let mut values = TchModel::<Reg, f32>::new(json!({"training": {"epochs": 1}}));
    let several = TchModel::<Reg, Array1<f32>>::new(json!({"outputs": 2}));
    assert_eq!(
        [classes.type_name(), values.type_name(), several.type_name()],
        ["tests.Reg", "tests.Reg<f32>", "tests.Reg<Array1<f32>>"]
    );
    values.train(&crate::models::testing::diabetes_split(1).0, &mut TrainSpec::epochs(0)).unwrap();
    // Each loads as what it was saved as, whichever was registered last.
    let back = from_bytes(&to_bytes(&values).unwrap(), None).unwrap();
    assert_eq!(back.downcast_ref::<TchModel<Reg, f32>>().unwrap().parameters().unwrap(), values.parameters().unwrap());
    assert!(from_bytes(&to_bytes(&classes).unwrap(), None).unwrap().downcast_ref::<TchModel<Reg>>().is_some());
    assert_eq!(classes.definition().type_name, "tests.Reg");
}

/// Two inputs, the sepals' measures and the petals', each through a layer of its own.
struct Halves {
    sepal: nn::Linear,
    petal: nn::Linear,
    out: nn::Linear,
}

impl TchNet<(Array1<f32>, Array1<f32>)> for Halves {
    const NAME: &'static str = "tests.Halves";
    fn build(p: &nn::Path<'_>, _: &Value) -> Result<Halves, String> {
        let layer = |name: &str, from, to| nn::linear(p / name, from, to, Default::default());
        Ok(Halves { sepal: layer("sepal", 2, 8), petal: layer("petal", 2, 8), out: layer("out", 16, 3) })
    }
    fn forward_t(&self, (sepals, petals): &(Tensor, Tensor), _train: bool) -> Tensor {
        Tensor::cat(&[sepals.apply(&self.sepal).relu(), petals.apply(&self.petal).relu()], 1).apply(&self.out)
    }
}

/// Each flower as a 1×2×2 image, through a convolution.
struct Square {
    conv: nn::Conv2D,
    out: nn::Linear,
}

impl TchNet<Array3<f32>> for Square {
    const NAME: &'static str = "tests.Square";
    fn build(p: &nn::Path<'_>, _: &Value) -> Result<Square, String> {
        Ok(Square {
            conv: nn::conv2d(p / "conv", 1, 8, 2, Default::default()),
            out: nn::linear(p / "out", 8, 3, Default::default()),
        })
    }
    fn forward_t(&self, images: &Tensor, _train: bool) -> Tensor {
        assert_eq!(images.size()[1..], [1, 2, 2], "images, not rows");
        images.apply(&self.conv).relu().flatten(1, -1).apply(&self.out)
    }
}

type TwoInputs = (Array1<f32>, Array1<f32>);

fn halves(x: Array1<f32>) -> TwoInputs {
    (x.slice(crate::data::ndarray::s![..2]).to_owned(), x.slice(crate::data::ndarray::s![2..]).to_owned())
}

fn square(x: Array1<f32>) -> Array3<f32> {
    x.into_shape_with_order((1, 2, 2)).expect("four measures")
}

#[test]
fn a_users_network_of_two_inputs_or_of_images_trains_and_scores_the_same_reloaded() {
    TchModel::<Halves, usize, TwoInputs>::register();
    TchModel::<Square, usize, Array3<f32>>::register();
    let args = json!({"optimizer": {"type": "adam", "lr": 0.02}, "training": {"epochs": 40, "batch_size": 16}});
    let (obj, ..) = crate::models::testing::floor_and_reload_as::<TchModel<Halves, usize, TwoInputs>>(
        "tests.Halves",
        &args,
        1,
        0.9,
        halves,
    );
    crate::models::testing::floor_and_reload_as::<TchModel<Square, usize, Array3<f32>>>(
        "tests.Square",
        &args,
        1,
        0.9,
        square,
    );
    // Inputs of other widths are named, whichever input differs.
    let two = obj.downcast_ref::<TchModel<Halves, usize, TwoInputs>>().unwrap();
    let e = two.predict(&(array![1.0, 2.0, 3.0], array![1.0, 2.0])).unwrap_err().to_string();
    assert_eq!(e, "tests.Halves: elements have 5 features; the network takes 4");
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
