//! A figure drawn as SVG: its frame, axes and ticks, each series by its kind, and the legend.

use super::*;

impl Figure {
    pub(super) fn render(&self, s: &mut String, y_offset: f64) {
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
}
