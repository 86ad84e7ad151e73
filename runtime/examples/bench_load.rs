//! The loading benchmark: an epoch of batches read from files, by dryml's readers and by the
//! same work written by hand. Two sources of scikit-learn's 1,797 8×8 digits (exported by
//! kernelspec/bootstrap.sh to `target/data`): the folder of PNG files by class
//! (`images::folder`, whose batches decode their files straight into rows, against a loop that
//! lists the folders, shuffles the file list and decodes each batch's files with the `image`
//! crate) and numpy's `.npz` (`numpy::xy`, against `ndarray-npy` and a gather of each batch's
//! rows), and the images alone as a `.npy`, read whole (`numpy::rows`, against `ndarray-npy`
//! and a gather) and where it lies (`numpy::rows_on_disk`, against a loop that reads each
//! batch's rows from their places in the file). Each round reads the files again (the folder:
//! every image decoded once an epoch).
//! Rounds interleaved so drift hits both alike; prints one JSON object.
//!
//! By hand: `cargo run --release -p dryml --features images,numpy --example bench_load -- 15
//! target/data`.

mod shared;

use dryml::data::images::{folder, ImageOptions};
use dryml::data::ndarray::{Array1, Array2, ArrayD, Axis, Ix3};
use dryml::data::{numpy, Dataset, Xy};
use ndarray_npy::{NpzReader, ReadNpyExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const BATCH: usize = 32;

/// What consumes a batch: a sum, so nothing is optimised away.
fn consume(x: &Array2<f32>, y: &Array1<usize>) -> f64 {
    x.sum() as f64 + y.sum() as f64
}

fn sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).expect("a folder").map(|e| e.expect("an entry").path()).collect();
    v.sort();
    v
}

