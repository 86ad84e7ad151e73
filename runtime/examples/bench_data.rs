//! The dataset pipeline benchmark: one epoch over 60,000 rows of 64 features and a class
//! (MNIST's count), shuffled, in batches of 256, each batch's features standardised, by
//! `dryml::data::Dataset` and by the same work written by hand (an index permutation, rows
//! gathered per batch). Rounds interleaved so drift hits both alike; prints one JSON object.
//!
//! With the `torch` feature, the same again ending in tch tensors (each batch converted), by
//! hand with `Tensor::from_slice`.
//!
//! By hand: `cargo run --release -p dryml --example bench_data -- 15` (add `--features torch`,
//! with `LIBTORCH_USE_PYTORCH=1` and the venv's Python on the path, for the tensor variant).

use dryml::data::ndarray::{Array1, Array2, Axis};
use dryml::data::{Dataset, Xy};
use std::time::Instant;

const ROWS: usize = 60_000;
const FEATURES: usize = 64;
const BATCH: usize = 256;

fn standardise(x: Array2<f32>) -> Array2<f32> {
    let mean = x.mean_axis(Axis(0)).expect("rows");
    let std = x.std_axis(Axis(0), 0.0).mapv(|s| s.max(1e-6));
    (x - &mean) / &std
}

/// What consumes a batch: a sum, so nothing is optimised away.
fn consume(x: &Array2<f32>, y: &Array1<i64>) -> f64 {
    x.sum() as f64 + y.sum() as f64
}

/// The hand-written epoch: a shuffled index list, each batch's rows gathered and standardised,
/// then `consume`d.
fn hand_epoch(
    x: &Array2<f32>,
    y: &Array1<i64>,
    seed: u64,
    mut consume: impl FnMut(Array2<f32>, Array1<i64>) -> f64,
) -> f64 {
    let mut order: Vec<usize> = (0..x.nrows()).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    order.chunks(BATCH).map(|idx| consume(standardise(x.select(Axis(0), idx)), y.select(Axis(0), idx))).sum()
}

fn by_hand(x: &Array2<f32>, y: &Array1<i64>, seed: u64) -> f64 {
    hand_epoch(x, y, seed, |xb, yb| consume(&xb, &yb))
}

fn by_dataset(data: &Dataset<Xy<Array1<f32>, i64>>, seed: u64) -> f64 {
    let batches = data.shuffle(ROWS, seed).batch(BATCH, false).expect("batch size").apply_x(standardise);
    let mut total = 0.0;
    for b in batches.iter() {
        let b = b.expect("a pass");
        total += consume(&b.x, &b.y);
    }
    total
}

#[cfg(feature = "torch")]
mod tensors {
    use super::*;
    use tch::{Kind, Tensor};

    fn consume(x: &Tensor, y: &Tensor) -> f64 {
        x.sum(Kind::Float).double_value(&[]) + y.sum(Kind::Int64).double_value(&[])
    }

    pub fn by_hand(x: &Array2<f32>, y: &Array1<i64>, seed: u64) -> f64 {
        hand_epoch(x, y, seed, |xb, yb| {
            let xt =
                Tensor::from_slice(xb.as_slice().expect("standard layout")).view([xb.nrows() as i64, FEATURES as i64]);
            consume(&xt, &Tensor::from_slice(yb.as_slice().expect("standard layout")))
        })
    }

    pub fn by_dataset(data: &Dataset<Xy<Array1<f32>, i64>>, seed: u64) -> f64 {
        let batches = data.shuffle(ROWS, seed).batch(BATCH, false).expect("batch size").apply_x(standardise).to_tch();
        let mut total = 0.0;
        for b in batches.iter() {
            let b = b.expect("a pass");
            total += consume(&b.x, &b.y);
        }
        total
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(15);
    let mut rng = fastrand::Rng::with_seed(1);
    let x = Array2::from_shape_simple_fn((ROWS, FEATURES), || rng.f32());
    let y = Array1::from_shape_simple_fn(ROWS, || rng.i64(0..10));
    let data = Dataset::from_xy(x.clone(), y.clone()).expect("same rows");
    let (mut hand, mut ours) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let t0 = Instant::now();
        let a = by_hand(&x, &y, r as u64);
        hand.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let b = by_dataset(&data, r as u64);
        ours.push(t0.elapsed().as_secs_f64());
        // The same rows in other orders: the same sum up to rounding.
        assert!((a - b).abs() < 1e-3 * a.abs().max(1.0), "{a} {b}");
    }
    let (h, o) = (median(hand), median(ours));
    #[cfg(not(feature = "torch"))]
    let tensors = String::new();
    #[cfg(feature = "torch")]
    let tensors = {
        let (mut hand, mut ours) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let t0 = Instant::now();
            let a = tensors::by_hand(&x, &y, r as u64);
            hand.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            let b = tensors::by_dataset(&data, r as u64);
            ours.push(t0.elapsed().as_secs_f64());
            assert!((a - b).abs() < 1e-3 * a.abs().max(1.0), "{a} {b}");
        }
        let (th, to) = (median(hand), median(ours));
        format!(", \"tch_by_hand_s\": {th:.5}, \"tch_dataset_s\": {to:.5}, \"tch_ratio\": {:.3}", to / th)
    };
    println!(
        "{{\"rows\": {ROWS}, \"features\": {FEATURES}, \"batch\": {BATCH}, \"rounds\": {rounds}, \"by_hand_s\": {h:.5}, \"dataset_s\": {o:.5}, \"ratio\": {:.3}{tensors}}}",
        o / h
    );
}
