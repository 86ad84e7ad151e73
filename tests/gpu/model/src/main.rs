//! The GPU bundle's model check: a dryml tch or candle model in a context claimed with
//! `dryml::set_context`, as a program or a sandbox claims one, so `tests/gpu/check.py` sees that
//! the model layer trains on the GPU its context gives it (or on the CPU where it gives none) and
//! that a share of a GPU caps what libtorch may take; and it trains the benchmark's networks
//! (`tests/gpu/bench.py`). One JSON line on stdout.

use clap::{Parser, Subcommand};
use dryml::compute::context::Requests;
use dryml::data::ndarray::Array1;
use dryml::data::{Dataset, Xy};
use dryml::metrics::categorical_accuracy;
use dryml::models::candle::CandleClassifier;
use dryml::models::placement::Placement;
use dryml::models::tch::TchClassifier;
use dryml::models::{eval, Model, ModelError, TrainSpec};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(name = "dryml-gpu-model", about = "A dryml tch model in a context")]
struct Cli {
    /// The requests to claim before libtorch starts, in `%context`'s words ("torch gpu/0=0.25").
    /// The machine is the one `dryml-gpu-probe machine` wrote into $DRYML_STATE_DIR.
    #[arg(long)]
    context: String,
    /// The framework of the model: `torch` (dryml's tch) or `candle`.
    #[arg(long, default_value = "torch")]
    framework: String,
    #[command(subcommand)]
    cmd: Cmd,
}

/// A classifier of either framework, as the checks drive it.
trait Classifier: Model<X = Array1<f32>, Y = usize, P = Array1<f32>> + Sized {
    fn new(args: Value) -> Self;
    fn where_it_ran(&self) -> Option<Placement>;
}

impl Classifier for TchClassifier {
    fn new(args: Value) -> Self {
        TchClassifier::new(args)
    }
    fn where_it_ran(&self) -> Option<Placement> {
        self.placement()
    }
}

impl Classifier for CandleClassifier {
    fn new(args: Value) -> Self {
        CandleClassifier::new(args)
    }
    fn where_it_ran(&self) -> Option<Placement> {
        self.placement()
    }
}

/// `cmd` with classifiers `M`.
fn run<M: Classifier>(cmd: Cmd) -> Result<Value, String> {
    match cmd {
        Cmd::Train => train::<M>(),
        Cmd::Alloc { fraction, total } => alloc(fraction, total),
        Cmd::Bench { job, epochs, precision } => bench::<M>(&job, epochs, &precision),
        Cmd::Toma { job } => toma::<M>(&job),
    }
}

/// A training's error, as the report gives it.
fn text(e: ModelError) -> String {
    e.to_string()
}

#[derive(Subcommand)]
enum Cmd {
    /// Trains a small network on two clouds of points and scores it on others.
    Train,
    /// Allocates --fraction of the first CUDA device's memory (as reported by --total bytes)
    /// where the context places torch's models, and says whether libtorch allowed it.
    Alloc {
        #[arg(long)]
        fraction: f64,
        #[arg(long)]
        total: u64,
    },
    /// Trains `--layers` (the definition's JSON) on generated rows with Adam (1e-3) and
    /// cross-entropy: an epoch to warm up, then `--epochs` timed.
    Bench {
        #[command(flatten)]
        job: Job,
        #[arg(long, default_value_t = 2)]
        epochs: u64,
        /// The definition's `precision`: fp32, tf32 or bf16.
        #[arg(long, default_value = "fp32")]
        precision: String,
    },
    /// TOMA's job: trains `--layers` one epoch inside `dryml::batch`, from a batch of `--batch`
    /// halved on each out-of-memory error until one fits; says the sizes tried.
    Toma {
        #[command(flatten)]
        job: Job,
    },
}

/// A benchmark's network and generated data.
#[derive(clap::Args)]
struct Job {
    /// The layers, as a definition's JSON writes them.
    #[arg(long)]
    layers: String,
    #[arg(long)]
    rows: usize,
    #[arg(long)]
    features: usize,
    #[arg(long)]
    classes: usize,
    #[arg(long)]
    batch: usize,
}

impl Job {
    /// The layers parsed, and the rows.
    fn parts(&self) -> Result<(Value, Dataset<Xy<Array1<f32>, usize>>), String> {
        let layers = serde_json::from_str(&self.layers).map_err(|e| format!("--layers: {e}"))?;
        Ok((layers, generated(self.rows, self.features, self.classes)))
    }
}

/// Two clouds of 16-dimensional points around +1 and -1 in every coordinate (a fixed
/// generator: the same points on every machine).
fn clouds(n: usize, seed: u64) -> Dataset<Xy<Array1<f32>, usize>> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    };
    let items = (0..n)
        .map(|i| {
            let y = i % 2;
            let centre = if y == 0 { 1.0 } else { -1.0 };
            Xy { x: Array1::from_iter((0..16).map(|_| centre + 1.5 * next())), y }
        })
        .collect();
    Dataset::from_vec(items)
}