/// The hand-written folder loader: list, shuffle, decode each batch's files into rows.
fn folder_by_hand(root: &Path, seed: u64) -> f64 {
    let mut files = Vec::new();
    for (class, dir) in sorted(root).into_iter().filter(|p| p.is_dir()).enumerate() {
        files.extend(sorted(&dir).into_iter().map(|f| (f, class)));
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    let mut total = 0.0;
    for idx in order.chunks(BATCH) {
        let mut x = Array2::<f32>::zeros((idx.len(), 64));
        for (mut row, &i) in x.rows_mut().into_iter().zip(idx) {
            let img = image::open(&files[i].0).expect("an image").into_luma8();
            for (o, p) in row.iter_mut().zip(img.as_raw()) {
                *o = f32::from(*p) / 255.0;
            }
        }
        let y: Array1<usize> = idx.iter().map(|&i| files[i].1).collect();
        total += consume(&x, &y);
    }
    total
}

fn folder_by_dryml(root: &Path, seed: u64) -> f64 {
    let f = folder(root, &ImageOptions::default()).expect("the digits' folder");
    let n = f.data.count().expect("known");
    passes(&f.data.shuffle(n, seed))
}

/// The hand-written `.npz` loader: both arrays read, the images flattened to rows, each
/// batch's rows gathered.
fn npz_by_hand(path: &Path, seed: u64) -> f64 {
    let mut npz = NpzReader::new(std::fs::File::open(path).expect("the archive")).expect("npz");
    let x: ArrayD<u8> = npz.by_name("x").expect("x");
    let y: Array1<i64> = npz.by_name("y").expect("y");
    let x = x.into_dimensionality::<Ix3>().expect("images");
    let n = x.len_of(Axis(0));
    let rows = x.into_shape_with_order((n, 64)).expect("rows").mapv(f32::from);
    let mut order: Vec<usize> = (0..n).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    order
        .chunks(BATCH)
        .map(|idx| consume(&rows.select(Axis(0), idx), &idx.iter().map(|&i| y[i] as usize).collect()))
        .sum()
}

fn npz_by_dryml(path: &Path, seed: u64) -> f64 {
    let data = numpy::xy(path, "x", "y").expect("the digits' archive");
    passes(&data.shuffle(data.count().expect("known"), seed))
}

/// The hand-written `.npy` loader, read whole: the array, flattened to rows, each batch's rows
/// gathered.
fn npy_by_hand(path: &Path, seed: u64) -> f64 {
    let x = ArrayD::<u8>::read_npy(std::fs::File::open(path).expect("the array")).expect("npy");
    let n = x.len_of(Axis(0));
    let rows = x.into_shape_with_order((n, 64)).expect("rows").mapv(f32::from);
    let mut order: Vec<usize> = (0..n).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    order.chunks(BATCH).map(|idx| rows.select(Axis(0), idx).sum() as f64).sum()
}

fn npy_by_dryml(path: &Path, seed: u64) -> f64 {
    x_passes(&numpy::rows(path).expect("the digits' images"), seed)
}

/// The hand-written `.npy` loader that leaves the file where it lies: the header's length
/// read (version 1, as `np.save` writes it), then each batch's rows read from their places.
fn npy_on_disk_by_hand(path: &Path, seed: u64) -> f64 {
    let file = std::fs::File::open(path).expect("the array");
    let mut start = [0u8; 10];
    file.read_exact_at(&mut start, 0).expect("a header");
    let data_at = 10 + u16::from_le_bytes([start[8], start[9]]) as u64;
    let n = ((file.metadata().expect("a file").len() - data_at) / 64) as usize;
    let mut order: Vec<usize> = (0..n).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    let mut row = [0u8; 64];
    let mut total = 0.0;
    for idx in order.chunks(BATCH) {
        let mut x = Array2::<f32>::zeros((idx.len(), 64));
        for (mut out, &i) in x.rows_mut().into_iter().zip(idx) {
            file.read_exact_at(&mut row, data_at + i as u64 * 64).expect("a row");
            for (o, &p) in out.iter_mut().zip(&row) {
                *o = f32::from(p);
            }
        }
        total += x.sum() as f64;
    }
    total
}

fn npy_on_disk_by_dryml(path: &Path, seed: u64) -> f64 {
    x_passes(&numpy::rows_on_disk(path).expect("the digits' images"), seed)
}

fn x_passes(data: &Dataset<Array1<f32>>, seed: u64) -> f64 {
    let data = data.shuffle(data.count().expect("known"), seed);
    data.batch(BATCH, false).expect("batch size").iter().map(|b| b.expect("a pass").sum() as f64).sum()
}

fn passes(data: &Dataset<Xy<Array1<f32>, usize>>) -> f64 {
    let mut total = 0.0;
    for b in data.batch(BATCH, false).expect("batch size").iter() {
        let b = b.expect("a pass");
        total += consume(&b.x, &b.y);
    }
    total
}

type Loader = fn(&Path, u64) -> f64;

fn main() {
    let mut argv = std::env::args().skip(1);
    let rounds: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(15);
    let dir = PathBuf::from(argv.next().unwrap_or_else(|| "target/data".into()));
    let mut out = serde_json::Map::new();
    out.insert("rounds".into(), rounds.into());
    out.insert("batch".into(), BATCH.into());
    let cases: [(&str, PathBuf, Loader, Loader); 4] = [
        ("png_folder", dir.join("digits-png"), folder_by_hand, folder_by_dryml),
        ("npz", dir.join("digits.npz"), npz_by_hand, npz_by_dryml),
        ("npy", dir.join("digits_x.npy"), npy_by_hand, npy_by_dryml),
        ("npy_on_disk", dir.join("digits_x.npy"), npy_on_disk_by_hand, npy_on_disk_by_dryml),
    ];
    for (name, path, hand, ours) in cases {
        let (mut th, mut to) = (Vec::new(), Vec::new());
        for r in 0..rounds as u64 {
            let (t, a) = shared::timed(|| hand(&path, r));
            th.push(t);
            let (t, b) = shared::timed(|| ours(&path, r));
            to.push(t);
            // The same pixels and classes, in other orders.
            assert!((a - b).abs() < 1e-3 * a.abs().max(1.0), "{name}: {a} against {b}");
        }
        let (h, o) = (shared::median(th), shared::median(to));
        out.insert(name.into(), serde_json::json!({"by_hand_s": (h * 1e5).round() / 1e5, "dryml_s": (o * 1e5).round() / 1e5, "ratio": (o / h * 1000.0).round() / 1000.0}));
    }
    println!("{}", serde_json::Value::Object(out));
}
