//! The CNN benchmark: a user's own convolutional network trained through DRYML (`TchModel`,
//! `CandleModel`: the user writes the layers and the forward pass; dryml's shared training,
//! optimiser and checkpoint-ready state do the rest) against the same training written by hand
//! in that framework (the same layers, an index permutation per epoch, each batch's rows
//! gathered into a tensor, the framework's own Adam, the loss read back per batch). Data:
//! scikit-learn's 1,797 8×8 digits (`target/data/digits.csv`, exported by
//! kernelspec/bootstrap.sh). Rounds interleaved so drift hits both alike; prints one JSON
//! object: each framework's median seconds for the whole training, the ratio, the training
//! accuracy both reached.
//!
//! By hand: `LIBTORCH_USE_PYTORCH=1 cargo run --release -p dryml --features torch,candle
//! --example bench_cnn -- 7 target/data/digits.csv` (with the venv's Python on the path).

mod shared;

use dryml::data::ndarray::{Array1, Array2, Axis};
use dryml::data::{CsvOptions, Dataset, Element, Xy};
use dryml::metrics::categorical_accuracy;
use dryml::models::candle::{CandleModel, CandleNet};
use dryml::models::tch::{TchModel, TchNet};
use dryml::models::{eval, Model, TrainSpec};
use serde_json::{json, Value};

const EPOCHS: usize = 5;
const BATCH: usize = 32;
const CHANNELS: usize = 8;
const LR: f64 = 0.01;

fn args() -> Value {
    json!({"channels": CHANNELS, "optimizer": {"type": "adam", "lr": LR}, "training": {"epochs": EPOCHS, "batch_size": BATCH, "seed": 1}, "seed": 1})
}

fn accuracy(scores: &[f32], y: &Array1<usize>) -> f64 {
    let hits = scores
        .chunks(10)
        .zip(y)
        .filter(|(s, &c)| s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|m| m.0) == Some(c))
        .count();
    hits as f64 / y.len() as f64
}

/// The user's network in tch: conv 3×3 (padding 1), ReLU, max pool 2, linear to 10 classes.
struct TchCnn {
    conv: tch::nn::Conv2D,
    out: tch::nn::Linear,
}

impl TchCnn {
    fn new(p: &tch::nn::Path<'_>) -> TchCnn {
        let conv = tch::nn::conv2d(
            p / "conv",
            1,
            CHANNELS as i64,
            3,
            tch::nn::ConvConfig { padding: 1, ..Default::default() },
        );
        TchCnn { conv, out: tch::nn::linear(p / "out", (CHANNELS * 16) as i64, 10, Default::default()) }
    }
    fn forward(&self, xs: &tch::Tensor) -> tch::Tensor {
        xs.view([-1, 1, 8, 8]).apply(&self.conv).relu().max_pool2d_default(2).flatten(1, -1).apply(&self.out)
    }
}

impl TchNet for TchCnn {
    const NAME: &'static str = "bench.TchCnn";
    fn build(p: &tch::nn::Path<'_>, _: &Value) -> Result<TchCnn, String> {
        Ok(TchCnn::new(p))
    }
    fn forward_t(&self, xs: &tch::Tensor, _train: bool) -> tch::Tensor {
        self.forward(xs)
    }
}

/// The same network in candle.
struct CandleCnn {
    conv: candle_nn::Conv2d,
    out: candle_nn::Linear,
}

impl CandleCnn {
    fn new(vb: candle_nn::VarBuilder<'_>) -> candle_core::Result<CandleCnn> {
        let conv = candle_nn::conv2d(
            1,
            CHANNELS,
            3,
            candle_nn::Conv2dConfig { padding: 1, ..Default::default() },
            vb.pp("conv"),
        )?;
        Ok(CandleCnn { conv, out: candle_nn::linear(CHANNELS * 16, 10, vb.pp("out"))? })
    }
    fn forward(&self, xs: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
        use candle_core::Module as _;
        let n = xs.dim(0)?;
        self.out.forward(&self.conv.forward(&xs.reshape((n, 1, 8, 8))?)?.relu()?.max_pool2d(2)?.flatten_from(1)?)
    }
}

