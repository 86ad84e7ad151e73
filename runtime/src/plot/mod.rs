//! Plots as inline SVG for notebooks: curves, histograms, scatters and bars with axes, labels and a
//! legend, shown as a cell's output. One way redraws in place, by display id: a loop pushes
//! points to a [`Curve`], which redraws at most five times a second; any figure redraws with
//! [`Figure::show_as`]. (Both draw through [`crate::display::display`] with a display id.)
//!
//! ```
//! use dryml::plot::{Curve, Figure};
//!
//! let curve = Curve::new("loss"); // one plot, redrawn as points come
//! for loss in [2.3, 1.1, 0.7, 0.5] {
//!     curve.push("train", loss);
//! }
//! // A figure of several series; shown with `.show()`, `.show_as(id)` or as a cell's value.
//! let fig = Figure::new().title("fit").line("data", &[0, 1, 2], &[0.0, 1.1, 1.9]).scatter("points", &[0, 2], &[0.1, 2.0]);
//! assert!(fig.svg().starts_with("<svg"));
//! ```
//! The kernel draws `%cell_logger plot` and experiment reports with this module too.

mod boxes;
mod live;
mod scale;
mod svg;
use scale::{esc, finite_runs, min_max, short, thin, thin_line, ticks};

use boxes::BoxStats;
pub use live::Curve;
use std::fmt::Write as _;

/// A number a plot can take: every primitive integer and float.
pub trait Num: Copy {
    /// The number as an `f64`.
    fn to_f64(self) -> f64;
}

macro_rules! num {
    ($($t:ty),*) => { $(impl Num for $t { fn to_f64(self) -> f64 { self as f64 } })* };
}
num!(f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

/// Tableau's ten colours: distinct, and readable on white.
const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Line,
    Scatter,
    /// Bars centred on x, `width` wide in x units.
    Bars {
        width: f64,
    },
    /// A box and whiskers of the ys at one x.
    Box,
}

#[derive(Debug, Clone)]
struct Series {
    name: String,
    kind: Kind,
    xs: Vec<f64>,
    ys: Vec<f64>,
    color: Option<String>,
}

/// A plot: series on shared axes. Build it with the methods, then [`Figure::show`] it, return it
/// as a cell's value, or take its [`Figure::svg`].
#[derive(Debug, Clone)]
pub struct Figure {
    title: Option<String>,
    x_label: Option<String>,
    y_label: Option<String>,
    width: u32,
    height: u32,
    series: Vec<Series>,
    x_names: Option<Vec<(f64, String)>>,
    y_from_zero: bool,
    y_unit: String,
}

impl Default for Figure {
    fn default() -> Self {
        Self::new()
    }
}

impl Figure {
    /// An empty 640×320 figure.
    pub fn new() -> Self {
        Figure {
            title: None,
            x_label: None,
            y_label: None,
            width: 640,
            height: 320,
            series: Vec::new(),
            x_names: None,
            y_from_zero: false,
            y_unit: String::new(),
        }
    }

