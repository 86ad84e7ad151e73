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

    fn render(&self, s: &mut String, y_offset: f64) {
        let (w, h) = (self.width as f64, self.height as f64);
        // Boxes are named by their x labels, not in a legend.
        let in_legend = |s: &Series| !s.name.is_empty() && s.kind != Kind::Box;
        let named = self.series.iter().filter(|s| in_legend(s)).count();
        let top = if self.title.is_some() { 30.0 } else { 12.0 };
        let bottom = if self.x_label.is_some() { 44.0 } else { 26.0 };
        let left = if self.y_label.is_some() { 74.0 } else { 58.0 };
        let (pw, ph) = (w - left - 16.0, h - top - bottom);
        let _ = writeln!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" y=\"{y_offset}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>"
        );
        if let Some(t) = &self.title {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">{}</text>",
                left + pw / 2.0,
                esc(t)
            );
        }
        let (xr, yr) = self.ranges();
        let xt = ticks(xr.0, xr.1, (pw / 80.0).clamp(2.0, 10.0) as usize);
        let yt = ticks(yr.0, yr.1, (ph / 40.0).clamp(2.0, 8.0) as usize);
        let (x0, x1) = (xr.0.min(xt.first().copied().unwrap_or(xr.0)), xr.1.max(xt.last().copied().unwrap_or(xr.1)));
        let (x0, x1) = if self.x_names.is_some() || self.has_bars() { xr } else { (x0, x1) };
        let (y0, y1) = (yr.0.min(yt.first().copied().unwrap_or(yr.0)), yr.1.max(yt.last().copied().unwrap_or(yr.1)));
        let px = |x: f64| left + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64| top + ph - (y - y0) / (y1 - y0) * ph;
        // Grid and y ticks.
        for &t in &yt {
            let y = py(t);
            let _ = writeln!(
                s,
                "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e6e6e6\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}{}</text>",
                left + pw,
                left - 5.0,
                y + 4.0,
                short(t),
                esc(&self.y_unit)
            );
        }
        // X ticks: category names when there are, numbers otherwise.
        let names: Vec<(f64, String)> = match &self.x_names {
            Some(n) => thin(n, (pw / 28.0).max(1.0) as usize),
            None => xt.iter().filter(|t| **t >= x0 && **t <= x1).map(|t| (*t, short(*t))).collect(),
        };
        for (x, label) in names {
            let _ = writeln!(
                s,
                "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"black\"/><text x=\"{0:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{4}</text>",
                px(x),
                top + ph,
                top + ph + 4.0,
                top + ph + 16.0,
                esc(&label)
            );
        }
        for (k, series) in self.series.iter().enumerate() {
            let color = series.color.clone().unwrap_or_else(|| PALETTE[k % PALETTE.len()].to_string());
            let title = esc(&series.name);
            match series.kind {
                Kind::Bars { width } => {
                    // Series of bars side by side within each slot.
                    let bar_series: Vec<usize> = self
                        .series
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| matches!(s.kind, Kind::Bars { .. }))
                        .map(|(i, _)| i)
                        .collect();
                    let slot = bar_series.iter().position(|i| *i == k).unwrap_or(0) as f64;
                    let each = width / bar_series.len().max(1) as f64;
                    for (&x, &y) in series.xs.iter().zip(&series.ys).filter(|(_, y)| y.is_finite()) {
                        let (a, b) = (px(x - width / 2.0 + slot * each), px(x - width / 2.0 + (slot + 1.0) * each));
                        let (top_y, base) = (py(y.max(y0)), py(0f64.max(y0)));
                        let _ = writeln!(
                            s,
                            "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"><title>{title} {}: {}</title></rect>",
                            top_y.min(base),
                            (b - a - 0.5).max(0.5),
                            (base - top_y).abs(),
                            short(x),
                            short(y)
                        );
                    }
                }
                Kind::Box => {
                    let Some(b) = BoxStats::of(&series.ys) else { continue };
                    let x = series.xs[0];
                    let (a, c, mid) = (px(x - 0.25), px(x + 0.25), px(x));
                    let (n, med, lo, hi) = (series.ys.len(), short(b.median), short(b.q1), short(b.q3));
                    let (top_y, height, med_y) = (py(b.q3), (py(b.q1) - py(b.q3)).max(1.0), py(b.median));
                    let (w, up, down, low_y) = (c - a, py(b.high), py(b.q1), py(b.low));
                    let _ = writeln!(
                        s,
                        "<g stroke=\"{color}\" stroke-width=\"1.5\"><title>{title}: n {n}, median {med}, quartiles {lo} to {hi}</title><rect x=\"{a:.1}\" y=\"{top_y:.1}\" width=\"{w:.1}\" height=\"{height:.1}\" fill=\"{color}\" fill-opacity=\"0.3\"/><line x1=\"{a:.1}\" y1=\"{med_y:.1}\" x2=\"{c:.1}\" y2=\"{med_y:.1}\" stroke-width=\"2.5\"/><line x1=\"{mid:.1}\" y1=\"{top_y:.1}\" x2=\"{mid:.1}\" y2=\"{up:.1}\"/><line x1=\"{mid:.1}\" y1=\"{down:.1}\" x2=\"{mid:.1}\" y2=\"{low_y:.1}\"/></g>"
                    );
                    for y in [b.low, b.high] {
                        let (l, y, r) = (px(x - 0.1), py(y), px(x + 0.1));
                        let _ = writeln!(s, "<line x1=\"{l:.1}\" y1=\"{y:.1}\" x2=\"{r:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" stroke-width=\"1.5\"/>");
                    }
                    for &y in series.ys.iter().filter(|&&y| y < b.low || y > b.high) {
                        let _ = writeln!(
                            s,
                            "<circle cx=\"{mid:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"none\" stroke=\"{color}\"/>",
                            py(y)
                        );
                    }
                }
                Kind::Scatter => {
                    for (&x, &y) in series.xs.iter().zip(&series.ys).filter(|(x, y)| x.is_finite() && y.is_finite()) {
                        let _ = writeln!(
                            s,
                            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\" fill-opacity=\"0.75\"/>",
                            px(x),
                            py(y)
                        );
                    }
                }
                Kind::Line => {
                    for run in finite_runs(&series.xs, &series.ys) {
                        let pts: Vec<String> =
                            thin_line(&run).iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
                        if pts.len() == 1 {
                            let (cx, cy) = pts[0].split_once(',').unwrap_or(("0", "0"));
                            let _ = writeln!(s, "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"2.5\" fill=\"{color}\"/>");
                        } else {
                            let _ = writeln!(s, "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\"><title>{title}</title></polyline>", pts.join(" "));
                        }
                    }
                }
            }
        }
        // Axes over the data.
        let _ = writeln!(
            s,
            "<path d=\"M{left},{top} V{:.1} H{:.1}\" fill=\"none\" stroke=\"black\"/>",
            top + ph,
            left + pw
        );
        if let Some(l) = &self.x_label {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                left + pw / 2.0,
                h - 8.0,
                esc(l)
            );
        }
        if let Some(l) = &self.y_label {
            let (x, y) = (14.0, top + ph / 2.0);
            let _ = writeln!(
                s,
                "<text x=\"{x}\" y=\"{y:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 {x} {y:.1})\">{}</text>",
                esc(l)
            );
        }
        if named > 1 || (named == 1 && self.series.len() == 1 && self.title.is_none()) {
            let width = self.series.iter().map(|s| s.name.chars().count()).max().unwrap_or(0) as f64 * 6.5 + 30.0;
            let (lx, ly) = (left + pw - width - 6.0, top + 6.0);
            let _ = writeln!(
                s,
                "<rect x=\"{lx:.1}\" y=\"{ly:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>",
                named as f64 * 16.0 + 6.0
            );
            for (k, series) in self.series.iter().enumerate().filter(|(_, s)| in_legend(s)) {
                let row = self.series[..k].iter().filter(|s| in_legend(s)).count() as f64;
                let color = series.color.clone().unwrap_or_else(|| PALETTE[k % PALETTE.len()].to_string());
                let y = ly + 14.0 + row * 16.0;
                let _ = writeln!(
                    s,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"4\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
                    lx + 6.0,
                    y - 5.0,
                    lx + 24.0,
                    esc(&series.name)
                );
            }
        }
        s.push_str("</svg>\n");
    }

    fn has_bars(&self) -> bool {
        self.series.iter().any(|s| matches!(s.kind, Kind::Bars { .. }))
    }

    /// The data's x and y ranges, never empty, with room for bars' widths.
    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for s in &self.series {
            for (&x, &y) in s.xs.iter().zip(&s.ys).filter(|(x, y)| x.is_finite() && y.is_finite()) {
                match s.kind {
                    Kind::Bars { width } => xs.extend([x - width / 2.0, x + width / 2.0]),
                    _ => xs.push(x),
                }
                ys.push(y);
            }
        }
        if let Some(n) = &self.x_names {
            xs.extend([-0.5, n.len() as f64 - 0.5]);
        }
        if self.y_from_zero || self.has_bars() {
            ys.push(0.0);
        }
        let widen = |r: Option<(f64, f64)>| match r {
            None => (0.0, 1.0),
            Some((a, b)) if b > a => (a, b),
            Some((a, _)) => (a - 0.5_f64.max(a.abs() * 0.1), a + 0.5_f64.max(a.abs() * 0.1)),
        };
        let (y0, y1) = widen(min_max(&ys));
        // Room above and below boxes, so whiskers and outliers at the ends stay in sight.
        let pad = if self.series.iter().any(|s| s.kind == Kind::Box) { (y1 - y0) * 0.08 } else { 0.0 };
        (widen(min_max(&xs)), (y0 - pad, y1 + pad))
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
