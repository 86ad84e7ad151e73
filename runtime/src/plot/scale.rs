//! The axes' arithmetic: a figure's ranges, round ticks, short labels, and lines thinned to what a
//! plot can show.

use super::Kind;

/// The most points a line keeps per series: more than a plot is wide in pixels only grows the
/// SVG (and every redraw of it), so longer series are thinned to each bucket's min and max.
const MAX_LINE_POINTS: usize = 1200;

pub(super) fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let mut it = v.iter().copied().filter(|x| x.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(a, b), x| (a.min(x), b.max(x))))
}

/// About `n` round tick values (1, 2 or 5 times a power of ten apart) covering `lo..=hi`.
pub(super) fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let raw = (hi - lo) / n.max(1) as f64;
    // Ranges past f64's reach (values near 1e308) get their ends as the only ticks.
    if !raw.is_finite() || raw <= 0.0 {
        return vec![lo, hi];
    }
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut t = Vec::new();
    let mut k = 0.0;
    while start + k * step <= hi + step * 0.999 && t.len() < 50 {
        let v = start + k * step;
        // Snap float noise (0.30000000000000004) to the tick's precision.
        t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        k += 1.0;
    }
    t
}

/// A number as a short label: `1.5`, `2,000`, `3e-5`.
pub(super) fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e7).contains(&a) {
        let s = format!("{v:.1e}");
        s.replace(".0e", "e")
    } else if a >= 1000.0 {
        crate::sys::units::grouped(v.round() as i64)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// At most `max` evenly spaced category labels.
pub(super) fn thin(names: &[(f64, String)], max: usize) -> Vec<(f64, String)> {
    let step = names.len().div_ceil(max.max(1)).max(1);
    names.iter().step_by(step).cloned().collect()
}

/// The runs of consecutive finite points: a NaN or infinity breaks a line.
pub(super) fn finite_runs(xs: &[f64], ys: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut runs = vec![Vec::new()];
    for (&x, &y) in xs.iter().zip(ys) {
        if x.is_finite() && y.is_finite() {
            runs.last_mut().unwrap().push((x, y));
        } else if !runs.last().unwrap().is_empty() {
            runs.push(Vec::new());
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// A long run thinned to each bucket's first, min and max points, so spikes stay visible.
pub(super) fn thin_line(run: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if run.len() <= MAX_LINE_POINTS {
        return run.to_vec();
    }
    let per = run.len().div_ceil(MAX_LINE_POINTS / 3);
    let mut out = Vec::new();
    for chunk in run.chunks(per) {
        let lo = chunk.iter().copied().fold(chunk[0], |a, p| if p.1 < a.1 { p } else { a });
        let hi = chunk.iter().copied().fold(chunk[0], |a, p| if p.1 > a.1 { p } else { a });
        let mut three = [chunk[0], lo, hi];
        three.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.extend(three);
    }
    out.push(*run.last().unwrap());
    out.dedup();
    out
}

pub(super) use crate::display::wire::escape_html as esc;

impl super::Figure {
    pub(super) fn has_bars(&self) -> bool {
        self.series.iter().any(|s| matches!(s.kind, Kind::Bars { .. }))
    }

    /// The data's x and y ranges, never empty, with room for bars' widths.
    pub(super) fn ranges(&self) -> ((f64, f64), (f64, f64)) {
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
