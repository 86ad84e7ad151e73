//! What the models' tests share: iris and diabetes split once, and the checks every framework's
//! model passes (trained from its definition, above a floor (or below a ceiling) on held-out
//! data, the same reloaded; a training killed mid-way and resumed ends where an uninterrupted
//! one does, to the bit).

use super::{eval, Model, TrainSpec};
use crate::data::ndarray::Array1;
use crate::data::{Dataset, Xy};
use crate::metrics::{categorical_accuracy, mean_squared_error, Classes, Values};
use crate::objects::object::{from_bytes, to_bytes};
use crate::Object;
use serde_json::Value;

/// Fisher's iris, rows shuffled by `seed`: 100 to train on, 50 held out.
pub fn iris_split(seed: u64) -> (Dataset<Xy<Array1<f32>, usize>>, Dataset<Xy<Array1<f32>, usize>>) {
    let data = super::linfa::iris().shuffle(150, seed);
    (data.take(100), data.skip(100))
}

/// A model trained on `train` from its definition (`name`, `args`), its predictions on `test`
/// scored by `metric`, and a copy saved and loaded checked to predict the same, bit for bit.
/// Gives the trained object, the loaded copy, where the training ended and the score.
#[allow(clippy::type_complexity)]
fn trained_and_reloaded<M: Model + Object>(
    name: &str,
    args: &Value,
    (train, test): (Dataset<Xy<M::X, M::Y>>, Dataset<Xy<M::X, M::Y>>),
    metric: fn(&Dataset<Xy<M::P, M::Y>>) -> Result<f64, crate::data::DataError>,
) -> (Box<dyn Object>, Box<dyn Object>, TrainSpec, f64)
where
    M::Y: Sync + PartialEq + std::fmt::Debug,
    M::P: PartialEq + std::fmt::Debug + Sync,
{
    let mut obj = crate::ObjectDef::new(name, args).unwrap().build().unwrap();
    let model = obj.downcast_mut::<M>().unwrap();
    let mut spec = TrainSpec::epochs(0);
    model.train(&train, &mut spec).unwrap();
    let scored = eval(&*model, &test).unwrap();
    let score = metric(&scored).unwrap();
    let back = from_bytes(&to_bytes(&*obj).unwrap(), None).unwrap();
    let again = eval(back.downcast_ref::<M>().unwrap(), &test).unwrap();
    assert_eq!(
        again.collect().unwrap(),
        scored.collect().unwrap(),
        "{name} reloaded: the same predictions, bit for bit"
    );
    (obj, back, spec, score)
}

/// Builds the model `name` from `args` as a definition would, trains it on iris's 100 rows
/// (split by `seed`) and checks its accuracy on the 50 held out against `floor`, and that a
/// copy saved and loaded predicts the same, bit for bit. Gives the trained object, the loaded
/// copy and where the training ended.
pub fn floor_and_reload<M>(
    name: &str,
    args: &Value,
    seed: u64,
    floor: f64,
) -> (Box<dyn Object>, Box<dyn Object>, TrainSpec)
where
    M: Model<X = Array1<f32>, Y = usize> + Object,
    M::P: Classes + PartialEq + std::fmt::Debug + Sync,
{
    floor_and_reload_as::<M>(name, args, seed, floor, |x| x)
}

/// As [`floor_and_reload`], each flower's four measures given to the model as `layout` makes
/// them (two inputs, an image, a map).
pub fn floor_and_reload_as<M>(
    name: &str,
    args: &Value,
    seed: u64,
    floor: f64,
    layout: fn(Array1<f32>) -> M::X,
) -> (Box<dyn Object>, Box<dyn Object>, TrainSpec)
where
    M: Model<Y = usize> + Object,
    M::P: Classes + PartialEq + std::fmt::Debug + Sync,
{
    let (train, test) = iris_split(seed);
    let (obj, back, spec, acc) =
        trained_and_reloaded::<M>(name, args, (train.apply_x(layout), test.apply_x(layout)), categorical_accuracy);
    assert!(acc >= floor, "{name}: accuracy {acc} on 50 held-out flowers, floor {floor}");
    (obj, back, spec)
}

/// Diabetes (442 patients), rows shuffled by `seed`: 342 to train on, 100 held out. Its
/// features come scaled to a norm of 1 per column, its targets in the disease's units (mean
/// 152, spread 77): both are brought to about a spread of 1, as one would for a network.
pub fn diabetes_split(seed: u64) -> (Dataset<Xy<Array1<f32>, f32>>, Dataset<Xy<Array1<f32>, f32>>) {
    let data = super::linfa::diabetes().apply(|x, y| (x * 21.0, (y - 152.0) / 77.0)).shuffle(442, seed);
    (data.take(342), data.skip(342))
}

