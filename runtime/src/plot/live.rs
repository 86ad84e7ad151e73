//! A training curve that redraws itself in place while a loop pushes points to it.

use super::{Figure, Num};
use crate::display::Update;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A training curve that redraws itself while a loop runs:
///
/// ```no_run
/// let mut curve = dryml::plot::Curve::new("loss");
/// for step in 0..100 { let loss = 1.0 / (step + 1) as f64; curve.push("train", loss); }
/// ```
/// Redraws are at most every 200 ms (the last one follows within that time of the last push),
/// so a fast loop costs one small SVG a fifth of a second, not one per step.
#[derive(Clone)]
pub struct Curve {
    id: String,
    inner: Arc<Mutex<Live>>,
}

struct Live {
    names: Vec<String>,
    points: Vec<(Vec<f64>, Vec<f64>)>,
    x_label: String,
    shown: bool,
    /// The points shown by the last draw: a trailing redraw with nothing new is skipped.
    drawn: usize,
    last_draw: Option<Instant>,
    timer: bool,
    every: Duration,
}

impl Live {
    fn points(&self) -> usize {
        self.points.iter().map(|(xs, _)| xs.len()).sum()
    }
}

impl Curve {
    /// A curve shown under display id `id` (its title too), with steps on the x axis.
    pub fn new(id: &str) -> Self {
        Curve {
            id: id.to_string(),
            inner: Arc::new(Mutex::new(Live {
                names: Vec::new(),
                points: Vec::new(),
                x_label: "step".into(),
                shown: false,
                drawn: 0,
                last_draw: None,
                timer: false,
                every: Duration::from_millis(200),
            })),
        }
    }

    /// The x axis's label (default "step").
    pub fn x_label(self, label: &str) -> Self {
        self.live().x_label = label.to_string();
        self
    }

    /// The least time between redraws (default 200 ms).
    pub fn every(self, interval: Duration) -> Self {
        self.live().every = interval;
        self
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `y` to series `name` at the next step (0, 1, 2, … per series).
    pub fn push<Y: Num>(&self, name: &str, y: Y) {
        let l = self.live();
        let x = l.names.iter().position(|n| n == name).map(|i| l.points[i].0.len()).unwrap_or(0) as f64;
        drop(l);
        self.push_at(name, x, y);
    }

    /// Adds the point `(x, y)` to series `name`.
    pub fn push_at<X: Num, Y: Num>(&self, name: &str, x: X, y: Y) {
        let mut l = self.live();
        let i = match l.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                l.names.push(name.to_string());
                l.points.push((Vec::new(), Vec::new()));
                l.names.len() - 1
            }
        };
        l.points[i].0.push(x.to_f64());
        l.points[i].1.push(y.to_f64());
        let due = l.last_draw.map_or(Duration::MAX, |t| t.elapsed());
        if due >= l.every {
            self.draw(&mut l);
        } else if !l.timer {
            // The trailing redraw, so the last points show once the loop stops pushing.
            l.timer = true;
            let (me, wait) = (self.clone(), l.every - due);
            drop(l);
            let spawned = std::thread::Builder::new().name("dryml-curve".into()).spawn(move || {
                std::thread::sleep(wait);
                let mut l = me.live();
                l.timer = false;
                if l.points() > l.drawn {
                    me.draw(&mut l);
                }
            });
            if spawned.is_err() {
                self.show();
            }
        }
    }

    /// The figure as it is now.
    pub fn figure(&self) -> Figure {
        self.build(&self.live())
    }

    fn build(&self, l: &Live) -> Figure {
        let mut f = Figure::new().title(&self.id).x_label(&l.x_label);
        let one = l.names.len() == 1;
        for (name, (xs, ys)) in l.names.iter().zip(&l.points) {
            f = f.line(if one && name == &self.id { "" } else { name }, xs, ys);
        }
        f
    }

    /// Redraws now: after a loop, the last points show at once (a redraw still due is skipped).
    pub fn show(&self) {
        let mut l = self.live();
        self.draw(&mut l);
    }

    fn draw(&self, l: &mut Live) {
        let f = self.build(l);
        let bundle = [("image/svg+xml", f.svg()), ("text/plain", f.text())];
        let bundle: Vec<(&str, &str)> = bundle.iter().map(|(m, c)| (*m, c.as_str())).collect();
        // The first draw is the curve's output in the cell that made it; later ones (a trailing
        // redraw may land after the cell ended) update that output wherever it is.
        let update = if l.shown { Update::Replace(&self.id) } else { Update::InPlace(&self.id) };
        crate::display::display(&bundle, update);
        l.shown = true;
        l.drawn = l.points();
        l.last_draw = Some(Instant::now());
    }
}
