//! A user's own tch network (`TchNet`): trained, reloaded and resumed to the bit; its errors and
//! libtorch's named; regressions, two inputs and images.

use super::*;
use crate::data::ndarray::Array3;
use crate::models::placement::Placement;

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
        "models::tch::tests::own::a_users_own_network_trains_reloads_and_resumes_to_the_same_bits",
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
        .args([
            "--exact",
            "models::tch::tests::own::a_training_out_of_memory_is_retried_with_smaller_batches_until_it_fits",
        ])
        .args(["--test-threads=1", "--nocapture"])
        .env("DRYML_TEST_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // 8,192 rows at once need 256 MiB for the hidden layer alone; a smaller batch fits.
    assert!(stderr.contains("tried [8192, 4096"), "{stderr}");
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
