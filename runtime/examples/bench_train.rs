//! The training benchmark: each framework's model trained through DRYML (`TchClassifier`,
//! `CandleClassifier`, `BurnClassifier`, `DecisionTree`: a definition, a `Dataset`, the shared
//! training procedure) against the same training written by hand in that framework (the network
//! built the same, an index permutation per epoch, each batch's rows gathered into a tensor, one
//! optimiser step and the loss read back per batch; burn's by hand steps with burn's own Adam). Data: linfa's red wine quality (1599 rows,
//! 11 features, 9 class slots). Rounds interleaved so drift hits both alike; prints one JSON
//! object, each framework's median seconds, the ratio and the training accuracy both reached.
//!
//! By hand: `LIBTORCH_USE_PYTORCH=1 cargo run --release -p dryml --features torch,candle,burn,linfa
//! --example bench_train -- 7` (with the venv's Python on the path).

mod shared;

use dryml::data::ndarray::{Array1, Array2, Axis};
use dryml::data::{Dataset, Element, Xy};
use dryml::metrics::categorical_accuracy;
use dryml::models::burn::BurnClassifier;
use dryml::models::candle::CandleClassifier;
use dryml::models::linfa::{winequality, DecisionTree};
use dryml::models::tch::TchClassifier;
use dryml::models::{eval, Model, TrainSpec};
use serde_json::{json, Value};

const EPOCHS: usize = 20;
const BATCH: usize = 32;
const HIDDEN: usize = 64;
const CLASSES: usize = 9;
const LR: f64 = 0.005;

fn definition() -> Value {
    json!({
        "layers": [{"linear": HIDDEN}, "relu", {"linear": CLASSES}],
        "optimizer": {"type": "adam", "lr": LR},
        "training": {"epochs": EPOCHS, "batch_size": BATCH, "seed": 1},
        "seed": 1
    })
}

fn accuracy(scores: &Array2<f32>, y: &Array1<usize>) -> f64 {
    let hits = scores
        .outer_iter()
        .zip(y)
        .filter(|(s, &c)| s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|m| m.0) == Some(c))
        .count();
    hits as f64 / y.len() as f64
}

mod by_hand {
    use super::*;
    use candle_core::{DType, Device, Module as _, Tensor as CTensor};
    use candle_nn::{AdamW, Optimizer as _, ParamsAdamW, VarBuilder, VarMap};
    use tch::nn::{self, Module as _, OptimizerConfig as _};
    use tch::Tensor;

    fn rows(x: &Array2<f32>) -> Tensor {
        Tensor::from_slice(x.as_slice().expect("standard layout")).view([x.nrows() as i64, x.ncols() as i64])
    }

    pub fn tch(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        tch::manual_seed(1);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let net = nn::seq()
            .add(nn::linear(vs.root() / "layer0", x.ncols() as i64, HIDDEN as i64, Default::default()))
            .add_fn(Tensor::relu)
            .add(nn::linear(vs.root() / "layer2", HIDDEN as i64, CLASSES as i64, Default::default()));
        let mut opt = nn::adam(0.9, 0.999, 0.0).build(&vs, LR).expect("adam");
        let mut losses = 0.0;
        for epoch in 0..EPOCHS {
            for idx in shared::epoch_batches(x.nrows(), BATCH, epoch as u64) {
                let xb = x.select(Axis(0), &idx);
                let yb: Vec<i64> = idx.iter().map(|&i| y[i] as i64).collect();
                let loss = net.forward(&rows(&xb)).cross_entropy_for_logits(&Tensor::from_slice(&yb));
                opt.backward_step(&loss);
                losses += loss.double_value(&[]);
            }
        }
        assert!(losses.is_finite());
        let _guard = tch::no_grad_guard();
        let scores = net.forward(&rows(x));
        let flat = Vec::<f32>::try_from(scores.flatten(0, -1)).expect("scores");
        accuracy(&Array2::from_shape_vec((x.nrows(), CLASSES), flat).expect("shape"), y)
    }

