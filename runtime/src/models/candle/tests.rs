//! Tests of candle's networks: definitions and a user's own, on iris and diabetes.

use super::*;
use crate::models::eval;
use crate::models::placement::Placement;
use crate::models::seam::Framework as _;
use crate::models::{Model, TrainSpec};
use candle_core::{Device, Module as _};
use serde_json::json;

crate::models::testing::definition_tests!(CandleClassifier, CandleRegressor);

fn def(training: Value) -> Value {
    json!({"layers": [{"linear": 16}, "relu", {"linear": 3}], "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
}

#[test]
fn a_candle_network_beats_its_floor_on_iris_and_scores_the_same_reloaded() {
    let args = def(json!({"epochs": 40, "batch_size": 16}));
    let (obj, _, spec) =
        crate::models::testing::floor_and_reload::<CandleClassifier>("CandleClassifier", &args, 1, 0.9);
    assert_eq!(spec, TrainSpec { epochs: 40, epoch: 40, step: 280 });
    // One definition, one network: a second build trains to the same scores.
    let (train, test) = crate::models::testing::iris_split(1);
    let mut twin = CandleClassifier::new(args);
    twin.train(&train, &mut TrainSpec::epochs(0)).unwrap();
    let before = eval(obj.downcast_ref::<CandleClassifier>().unwrap(), &test).unwrap().collect().unwrap();
    assert_eq!(eval(&twin, &test).unwrap().collect().unwrap(), before, "seeded weights");
}

#[test]
fn a_cnn_definition_trains_and_scores_the_same_reloaded_and_resumes_to_the_same_bits() {
    let cnn = |training| {
        json!({"layers": [{"reshape": [1, 2, 2]}, {"conv2d": {"channels": 8, "kernel": 2, "padding": 1}}, "batch_norm", "relu",
                                          {"max_pool": 1}, {"avg_pool": 1}, "flatten", {"dropout": 0.1}, {"linear": 16}, "tanh", {"linear": 3}],
                               "optimizer": {"type": "adam", "lr": 0.02}, "training": training})
    };
    let test =
        "models::candle::tests::a_cnn_definition_trains_and_scores_the_same_reloaded_and_resumes_to_the_same_bits";
    if std::env::var_os("DRYML_KILL_TEST_CHECKPOINT").is_none() {
        crate::models::testing::floor_and_reload::<CandleClassifier>(
            "CandleClassifier",
            &cnn(json!({"epochs": 40, "batch_size": 16})),
            1,
            0.85,
        );
    }
    crate::models::testing::killed_and_resumed::<CandleClassifier>(test, cnn(json!({"epochs": 30, "batch_size": 16})));
}

/// A network of the user's own: two linear layers, its width from its arguments.
struct Mlp {
    hidden: candle_nn::Linear,
    out: candle_nn::Linear,
}

impl CandleNet for Mlp {
    const NAME: &'static str = "tests.CandleMlp";
    fn build(vb: VarBuilder<'_>, args: &Value) -> Result<Mlp, String> {
        let width = args["width"].as_u64().ok_or("`width` must be a number")? as usize;
        let hidden = candle_nn::linear(4, width, vb.pp("hidden")).map_err(|e| e.to_string())?;
        Ok(Mlp { hidden, out: candle_nn::linear(width, 3, vb.pp("out")).map_err(|e| e.to_string())? })
    }
    fn forward_t(&self, xs: &Tensor, _train: bool) -> candle_core::Result<Tensor> {
        self.out.forward(&self.hidden.forward(xs)?.relu()?)
    }
}

crate::models::testing::resumable!(CandleModel<Mlp>);

// candle cannot seed its initialisation; dryml draws it again from the seed.
crate::models::testing::own_network_test!(
    a_users_own_candle_network_is_seeded_trains_reloads_and_resumes_to_the_same_bits,
    CandleModel<Mlp>,
    "tests.CandleMlp"
);

#[test]
fn candle_errors_name_what_and_where() {
    let train = crate::models::linfa::iris().take(20);
    let mut m = CandleClassifier::new(json!({"layers": [{"linear": 3}], "training": {"epochs": 1}}));
    m.train(&train, &mut TrainSpec::epochs(0)).unwrap();
    assert_eq!(
        m.predict(&Array1::zeros(2)).unwrap_err().to_string(),
        "CandleClassifier: elements have 2 features; the network takes 4"
    );
}

/// Several inputs by name: each measure's name, its value.
struct Measures(candle_nn::Linear, candle_nn::Linear);

impl CandleNet<std::collections::BTreeMap<String, Array1<f32>>> for Measures {
    const NAME: &'static str = "tests.CandleNamed";
    fn build(vb: VarBuilder<'_>, _: &Value) -> Result<Measures, String> {
        let hidden = candle_nn::linear(4, 16, vb.pp("hidden")).map_err(|e| e.to_string())?;
        Ok(Measures(hidden, candle_nn::linear(16, 3, vb.pp("out")).map_err(|e| e.to_string())?))
    }
    fn forward_t(&self, xs: &std::collections::BTreeMap<String, Tensor>, _train: bool) -> candle_core::Result<Tensor> {
        let columns: Vec<&Tensor> =
            ["petal_length", "petal_width", "sepal_length", "sepal_width"].iter().map(|k| &xs[*k]).collect();
        self.1.forward(&self.0.forward(&Tensor::cat(&columns, 1)?)?.relu()?)
    }
}

#[test]
fn a_users_candle_network_takes_its_inputs_by_name() {
    type ByName = std::collections::BTreeMap<String, Array1<f32>>;
    CandleModel::<Measures, usize, ByName>::register();
    let by_name = |x: Array1<f32>| -> ByName {
        ["sepal_length", "sepal_width", "petal_length", "petal_width"]
            .iter()
            .zip(x)
            .map(|(k, v)| (k.to_string(), Array1::from_elem(1, v)))
            .collect()
    };
    let args = json!({"optimizer": {"type": "adam", "lr": 0.02}, "training": {"epochs": 40, "batch_size": 16}});
    crate::models::testing::floor_and_reload_as::<CandleModel<Measures, usize, ByName>>(
        "tests.CandleNamed",
        &args,
        1,
        0.9,
        by_name,
    );
}

/// Elements held on the device, each batch picked there, train as batches made on the host
/// do: the same steps, losses and weights, bit for bit (here the device is the CPU).
#[test]
fn candle_elements_held_on_the_device_train_to_the_same_bits_as_batches_from_the_host() {
    let (train, _) = crate::models::testing::iris_split(1);
    let mut runs = Vec::new();
    for on_device in [true, false] {
        let mut m =
            CandleClassifier::new(def(json!({"batch_size": 16, "validation_split": 0.2, "on_device": on_device})));
        let mut history = crate::models::callbacks::History::default();
        let mut spec = TrainSpec::epochs(6);
        m.train_with(&train, &mut spec, &mut [&mut history]).unwrap();
        runs.push((spec, history.epochs, <CandleClassifier as crate::models::testing::Resumable>::parameters(&m)));
    }
    assert_eq!(runs[0].0, runs[1].0, "the same steps");
    assert_eq!(runs[0].1, runs[1].1, "the same losses");
    assert!(runs[0].2 == runs[1].2, "the same weights");
}

/// bf16 casts the definition's linear and convolution layers on CUDA, and TF32 is CUDA's GEMM:
/// candle's CPU has neither (no bf16 matmul), so there both train to FP32's bits, and a model
/// reloaded scores the same. A network of one's own cannot be cast for bf16: an error.
#[test]
fn candle_precision_is_cudas_the_cpu_computes_fp32() {
    let with = |precision: &str, layers: Value| {
        let mut args = def(json!({"epochs": 40, "batch_size": 16}));
        args["precision"] = json!(precision);
        args["layers"] = layers;
        args
    };
    let mlp = json!([{"linear": 16}, "relu", {"linear": 3}]);
    let cnn = json!([{"reshape": [1, 2, 2]}, {"conv2d": {"channels": 4, "kernel": 2, "padding": 1}}, "relu", "flatten", {"linear": 3}]);
    let params = |m: &dyn crate::Object| {
        <CandleClassifier as crate::models::testing::Resumable>::parameters(
            m.downcast_ref::<CandleClassifier>().unwrap(),
        )
    };
    let run = |precision, layers: &Value| {
        crate::models::testing::floor_and_reload::<CandleClassifier>(
            "CandleClassifier",
            &with(precision, layers.clone()),
            1,
            0.85,
        )
        .0
    };
    for layers in [&mlp, &cnn] {
        let (bf16, fp32, tf32) = (run("bf16", layers), run("fp32", layers), run("tf32", layers));
        assert!(params(&*bf16) == params(&*fp32), "the CPU computes FP32 under bf16: {layers}");
        assert!(params(&*tf32) == params(&*fp32), "the CPU computes FP32 under TF32: {layers}");
    }
    let (train, _) = crate::models::testing::iris_split(1);
    let mut own = CandleModel::<Mlp>::new(json!({"precision": "bf16", "training": {"epochs": 1}}));
    let e = own.train(&train, &mut TrainSpec::epochs(0)).unwrap_err().to_string();
    assert!(e.contains("`precision` \"bf16\" casts a definition's layers; candle has no autocast"), "{e}");
}

/// A context that gives candle a GPU: candle's CUDA device, where dryml is built with it; here
/// (no `candle-cuda`) an error that names the GPU and what is missing, never a silent CPU.
#[test]
fn a_context_that_gives_candle_a_gpu_is_its_cuda_device_or_a_clear_error() {
    let gpu = Placement::Cuda { gpu: 2, cuda: 0 };
    let e = Candle::device_of(gpu, "CandleClassifier");
    if cfg!(feature = "candle-cuda") {
        assert!(e.is_ok() || e.unwrap_err().to_string().contains("but CUDA did not open it here"));
    } else {
        assert_eq!(
            e.unwrap_err().to_string(),
            "CandleClassifier: the context gives candle cuda:0 (gpu/2), but dryml's candle is built without CUDA (the `candle-cuda` feature, which the set-up adds where an NVIDIA driver is): give candle no GPU (its models then run on the CPU), or train the network with tch"
        );
    }
    assert!(matches!(Candle::device_of(Placement::Cpu, "CandleClassifier"), Ok(Device::Cpu)));
    let oom = ModelError::Model(
        "CandleClassifier: the forward pass: DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".into(),
    );
    assert!(crate::batch::OutOfMemory::is_out_of_memory(&oom), "TOMA retries candle's CUDA out of memory");
}

/// Pooling takes each window's mean or its largest value, as tch's does.
#[test]
fn pooling_takes_each_windows_mean_or_largest_value() {
    use crate::models::seam::layers::LayerOps;
    let t = Tensor::from_vec(vec![1f32, 2., 3., 4.], (1, 1, 2, 2), &Device::Cpu).unwrap();
    let pooled = |max| Candle::pool(&t, 2, max).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(pooled(false), [2.5]);
    assert_eq!(pooled(true), [4.0]);
}
