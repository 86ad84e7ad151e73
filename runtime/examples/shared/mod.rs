//! What the benchmark examples share: medians, timing, a hand-written loop's shuffled batches,
//! and the interleaved rounds of a by-hand and a through-dryml run of the same work.

#![allow(dead_code)]

use serde_json::{json, Map, Value};
use std::time::Instant;

/// The median of some timings.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `f`; its seconds and what it gave.
pub fn timed(f: impl FnOnce() -> f64) -> (f64, f64) {
    let t0 = Instant::now();
    let got = f();
    (t0.elapsed().as_secs_f64(), got)
}

/// The batches of one epoch of `rows`, as a hand-written loop makes them: an index permutation
/// by `seed`, cut into `size`s.
pub fn epoch_batches(rows: usize, size: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..rows).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    order.chunks(size).map(<[usize]>::to_vec).collect()
}

/// A named pair of runs of the same work: by hand, and through dryml. Each gives the accuracy
/// it reached.
pub type Pair = (&'static str, Box<dyn Fn() -> f64>, Box<dyn Fn() -> f64>);

/// Each pair's runs, interleaved `rounds` times so drift hits both alike, into `out` under its
/// name: both medians, their ratio and the accuracy each reached.
pub fn compare(out: &mut Map<String, Value>, rounds: usize, pairs: &[Pair]) {
    for (name, hand, ours) in pairs {
        let (mut th, mut to, mut ah, mut ao) = (Vec::new(), Vec::new(), 0.0, 0.0);
        for _ in 0..rounds {
            let (t, a) = timed(hand);
            th.push(t);
            ah = a;
            let (t, a) = timed(ours);
            to.push(t);
            ao = a;
        }
        let (h, o) = (median(th), median(to));
        let round = |v: f64, by: f64| (v * by).round() / by;
        out.insert(
            (*name).into(),
            json!({"by_hand_s": round(h, 1e4), "dryml_s": round(o, 1e4), "ratio": round(o / h, 1e3), "accuracy_by_hand": round(ah, 1e3), "accuracy_dryml": round(ao, 1e3)}),
        );
    }
}