    pub fn candle(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        let run = || -> candle_core::Result<f64> {
            let dev = Device::Cpu;
            let vars = VarMap::new();
            let vb = VarBuilder::from_varmap(&vars, DType::F32, &dev);
            let (l0, l2) = (
                candle_nn::linear(x.ncols(), HIDDEN, vb.pp("layer0"))?,
                candle_nn::linear(HIDDEN, CLASSES, vb.pp("layer2"))?,
            );
            let forward = |t: &CTensor| l2.forward(&l0.forward(t)?.relu()?);
            let mut opt =
                AdamW::new(vars.all_vars(), ParamsAdamW { lr: LR, weight_decay: 0.0, ..ParamsAdamW::default() })?;
            let mut losses = 0.0;
            for epoch in 0..EPOCHS {
                for idx in shared::epoch_batches(x.nrows(), BATCH, epoch as u64) {
                    let xb = x.select(Axis(0), &idx);
                    let yb: Vec<u32> = idx.iter().map(|&i| y[i] as u32).collect();
                    let t =
                        CTensor::from_slice(xb.as_slice().expect("standard layout"), (xb.nrows(), xb.ncols()), &dev)?;
                    let loss = candle_nn::loss::cross_entropy(&forward(&t)?, &CTensor::from_vec(yb, idx.len(), &dev)?)?;
                    opt.backward_step(&loss)?;
                    losses += f64::from(loss.to_scalar::<f32>()?);
                }
            }
            assert!(losses.is_finite());
            let all = CTensor::from_slice(x.as_slice().expect("standard layout"), (x.nrows(), x.ncols()), &dev)?;
            let scores = forward(&all)?.flatten_all()?.to_vec1::<f32>()?;
            Ok(accuracy(&Array2::from_shape_vec((x.nrows(), CLASSES), scores).expect("shape"), y))
        };
        run().expect("candle")
    }

    pub fn burn(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        use burn::module::Module;
        use burn::nn::loss::CrossEntropyLossConfig;
        use burn::nn::{Linear, LinearConfig};
        use burn::optim::{AdamConfig, GradientsParams};
        use burn::tensor::{activation::relu, Device, Int, Tensor as BTensor, TensorData};

        #[derive(Module, Debug)]
        struct Mlp {
            layer0: Linear,
            layer2: Linear,
        }
        let dev = Device::flex().autodiff();
        let rows = |x: &Array2<f32>| {
            let x = x.as_standard_layout();
            BTensor::<2>::from_data(
                TensorData::new(x.as_slice().expect("standard").to_vec(), [x.nrows(), x.ncols()]),
                &dev,
            )
        };
        let mut net = Mlp {
            layer0: LinearConfig::new(x.ncols(), HIDDEN).init(&dev),
            layer2: LinearConfig::new(HIDDEN, CLASSES).init(&dev),
        };
        let mut opt = AdamConfig::new().init();
        let loss_of = CrossEntropyLossConfig::new().init(&dev);
        let mut losses = 0.0;
        for epoch in 0..EPOCHS {
            for idx in shared::epoch_batches(x.nrows(), BATCH, epoch as u64) {
                let yb: Vec<i64> = idx.iter().map(|&i| y[i] as i64).collect();
                let yb = BTensor::<1, Int>::from_data(TensorData::new(yb, [idx.len()]), &dev);
                let out = net.layer2.forward(relu(net.layer0.forward(rows(&x.select(Axis(0), &idx)))));
                let loss = loss_of.forward(out, yb);
                losses += f64::from(loss.clone().into_scalar::<f32>());
                let grads = GradientsParams::from_grads(loss.backward(), &net);
                net = opt.step(LR, net, grads);
            }
        }
        assert!(losses.is_finite());
        let scores = net.layer2.forward(relu(net.layer0.forward(rows(x))));
        let flat = scores.into_data().try_to_vec_as::<f32>().expect("scores");
        accuracy(&Array2::from_shape_vec((x.nrows(), CLASSES), flat).expect("shape"), y)
    }

