//! The adaptive-batching benchmark on TOMA's own shape: fill a (128, 256, 256) CPU tensor with
//! ones in chunks of 32, by a plain loop and by each `dryml::batch` loop, rounds interleaved so
//! drift hits every variant alike. Prints one JSON object (times in seconds per call).
//!
//! Run by `tests/bench/bench_batch.py`; by hand:
//! `LIBTORCH_USE_PYTORCH=1 cargo run --release --features torch --example bench_batch -- 300`.

use dryml::batch::{self, Batcher, Cache};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

type R = Result<(), tch::TchError>;

fn native(t: &Tensor, step: i64) {
    let end = t.size()[0];
    let mut at = 0;
    while at < end {
        let hi = (at + step).min(end);
        let _ = t.narrow(0, at, hi - at).fill_(1.0);
        at = hi;
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(300);
    let t = Tensor::zeros([128, 256, 256], (Kind::Float, Device::Cpu));
    let variants: Vec<(&str, Box<dyn Fn(&Tensor)>)> = vec![
        ("native", Box::new(|t| native(t, 32))),
        (
            "batch",
            Box::new(|t| {
                batch::batch(32, |b| -> R {
                    native(t, b as i64);
                    Ok(())
                })
                .unwrap()
            }),
        ),
        (
            "range",
            Box::new(|t| {
                batch::range(0, 128, 32, |lo, hi| -> R {
                    let _ = t.narrow(0, lo as i64, (hi - lo) as i64).fill_(1.0);
                    Ok(())
                })
                .unwrap()
            }),
        ),
        ("chunked", Box::new(|t| batch::chunked(t, 32, 0, |c, _, _| -> R { c.f_fill_(1.0).map(|_| ()) }).unwrap())),
        (
            "chunked_no_cache",
            Box::new(|t| {
                Batcher::new(32)
                    .cache(Cache::None)
                    .chunked(t, 0, |c, _, _| -> R { c.f_fill_(1.0).map(|_| ()) })
                    .unwrap()
            }),
        ),
        (
            "chunked_global",
            Box::new(|t| {
                Batcher::new(32)
                    .cache(Cache::Global)
                    .chunked(t, 0, |c, _, _| -> R { c.f_fill_(1.0).map(|_| ()) })
                    .unwrap()
            }),
        ),
    ];
    // Warm-up: pages touched, thread pools started, caches filled.
    for _ in 0..20 {
        for (_, f) in &variants {
            f(&t);
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); variants.len()];
    for r in 0..rounds {
        // Rotate the order so no variant always runs first after the previous one.
        for k in 0..variants.len() {
            let i = (r + k) % variants.len();
            let t0 = Instant::now();
            variants[i].1(&t);
            times[i].push(t0.elapsed().as_secs_f64());
        }
    }
    let ones = t.sum(Kind::Double).double_value(&[]);
    assert_eq!(ones, (128 * 256 * 256) as f64, "every variant filled the whole tensor");
    let stats: Vec<String> = variants
        .iter()
        .zip(&mut times)
        .map(|((name, _), ts)| {
            ts.sort_by(f64::total_cmp);
            let mean = ts.iter().sum::<f64>() / ts.len() as f64;
            format!("\"{name}\":{{\"min\":{},\"median\":{},\"mean\":{}}}", ts[0], ts[ts.len() / 2], mean)
        })
        .collect();
    // The fixed cost per call, with no work to hide it: a closure that does nothing.
    let n = 200_000;
    let per_call = |f: &dyn Fn()| {
        let t0 = Instant::now();
        for _ in 0..n {
            f();
        }
        t0.elapsed().as_secs_f64() / n as f64 * 1e9
    };
    type Nothing = Result<(), std::collections::TryReserveError>;
    let empty_native = per_call(&|| {
        let mut at = 0;
        while at < 128 {
            std::hint::black_box(at);
            at += 32;
        }
    });
    let empty_batch = per_call(&|| {
        batch::batch(32, |b| -> Nothing {
            std::hint::black_box(b);
            Ok(())
        })
        .unwrap()
    });
    let empty_range = per_call(&|| {
        batch::range(0, 128, 32, |lo, _| -> Nothing {
            std::hint::black_box(lo);
            Ok(())
        })
        .unwrap()
    });
    println!(
        "{{\"rounds\":{rounds},\"threads\":{},{},\"empty_ns\":{{\"native\":{empty_native},\"batch\":{empty_batch},\"range\":{empty_range}}}}}",
        tch::get_num_threads(),
        stats.join(",")
    );
}
