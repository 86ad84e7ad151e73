//! A `.npy` file read where it lies: its header parsed here, each batch's rows read from their
//! places in the file when a pass reaches them, so an array larger than memory streams.

use super::super::access::{Access, Gather};
use super::super::ndarray::{Array1, Array2};
use super::super::{DataError, Dataset};
use super::file_error;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a `.npy` file's header says.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Header {
    pub(super) dtype: Dtype,
    /// The values in Fortran (column-major) order: a row's values lie apart.
    pub(super) fortran: bool,
    pub(super) shape: Vec<usize>,
    /// Where the values start.
    pub(super) data_at: u64,
}

/// One of the dtypes dryml reads, and its byte order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dtype {
    pub(super) kind: Kind,
    big_endian: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    F4,
    F8,
    U1,
    I8,
    I4,
}

impl Dtype {
    /// numpy's `descr` (`'<f4'`, `'>f8'`, `'|u1'`), if dryml reads it.
    pub(super) fn parse(descr: &str) -> Option<Dtype> {
        let kind = match descr.trim_start_matches(['<', '>', '|', '=']) {
            "f4" => Kind::F4,
            "f8" => Kind::F8,
            "u1" => Kind::U1,
            "i8" => Kind::I8,
            "i4" => Kind::I4,
            _ => return None,
        };
        Some(Dtype { kind, big_endian: descr.starts_with('>') })
    }

    fn size(self) -> usize {
        match self.kind {
            Kind::F4 | Kind::I4 => 4,
            Kind::F8 | Kind::I8 => 8,
            Kind::U1 => 1,
        }
    }

    /// `bytes`, values of this dtype, into `out` as `f32`s.
    fn convert(self, bytes: &[u8], out: &mut [f32]) {
        macro_rules! each {
            ($t:ty) => {{
                const N: usize = std::mem::size_of::<$t>();
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(N)) {
                    let b: [u8; N] = c.try_into().expect("chunks of N bytes");
                    *o = (if self.big_endian { <$t>::from_be_bytes(b) } else { <$t>::from_le_bytes(b) }) as f32;
                }
            }};
        }
        match self.kind {
            Kind::F4 => each!(f32),
            Kind::F8 => each!(f64),
            Kind::U1 => each!(u8),
            Kind::I8 => each!(i64),
            Kind::I4 => each!(i32),
        }
    }
}

impl Header {
    /// The header at the start of `file`: the magic string, the version, the length of the
    /// header's text, then the text, a Python dict of `descr`, `fortran_order` and `shape`.
    pub(super) fn read(file: &File) -> Result<Header, String> {
        let mut start = [0u8; 12];
        let got = read_up_to(file, 0, &mut start)?;
        if got < 10 || !start.starts_with(b"\x93NUMPY") {
            return Err("not a .npy file: it does not start with numpy's header".into());
        }
        let (len, at) = match start[6] {
            1 => (u16::from_le_bytes([start[8], start[9]]) as usize, 10),
            2 | 3 if got == 12 => (u32::from_le_bytes([start[8], start[9], start[10], start[11]]) as usize, 12),
            v => return Err(format!("numpy's header version {v} is not one dryml reads (1, 2 or 3)")),
        };
        // numpy writes headers of a few hundred bytes; a huge length is a corrupt file, not a
        // buffer to allocate.
        if len > 1 << 20 {
            return Err(format!("its header claims {len} bytes: not a .npy file dryml can read"));
        }
        let mut whole = vec![0u8; at + len];
        if read_up_to(file, 0, &mut whole)? < at + len {
            return Err("the file is cut inside its header".into());
        }
        let descr = descr(&whole).ok_or("its header has no `descr`")?;
        let dtype = Dtype::parse(descr).ok_or_else(|| format!("its dtype `{descr}` is {NOT_READ}"))?;
        let text = String::from_utf8_lossy(&whole[at..]);
        let value = |key: &str| text.split_once(&format!("'{key}':")).map(|(_, rest)| rest.trim_start().to_string());
        let fortran = value("fortran_order").is_some_and(|r| r.starts_with("True"));
        let shape = value("shape").and_then(|r| r.strip_prefix('(')?.split_once(')').map(|(s, _)| s.to_string()));
        let shape = shape.ok_or("its header has no `shape`")?;
        let shape = shape
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.trim_end_matches('L')
                    .parse::<usize>()
                    .map_err(|_| format!("its shape ({shape}) is not a list of sizes"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Header { dtype, fortran, shape, data_at: (at + len) as u64 })
    }

    /// How many bytes its values take.
    pub(super) fn data_len(&self) -> u64 {
        self.shape.iter().product::<usize>() as u64 * self.dtype.size() as u64
    }
}

/// What a dtype dryml does not read is not.
pub(super) const NOT_READ: &str = "none of float32, float64, uint8, int64, int32";

/// How much of a file [`descr`] looks at.
pub(super) const HEAD: usize = 4096;

/// The `descr` of a `.npy` header (`'<f4'`), if the bytes (the file's first) start with one.
pub(super) fn descr(bytes: &[u8]) -> Option<&str> {
    if !bytes.starts_with(b"\x93NUMPY") {
        return None;
    }
    let head = &bytes[..bytes.len().min(HEAD)];
    let key = b"'descr'";
    let after = head.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &head[after..];
    let open = rest.iter().position(|&b| b == b'\'')? + 1;
    let len = rest[open..].iter().position(|&b| b == b'\'')?;
    std::str::from_utf8(&rest[open..open + len]).ok()
}

/// Reads into `buf` from `at` until it is full or the file ends; how much it read.
fn read_up_to(file: &File, at: u64, buf: &mut [u8]) -> Result<usize, String> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(got)
}

