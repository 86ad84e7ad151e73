//! The numbers a box-and-whisker plot draws.

/// A box's numbers: quartiles by linear interpolation, whiskers at the furthest values within
/// 1.5 interquartile ranges of the box (Tukey's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct BoxStats {
    pub low: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub high: f64,
}

impl BoxStats {
    pub fn of(values: &[f64]) -> Option<BoxStats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let at = p * (v.len() - 1) as f64;
            let (i, f) = (at.floor() as usize, at.fract());
            v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
        };
        let (q1, median, q3) = (q(0.25), q(0.5), q(0.75));
        let reach = 1.5 * (q3 - q1);
        let low = v.iter().copied().find(|&x| x >= q1 - reach).unwrap_or(q1);
        let high = v.iter().rev().copied().find(|&x| x <= q3 + reach).unwrap_or(q3);
        Some(BoxStats { low, q1, median, q3, high })
    }
}