impl CandleNet for CandleCnn {
    const NAME: &'static str = "bench.CandleCnn";
    fn build(vb: candle_nn::VarBuilder<'_>, _: &Value) -> Result<CandleCnn, String> {
        CandleCnn::new(vb).map_err(|e| e.to_string())
    }
    fn forward_t(&self, xs: &candle_core::Tensor, _train: bool) -> candle_core::Result<candle_core::Tensor> {
        self.forward(xs)
    }
}

mod by_hand {
    use super::*;
    use candle_core::{DType, Device, Tensor as CTensor};
    use candle_nn::{AdamW, Optimizer as _, ParamsAdamW, VarBuilder, VarMap};
    use tch::nn::{self, OptimizerConfig as _};
    use tch::Tensor;

    fn rows(x: &Array2<f32>) -> Tensor {
        Tensor::from_slice(x.as_slice().expect("standard layout")).view([x.nrows() as i64, x.ncols() as i64])
    }

    pub fn tch(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        tch::manual_seed(1);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let net = TchCnn::new(&vs.root());
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
        accuracy(&Vec::<f32>::try_from(net.forward(&rows(x)).flatten(0, -1)).expect("scores"), y)
    }

    pub fn candle(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
        let run = || -> candle_core::Result<f64> {
            let dev = Device::Cpu;
            let vars = VarMap::new();
            let net = CandleCnn::new(VarBuilder::from_varmap(&vars, DType::F32, &dev))?;
            let mut opt =
                AdamW::new(vars.all_vars(), ParamsAdamW { lr: LR, weight_decay: 0.0, ..ParamsAdamW::default() })?;
            let mut losses = 0.0;
            for epoch in 0..EPOCHS {
                for idx in shared::epoch_batches(x.nrows(), BATCH, epoch as u64) {
                    let xb = x.select(Axis(0), &idx);
                    let yb: Vec<u32> = idx.iter().map(|&i| y[i] as u32).collect();
                    let t =
                        CTensor::from_slice(xb.as_slice().expect("standard layout"), (xb.nrows(), xb.ncols()), &dev)?;
                    let loss =
                        candle_nn::loss::cross_entropy(&net.forward(&t)?, &CTensor::from_vec(yb, idx.len(), &dev)?)?;
                    opt.backward_step(&loss)?;
                    losses += f64::from(loss.to_scalar::<f32>()?);
                }
            }
            assert!(losses.is_finite());
            let all = CTensor::from_slice(x.as_slice().expect("standard layout"), (x.nrows(), x.ncols()), &dev)?;
            Ok(accuracy(&net.forward(&all)?.flatten_all()?.to_vec1::<f32>()?, y))
        };
        run().expect("candle")
    }
}

fn through_dryml<M: Model<X = Array1<f32>, Y = usize>>(mut m: M, data: &Dataset<Xy<Array1<f32>, usize>>) -> f64
where
    M::P: Sync + Send + dryml::metrics::Classes + 'static,
{
    m.train(data, &mut TrainSpec::epochs(0)).expect("training");
    categorical_accuracy(&eval(&m, data).expect("eval")).expect("accuracy")
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let rounds: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let csv = argv.next().unwrap_or_else(|| "target/data/digits.csv".into());
    tch::set_num_threads(1);
    let digits = Dataset::from_csv_xy(&csv, "label", &CsvOptions::default())
        .expect("the digits' CSV (kernelspec/bootstrap.sh exports it)");
    let rows = digits.collect().expect("digits");
    let x = Array1::<f32>::stack(rows.iter().map(|r| r.x.mapv(|v| v as f32 / 16.0)).collect()).expect("rows");
    let y: Array1<usize> = rows.iter().map(|r| r.y as usize).collect();
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
                move || through_dryml(TchModel::<TchCnn>::new(args()), &d)
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
                move || through_dryml(CandleModel::<CandleCnn>::new(args()), &d)
            }),
        ),
    ];
    shared::compare(&mut out, rounds, &pairs);
    println!("{}", Value::Object(out));
}