/// `rows` rows of `features` values in [-1, 1) and a class each, from a fixed generator.
fn generated(rows: usize, features: usize, classes: usize) -> Dataset<Xy<Array1<f32>, usize>> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let items = (0..rows)
        .map(|_| {
            let x = Array1::from_iter((0..features).map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0));
            Xy { x, y: (next() % classes as u64) as usize }
        })
        .collect();
    Dataset::from_vec(items)
}

fn bench<M: Classifier>(job: &Job, epochs: u64, precision: &str) -> Result<Value, String> {
    let (layers, data) = job.parts()?;
    let batch = job.batch;
    let mut m = M::new(json!({
        "layers": layers,
        "optimizer": {"type": "adam", "lr": 0.001},
        "precision": precision,
        "training": {"epochs": 1, "batch_size": batch}
    }));
    let started = std::time::Instant::now();
    m.train(&data, &mut TrainSpec::epochs(1)).map_err(text)?;
    let warm_up = started.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    m.train(&data, &mut TrainSpec::epochs(epochs)).map_err(text)?;
    Ok(json!({
        "placement": m.where_it_ran().map(|p| p.to_string()),
        "warm_up": warm_up,
        "seconds_per_epoch": started.elapsed().as_secs_f64() / epochs as f64,
    }))
}

fn toma<M: Classifier>(job: &Job) -> Result<Value, String> {
    let (layers, data) = job.parts()?;
    let tried = std::cell::RefCell::new(Vec::new());
    let started = std::time::Instant::now();
    let settled = dryml::batch::Batcher::new(job.batch).cache(dryml::batch::Cache::None).batch(|b| {
        tried.borrow_mut().push(b);
        let args = json!({
            "layers": layers,
            "optimizer": {"type": "adam", "lr": 0.001},
            "training": {"epochs": 1, "batch_size": b}
        });
        let mut m = M::new(args);
        m.train(&data, &mut TrainSpec::epochs(1)).map(|_| (b, m.where_it_ran().map(|p| p.to_string())))
    });
    let (settled, placement) = settled.map_err(|e| format!("{e} (tried {:?})", tried.borrow()))?;
    Ok(json!({
        "tried": *tried.borrow(),
        "settled": settled,
        "placement": placement,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}

fn train<M: Classifier>() -> Result<Value, String> {
    let mut m = M::new(json!({
        "layers": [{"linear": 32}, "relu", {"linear": 2}],
        "optimizer": {"type": "adam", "lr": 0.01},
        "training": {"epochs": 5, "batch_size": 64}
    }));
    let started = std::time::Instant::now();
    m.train(&clouds(2000, 1), &mut TrainSpec::epochs(0)).map_err(text)?;
    let accuracy = categorical_accuracy(&eval(&m, &clouds(500, 2)).map_err(text)?).map_err(|e| e.to_string())?;
    Ok(json!({
        "placement": m.where_it_ran().map(|p| p.to_string()),
        "accuracy": accuracy,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}

fn alloc(fraction: f64, total: u64) -> Result<Value, String> {
    let device = match dryml::models::placement::placement("torch") {
        dryml::models::placement::Placement::Cuda { cuda, .. } => tch::Device::Cuda(cuda),
        p => return Err(format!("the context places torch on {p}, not a GPU")),
    };
    let bytes = (total as f64 * fraction) as i64;
    Ok(match tch::Tensor::f_zeros([bytes], (tch::Kind::Uint8, device)) {
        Ok(t) => json!({"allocated": t.numel()}),
        Err(e) => {
            let message = e.to_string();
            json!({"refused": message, "out_of_memory": dryml::batch::is_out_of_memory_message(&message)})
        }
    })
}

fn main() {
    let cli = Cli::parse();
    let ctx = Requests::parse(&cli.context)
        .map_err(|e| e.to_string())
        .and_then(|reqs| dryml::set_context(&reqs).map_err(|e| e.to_string()));
    let ran = ctx.clone().and_then(|_| match cli.framework.as_str() {
        "torch" => run::<TchClassifier>(cli.cmd),
        "candle" => run::<CandleClassifier>(cli.cmd),
        other => Err(format!("--framework {other}: torch or candle")),
    });
    let mut out = ran.unwrap_or_else(|e| json!({"error": e}));
    // What the context did to this process, whatever came of the command.
    out["context"] = json!(ctx.ok().map(|c| c.to_string()));
    out["visible"] = json!(std::env::var("CUDA_VISIBLE_DEVICES").ok());
    out["alloc_conf"] = json!(std::env::var("PYTORCH_CUDA_ALLOC_CONF").ok());
    out["cuda_devices"] = json!(tch::Cuda::device_count());
    out["candle_cuda"] = json!(cfg!(feature = "candle-cuda"));
    println!("{out}");
}
