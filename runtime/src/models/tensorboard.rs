//! TensorBoard event files, where people compare runs over days: a [`TensorBoard`] writer of
//! scalars, histograms and text, one run directory each, and the training callback that writes
//! every epoch's losses and a network's weight histograms. `tensorboard --logdir` on the parent
//! directory compares the runs. While an experiment says where ([`ambient`]: `%experiment
//! start --tensorboard DIR`), every network trained writes its run there without being asked.
//!
//! ```
//! use dryml::models::tensorboard::TensorBoard;
//! use dryml::models::callbacks::Callback;
//! use dryml::models::training::Epoch;
//!
//! let logdir = std::env::temp_dir().join(format!("dryml-tb-doc-{}", std::process::id()));
//! let mut run = TensorBoard::create(logdir.join("lr=0.1")).unwrap();
//! run.text("definition", 0, "a 64-32-10 network, lr 0.1").unwrap();
//! // As a callback: `loss/train` and `loss/validation` after every epoch.
//! run.on_epoch(&Epoch { epoch: 1, train_loss: Some(0.7), val_loss: Some(0.8) });
//! run.histogram("weights/layer1", 1, &[0.1, -0.2, 0.3]).unwrap();
//! # std::fs::remove_dir_all(&logdir).unwrap();
//! ```
//!
//! The format: TFRecord framing (a length and the data, each with a masked CRC-32C) around
//! `tensorflow.Event` protocol buffers, encoded by `prost` from the few messages below (the
//! fields TensorBoard reads, with their numbers from TensorFlow's `event.proto` and
//! `summary.proto`). Each record is one `write` of whole bytes; a run cut short ends at a
//! whole record, which TensorBoard reads up to.

use super::callbacks::{Callback, Control};
use super::training::Epoch;
use crate::objects::object::now;
use prost::Message;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Clone, PartialEq, prost::Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(string, optional, tag = "3")]
    file_version: Option<String>,
    #[prost(message, optional, tag = "5")]
    summary: Option<Summary>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<Value>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Value {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(float, optional, tag = "2")]
    simple_value: Option<f32>,
    #[prost(message, optional, tag = "5")]
    histo: Option<Histogram>,
    #[prost(message, optional, tag = "8")]
    tensor: Option<Tensor>,
    #[prost(message, optional, tag = "9")]
    metadata: Option<Metadata>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Histogram {
    #[prost(double, tag = "1")]
    min: f64,
    #[prost(double, tag = "2")]
    max: f64,
    #[prost(double, tag = "3")]
    num: f64,
    #[prost(double, tag = "4")]
    sum: f64,
    #[prost(double, tag = "5")]
    sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    bucket: Vec<f64>,
}

