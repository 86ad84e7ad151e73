//! The Rust half of `tests/bench/bench_objects.py`: save and load throughput for small and large
//! objects, and a repo of N small objects queried with a selector. Prints one JSON line.
//!
//! Usage: cargo run --release --example bench_objects -p dryml -- N DIR

use dryml::objects::{Build, Meta, ObjectError, State};
use dryml::{Object, Repo, Selector};
use serde_json::json;
use std::time::Instant;

#[derive(dryml::Object)]
struct Small {
    args: serde_json::Value,
    meta: Meta,
}
impl Build for Small {
    type Args = serde_json::Value;
    fn build(args: serde_json::Value, meta: Meta) -> Self {
        Small { args, meta }
    }
}

#[derive(dryml::Object)]
struct Large {
    args: usize,
    meta: Meta,
    weights: Vec<f32>,
}
impl Build for Large {
    type Args = usize;
    fn build(n: usize, meta: Meta) -> Self {
        Large { args: n, meta, weights: (0..n).map(|i| i as f32).collect() }
    }
    fn save_state(&self, s: &mut State) -> Result<(), ObjectError> {
        let bytes: Vec<u8> = self.weights.iter().flat_map(|w| w.to_le_bytes()).collect();
        s.put_bytes("weights", bytes);
        Ok(())
    }
    fn load_state(&mut self, s: &State) -> Result<(), ObjectError> {
        self.weights = s.bytes("weights")?.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        Ok(())
    }
}

const LRS: [f64; 10] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const DATA: [&str; 10] = ["mnist", "cifar", "svhn", "imagenet", "coco", "voc", "celeba", "lsun", "stl", "kmnist"];
const WIDTHS: [u32; 10] = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];

/// The i-th small definition: 1,000 distinct (lr, data, width) triples, seeds unique.
pub fn small_args(i: usize) -> serde_json::Value {
    json!({"lr": LRS[i % 10], "data": {"name": DATA[i / 10 % 10], "split": "train"}, "width": WIDTHS[i / 100 % 10], "seed": i})
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let n: usize = argv.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let dir = std::path::PathBuf::from(argv.next().expect("DIR"));
    std::fs::create_dir_all(&dir).unwrap();

    // Throughput, one durable file per object.
    let small_n = 500;
    let t = Instant::now();
    for i in 0..small_n {
        dryml::save_object(&Small::build(small_args(i), Meta::new()), dir.join(format!("s{i}.dry"))).unwrap();
    }
    let small_save = small_n as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in 0..small_n {
        dryml::load_object(dir.join(format!("s{i}.dry"))).unwrap();
    }
    let small_load = small_n as f64 / t.elapsed().as_secs_f64();
    let large = Large::build(64 << 20 >> 2, Meta::new());
    let (mut large_save, mut large_load) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        dryml::save_object(&large, dir.join("large.dry")).unwrap();
        large_save.push(64.0 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        let back = dryml::load_object(dir.join("large.dry")).unwrap();
        large_load.push(64.0 / t.elapsed().as_secs_f64());
        assert_eq!(back.downcast_ref::<Large>().unwrap().weights[12345], 12345.0);
    }

    // A repo of n small objects, added in batches (one sync per batch).
    let rdir = dir.join("repo");
    let _ = std::fs::remove_dir_all(&rdir);
    let mut repo = Repo::create(&rdir).unwrap();
    let t = Instant::now();
    let batch = 10_000;
    for start in (0..n).step_by(batch) {
        let objs: Vec<Small> =
            (start..(start + batch).min(n)).map(|i| Small::build(small_args(i), Meta::new())).collect();
        repo.add_many(objs.iter().map(|o| o as &dyn Object)).unwrap();
    }
    let add_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let repo = Repo::open(&rdir).unwrap();
    let open_secs = t.elapsed().as_secs_f64();
    assert_eq!(repo.len(), n);
    // lr=0.1, data.name=mnist, width=64: 1 in 1,000.
    let sel = || Selector::of("Small").arg("lr", json!(0.1)).arg("data.name", json!("mnist")).arg("width", json!(64));
    let (mut find, mut get) = (Vec::new(), Vec::new());
    let mut matched = 0;
    for _ in 0..21 {
        let t = Instant::now();
        matched = repo.find(&sel()).len();
        find.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let objs = repo.get(&sel()).unwrap();
        get.push(t.elapsed().as_secs_f64());
        assert_eq!(objs.len(), matched);
    }
    println!(
        "{}",
        json!({
            "n": n, "matched": matched,
            "small_save_per_s": small_save, "small_load_per_s": small_load,
            "large_save_mib_s": median(large_save), "large_load_mib_s": median(large_load),
            "add_secs": add_secs, "open_secs": open_secs,
            "find_median_s": median(find), "get_median_s": median(get),
        })
    );
}