/// The rows (along the first axis, flattened) of the C-ordered array in `file`, read when a pass
/// reaches them.
pub(super) fn rows(path: &Path, file: File, head: Header) -> Result<Dataset<Array1<f32>>, DataError> {
    let bad = |m: String| file_error(path, m);
    if head.fortran {
        return Err(bad("its values are in Fortran order, so a row's values lie apart: save it in C order (`np.ascontiguousarray`) to read it from disk".into()));
    }
    let Some((&n, rest)) = head.shape.split_first() else {
        return Err(bad("holds a single value, not rows".into()));
    };
    let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
    if len < head.data_at + head.data_len() {
        return Err(bad(format!(
            "the file is cut: its header promises {} bytes of values (shape {:?}) and it holds {}",
            head.data_len(),
            head.shape,
            len.saturating_sub(head.data_at)
        )));
    }
    let width = rest.iter().product();
    let reader = Arc::new(Rows { path: path.to_path_buf(), file, dtype: head.dtype, data_at: head.data_at, width });
    let (one, many) = (reader.clone(), reader);
    let gather: Arc<Gather<Array2<f32>>> = Arc::new(move |at: &[usize]| {
        let mut x = Array2::zeros((at.len(), many.width));
        many.read(at, x.as_slice_mut().expect("a new array is contiguous"))?;
        Ok(x)
    });
    let get = move |i: usize| -> Result<Array1<f32>, DataError> {
        let mut x = Array1::zeros(one.width);
        one.read(&[i], x.as_slice_mut().expect("a new array is contiguous"))?;
        Ok(x)
    };
    Ok(Dataset::from_access(Access::fallible(n, get, Some(gather))))
}

/// What a pass reads with.
struct Rows {
    path: PathBuf,
    file: File,
    dtype: Dtype,
    data_at: u64,
    width: usize,
}

impl Rows {
    /// The rows at `at` into `out`, one after another; neighbouring rows in one read.
    fn read(&self, at: &[usize], out: &mut [f32]) -> Result<(), DataError> {
        let row = self.width * self.dtype.size();
        let mut bytes = Vec::new();
        let mut k = 0;
        while k < at.len() {
            let mut run = 1;
            while k + run < at.len() && at[k + run] == at[k] + run {
                run += 1;
            }
            bytes.resize(run * row, 0);
            self.file
                .read_exact_at(&mut bytes, self.data_at + (at[k] * row) as u64)
                .map_err(|e| file_error(&self.path, format!("element {}: {e}", at[k])))?;
            self.dtype.convert(&bytes, &mut out[k * self.width..(k + run) * self.width]);
            k += run;
        }
        Ok(())
    }
}