/// A string tensor of one element (`DT_STRING`, shape `[1]`): how the text plugin stores text.
#[derive(Clone, PartialEq, prost::Message)]
struct Tensor {
    #[prost(int32, tag = "1")]
    dtype: i32,
    #[prost(message, optional, tag = "2")]
    shape: Option<Shape>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    string_val: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Shape {
    #[prost(message, repeated, tag = "2")]
    dim: Vec<Dim>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Dim {
    #[prost(int64, tag = "1")]
    size: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Metadata {
    #[prost(message, optional, tag = "1")]
    plugin_data: Option<PluginData>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PluginData {
    #[prost(string, tag = "1")]
    plugin_name: String,
}

/// TensorFlow's `DT_STRING`.
const DT_STRING: i32 = 7;
/// Buckets of a histogram.
const BUCKETS: usize = 30;

/// The masked CRC-32C TFRecord puts after a record's length and after its data.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord: length, its CRC, data, its CRC.
fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut r = Vec::with_capacity(data.len() + 16);
    r.extend_from_slice(&len);
    r.extend_from_slice(&masked_crc(&len).to_le_bytes());
    r.extend_from_slice(data);
    r.extend_from_slice(&masked_crc(data).to_le_bytes());
    r
}

/// One run's event file, in its own directory (`tensorboard --logdir` on the parent shows
/// each run by its directory's name).
#[derive(Debug)]
pub struct TensorBoard {
    dir: PathBuf,
    file: File,
    /// The first write error a callback could not return; later writes are skipped.
    failed: Option<String>,
    /// As a callback, write a histogram of each of a network's parameters after every epoch.
    weights: bool,
}

impl TensorBoard {
    /// A new event file in `dir` (made if missing), named as TensorFlow names them
    /// (`events.out.tfevents.<seconds>.<host>.<pid>.<n>`), so several writers never share one.
    pub fn create(dir: impl AsRef<Path>) -> io::Result<TensorBoard> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        // The count tells apart two runs a process starts in one second in one directory.
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!(
            "events.out.tfevents.{}.{}.{}.{}.dryml",
            now() as u64,
            host.trim().replace('/', "_"),
            std::process::id(),
            COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let path = dir.join(name);
        let file = File::options().create_new(true).write(true).open(&path)?;
        let mut tb = TensorBoard { dir, file, failed: None, weights: true };
        tb.write(Event { wall_time: now(), file_version: Some("brain.Event:2".into()), ..Event::default() })?;
        Ok(tb)
    }

    /// A run for `object` in `logdir`: its directory named by the object's id, its definition
    /// written as the text `definition` and how it is made as `provenance` (a table). In a sweep every model gets its own run, so
    /// `tensorboard --logdir` on `logdir` compares the sweep's runs:
    ///
    /// ```text
    /// %%sweep defs --repo runs
    /// |m: &mut TchClassifier| {
    ///     let mut tb = TensorBoard::for_object("runs/tensorboard", &*m).unwrap();
    ///     m.train_with(&train, &mut m.train_spec(), &mut [&mut tb]).unwrap();
    /// }
    /// ```
    pub fn for_object(logdir: impl AsRef<Path>, object: &dyn crate::Object) -> io::Result<TensorBoard> {
        let mut tb = TensorBoard::create(logdir.as_ref().join(&object.meta().id))?;
        tb.text("definition", 0, &format!("`{}`", object.definition()))?;
        tb.text("provenance", 0, &crate::objects::Provenance::of(object).markdown())?;
        Ok(tb)
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// As a callback, whether to write a histogram of each of a network's parameters
    /// (`weights/<name>`) after every epoch (the default; it copies the weights once an epoch).
    pub fn with_weights(mut self, on: bool) -> TensorBoard {
        self.weights = on;
        self
    }

    /// Keeps the first write error, which a callback cannot return.
    fn keep(&mut self, written: io::Result<()>) {
        if let Err(e) = written {
            self.failed.get_or_insert_with(|| format!("{}: {e}", self.dir.display()));
        }
    }

    fn write(&mut self, event: Event) -> io::Result<()> {
        self.file.write_all(&record(&event.encode_to_vec()))
    }

    fn value(&mut self, step: u64, value: Value) -> io::Result<()> {
        self.write(Event {
            wall_time: now(),
            step: step as i64,
            summary: Some(Summary { value: vec![value] }),
            ..Event::default()
        })
    }

    /// A scalar at `step` (a curve in TensorBoard's Scalars tab).
    pub fn scalar(&mut self, tag: &str, step: u64, value: f64) -> io::Result<()> {
        self.value(step, Value { tag: tag.into(), simple_value: Some(value as f32), ..Value::default() })
    }

    /// The distribution of `values` at `step` (TensorBoard's Histograms tab): 30 buckets of
    /// equal width between the least and the greatest finite value; others are left out.
    pub fn histogram(&mut self, tag: &str, step: u64, values: &[f64]) -> io::Result<()> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let (min, max) = finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        let mut h = Histogram { num: finite.len() as f64, ..Histogram::default() };
        if !finite.is_empty() {
            let width = (max - min) / BUCKETS as f64;
            let mut counts = [0.0; BUCKETS];
            for &v in &finite {
                let i = if width > 0.0 { (((v - min) / width) as usize).min(BUCKETS - 1) } else { 0 };
                counts[i] += 1.0;
            }
            h.min = min;
            h.max = max;
            h.sum = finite.iter().sum();
            h.sum_squares = finite.iter().map(|v| v * v).sum();
            h.bucket_limit = (1..=BUCKETS).map(|i| if i == BUCKETS { max } else { min + width * i as f64 }).collect();
            h.bucket = counts.to_vec();
        }
        self.value(step, Value { tag: tag.into(), histo: Some(h), ..Value::default() })
    }

    /// Text at `step` (TensorBoard's Text tab; Markdown): a run's definition, say.
    pub fn text(&mut self, tag: &str, step: u64, text: &str) -> io::Result<()> {
        let tensor = Tensor {
            dtype: DT_STRING,
            shape: Some(Shape { dim: vec![Dim { size: 1 }] }),
            string_val: vec![text.as_bytes().to_vec()],
        };
        let metadata = Metadata { plugin_data: Some(PluginData { plugin_name: "text".into() }) };
        self.value(step, Value { tag: tag.into(), tensor: Some(tensor), metadata: Some(metadata), ..Value::default() })
    }

    /// The first write error the callback met (a full disk, say), if any: the training went on
    /// without its curves from there.
    pub fn error(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

/// After each epoch: `loss/train` and `loss/validation`, at the epoch's number, and for a
/// network `weights/<parameter>` histograms. A write error does not stop the training;
/// [`TensorBoard::error`] tells it.
impl Callback for TensorBoard {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        let losses = [("loss/train", epoch.train_loss), ("loss/validation", epoch.val_loss)];
        for (tag, loss) in losses {
            if let (Some(v), None) = (loss, &self.failed) {
                let written = self.scalar(tag, epoch.epoch, v);
                self.keep(written);
            }
        }
        Control::Continue
    }

    fn wants_weights(&self) -> bool {
        self.weights && self.failed.is_none()
    }

    fn on_weights(&mut self, epoch: u64, weights: &[(String, Vec<usize>, Vec<f32>)]) {
        for (name, _, values) in weights {
            if self.failed.is_none() {
                let values: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
                let written = self.histogram(&format!("weights/{name}"), epoch, &values);
                self.keep(written);
            }
        }
    }
}

/// The directory an experiment asked every network to write its run to, in this copy of
/// `dryml` (see [`ambient`]).
static AMBIENT: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Sets (or, empty, clears) this copy's directory: in the kernel's child, on the kernel's word.
#[doc(hidden)]
pub fn set_ambient(dir: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let dir = (!dir.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)));
    *AMBIENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = dir;
}

/// Copies this copy's directory into `out` (`cap` bytes) and returns its length (0 for none).
/// A directory longer than `cap` is not copied; its length says so.
///
/// # Safety
/// `out` is valid for `cap` bytes of writes.
#[doc(hidden)]
pub unsafe extern "C" fn ambient_into(out: *mut u8, cap: usize) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let dir = AMBIENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(bytes) = dir.as_deref().map(|d| d.as_os_str().as_bytes()) else { return 0 };
    if bytes.len() <= cap {
        // SAFETY: the caller's buffer holds `cap` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) };
    }
    bytes.len()
}

/// Where an open experiment asked every network trained to write its TensorBoard run
/// (`%experiment start --tensorboard DIR`), if one did: the kernel binary's copy, which every
/// cell's copy of `dryml` and every sandbox (a fork) reads; this copy's own outside a kernel.
pub fn ambient() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    type Get = unsafe extern "C" fn(*mut u8, usize) -> usize;
    static GET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let get = *GET.get_or_init(|| {
        crate::display::interrupt::kernel_symbol(crate::sys::protocol::symbols::TENSORBOARD_DIR)
            .unwrap_or(ambient_into as Get as usize)
    });
    // SAFETY: the kernel's export has exactly this signature (kernel/src/child.rs).
    let get = unsafe { std::mem::transmute::<usize, Get>(get) };
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` holds its length in bytes.
    let n = unsafe { get(buf.as_mut_ptr(), buf.len()) };
    (n > 0 && n <= buf.len()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&buf[..n])))
}

/// The run `object` writes to the ambient directory while it trains, if an experiment asked for
/// one; a directory it cannot write to is said on stderr, and the training goes on.
pub(crate) fn ambient_run(object: &dyn crate::Object) -> Option<TensorBoard> {
    let dir = ambient()?;
    match TensorBoard::for_object(&dir, object) {
        Ok(tb) => Some(tb),
        Err(e) => {
            eprintln!("dryml: no TensorBoard run in {}: {e}", dir.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_tensorflows_masked_crc() {
        // CRC-32C of "123456789" is 0xE3069283 (RFC 3720's check value); then TFRecord's mask.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc(b"123456789"), 0xe306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
        let r = record(b"abc");
        assert_eq!(r.len(), 8 + 4 + 3 + 4);
        assert_eq!(&r[..8], &3u64.to_le_bytes());
        assert_eq!(&r[12..15], b"abc");
    }

    /// Every event of a file, each record's length and CRC checked.
    fn read_events(file: &Path) -> Vec<Event> {
        let bytes = std::fs::read(file).unwrap();
        let mut events = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            let data = &bytes[at + 12..at + 12 + len];
            assert_eq!(u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap()), masked_crc(data));
            events.push(Event::decode(data).unwrap());
            at += 16 + len;
        }
        events
    }

    #[test]
    fn the_ambient_directory_is_set_read_and_cleared() {
        assert_eq!(ambient(), None);
        set_ambient(b"/tmp/dryml tb");
        assert_eq!(ambient(), Some(PathBuf::from("/tmp/dryml tb")));
        let mut small = [0u8; 4];
        // Too long for the buffer: its length says so, and nothing is copied.
        assert_eq!(unsafe { ambient_into(small.as_mut_ptr(), small.len()) }, 13);
        assert_eq!(small, [0; 4]);
        set_ambient(b"");
        assert_eq!(ambient(), None);
    }

    #[test]
    fn a_run_writes_whole_records_of_events() {
        let dir = std::env::temp_dir().join(format!("dryml-tb-unit-{}", std::process::id()));
        let mut tb = TensorBoard::create(&dir).unwrap();
        tb.on_epoch(&Epoch { epoch: 3, train_loss: Some(0.5), val_loss: None });
        tb.histogram("w", 3, &[1.0, 2.0, f64::NAN, 3.0]).unwrap();
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let events = read_events(&file);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
        let loss = &events[1].summary.as_ref().unwrap().value[0];
        assert_eq!((loss.tag.as_str(), loss.simple_value, events[1].step), ("loss/train", Some(0.5), 3));
        let h = events[2].summary.as_ref().unwrap().value[0].histo.clone().unwrap();
        assert_eq!((h.num, h.min, h.max, h.bucket.iter().sum::<f64>()), (3.0, 1.0, 3.0, 3.0));
        // A network's weights, as a histogram per parameter.
        tb.on_weights(3, &[("fc.bias".into(), vec![2], vec![0.5, -0.5]), ("fc.weight".into(), vec![1], vec![1.0])]);
        assert!(tb.wants_weights() && !tb.with_weights(false).wants_weights());
        let events = read_events(&file);
        let tags: Vec<&str> = events[3..].iter().map(|e| e.summary.as_ref().unwrap().value[0].tag.as_str()).collect();
        assert_eq!(tags, ["weights/fc.bias", "weights/fc.weight"]);
        let h = events[3].summary.as_ref().unwrap().value[0].histo.clone().unwrap();
        assert_eq!((h.num, h.min, h.max, events[3].step), (2.0, -0.5, 0.5, 3));
        // A second run in the same directory within the second gets a file of its own.
        drop(TensorBoard::create(&dir).unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