/// Builds the regressor `name` from `args` as a definition would, trains it on diabetes (split
/// by `seed`) and checks its mean squared error on the 100 held out (in spreads: 1 is the
/// mean's) against `ceiling`, and that a copy saved and loaded predicts the same, bit for bit.
/// Gives the error.
pub fn ceiling_and_reload<M>(name: &str, args: &Value, seed: u64, ceiling: f64) -> f64
where
    M: Model<X = Array1<f32>, Y = f32> + Object,
    M::P: Values + PartialEq + std::fmt::Debug + Sync,
{
    let (_, _, _, mse) = trained_and_reloaded::<M>(name, args, diabetes_split(seed), mean_squared_error);
    assert!(mse <= ceiling, "{name}: mean squared error {mse} on 100 held-out patients, ceiling {ceiling}");
    mse
}

/// A network classifier as the kill test drives it.
pub trait Resumable: Model<X = Array1<f32>, Y = usize> + Object + Sized {
    fn of(args: Value) -> Self;
    fn checkpoint_to(&mut self, path: std::path::PathBuf);
    fn train_spec(&self) -> TrainSpec;
    fn parameters(&self) -> super::optim::Named;
}

/// The names of the parameters model `M` draws from the seed in `args(seed)`, once built (a
/// training of no epochs): the same seed gives the same values, another seed others.
pub fn drawn_from_seed<M: Resumable>(args: impl Fn(u64) -> Value) -> Vec<String> {
    let (train, _) = iris_split(1);
    let first = |seed: u64| {
        let mut m = M::of(args(seed));
        m.train(&train.take(1), &mut TrainSpec::epochs(0)).unwrap();
        m.parameters()
    };
    assert_eq!(first(3), first(3), "the same seed, the same parameters");
    assert_ne!(first(3), first(4), "another seed, other parameters");
    first(3).into_iter().map(|p| p.0).collect()
}

macro_rules! resumable {
    ($t:ty) => {
        impl $crate::models::testing::Resumable for $t {
            fn of(args: serde_json::Value) -> Self {
                <$t>::new(args)
            }
            fn checkpoint_to(&mut self, path: std::path::PathBuf) {
                <$t>::checkpoint_to(self, path)
            }
            fn train_spec(&self) -> $crate::models::TrainSpec {
                <$t>::train_spec(self)
            }
            fn parameters(&self) -> $crate::models::optim::Named {
                <$t>::parameters(self).unwrap()
            }
        }
    };
}
#[cfg(any(feature = "torch", feature = "candle", feature = "burn"))]
pub(crate) use resumable;
#[cfg(feature = "torch")]
resumable!(super::tch::TchClassifier);
#[cfg(feature = "candle")]
resumable!(super::candle::CandleClassifier);
#[cfg(feature = "burn")]
resumable!(super::burn::BurnClassifier);

const CHILD: &str = "DRYML_KILL_TEST_CHECKPOINT";