    pub fn linfa(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        use linfa::prelude::{Fit, Predict};
        let records = x.mapv(f64::from);
        let tree = linfa_trees::DecisionTree::params()
            .max_depth(Some(8))
            .fit(&linfa::Dataset::new(records.clone(), y.clone()))
            .expect("a tree");
        let p = tree.predict(&records);
        p.iter().zip(y).filter(|(a, b)| a == b).count() as f64 / y.len() as f64
    }
}

mod through_dryml {
    use super::*;

    fn trained<M: Model<X = Array1<f32>, Y = usize>>(mut m: M, data: &Dataset<Xy<Array1<f32>, usize>>) -> M {
        let mut spec = TrainSpec::epochs(0);
        m.train(data, &mut spec).expect("training");
        m
    }

    fn scored<M: Model<X = Array1<f32>, Y = usize>>(m: &M, data: &Dataset<Xy<Array1<f32>, usize>>) -> f64
    where
        M::P: Sync + Send + dryml::metrics::Classes + 'static,
    {
        categorical_accuracy(&eval(m, data).expect("eval")).expect("accuracy")
    }

    pub fn tch(data: &Dataset<Xy<Array1<f32>, usize>>) -> f64 {
        scored(&trained(TchClassifier::new(definition()), data), data)
    }

    pub fn candle(data: &Dataset<Xy<Array1<f32>, usize>>) -> f64 {
        scored(&trained(CandleClassifier::new(definition()), data), data)
    }

    pub fn burn(data: &Dataset<Xy<Array1<f32>, usize>>) -> f64 {
        scored(&trained(BurnClassifier::new(definition()), data), data)
    }

    pub fn linfa(data: &Dataset<Xy<Array1<f32>, usize>>) -> f64 {
        scored(&trained(DecisionTree::new(json!({"max_depth": 8})), data), data)
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    tch::set_num_threads(1);
    // Standardised, as one would before training a network on it.
    let rows = winequality().collect().expect("wine");
    let raw = Array1::<f32>::stack(rows.iter().map(|r| r.x.clone()).collect()).expect("rows");
    let x = (&raw - &raw.mean_axis(Axis(0)).expect("rows")) / &raw.std_axis(Axis(0), 0.0);
    let y: Array1<usize> = rows.iter().map(|r| r.y).collect();
    let data = Dataset::from_xy(x.clone(), y.clone()).expect("as many targets as rows");
    let mut out = serde_json::Map::new();
    out.insert("rows".into(), json!(x.nrows()));
    out.insert("epochs".into(), json!(EPOCHS));
    out.insert("batch".into(), json!(BATCH));
    out.insert("rounds".into(), json!(rounds));
    let pairs: Vec<shared::Pair> = vec![
        (
            "tch",
            Box::new({
                let (x, y) = (x.clone(), y.clone());
                move || by_hand::tch(&x, &y)
            }),
            Box::new({
                let d = data.clone();
                move || through_dryml::tch(&d)
            }),
        ),
        (
            "candle",
            Box::new({
                let (x, y) = (x.clone(), y.clone());
                move || by_hand::candle(&x, &y)
            }),
            Box::new({
                let d = data.clone();
                move || through_dryml::candle(&d)
            }),
        ),
        (
            "burn",
            Box::new({
                let (x, y) = (x.clone(), y.clone());
                move || by_hand::burn(&x, &y)
            }),
            Box::new({
                let d = data.clone();
                move || through_dryml::burn(&d)
            }),
        ),
        (
            "linfa",
            Box::new({
                let (x, y) = (x.clone(), y.clone());
                move || by_hand::linfa(&x, &y)
            }),
            Box::new({
                let d = data.clone();
                move || through_dryml::linfa(&d)
            }),
        ),
    ];
    shared::compare(&mut out, rounds, &pairs);
    println!("{}", Value::Object(out));
}
