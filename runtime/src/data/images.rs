//! Folders of images by class as datasets (the `images` feature, which the kernel adds when a
//! cell names `dryml::data::images`): `root/<class>/<image>.png` (or `.jpg`), the classes
//! numbered in the order of their folders' names. Each element is one image's pixels in [0, 1],
//! channels first (`[channels, height, width]`) and flattened to `f32`s, so a definition's
//! `{"reshape": [channels, height, width]}` makes it an image again.
//!
//! The files are listed when the dataset is made and read when a pass reaches them: a shuffle
//! permutes the list, `take`/`skip` narrow it, and a batch decodes its files straight into its
//! rows, so a folder larger than memory streams. A file that cannot be read, or whose size
//! differs from the folder's, is a [`DataError::File`] naming the file and the element.
//!
//! ```no_run
//! use dryml::data::images::{folder, Channels, ImageOptions};
//!
//! let digits = folder("digits/", &ImageOptions { channels: Channels::Gray, size: None }).unwrap();
//! println!("{} classes: {:?}", digits.classes.len(), digits.classes);
//! let batches = digits.data.shuffle(1797, 3).batch(32, false).unwrap();
//! ```

use super::access::{Access, Gather};
use super::ndarray::{Array1, Array2};
use super::{DataError, Dataset, Xy};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The channels each image is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Channels {
    /// One: grey levels (colour images are converted).
    #[default]
    Gray,
    /// Three: red, green, blue.
    Rgb,
}

impl Channels {
    /// How many.
    pub fn count(self) -> usize {
        match self {
            Channels::Gray => 1,
            Channels::Rgb => 3,
        }
    }
}

/// How a folder's images are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageOptions {
    /// The channels of each element.
    pub channels: Channels,
    /// Every image's width and height; by default the first image's (in the order of the
    /// list). An image of another size is an error, not resized.
    pub size: Option<(u32, u32)>,
}

/// A folder's images: its classes and the dataset of its images.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    /// The class folders' names, class 0 first.
    pub classes: Vec<String>,
    /// Every image's width and height.
    pub size: (u32, u32),
    /// The channels of each element.
    pub channels: Channels,
    /// One element per image file: its pixels, flattened channels first, and its class.
    pub data: Dataset<Xy<Array1<f32>, usize>>,
}

impl ImageFolder {
    /// The shape of each element as an image, `[channels, height, width]` (a definition's
    /// `reshape`).
    pub fn shape(&self) -> [usize; 3] {
        [self.channels.count(), self.size.1 as usize, self.size.0 as usize]
    }
}

/// Whether a file's name is an image this build reads.
fn is_image(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    matches!(ext.as_deref(), Some("png" | "jpg" | "jpeg"))
}

/// The entries of `dir` that are folders (`dirs`) or files, sorted by name, hidden ones left
/// out. The kind comes from the listing itself (no `stat` per file, which a folder of a million
/// images would pay for), following a link where the listing says only that.
fn sorted_entries(dir: &Path, dirs: bool) -> Result<Vec<PathBuf>, DataError> {
    let bad = |e: std::io::Error| file_error(dir, None, e.to_string());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(bad)? {
        let entry = entry.map_err(bad)?;
        if entry.file_name().to_str().is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        let kind = entry.file_type().map_err(bad)?;
        let path = entry.path();
        let is_dir = if kind.is_symlink() { path.is_dir() } else { kind.is_dir() };
        if is_dir == dirs {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn file_error(path: &Path, element: Option<usize>, message: String) -> DataError {
    let message = match element {
        Some(i) => format!("element {i}: {message}"),
        None => message,
    };
    DataError::File { path: path.display().to_string(), at: None, message }
}

/// The images under `root`, one folder per class.
pub fn folder(root: impl AsRef<Path>, options: &ImageOptions) -> Result<ImageFolder, DataError> {
    let root = root.as_ref();
    let mut classes = Vec::new();
    let mut files: Vec<(PathBuf, usize)> = Vec::new();
    for dir in sorted_entries(root, true)? {
        let class = classes.len();
        classes.push(dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string());
        files.extend(sorted_entries(&dir, false)?.into_iter().filter(|p| is_image(p)).map(|p| (p, class)));
    }
    if files.is_empty() {
        let found = if classes.is_empty() {
            "no class folders".to_string()
        } else {
            format!("no .png or .jpg files in its {} class folders", classes.len())
        };
        return Err(file_error(root, None, format!("{found}: an image folder holds one folder of images per class")));
    }
    let size = match options.size {
        Some(s) => s,
        None => image::image_dimensions(&files[0].0).map_err(|e| file_error(&files[0].0, Some(0), e.to_string()))?,
    };
    let reader = Arc::new(Reader { files, size, channels: options.channels });
    let (n, one, many) = (reader.files.len(), reader.clone(), reader.clone());
    let gather: Arc<Gather<Xy<Array2<f32>, Array1<usize>>>> = Arc::new(move |at: &[usize]| many.batch(at));
    let get = move |i: usize| -> Result<Xy<Array1<f32>, usize>, DataError> {
        let mut x = Array1::zeros(one.width());
        one.read(i, x.as_slice_mut().expect("a new array is contiguous"))?;
        Ok(Xy { x, y: one.files[i].1 })
    };
    let data = Dataset::from_access(Access::fallible(n, get, Some(gather)));
    Ok(ImageFolder { classes, size, channels: options.channels, data })
}

/// What a pass reads with: the files and their classes, and what every image must be.
struct Reader {
    files: Vec<(PathBuf, usize)>,
    size: (u32, u32),
    channels: Channels,
}

impl Reader {
    /// The values of one element.
    fn width(&self) -> usize {
        self.channels.count() * self.size.0 as usize * self.size.1 as usize
    }

    /// Decodes file `i` into `out` (its pixels in [0, 1], channels first).
    fn read(&self, i: usize, out: &mut [f32]) -> Result<(), DataError> {
        let path = &self.files[i].0;
        // The format by the file's extension (only .png, .jpg and .jpeg are listed).
        let img = image::open(path).map_err(|e| file_error(path, Some(i), e.to_string()))?;
        let (w, h) = (img.width(), img.height());
        if (w, h) != self.size {
            let (fw, fh) = self.size;
            return Err(file_error(
                path,
                Some(i),
                format!("the image is {w}×{h} pixels; the folder's images are {fw}×{fh}"),
            ));
        }
        let plane = (w * h) as usize;
        match self.channels {
            Channels::Gray => {
                for (o, p) in out.iter_mut().zip(img.into_luma8().into_raw()) {
                    *o = f32::from(p) / 255.0;
                }
            }
            Channels::Rgb => {
                for (at, px) in img.into_rgb8().into_raw().chunks_exact(3).enumerate() {
                    for (c, &v) in px.iter().enumerate() {
                        out[c * plane + at] = f32::from(v) / 255.0;
                    }
                }
            }
        }
        Ok(())
    }

    /// The files at `at`, decoded straight into a batch's rows.
    fn batch(&self, at: &[usize]) -> Result<Xy<Array2<f32>, Array1<usize>>, DataError> {
        let mut x = Array2::zeros((at.len(), self.width()));
        for (row, &i) in x.rows_mut().into_iter().zip(at) {
            let mut row = row;
            self.read(i, row.as_slice_mut().expect("a row of a new array is contiguous"))?;
        }
        Ok(Xy { x, y: at.iter().map(|&i| self.files[i].1).collect() })
    }
}

#[cfg(test)]
mod tests;