/// The kill test: this test binary runs `test` again as a child, which trains `args` (on iris's
/// 100 rows, a millisecond per element) saving after every epoch; the child is SIGKILLed once
/// three epochs are saved, and the model loaded from its checkpoint resumes. It must end with
/// the steps of an uninterrupted training and its very parameters, bit for bit (the optimiser's
/// state and each epoch's order travel in the checkpoint). The child's side returns at once.
pub fn killed_and_resumed<M: Resumable>(test: &str, args: Value) {
    let (train, _) = iris_split(1);
    if let Some(path) = std::env::var_os(CHILD) {
        let slow = train.map(|e| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            e
        });
        let mut model = M::of(args);
        model.checkpoint_to(std::path::PathBuf::from(path));
        model.train(&slow, &mut TrainSpec::epochs(0)).unwrap();
        return;
    }
    let dir = std::env::temp_dir().join(format!("dryml-kill-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.dryml");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture"])
        .env(CHILD, &file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let saved = loop {
        let spec = crate::load_object(&file).ok().map(|o| o.downcast_ref::<M>().unwrap().train_spec());
        if let Some(s) = spec.filter(|s| s.epoch >= 3) {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "no checkpoint of 3 epochs"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let mut obj = crate::load_object(&file).unwrap();
    let model = obj.downcast_mut::<M>().unwrap();
    let mut spec = model.train_spec();
    assert!(spec.epoch >= saved.epoch && !spec.is_done(), "killed mid-way: {spec:?}");
    model.train(&train, &mut spec).unwrap();
    let mut whole = M::of(args);
    let mut whole_spec = TrainSpec::epochs(0);
    whole.train(&train, &mut whole_spec).unwrap();
    assert_eq!(spec, whole_spec, "the same steps");
    let bits = |named: super::optim::Named| {
        named
            .into_iter()
            .map(|(n, d, v)| (n, d, v.into_iter().map(f32::to_bits).collect::<Vec<u32>>()))
            .collect::<Vec<_>>()
    };
    let (resumed, uninterrupted) = (bits(model.parameters()), bits(whole.parameters()));
    assert!(!resumed.is_empty());
    assert!(
        resumed == uninterrupted,
        "resumed after epoch {}: other weights than an uninterrupted training",
        saved.epoch
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The tests every framework's definition models pass, written once (`$classifier`,
/// `$regressor`): a training killed after three epochs resumes to the bits of an uninterrupted
/// one under Adam (with early stopping's validation split), AdamW, and SGD with momentum and
/// weight decay; a regressor learns diabetes below its ceiling, and says what its last layer
/// must be.
macro_rules! definition_tests {
    ($classifier:ident, $regressor:ident) => {
        $crate::models::testing::definition_tests!(@killed $classifier, a_killed_adam_training_resumes_to_the_same_bits,
            {"type": "adam", "lr": 0.02}, {"epochs": 30, "batch_size": 16, "validation_split": 0.2});
        $crate::models::testing::definition_tests!(@killed $classifier, a_killed_adamw_training_resumes_to_the_same_bits,
            {"type": "adamw", "lr": 0.02}, {"epochs": 30, "batch_size": 16});
        $crate::models::testing::definition_tests!(@killed $classifier, a_killed_sgd_momentum_training_resumes_to_the_same_bits,
            {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.001}, {"epochs": 30, "batch_size": 16});

        #[test]
        fn a_regressor_learns_diabetes_below_its_ceiling_and_scores_the_same_reloaded() {
            use $crate::models::Model as _;
            let args = serde_json::json!({"layers": [{"linear": 16}, "relu", {"linear": 1}],
                "optimizer": {"type": "adam", "lr": 0.01}, "training": {"epochs": 30, "batch_size": 32}});
            let name = stringify!($regressor);
            let mse = $crate::models::testing::ceiling_and_reload::<$regressor>(name, &args, 1, 0.7);
            eprintln!("{name} on diabetes: held-out MSE {mse:.3} (in spreads)");
            let (train, _) = $crate::models::testing::diabetes_split(1);
            let e = $regressor::new(serde_json::json!({"layers": [{"linear": 2}]}))
                .train(&train, &mut $crate::models::TrainSpec::epochs(0))
                .unwrap_err()
                .to_string();
            let want = "each target has 1 value(s) and the network gives 2 outputs: make its last layer {\"linear\": 1}";
            assert_eq!(e, format!("{name}: {want}"));
        }
    };
    (@killed $classifier:ident, $test:ident, $optimizer:tt, $training:tt) => {
        #[test]
        fn $test() {
            let args = serde_json::json!({"layers": [{"linear": 16}, "relu", {"linear": 3}],
                "optimizer": $optimizer, "training": $training});
            // The test's name as the test binary lists it: its path without the crate's name.
            let path = module_path!().split_once("::").map_or("", |p| p.1);
            $crate::models::testing::killed_and_resumed::<$classifier>(&format!("{path}::{}", stringify!($test)), args);
        }
    };
}
pub(crate) use definition_tests;

/// The test of a user's own network `$model` of iris (two linear layers, fields `hidden` and
/// `out`, its width from `width`), saved as `$name`: above its floor and the same reloaded, its
/// parameters drawn from the seed and named by field, a killed training resumed to the bit.
#[cfg(any(feature = "candle", feature = "burn"))]
macro_rules! own_network_test {
    ($test:ident, $model:ty, $name:literal) => {
        #[test]
        fn $test() {
            let own = |training| serde_json::json!({"width": 16, "optimizer": {"type": "adam", "lr": 0.02}, "training": training});
            <$model>::register();
            if std::env::var_os("DRYML_KILL_TEST_CHECKPOINT").is_none() {
                let training = serde_json::json!({"epochs": 40, "batch_size": 16});
                $crate::models::testing::floor_and_reload::<$model>($name, &own(training), 1, 0.9);
                let names = $crate::models::testing::drawn_from_seed::<$model>(|seed| {
                    serde_json::json!({"width": 8, "seed": seed, "training": {"epochs": 1}})
                });
                assert_eq!(names, ["hidden.bias", "hidden.weight", "out.bias", "out.weight"]);
            }
            let path = module_path!().split_once("::").map_or("", |p| p.1);
            let args = own(serde_json::json!({"epochs": 30, "batch_size": 16}));
            $crate::models::testing::killed_and_resumed::<$model>(&format!("{path}::{}", stringify!($test)), args);
        }
    };
}
#[cfg(any(feature = "candle", feature = "burn"))]
pub(crate) use own_network_test;