    /// The title above the plot.
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_string());
        self
    }

    /// The x axis's label.
    pub fn x_label(mut self, label: &str) -> Self {
        self.x_label = Some(label.to_string());
        self
    }

    /// The y axis's label.
    pub fn y_label(mut self, label: &str) -> Self {
        self.y_label = Some(label.to_string());
        self
    }

    /// Size in pixels (at least 160×100).
    pub fn size(mut self, width: u32, height: u32) -> Self {
        self.width = width.max(160);
        self.height = height.max(100);
        self
    }

    /// The y axis starts at zero (bars and histograms always do).
    pub fn y_from_zero(mut self) -> Self {
        self.y_from_zero = true;
        self
    }

    /// A suffix for the y axis's tick labels (" s", " MiB").
    pub fn y_unit(mut self, unit: &str) -> Self {
        self.y_unit = unit.to_string();
        self
    }

    /// A line through `(xs[i], ys[i])`; a non-finite y (a NaN loss) breaks the line there.
    pub fn line<X: Num, Y: Num>(mut self, name: &str, xs: &[X], ys: &[Y]) -> Self {
        self.push(name, Kind::Line, xs.iter().map(|x| x.to_f64()).collect(), ys.iter().map(|y| y.to_f64()).collect());
        self
    }

    /// A line over steps 0, 1, 2, …: a loss or accuracy curve.
    pub fn curve<Y: Num>(mut self, name: &str, ys: &[Y]) -> Self {
        self.push(name, Kind::Line, (0..ys.len()).map(|i| i as f64).collect(), ys.iter().map(|y| y.to_f64()).collect());
        self
    }

    /// Points, unconnected.
    pub fn scatter<X: Num, Y: Num>(mut self, name: &str, xs: &[X], ys: &[Y]) -> Self {
        self.push(
            name,
            Kind::Scatter,
            xs.iter().map(|x| x.to_f64()).collect(),
            ys.iter().map(|y| y.to_f64()).collect(),
        );
        self
    }

    /// One bar per label; figures with bars share the labels of the first bar series.
    pub fn bars<Y: Num>(mut self, name: &str, labels: &[impl AsRef<str>], values: &[Y]) -> Self {
        if self.x_names.is_none() {
            self.x_names = Some(labels.iter().enumerate().map(|(i, l)| (i as f64, l.as_ref().to_string())).collect());
        }
        let n = values.len().min(labels.len());
        self.push(
            name,
            Kind::Bars { width: 0.7 },
            (0..n).map(|i| i as f64).collect(),
            values[..n].iter().map(|v| v.to_f64()).collect(),
        );
        self.y_from_zero = true;
        self
    }

    /// A box-and-whisker plot, one box per label: the quartiles and median, whiskers to the
    /// furthest values within 1.5 interquartile ranges, and the values beyond them as points.
    pub fn boxes<Y: Num>(mut self, labels: &[impl AsRef<str>], groups: &[Vec<Y>]) -> Self {
        if self.x_names.is_none() {
            self.x_names = Some(labels.iter().enumerate().map(|(i, l)| (i as f64, l.as_ref().to_string())).collect());
        }
        for (i, (label, g)) in labels.iter().zip(groups).enumerate() {
            let ys: Vec<f64> = g.iter().map(|v| v.to_f64()).filter(|v| v.is_finite()).collect();
            self.push(label.as_ref(), Kind::Box, vec![i as f64; ys.len()], ys);
        }
        self
    }

    /// A histogram of `values` in `bins` equal bins (non-finite values are left out).
    pub fn histogram<Y: Num>(mut self, name: &str, values: &[Y], bins: usize) -> Self {
        let vals: Vec<f64> = values.iter().map(|v| v.to_f64()).filter(|v| v.is_finite()).collect();
        let bins = bins.max(1);
        let (lo, hi) = min_max(&vals).unwrap_or((0.0, 1.0));
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 0.5, lo + 0.5) };
        let w = (hi - lo) / bins as f64;
        let mut counts = vec![0.0; bins];
        for v in vals {
            counts[(((v - lo) / w) as usize).min(bins - 1)] += 1.0;
        }
        let xs = (0..bins).map(|i| lo + (i as f64 + 0.5) * w).collect();
        self.push(name, Kind::Bars { width: w }, xs, counts);
        self.y_from_zero = true;
        self
    }

    /// Sets the colour (any SVG colour) of the series added last.
    pub fn color(mut self, color: &str) -> Self {
        if let Some(s) = self.series.last_mut() {
            s.color = Some(color.to_string());
        }
        self
    }

    fn push(&mut self, name: &str, kind: Kind, xs: Vec<f64>, ys: Vec<f64>) {
        let n = xs.len().min(ys.len());
        let (mut xs, mut ys) = (xs, ys);
        xs.truncate(n);
        ys.truncate(n);
        self.series.push(Series { name: name.to_string(), kind, xs, ys, color: None });
    }

    /// What a front end without SVG shows: the title and each series' last value.
    pub fn text(&self) -> String {
        let mut t = format!("<plot{}", self.title.as_deref().map(|t| format!(" {t:?}")).unwrap_or_default());
        for s in &self.series {
            let last = s.ys.iter().rev().find(|v| v.is_finite());
            let _ = write!(t, "; {}: {} points", if s.name.is_empty() { "series" } else { &s.name }, s.ys.len());
            if let (Some(v), Kind::Line) = (last, s.kind) {
                let _ = write!(t, ", last {}", short(*v));
            }
        }
        t.push('>');
        t
    }

    /// The figure as an SVG document.
    pub fn svg(&self) -> String {
        let mut out = String::new();
        self.render(&mut out, 0.0);
        out
    }

    /// Shows the figure as a new output.
    pub fn show(&self) {
        crate::display::display(
            &[("image/svg+xml", &self.svg()), ("text/plain", &self.text())],
            crate::display::Update::New,
        );
    }

    /// Shows the figure under `id`: the first time in a cell it is a new output, after that the
    /// same output is redrawn.
    pub fn show_as(&self, id: &str) {
        crate::display::display(
            &[("image/svg+xml", &self.svg()), ("text/plain", &self.text())],
            crate::display::Update::InPlace(id),
        );
    }

    /// evcxr's display protocol: a figure that is a cell's value shows as the plot.
    pub fn evcxr_display(&self) {
        println!("EVCXR_BEGIN_CONTENT image/svg+xml\n{}\nEVCXR_END_CONTENT", self.svg());
        println!("EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT", self.text());
    }
}

/// Several figures one above the other, as one SVG document (the panels of a report).
pub fn stack(figures: &[Figure]) -> String {
    let width = figures.iter().map(|f| f.width).max().unwrap_or(160);
    let height: u32 = figures.iter().map(|f| f.height).sum();
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n");
    let mut y = 0.0;
    for f in figures {
        f.render(&mut s, y);
        y += f.height as f64;
    }
    s.push_str("</svg>\n");
    s
}

/// A histogram of `values` in `bins` bins; show it with `.show()` or as a cell's value.
pub fn hist<Y: Num>(values: &[Y], bins: usize) -> Figure {
    Figure::new().histogram("", values, bins).y_label("count")
}

/// A scatter of `(xs[i], ys[i])`; show it with `.show()` or as a cell's value.
pub fn scatter<X: Num, Y: Num>(xs: &[X], ys: &[Y]) -> Figure {
    Figure::new().scatter("", xs, ys)
}

#[cfg(test)]
mod tests;
